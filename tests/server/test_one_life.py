"""One life for every speech request (service/speech.py): what each front end used to get
differently, now the same. A FakeEngine speaks, so each test takes seconds.

Each test names the problem it guards against: the WebSocket ignored `speed`, was missing from
the metrics and the log, let an utterance whose text stopped hold its row forever, kept
generating for a client that read nothing, queued utterances without end and sent a cancelled
sentence's partial file; batch items kept single requests at 429; the HTTP answer counted a
shutdown differently depending on how its response had started.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import re
import socket
import struct
import threading
import time

import httpx
import pytest
from websockets.sync.client import connect

from tests.server.fakes import FakeEngine
from tests.server.helpers import make_settings, serve
from tests.server.test_overload import wait_until
from tests.server.test_speech_stream import events_until

FRAME = 1920 * 2  # bytes of one 80 ms frame as pcm


def ws_url(base: str) -> str:
    return base.replace("http://", "ws://") + "/v1/audio/speech/stream"


def config(**extra) -> str:
    return json.dumps({"type": "session.config", "voice": "ryan", "response_format": "pcm",
                       "stream_audio": True, "seed": 5, **extra})  # fmt: skip


def say_over_ws(base: str, text: str, **extra) -> tuple[list[dict], bytes]:
    with connect(ws_url(base)) as ws:
        ws.send(config(**extra))
        ws.send(json.dumps({"type": "input.text", "text": text}))
        ws.send(json.dumps({"type": "input.done"}))
        return events_until(ws, "session.done")


def metric(base: str, name: str, **labels) -> float:
    """The sample of `name` whose labels include `labels` (0 when absent)."""
    want = {k: str(v) for k, v in labels.items()}
    for line in httpx.get(f"{base}/metrics").text.splitlines():
        m = re.match(r"(\w+)(?:\{(.*)\})? (\S+)$", line)
        if not m or m.group(1) != name:
            continue
        have = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
        if all(have.get(k) == v for k, v in want.items()):
            return float(m.group(3))
    return 0.0


TEXT = "Hello there, this is a test of the speed."


def test_websocket_speed_changes_the_audio_as_http_does(tmp_path):
    """1. `speed: 2` over the WebSocket sent the audio of `speed: 1` (HTTP halved it)."""
    with serve(make_settings(tmp_path, device="cpu"), engines={"cv": FakeEngine()}) as (base, _):
        _, normal = say_over_ws(base, TEXT)
        _, fast = say_over_ws(base, TEXT, speed=2.0)
        body = {"model": "tts-1", "voice": "ryan", "input": TEXT, "seed": 5, "speed": 2.0,
                "response_format": "pcm", "non_streaming_mode": False}  # fmt: skip
        http_fast = httpx.post(f"{base}/v1/audio/speech", json=body, timeout=30).content
    assert len(normal) > 10 * FRAME
    assert len(fast) == 2 * round(len(normal) / 2 / 2.0)  # round(samples / speed)
    assert fast == http_fast


def test_every_front_end_counts_and_logs_its_requests_alike(tmp_path, caplog):
    """2 and the acceptance: an HTTP request, a batch item, a WebSocket utterance and a Wyoming
    synthesize each count once in tts_requests_total (labelled by front end) and write one log
    line, with the same fields."""
    import asyncio

    from tests.wyoming.test_wyoming import synthesize

    settings = make_settings(tmp_path, device="cpu", wyoming={"uri": "tcp://127.0.0.1:0"})
    with caplog.at_level(logging.INFO, logger="ownvoice.requests"):
        with serve(settings, engines={"cv": FakeEngine()}) as (base, app):
            body = {"model": "tts-1", "voice": "ryan", "input": TEXT, "response_format": "pcm"}
            assert httpx.post(f"{base}/v1/audio/speech", json=body).status_code == 200
            batch = {"items": [{"input": TEXT, "voice": "ryan"}], "response_format": "pcm"}
            r = httpx.post(f"{base}/v1/audio/speech/batch", json=batch, timeout=30)
            assert r.json()["succeeded"] == 1
            events, _ = say_over_ws(base, TEXT)
            assert events[-1]["type"] == "session.done"
            assert asyncio.run(synthesize(app.state.wyoming.port, TEXT, "ryan"))[-1].type == (
                "audio-stop"
            )
            counts = {
                endpoint: metric(base, "tts_requests_total", endpoint=endpoint, status="200")
                for endpoint in ("speech", "speech-batch", "websocket", "wyoming")
            }
            seconds = metric(base, "tts_audio_seconds_total")
            ttfa = metric(base, "tts_time_to_first_audio_seconds_count")
    assert counts == {"speech": 1, "speech-batch": 1, "websocket": 1, "wyoming": 1}
    lines = [r.getMessage() for r in caplog.records if r.name == "ownvoice.requests"]
    assert len(lines) == 4, lines
    for line, endpoint in zip(sorted(lines), ("speech 200", "speech-batch 200", "websocket 200",
                                              "wyoming 200"), strict=True):  # fmt: skip
        assert line.startswith(endpoint), line
        for field in ("id=", "voice=ryan", "model=cv", "chars=", "audio=", "rtf=", "ttfa="):
            assert field in line, (field, line)
    # the same text, the same audio: each front end delivered the same seconds
    each = [float(re.search(r"audio=([\d.]+)s", line).group(1)) for line in lines]
    assert len(set(each)) == 1 and seconds == pytest.approx(4 * each[0], abs=0.05)
    assert ttfa == 4


def test_an_utterance_whose_text_stops_ends_and_frees_its_row(tmp_path):
    """3. An utterance whose text stopped before input.done stayed open for ever, holding its
    row; now limits.idle_timeout_s ends it with an error event, and others get the row."""
    engine = FakeEngine(frame_delay=0.01)
    settings = make_settings(tmp_path, device="cpu",
                             limits={"max_batch": 1, "queue_size": 0, "idle_timeout_s": 0.5})  # fmt: skip
    with serve(settings, engines={"cv": engine}) as (base, app):
        with connect(ws_url(base)) as ws:
            ws.send(config())
            ws.send(json.dumps({"type": "input.text", "text": "The weather tomorrow is"}))
            events, _ = events_until(ws, "session.done", timeout=15)
            errors = [e for e in events if e["type"] == "error"]
            assert [e["code"] for e in errors] == ["idle_timeout"], events
            assert any(e["type"] == "audio.done" for e in events)
            # the row is free: a request that needs it is served at once
            body = {"model": "tts-1", "voice": "ryan", "input": "Hi.", "response_format": "pcm"}
            assert httpx.post(f"{base}/v1/audio/speech", json=body).status_code == 200
            # and the connection takes a new utterance
            ws.send(json.dumps({"type": "input.text", "text": "Next one."}))
            ws.send(json.dumps({"type": "input.done"}))
            events, audio = events_until(ws, "session.done")
            assert events[-1]["utterance_index"] == 1 and len(audio) > 0
        assert metric(base, "tts_requests_total", endpoint="websocket", status="idle") == 1


def silent_client(base: str, messages: list[dict]) -> socket.socket:
    """A WebSocket client that sends `messages` and then reads nothing, with a small receive
    buffer (the kernel's autotuned one would take seconds of audio; websockets' own client
    keeps reading into its queue)."""
    host, port = "127.0.0.1", int(base.rsplit(":", 1)[1])
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((host, port))
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(
        f"GET /v1/audio/speech/stream HTTP/1.1\r\nHost: {host}:{port}\r\n"
        f"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
        "Sec-WebSocket-Version: 13\r\n\r\n".encode()
    )
    answer = b""
    while b"\r\n\r\n" not in answer:
        answer += sock.recv(1)
    assert answer.startswith(b"HTTP/1.1 101"), answer
    for message in messages:
        data, mask = json.dumps(message).encode(), os.urandom(4)
        size = (
            bytes([0x80 | len(data)]) if len(data) < 126 else b"\xfe" + struct.pack(">H", len(data))
        )
        sock.sendall(b"\x81" + size + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))
    return sock


def test_a_websocket_client_that_stops_reading_is_dropped(tmp_path):
    """4. A client that read nothing kept its generation running until uvicorn's ping; now
    limits.send_timeout_s drops it and frees its row, as HTTP does."""
    engine = FakeEngine(frame_delay=0.02, frames_per_char=2.0)
    settings = make_settings(tmp_path, device="cpu", limits={"send_timeout_s": 1.0})
    with serve(settings, engines={"cv": engine}, send_buffer=4096) as (base, app):
        admission = app.state.service.pool.workers["cv"].admission
        sock = silent_client(base, [
            json.loads(config()),
            {"type": "input.text", "text": "x" * 1000},  # 2,000 frames: 40 s here
            {"type": "input.done"},
        ])  # fmt: skip
        with sock:
            wait_until(lambda: admission.running == 1, 5.0)
            t0 = time.monotonic()
            wait_until(lambda: admission.admitted == 0, 15.0)
            freed = time.monotonic() - t0
        assert freed < 10.0
        assert engine.frames_generated < 1000  # of the 2000 the text asks for
        assert metric(base, "tts_requests_total", endpoint="websocket", status="stalled") == 1


def test_utterances_queued_on_one_connection_are_capped(tmp_path):
    """4. 5,000 utterances could be queued on one connection (+32 MB); now
    limits.max_queued_utterances refuses the ones past it."""
    engine = FakeEngine(frame_delay=0.02)
    settings = make_settings(tmp_path, device="cpu", limits={"max_queued_utterances": 2})
    with serve(settings, engines={"cv": engine}) as (base, _):
        with connect(ws_url(base)) as ws:
            ws.send(config())
            for n in range(5):
                ws.send(json.dumps({"type": "input.text", "text": f"Utterance number {n}."}))
                ws.send(json.dumps({"type": "input.done"}))
            errors, done = [], []
            deadline = time.monotonic() + 30
            while len(done) < 2 and time.monotonic() < deadline:
                message = ws.recv(timeout=30)
                if isinstance(message, str):
                    event = json.loads(message)
                    if event["type"] == "error":
                        errors.append(event["code"])
                    elif event["type"] == "session.done":
                        done.append(event["utterance_index"])
    assert done == [0, 1]
    assert errors and set(errors) == {"too_many_utterances"}


def test_a_cancelled_sentence_sends_no_partial_file(tmp_path):
    """9. input.cancel in a whole-file format still sent the partial file; now its audio.done
    says cancelled and no file comes."""
    engine = FakeEngine(frame_delay=0.02, frames_per_char=2.0)
    with serve(make_settings(tmp_path, device="cpu"), engines={"cv": engine}) as (base, _):
        with connect(ws_url(base)) as ws:
            ws.send(config(response_format="wav", stream_audio=False))
            ws.send(json.dumps({"type": "input.text", "text": "A long sentence " * 20}))
            ws.send(json.dumps({"type": "input.done"}))
            events_until(ws, "audio.start")
            time.sleep(0.2)
            ws.send(json.dumps({"type": "input.cancel"}))
            events, audio = events_until(ws, "session.done")
    assert audio == b"", "a partial file was sent"
    done = next(e for e in events if e["type"] == "audio.done")
    assert done["cancelled"] is True and events[-1]["cancelled"] is True


def test_a_failed_sentence_says_so_in_its_audio_done(tmp_path):
    """vLLM-Omni's audio.done: the bytes sent for the sentence, and `error: true` when its
    generation failed (after the error event); the connection speaks on."""
    engine = FakeEngine(frames_per_char=1.0, gated=True)
    with serve(make_settings(tmp_path, device="cpu"), engines={"cv": engine}) as (base, _):
        with connect(ws_url(base)) as ws:
            ws.send(config())
            engine.fail_after = 20
            ws.send(json.dumps({"type": "input.text", "text": "A sentence that fails " * 3}))
            ws.send(json.dumps({"type": "input.done"}))
            # the generation steps only once input.done has been read (messages are read in
            # order, and this one's answer proves it): a failure before it would end the
            # utterance early, and input.done would then be an empty utterance of its own
            ws.send(json.dumps({"type": "no.such.message"}))
            read, _ = events_until(ws, "error")
            assert read[-1]["code"] == "unknown_type", read
            engine.allow(10_000)
            events, audio = events_until(ws, "session.done")
            engine.fail_after = None
            kinds = [e["type"] for e in events if e["type"] != "audio"]
            assert "error" in kinds and kinds.index("error") < kinds.index("audio.done"), kinds
            done = next(e for e in events if e["type"] == "audio.done")
            assert done["error"] is True and done["total_bytes"] == len(audio) > 0
            ws.send(json.dumps({"type": "input.text", "text": "Fine now."}))
            ws.send(json.dumps({"type": "input.done"}))
            events, audio = events_until(ws, "session.done")
    done = next(e for e in events if e["type"] == "audio.done")
    assert done["error"] is False and done["total_bytes"] == len(audio) == 9 * FRAME


def test_a_batch_never_turns_single_requests_away(tmp_path):
    """7. Batch items polled for places and held every one of them: plain requests got 429 for
    minutes. Now batch items hold at most the batch's rows, and a single request queues."""
    engine = FakeEngine(frame_delay=0.01, max_batch=2)
    settings = make_settings(tmp_path, device="cpu", limits={"max_batch": 2, "queue_size": 2})
    items = [{"input": "Item number one of many.", "seed": n} for n in range(32)]
    with serve(settings, engines={"cv": engine}) as (base, app):
        admission = app.state.service.pool.workers["cv"].admission
        results = []
        batches = [
            threading.Thread(
                target=lambda: results.append(
                    httpx.post(
                        f"{base}/v1/audio/speech/batch",
                        timeout=120,
                        json={"items": items, "voice": "ryan", "response_format": "pcm"},
                    )
                )
            )  # fmt: skip
            for _ in range(3)
        ]
        for t in batches:
            t.start()
        wait_until(lambda: admission.running == 2, 10.0)
        codes = []
        for _ in range(5):
            body = {"model": "tts-1", "voice": "ryan", "input": "Hi.", "response_format": "pcm"}
            codes.append(httpx.post(f"{base}/v1/audio/speech", json=body, timeout=60).status_code)
            assert admission.admitted <= 2 + 2
        for t in batches:
            t.join(120)
    assert codes == [200] * 5
    assert [r.json()["succeeded"] for r in results] == [32, 32, 32]


def test_a_shutdown_counts_alike_however_the_response_started(tmp_path, monkeypatch):
    """10. The HTTP answer had three entry paths: a request aborted by the drain after a
    keep-alive start was counted "error", one aborted mid-audio "aborted". One generator, one
    status."""
    from ownvoice.server import streaming

    monkeypatch.setattr(streaming, "KEEPALIVE_S", 0.2)
    engine = FakeEngine(frame_delay=0.05, max_batch=1)
    settings = make_settings(tmp_path, device="cpu", limits={"max_batch": 1, "queue_size": 1})
    with serve(settings, engines={"cv": engine}) as (base, app):
        admission = app.state.service.pool.workers["cv"].admission
        body = {"model": "tts-1", "voice": "ryan", "input": "x" * 200, "response_format": "pcm"}
        statuses = []

        def post(stream_format):
            with httpx.stream("POST", f"{base}/v1/audio/speech", timeout=30,
                              json={**body, "stream_format": stream_format}) as r:  # fmt: skip
                statuses.append(r.status_code)
                try:
                    r.read()
                except httpx.HTTPError:
                    pass

        playing = threading.Thread(target=post, args=("audio",))
        playing.start()
        wait_until(lambda: admission.running == 1, 5.0)
        waiting = threading.Thread(target=post, args=("audio",))
        waiting.start()
        wait_until(lambda: len(statuses) == 2, 5.0)  # both answered: audio, and a keep-alive
        app.state.drain.abort()
        for t in (playing, waiting):
            t.join(10)
        aborted = metric(base, "tts_requests_total", endpoint="speech", status="aborted")
    assert statuses == [200, 200]
    assert aborted == 2
