"""Word-level streaming text is exact: however the text is cut into input.text messages, and
however long the gaps between them, the WebSocket speaks what `POST /v1/audio/speech` speaks for
the whole text in the streaming text mode (a property test, Hypothesis; the HTTP request runs
beside the session, in the same batch), with long text split
into pieces, for a preset, a clone and a designed voice. Also: speech starts on the first words,
before any sentence ends; a session and an HTTP request share one batch.

Real server, real WebSocket client (`websockets`), tiny checkpoints; the PCM is compared byte
for byte.
"""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from itertools import pairwise

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from websockets.sync.client import connect

from tests.server.helpers import make_settings, serve, speech_clip, wav_bytes
from tests.server.test_speech_stream import events_until, same_audio, ws_url

MAX_CHUNK = 70  # small, so that a few sentences make several pieces
CLIP = wav_bytes(speech_clip(3.2, rate=24000), rate=24000)
VOICES = {
    "preset": {"voice": "ryan"},
    "clone": {"voice": "clone:Alice"},
    "design": {"task_type": "VoiceDesign", "instructions": "A calm, low voice."},
}
SENTENCES = [
    "Sure, here is the plan.",
    "The weather tomorrow looks sunny",
    "with highs around twenty degrees.",
    "Dr. Smith arrives at 3.5 hours past noon!",
    "Is that all?",
    "Then we go home, and so on",
    "bring an umbrella just in case.",
]


@pytest.fixture(scope="module")
def server(tiny_checkpoints, tmp_path_factory):
    settings_ = make_settings(
        tmp_path_factory.mktemp("voices"), device="cpu", dtype="float32",
        models={
            "cv": {"source": str(tiny_checkpoints["0.6B-CustomVoice"])},
            "design": {"source": str(tiny_checkpoints["1.7B-VoiceDesign"])},
            "base": {"source": str(tiny_checkpoints["0.6B-Base"])},
        },
        limits={"max_batch": 4, "max_chunk_chars": MAX_CHUNK, "max_input_chars": 2000},
    )  # fmt: skip
    with serve(settings_) as (base, app):
        r = httpx.post(f"{base}/v1/audio/voices", files={"audio_sample": ("a.wav", CLIP)},
                       data={"name": "Alice", "consent": "consent-42",
                             "ref_text": "A short reference."})  # fmt: skip
        assert r.status_code == 200, r.text
        yield base, app


def http_pcm(base: str, text: str, voice: dict, seed: int) -> bytes:
    body = {"model": "tts-1", "input": text, "response_format": "pcm", "seed": seed,
            "non_streaming_mode": False, **voice}  # fmt: skip
    r = httpx.post(f"{base}/v1/audio/speech", json=body, timeout=300)
    assert r.status_code == 200, r.text
    return r.content


def ws_pcm(base: str, pieces: list[str], delays: list[float], voice: dict, seed: int):
    with connect(ws_url(base)) as ws:
        ws.send(json.dumps({"type": "session.config", "response_format": "pcm",
                            "stream_audio": True, "seed": seed, **voice}))  # fmt: skip
        for piece, delay in zip(pieces, delays, strict=True):
            ws.send(json.dumps({"type": "input.text", "text": piece}))
            time.sleep(delay)
        ws.send(json.dumps({"type": "input.done"}))
        events, audio = events_until(ws, "session.done", timeout=300)
    assert not [e for e in events if e["type"] == "error"], events
    return events, audio


def beside(call, *args):
    """Start call(*args) in a thread; the returned function waits for its result. The reference
    request runs beside the session it is compared with: they share the batch's steps (a row's
    audio does not depend on its batch), which costs less than one after the other."""
    pool = ThreadPoolExecutor(max_workers=1)
    future = pool.submit(call, *args)
    pool.shutdown(wait=False)
    return lambda: future.result(timeout=300)


@st.composite
def cut_text(draw):
    text = " ".join(draw(st.lists(st.sampled_from(SENTENCES), min_size=1, max_size=4)))
    cuts = sorted(set(draw(st.lists(st.integers(1, len(text) - 1), max_size=8))))
    bounds = [0, *cuts, len(text)]
    pieces = [text[a:b] for a, b in pairwise(bounds)]
    delays = draw(st.lists(st.sampled_from([0.0, 0.0, 0.01, 0.05, 0.3]),
                           min_size=len(pieces), max_size=len(pieces)))  # fmt: skip
    return text, pieces, delays


@pytest.mark.parametrize("kind", list(VOICES))
def test_any_cut_with_any_delays_speaks_what_http_speaks(kind, server):
    base, _ = server
    voice = VOICES[kind]

    @settings(max_examples=6, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(cut_text(), st.integers(0, 1000))
    def check(drawn, seed):
        text, pieces, delays = drawn
        expected = beside(http_pcm, base, text, voice, seed)
        _, audio = ws_pcm(base, pieces, delays, voice, seed)
        assert same_audio(audio, expected()), (text, pieces, delays)

    check()


def test_long_text_is_split_where_http_splits_it(server):
    """Several pieces, each begun before its text is whole and named in its audio.start."""
    base, _ = server
    text = " ".join(SENTENCES)
    words = [w + " " for w in text.split(" ")]
    expected = beside(http_pcm, base, text, VOICES["preset"], 3)
    events, audio = ws_pcm(base, words, [0.02] * len(words), VOICES["preset"], 3)
    starts = [e for e in events if e["type"] == "audio.start"]
    assert len(starts) >= 3
    assert same_audio(audio, expected())


def test_words_without_a_sentence_end_are_spoken_before_the_text_ends(server):
    """No punctuation at all: the first audio still comes while the text is being written."""
    base, _ = server
    with connect(ws_url(base)) as ws:
        ws.send(json.dumps({"type": "session.config", "voice": "ryan", "response_format": "pcm",
                            "stream_audio": True, "seed": 1}))  # fmt: skip
        ws.send(json.dumps({"type": "input.text", "text": "well the weather tomorrow "}))
        events, _ = events_until(ws, "audio.start", timeout=120)
        first = ws.recv(timeout=60)
        assert isinstance(first, bytes) and first  # spoken while no sentence has ended
        ws.send(json.dumps({"type": "input.text", "text": "looks sunny and warm"}))
        ws.send(json.dumps({"type": "input.done"}))
        events, rest = events_until(ws, "session.done", timeout=120)
    audio = first + rest
    assert same_audio(audio, http_pcm(base, "well the weather tomorrow looks sunny and warm",
                                      {"voice": "ryan"}, 1))  # fmt: skip


def test_two_sessions_and_an_http_request_share_one_batch(server):
    """Two WebSocket sessions speaking word by word and an HTTP request run as rows of the same
    steps, and each says exactly what it says alone."""
    base, app = server
    engine = app.state.service.pool.workers["cv"].engine
    rows_per_step = []
    step = engine.step

    def counting_step():
        rows_per_step.append(len(engine.running))
        return step()

    texts = {"a": SENTENCES[2] + " " + SENTENCES[4], "b": SENTENCES[5] + " " + SENTENCES[6]}
    results = {}

    def session(name, seed):
        words = [w + " " for w in texts[name].split(" ")]
        results[name] = ws_pcm(base, words, [0.05] * len(words), VOICES["preset"], seed)[1]

    def request():
        time.sleep(0.2)  # the sessions are speaking by now
        results["http"] = http_pcm(base, SENTENCES[0] + " " + SENTENCES[1], VOICES["preset"], 9)

    engine.step = counting_step  # the test's window on the batch; removed below
    try:
        threads = [threading.Thread(target=session, args=("a", 4)),
                   threading.Thread(target=session, args=("b", 6)),
                   threading.Thread(target=request)]  # fmt: skip
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
    finally:
        del engine.step
    assert max(rows_per_step) == 3, rows_per_step
    # each alone: one after the other
    assert same_audio(results["a"], http_pcm(base, texts["a"], VOICES["preset"], 4))
    assert same_audio(results["b"], http_pcm(base, texts["b"], VOICES["preset"], 6))
    assert same_audio(results["http"], http_pcm(base, SENTENCES[0] + " " + SENTENCES[1],
                                                VOICES["preset"], 9))  # fmt: skip


def test_a_session_waiting_for_words_costs_no_steps(server):
    """While every row waits for text the scheduler sleeps until text arrives (or its poll),
    instead of spinning through empty steps."""
    base, app = server
    scheduler = app.state.service.pool.workers["cv"]
    with connect(ws_url(base)) as ws:
        ws.send(json.dumps({"type": "session.config", "voice": "ryan", "response_format": "pcm",
                            "stream_audio": True, "seed": 2}))  # fmt: skip
        ws.send(json.dumps({"type": "input.text", "text": "Well the weather "}))
        events_until(ws, "audio.start", timeout=120)
        time.sleep(0.5)  # it has read all it has by now
        steps = scheduler.steps
        time.sleep(1.0)
        idle_steps = scheduler.steps - steps
        ws.send(json.dumps({"type": "input.text", "text": "is fine."}))
        ws.send(json.dumps({"type": "input.done"}))
        events_until(ws, "session.done", timeout=120)
    assert idle_steps <= 3, idle_steps
