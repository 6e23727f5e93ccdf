"""WebSocket /v1/audio/speech/stream with a real WebSocket client (the `websockets` library)
against a real server on a tiny CustomVoice checkpoint: vLLM-Omni's message set, audio before
the text ends, barge-in, bad input, the key, the origin."""

from __future__ import annotations

import json
import time
from dataclasses import replace

import httpx
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from tests.server.helpers import make_settings, serve

CONFIG = {"type": "session.config", "voice": "ryan", "response_format": "pcm",
          "stream_audio": True, "seed": 5}  # fmt: skip


@pytest.fixture(scope="module")
def server(tiny_checkpoints, tmp_path_factory):
    settings = make_settings(
        tmp_path_factory.mktemp("voices"), device="cpu", dtype="float32",
        models={"cv": {"source": str(tiny_checkpoints["0.6B-CustomVoice"])}},
        limits={"max_batch": 2, "max_input_chars": 600},
    )  # fmt: skip
    with serve(settings) as (base, app):
        yield base, app


def ws_url(base: str) -> str:
    return base.replace("http://", "ws://") + "/v1/audio/speech/stream"


def events_until(ws, kind: str, timeout: float = 120) -> tuple[list[dict], bytes]:
    """JSON events and the audio bytes received up to and including an event of `kind`."""
    events, audio = [], bytearray()
    deadline = time.monotonic() + timeout
    while True:
        message = ws.recv(timeout=max(0.1, deadline - time.monotonic()))
        if isinstance(message, bytes):
            audio += message
            events.append({"type": "audio", "bytes": message})
            continue
        event = json.loads(message)
        events.append(event)
        if event["type"] == kind:
            return events, bytes(audio)


def sentences(events: list[dict]) -> list[tuple[str, bytes]]:
    """(sentence_text, its audio) of each audio.start .. audio.done."""
    out = []
    for event in events:
        if event["type"] == "audio.start":
            out.append([event["sentence_text"], b""])
        elif event["type"] == "audio":
            out[-1][1] += event["bytes"]
    return [tuple(x) for x in out]


def same_audio(a: bytes, b: bytes) -> bool:
    """Byte for byte: the same codes, cut into chunks at the same frames however the audio
    was collected, decode to the same samples."""
    return len(a) > 0 and a == b


def http_pcm(base: str, text: str, **extra) -> bytes:
    """The HTTP path's audio for `text`, in the streaming text mode the WebSocket speaks in."""
    body = {"model": "tts-1", "input": text, "voice": "ryan", "seed": 5, "response_format": "pcm",
            "non_streaming_mode": False, **extra}  # fmt: skip
    r = httpx.post(f"{base}/v1/audio/speech", json=body, timeout=300)
    assert r.status_code == 200, r.text
    return r.content


def test_an_utterance_is_spoken_and_the_connection_takes_the_next(server):
    base, _ = server
    with connect(ws_url(base)) as ws:
        ws.send(json.dumps(CONFIG))
        for piece in ("Hello there. ", "How are ", "you today?"):
            ws.send(json.dumps({"type": "input.text", "text": piece}))
        ws.send(json.dumps({"type": "input.done"}))
        events, audio = events_until(ws, "session.done")
        said = sentences(events)
        assert " ".join(text for text, _ in said) == "Hello there. How are you today?"
        assert events[-1] == {"type": "session.done", "utterance_index": 0,
                              "total_sentences": len(said), "cancelled": False}  # fmt: skip
        assert [e["type"] for e in events if e["type"] != "audio"] == [
            "audio.start", "audio.done"] * len(said) + ["session.done"]  # fmt: skip
        # each piece is spoken as the HTTP path speaks that text
        for text, pcm in said:
            assert same_audio(pcm, http_pcm(base, text)), text
        # what vLLM-Omni's clients read: the rate and channels to play PCM, the bytes sent
        starts = [e for e in events if e["type"] == "audio.start"]
        assert all(e["sample_rate"] == 24000 and e["channels"] == 1 for e in starts)
        dones = [e for e in events if e["type"] == "audio.done"]
        assert [d["total_bytes"] for d in dones] == [len(pcm) for _, pcm in said]
        assert not any(d["error"] for d in dones)

        # the config is sticky; the next utterance on the same connection
        ws.send(json.dumps({"type": "input.text", "text": "Again."}))
        ws.send(json.dumps({"type": "input.done"}))
        events, audio = events_until(ws, "session.done")
        assert events[-1]["utterance_index"] == 1 and same_audio(audio, http_pcm(base, "Again."))


def test_audio_comes_before_the_text_is_done(server):
    base, _ = server
    with connect(ws_url(base)) as ws:
        ws.send(json.dumps(CONFIG))
        ws.send(json.dumps({"type": "input.text", "text": "The first sentence is whole. The "}))
        events, audio = events_until(ws, "audio.start")
        first = ws.recv(timeout=60)
        assert isinstance(first, bytes) and len(first) > 0  # audio before input.done
        ws.send(json.dumps({"type": "input.text", "text": "second one ends here."}))
        ws.send(json.dumps({"type": "input.done"}))
        events, rest = events_until(ws, "session.done")
        assert events[-1]["cancelled"] is False and len(first + rest) > len(first)


def test_a_whole_file_at_the_end_without_stream_audio(server):
    base, _ = server
    with connect(ws_url(base)) as ws:
        ws.send(json.dumps({"type": "session.config", "voice": "ryan", "seed": 5}))  # wav
        ws.send(json.dumps({"type": "input.text", "text": "A whole file."}))
        ws.send(json.dumps({"type": "input.done"}))
        events, audio = events_until(ws, "session.done")
        starts = [e for e in events if e["type"] == "audio.start"]
        files = [e["bytes"] for e in events if e["type"] == "audio"]
        assert [e["format"] for e in starts] == ["wav"] and len(files) == 1  # one file
        assert files[0][:4] == b"RIFF" and same_audio(
            files[0][44:], http_pcm(base, "A whole file.")
        )


def test_cancel_stops_within_a_frame_and_the_connection_speaks_again(server):
    base, app = server
    worker = app.state.service.pool.workers["cv"]
    with connect(ws_url(base)) as ws:
        ws.send(json.dumps(CONFIG))
        ws.send(json.dumps({"type": "input.text", "text": "This sentence is long enough to be "
                            "stopped in the middle of it. " * 4}))  # fmt: skip
        events_until(ws, "audio.start")
        assert isinstance(ws.recv(timeout=60), bytes)
        steps = worker.steps
        ws.send(json.dumps({"type": "input.cancel"}))
        events, _ = events_until(ws, "session.done")
        assert events[-1]["cancelled"] is True
        assert worker.steps - steps <= 3  # stopped at the next step or two
        deadline = time.monotonic() + 5
        while (
            httpx.get(f"{base}/health").json()["queue"]["generating"]
            and time.monotonic() < deadline
        ):
            time.sleep(0.02)
        assert httpx.get(f"{base}/health").json()["queue"]["generating"] == 0
        ws.send(json.dumps({"type": "input.text", "text": "Speaking again."}))
        ws.send(json.dumps({"type": "input.done"}))
        events, audio = events_until(ws, "session.done")
        assert events[-1]["cancelled"] is False
        assert same_audio(audio, http_pcm(base, "Speaking again."))

        # after input.done the audio is still going out: a cancel gets through all the same
        ws.send(json.dumps({"type": "input.text", "text": "Another long sentence to be cut "
                            "short while it is being spoken aloud. " * 4}))  # fmt: skip
        ws.send(json.dumps({"type": "input.done"}))
        events_until(ws, "audio.start")
        steps = worker.steps
        ws.send(json.dumps({"type": "input.cancel"}))
        events, _ = events_until(ws, "session.done")
        assert events[-1]["cancelled"] is True and worker.steps - steps <= 3


def test_bad_input_gets_an_error_and_the_session_goes_on(server):
    base, _ = server
    with connect(ws_url(base)) as ws:
        ws.send(json.dumps(CONFIG))
        cases = [
            ("not json", "invalid_message"),
            (json.dumps([1, 2]), "invalid_message"),
            (json.dumps({"type": "input.nonsense"}), "unknown_type"),
            (json.dumps({"type": "input.text", "text": 3}), "invalid_request_error"),
            (json.dumps({"type": "input.text", "text": "x" * 20_000}), "invalid_request_error"),
            (json.dumps({"type": "session.config", "voice": "ryan", "stream_audio": True}),
             "invalid_config"),  # stream_audio needs pcm
            (json.dumps({"type": "session.config", "voice": "ryan", "speed": 9}), "invalid_config"),
        ]  # fmt: skip
        for message, code in cases:
            ws.send(message)
            event = json.loads(ws.recv(timeout=30))
            assert event["type"] == "error" and event["code"] == code, (message, event)
        ws.send(b"\x00\x01")
        assert json.loads(ws.recv(timeout=30))["code"] == "invalid_message"
        # a config change while text is buffered is refused; an unknown voice is named
        ws.send(json.dumps({"type": "input.text", "text": "Held back"}))
        ws.send(json.dumps({"type": "session.config", "voice": "vivian"}))
        event = json.loads(ws.recv(timeout=30))
        assert event["code"] == "utterance_open"
        ws.send(json.dumps({"type": "input.cancel"}))
        events_until(ws, "session.done")
        ws.send(json.dumps({**CONFIG, "voice": "nobody"}))
        ws.send(json.dumps({"type": "input.text", "text": "Who?"}))
        event = json.loads(ws.recv(timeout=30))
        assert (
            event["type"] == "error" and event["param"] == "voice" and "nobody" in event["message"]
        )
        # past limits.max_input_chars in one utterance: refused as a whole, so it stops at once
        # (what went out stays out) and its session.done says cancelled
        ws.send(json.dumps(CONFIG))
        ws.send(json.dumps({"type": "input.text", "text": "word " * 100}))
        ws.send(json.dumps({"type": "input.text", "text": "word " * 100}))
        events, _ = events_until(ws, "session.done")
        errors = [e for e in events if e["type"] == "error"]
        assert any("max_input_chars" in e["message"] and e["param"] == "text" for e in errors)
        assert events[-1]["cancelled"] is True
        # and the session still speaks
        ws.send(json.dumps({"type": "input.text", "text": "Still here."}))
        ws.send(json.dumps({"type": "input.done"}))
        events, audio = events_until(ws, "session.done")
        assert same_audio(audio, http_pcm(base, "Still here."))


def test_config_must_come_first_and_a_huge_message_closes(server):
    base, _ = server
    with connect(ws_url(base)) as ws:
        ws.send(json.dumps({"type": "input.text", "text": "Hi."}))
        assert json.loads(ws.recv(timeout=30))["code"] == "no_config"
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=30)
        assert closed.value.rcvd.code == 1008
    # a refused config, then text: the error says the config was refused, not only "first"
    with connect(ws_url(base)) as ws:
        ws.send(json.dumps({**CONFIG, "voice": "nobody"}))
        assert json.loads(ws.recv(timeout=30))["param"] == "voice"
        ws.send(json.dumps({"type": "input.text", "text": "Hi."}))
        event = json.loads(ws.recv(timeout=30))
        assert event["code"] == "no_config" and "was refused" in event["message"], event
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=30)
        assert closed.value.rcvd.code == 1008
    # past 4 MiB, text or binary: an error that says so, then 1009 (message too big)
    for huge in (json.dumps({"type": "input.text", "text": "x" * (5 * 2**20)}), b"\0" * 5 * 2**20):
        with connect(ws_url(base), max_size=None) as ws:
            ws.send(json.dumps(CONFIG))
            ws.send(huge)
            assert json.loads(ws.recv(timeout=30))["code"] == "message_too_big"
            with pytest.raises(ConnectionClosed) as closed:
                ws.recv(timeout=30)
            assert closed.value.rcvd.code == 1009


def test_a_vanished_client_frees_its_row(server):
    base, app = server
    worker = app.state.service.pool.workers["cv"]
    ws = connect(ws_url(base))
    ws.send(json.dumps(CONFIG))
    ws.send(json.dumps({"type": "input.text", "text": "Going away in the middle of this. " * 5}))
    events_until(ws, "audio.start")
    ws.close()
    deadline = time.monotonic() + 5
    while worker.occupancy and time.monotonic() < deadline:
        time.sleep(0.02)
    assert worker.occupancy == 0


def test_the_key_and_the_origin_are_checked_at_the_handshake(tiny_checkpoints, tmp_path, server):
    base, _ = server
    with pytest.raises(InvalidStatus) as refused:
        connect(ws_url(base), origin="http://evil.example")
    assert refused.value.response.status_code == 403
    settings = make_settings(
        tmp_path, device="cpu", dtype="float32", server={"api_key": "sekrit"},
        models={"cv": {"source": str(tiny_checkpoints["0.6B-CustomVoice"])}},
    )  # fmt: skip
    with serve(settings) as (keyed, _):
        url = ws_url(keyed)
        for kwargs in ({}, {"additional_headers": {"Authorization": "Bearer wrong"}},
                       {"subprotocols": ["bearer", "wrong"]}):  # fmt: skip
            with pytest.raises(InvalidStatus) as refused:
                connect(url, **kwargs)
            assert refused.value.response.status_code == 403
        for kwargs in ({"additional_headers": {"Authorization": "Bearer sekrit"}},
                       {"subprotocols": ["bearer", "sekrit"]}):  # fmt: skip
            with connect(url, **kwargs) as ws:
                ws.send(json.dumps(CONFIG))
                ws.send(json.dumps({"type": "input.text", "text": "With the key."}))
                ws.send(json.dumps({"type": "input.done"}))
                events, audio = events_until(ws, "session.done")
                assert len(audio) > 0


def test_the_example_in_docs_voice_agents_runs(server, monkeypatch, capsys):
    """The Python example of docs/voice-agents.md, run as written against the server."""
    import re
    from pathlib import Path

    base, _ = server
    doc = (Path(__file__).resolve().parents[2] / "docs" / "voice-agents.md").read_text()
    code = re.search(r"```python\n(.*?)```", doc, re.S).group(1)
    monkeypatch.setenv("OWNVOICE_WS", ws_url(base))
    scope: dict = {"__name__": "example"}
    exec(compile(code, "voice-agents.md", "exec"), scope)
    import asyncio

    pcm = asyncio.run(scope["main"]())
    assert len(pcm) > 24000 and len(pcm) % 2 == 0
    assert re.search(r"first audio after \d+\.\d\d s", capsys.readouterr().out)


def test_an_idle_connection_is_closed_but_not_while_it_listens(server, monkeypatch):
    base, app = server
    limits = app.state.service.limits
    monkeypatch.setattr(app.state.service, "limits", replace(limits, idle_timeout_s=0.3))
    with connect(ws_url(base)) as ws:
        ws.send(json.dumps(CONFIG))
        # a long answer takes longer than the timeout to speak: the listener stays
        ws.send(json.dumps({"type": "input.text", "text": "A long answer is read out. " * 6}))
        ws.send(json.dumps({"type": "input.done"}))
        events, audio = events_until(ws, "session.done")
        assert events[-1]["cancelled"] is False and len(audio) > 0
        event = json.loads(ws.recv(timeout=30))  # then nothing comes: idle
        assert event["code"] == "idle_timeout"
        with pytest.raises(ConnectionClosed):
            ws.recv(timeout=30)


def test_non_streaming_mode_speaks_whole_sentences_as_vllm_omni_does(server):
    """With non_streaming_mode: true each sentence is a generation of its own, started once the
    sentence is whole, in the non-streaming text mode (vLLM-Omni's sentence-scoped behaviour)."""
    base, _ = server
    with connect(ws_url(base)) as ws:
        ws.send(json.dumps({**CONFIG, "non_streaming_mode": True}))
        for piece in ("Hello th", "ere. How are"):
            ws.send(json.dumps({"type": "input.text", "text": piece}))
        first, _ = events_until(ws, "audio.start")  # the first sentence goes before the rest
        ws.send(json.dumps({"type": "input.text", "text": " you today?"}))
        ws.send(json.dumps({"type": "input.done"}))
        events, _ = events_until(ws, "session.done")
        events = first + events
    said = sentences(events)
    assert [text for text, _ in said] == ["Hello there.", "How are you today?"]
    for text, pcm in said:
        assert same_audio(pcm, http_pcm(base, text, non_streaming_mode=True)), text


def test_a_markup_session_speaks_ssml_and_pause_tags_as_http_does(server):
    """input_format in session.config: the utterance is read whole at input.done (SSML may
    be cut anywhere, even inside a tag); its audio is HTTP's for the same document, each span
    a sentence, each pause with the sentence before it; a malformed document is an error event
    and the session goes on."""
    base, _ = server
    ssml = (
        '<speak>Lights on.<break time="300ms"/><prosody rate="fast">Doors locked.</prosody></speak>'
    )
    with connect(ws_url(base)) as ws:
        ws.send(json.dumps({**CONFIG, "input_format": "ssml"}))
        for piece in (ssml[:20], ssml[20:31], ssml[31:]):  # cut inside <break .../>
            ws.send(json.dumps({"type": "input.text", "text": piece}))
        ws.send(json.dumps({"type": "input.done"}))
        events, audio = events_until(ws, "session.done")
        said = sentences(events)
        assert [text for text, _ in said] == ["Lights on.", "Doors locked."]
        body = {"non_streaming_mode": None}
        assert audio == http_pcm(base, ssml, **body)
        first = http_pcm(base, "Lights on.", **body)
        assert said[0][1] == first + bytes(2 * 7200)  # the break goes with the sentence before
        assert said[1][1] == http_pcm(base, "Doors locked.", speed=1.25, **body)

        ws.send(json.dumps({"type": "input.text", "text": "<speak>Hi <audio/></speak>"}))
        ws.send(json.dumps({"type": "input.done"}))
        events, audio = events_until(ws, "session.done")
        errors = [e for e in events if e["type"] == "error"]
        assert len(errors) == 1 and "<audio>" in errors[0]["message"] and audio == b""
        assert events[-1]["total_sentences"] == 0

        ws.send(json.dumps({**CONFIG, "input_format": "text"}))  # plain text, pause tags read
        ws.send(json.dumps({"type": "input.text", "text": "Lights on. [pause:0.5] Goodnight."}))
        ws.send(json.dumps({"type": "input.done"}))
        events, audio = events_until(ws, "session.done")
        assert audio == first + bytes(2 * 12000) + http_pcm(base, "Goodnight.", **body)
