"""The OpenAI contract, with the official `openai` client against a real uvicorn (FakeEngine)."""

from __future__ import annotations

import base64
import json
import math
import time

import openai
import pytest

from ownvoice.engine.options import frame_cap
from ownvoice.service.encode import FORMATS
from tests.server.fakes import FakeEngine
from tests.server.helpers import duration, make_settings, serve

TEXT = "The quick brown fox jumps over the lazy dog."  # 44 characters -> 22 fake frames
FRAME_S = 0.08


def expected_seconds(text: str, frames_per_char: float = 0.5) -> float:
    return math.ceil(len(text) * frames_per_char) * FRAME_S


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    engines = {
        "cv": FakeEngine("custom_voice"),
        "design": FakeEngine("voice_design"),
        "slow": FakeEngine("custom_voice", frame_delay=0.04),
    }
    settings = make_settings(
        tmp_path_factory.mktemp("voices"), device="cpu", roles={"presets": "cv"},
        limits={"max_input_chars": 1000, "queue_size": 8},
    )  # fmt: skip
    with serve(settings, engines=engines) as (base, app):
        client = openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0)
        yield client, engines, app


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_decodes_to_the_generated_duration(server, fmt):
    client, _, _ = server
    audio = client.audio.speech.create(
        model="tts-1", voice="alloy", input=TEXT, response_format=fmt
    )
    got = duration(audio.content, fmt)
    want = expected_seconds(TEXT)
    slack = 0.12 if fmt in ("mp3", "aac") else 0.001  # encoder priming/padding
    assert want - 0.001 <= got <= want + slack, f"{fmt}: {got:.3f} s, expected {want:.3f} s"


def test_streaming_response_gets_audio_before_generation_ends(server):
    client, engines, _ = server
    slow = engines["slow"]
    text = "x" * 120  # 60 frames at 40 ms each: 2.4 s of generation
    t0 = time.monotonic()
    with client.audio.speech.with_streaming_response.create(
        model="slow", voice="ryan", input=text, response_format="pcm"
    ) as response:
        stream = response.iter_bytes()
        first = next(stream)
        t_first = time.monotonic() - t0
        still_generating = slow.active == 1
        rest = b"".join(stream)
    total = time.monotonic() - t0
    assert first and still_generating, "the first bytes came only after generation ended"
    assert t_first < total / 2, f"first audio at {t_first:.2f} s of {total:.2f} s"
    assert len(first) + len(rest) == 60 * 1920 * 2


def test_sse_deltas_concatenate_to_a_valid_file(server):
    client, _, _ = server
    with client.audio.speech.with_streaming_response.create(
        model="tts-1", voice="echo", input=TEXT, response_format="mp3", stream_format="sse"
    ) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        events = [
            json.loads(line[6:]) for line in response.iter_lines() if line.startswith("data: ")
        ]
    deltas = [e for e in events if e["type"] == "speech.audio.delta"]
    assert len(deltas) >= 2 and events[-1]["type"] == "speech.audio.done"
    audio = b"".join(base64.b64decode(e["audio"]) for e in deltas)
    assert abs(duration(audio, "mp3") - expected_seconds(TEXT)) < 0.12
    usage = events[-1]["usage"]
    assert usage == {
        "input_tokens": len(TEXT), "output_tokens": math.ceil(len(TEXT) / 2),
        "total_tokens": len(TEXT) + math.ceil(len(TEXT) / 2),
    }  # fmt: skip


@pytest.mark.parametrize(
    "kwargs, error, param",
    [
        ({"input": ""}, openai.BadRequestError, "input"),
        ({"input": "   "}, openai.BadRequestError, "input"),
        ({"input": "a" * 1001}, openai.BadRequestError, "input"),
        ({"speed": 4.5}, openai.BadRequestError, "speed"),
        ({"speed": 0.1}, openai.BadRequestError, "speed"),
        ({"voice": "nobody"}, openai.BadRequestError, "voice"),
        ({"voice": "clone:nobody"}, openai.BadRequestError, "voice"),
        ({"model": "tts-9000"}, openai.NotFoundError, "model"),
        ({"response_format": "ogg"}, openai.BadRequestError, "response_format"),
        ({"extra_body": {"language": "klingon"}}, openai.BadRequestError, "language"),
        ({"extra_body": {"temperature": 0}}, openai.BadRequestError, "temperature"),
        ({"extra_body": {"top_p": 1.5}}, openai.BadRequestError, "top_p"),
        ({"voice": "design", "instructions": "x" * 4097}, openai.BadRequestError, "instructions"),
    ],
)
def test_errors_are_typed_with_the_right_param(server, kwargs, error, param):
    client, _, _ = server
    request = {"model": "tts-1", "voice": "alloy", "input": "Hello.", **kwargs}
    with pytest.raises(error) as e:
        client.audio.speech.create(**request)
    assert e.value.param == param, e.value.body
    assert set(e.value.body) == {"message", "type", "param", "code", "request_id"}
    assert e.value.body["message"]


def test_speed_shortens_the_audio(server):
    client, _, _ = server
    audio = client.audio.speech.create(
        model="tts-1", voice="alloy", input=TEXT, response_format="wav", speed=2.0
    )
    assert abs(duration(audio.content, "wav") - expected_seconds(TEXT) / 2) < 0.01


def test_extensions_reach_the_engine_and_unknown_fields_are_ignored(server):
    client, engines, _ = server
    cv = engines["cv"]
    client.audio.speech.create(
        model="tts-1", voice="nova", input=TEXT, response_format="pcm",
        extra_body={"language": "en", "seed": 7, "temperature": 0.5, "top_k": 10, "top_p": 0.9,
                    "max_frames": 5, "normalization_options": {"x": 1}, "stream": True},
    )  # fmt: skip
    call = cv.calls[-1]
    opts = call["options"]
    assert call["voice"] == "sohee"  # nova -> sohee
    assert (opts.language, opts.seed, opts.max_frames) == ("english", 7, 5)
    assert (opts.sampling.temperature, opts.sampling.top_k, opts.sampling.top_p) == (0.5, 10, 0.9)
    client.audio.speech.create(
        model="tts-1", voice={"id": "Ryan"}, input="Hi.", response_format="pcm"
    )
    assert cv.calls[-1]["voice"] == "ryan"
    assert cv.calls[-1]["options"].max_frames is None  # the engine caps by the text's length


def test_voice_design_and_instructions(server):
    client, engines, _ = server
    client.audio.speech.create(
        model="tts-1",
        voice="design",
        input="Hi.",
        instructions="A calm, low voice.",
        response_format="pcm",
    )
    assert engines["design"].calls[-1]["instruct"] == "A calm, low voice."
    assert engines["design"].calls[-1]["voice"] is None
    # the 0.6B CustomVoice model takes no instructions: they are dropped, not an error
    client.audio.speech.create(
        model="tts-1", voice="ryan", input="Hi.", instructions="Whisper.", response_format="pcm"
    )
    assert engines["cv"].calls[-1]["instruct"] is None


def test_long_input_is_split_at_sentences_and_capped(tmp_path):
    runaway = FakeEngine("custom_voice", runaway=True)  # never ends on its own
    sentence = "This sentence is one of many in a long text. "
    text = sentence * 20  # 900 characters
    settings = make_settings(tmp_path, device="cpu", limits={"max_chunk_chars": 200})
    with serve(settings, engines={"cv": runaway}) as (base, app):
        client = openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0)
        audio = client.audio.speech.create(
            model="tts-1", voice="ryan", input=text, response_format="pcm"
        )
    pieces = [c["text"] for c in runaway.calls]
    assert len(pieces) >= 5 and all(len(p) <= 200 for p in pieces)
    assert all(p.strip().endswith(".") for p in pieces), "split inside a sentence"
    assert " ".join(p.strip() for p in pieces) == text.strip()
    frames = sum(frame_cap(p) for p in pieces)  # each piece stopped by its own cap
    assert len(audio.content) == frames * 1920 * 2
    assert all(c["frames"] == frame_cap(c["text"]) for c in runaway.calls)


def test_generation_runs_on_engine_threads(server):
    client, engines, _ = server
    client.audio.speech.create(model="tts-1", voice="alloy", input="Hi.", response_format="pcm")
    threads = set().union(*(e.threads for e in engines.values()))
    assert threads and all(t.startswith("ownvoice-engine-") for t in threads), threads
