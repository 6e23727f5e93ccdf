"""Admission and cancellation: bounded queue with 429, disconnects free their slot."""

from __future__ import annotations

import json
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import openai
import pytest

from tests.server.fakes import FakeEngine
from tests.server.helpers import make_settings, serve

pytestmark = pytest.mark.alone  # its bounds are times (a 429 at once, a row freed within 0.9 s)


def metric(base: str, name: str) -> float:
    for line in httpx.get(f"{base}/metrics").text.splitlines():
        if (
            line.startswith(name + " ")
            or line.startswith(name + "{")
            and line.split(" ")[0] == name
        ):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def wait_until(condition, timeout: float) -> float:
    """Seconds until condition() holds; fails after timeout."""
    t0 = time.monotonic()
    while not condition():
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"condition not met within {timeout} s")
        time.sleep(0.01)
    return time.monotonic() - t0


def test_burst_gives_three_accepted_and_seven_429(tmp_path):
    engine = FakeEngine("custom_voice", frame_delay=0.03)  # 20 frames: 0.6 s per request
    settings = make_settings(tmp_path, device="cpu", limits={"max_batch": 1, "queue_size": 2})
    with serve(settings, engines={"cv": engine}) as (base, app):
        body = {"model": "tts-1", "voice": "alloy", "input": "x" * 40, "response_format": "pcm"}
        http = httpx.Client(timeout=30, limits=httpx.Limits(max_connections=20))

        def post(_):
            t0 = time.monotonic()
            r = http.post(f"{base}/v1/audio/speech", json=body)
            return r, time.monotonic() - t0

        with ThreadPoolExecutor(10) as pool:
            results = list(pool.map(post, range(10)))
        codes = sorted(r.status_code for r, _ in results)
        assert codes == [200] * 3 + [429] * 7, codes
        for r, seconds in results:
            if r.status_code == 429:
                assert int(r.headers["retry-after"]) >= 1
                assert r.headers["x-should-retry"] == "true"
                assert r.json()["error"]["type"] == "rate_limit_error"
                assert r.json()["error"]["code"] == "queue_full"
                assert seconds < 0.5, f"429 took {seconds:.2f} s"
            else:
                assert len(r.content) == 20 * 1920 * 2
        assert engine.max_active == 1
        assert metric(base, 'tts_rejected_total{reason="queue_full"}') == 7
        assert (
            metric(
                base,
                'tts_requests_total{endpoint="speech",format="pcm",status="200",stream="audio"}',
            )
            == 3
        )
        assert metric(base, "tts_queue_depth") == 0 and metric(base, "tts_inflight") == 0

        # the official client raises its typed error (retries off, or it would retry politely)
        with ThreadPoolExecutor(4) as pool:
            futures = [pool.submit(post, i) for i in range(3)]
            time.sleep(0.1)
            client = openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0)
            with pytest.raises(openai.RateLimitError):
                client.audio.speech.create(model="tts-1", voice="alloy", input="Hi.")
            [f.result() for f in futures]
        http.close()


@pytest.mark.parametrize("stream_format", ["audio", "sse"])
def test_disconnected_stream_frees_its_slot_within_one_chunk(tmp_path, stream_format):
    engine = FakeEngine("custom_voice", frame_delay=0.05)  # chunks of 8 frames: 0.4 s each
    settings = make_settings(tmp_path, device="cpu", limits={"max_batch": 1, "queue_size": 0})
    with serve(settings, engines={"cv": engine}) as (base, app):
        body = {
            "model": "tts-1",
            "voice": "alloy",
            "input": "x" * 400,
            "response_format": "pcm",
            "stream_format": stream_format,
        }  # fmt: skip  (200 frames: 10 s if not stopped)
        with httpx.stream("POST", f"{base}/v1/audio/speech", json=body, timeout=30) as r:
            assert r.status_code == 200
            next(r.iter_raw())
        # the client is gone: generation stops between frames, within one chunk
        freed = wait_until(
            lambda: (
                engine.active == 0 and app.state.service.pool.workers["cv"].admission.admitted == 0
            ),
            3.0,
        )
        assert freed < 0.4 + 0.5, f"slot freed after {freed:.2f} s"
        assert engine.cancelled == 1 and engine.frames_generated < 40
        r = httpx.post(f"{base}/v1/audio/speech", json={**body, "input": "Hi."}, timeout=10)
        assert r.status_code == 200  # the single slot is free again
        assert metric(base, "tts_cancelled_total") == 1


def test_client_leaving_the_queue_never_generates(tmp_path):
    engine = FakeEngine("custom_voice", frame_delay=0.05)
    settings = make_settings(tmp_path, device="cpu", limits={"max_batch": 1, "queue_size": 1})
    with serve(settings, engines={"cv": engine}) as (base, app):
        long_body = {
            "model": "tts-1",
            "voice": "alloy",
            "input": "x" * 400,
            "response_format": "pcm",
        }
        with httpx.stream("POST", f"{base}/v1/audio/speech", json=long_body, timeout=30) as running:
            chunks = running.iter_raw()  # kept: dropping the iterator would close the response
            next(chunks)
            # a second client queues behind it, then hangs up before its turn
            raw = b'{"model":"tts-1","voice":"ryan","input":"queued","response_format":"pcm"}'
            sock = socket.create_connection(("127.0.0.1", int(base.rsplit(":", 1)[1])))
            sock.sendall(
                b"POST /v1/audio/speech HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Type: application/json\r\n"
                + f"Content-Length: {len(raw)}\r\n\r\n".encode()
                + raw
            )
            wait_until(lambda: app.state.service.pool.workers["cv"].admission.admitted == 2, 2.0)
            sock.close()
            wait_until(
                lambda: app.state.service.pool.workers["cv"].admission.admitted == 1, 2.0
            )  # its place is free at once
            third = threading.Thread(
                target=lambda: httpx.post(
                    f"{base}/v1/audio/speech", json={**long_body, "input": "Hi."}, timeout=30
                )
            )
            third.start()
            wait_until(
                lambda: app.state.service.pool.workers["cv"].admission.admitted == 2, 2.0
            )  # admitted, not refused
            assert (
                app.state.service.pool.workers["cv"].admission.running == 1
                and engine.calls[0]["voice"] == "vivian"
            )
        third.join(10)
        assert "ryan" not in [c["voice"] for c in engine.calls]  # the queued one never ran


def test_a_client_that_stops_reading_is_dropped_after_send_timeout(tmp_path):
    engine = FakeEngine("custom_voice", frames_per_char=2, frame_delay=0.03)
    settings = make_settings(
        tmp_path,
        device="cpu",
        limits={"max_batch": 1, "queue_size": 0, "send_timeout_s": 2},
    )
    # small kernel buffers on both sides, so the server's sends block soon after the client
    # stops reading (autotuning would otherwise absorb megabytes first)
    with serve(settings, engines={"cv": engine}, send_buffer=16384) as (base, app):
        text = "Hello there. " * 20  # 520 frames: 15.6 s of generation unless stopped
        raw = json.dumps(
            {"model": "tts-1", "voice": "alloy", "input": text, "response_format": "pcm"}
        ).encode()
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", int(base.rsplit(":", 1)[1])))
        try:
            sock.sendall(
                b"POST /v1/audio/speech HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Type: application/json\r\n"
                + f"Content-Length: {len(raw)}\r\n\r\n".encode()
                + raw
            )
            head = b""
            while b"\r\n\r\n" not in head:
                head += sock.recv(4096)
            assert head.startswith(b"HTTP/1.1 200"), head[:100]
            # the client now reads nothing more, and keeps the connection open
            freed = wait_until(
                lambda: (
                    engine.active == 0
                    and app.state.service.pool.workers["cv"].admission.admitted == 0
                ),
                8.0,
            )
            # 2 s of send_timeout after the buffers fill (about 1 s of audio), not 15 s
            assert 1.5 < freed < 2 + 3.5, f"slot freed after {freed:.2f} s"
            assert engine.cancelled == 1 and engine.frames_generated < 520
            r = httpx.post(
                f"{base}/v1/audio/speech",
                json={"model": "tts-1", "voice": "alloy", "input": "Hi.", "response_format": "pcm"},
                timeout=10,
            )
            assert r.status_code == 200  # the single slot serves the next request
            stalled = (
                'tts_requests_total{endpoint="speech",format="pcm",status="stalled",stream="audio"}'
            )
            assert metric(base, stalled) == 1
        finally:
            sock.close()


def test_a_request_in_line_is_kept_alive_then_gets_its_audio(tmp_path, monkeypatch):
    """With the batch full, a waiting request's response starts after KEEPALIVE_S (scaled down
    here from 10 s): SSE gets keep-alive comments, then its audio; a raw stream gets its headers
    while it waits, then the audio. Clients that allow 30 s to the first byte stay."""
    from ownvoice.server import streaming

    monkeypatch.setattr(streaming, "KEEPALIVE_S", 0.2)
    engine = FakeEngine("custom_voice", frame_delay=0.03)  # 80 frames: 2.4 s
    settings = make_settings(tmp_path, device="cpu", limits={"max_batch": 1, "queue_size": 4})
    with serve(settings, engines={"cv": engine}) as (base, app):
        long_body = {
            "model": "tts-1",
            "voice": "alloy",
            "input": "x" * 160,
            "response_format": "pcm",
        }
        first = threading.Thread(target=lambda: httpx.post(
            f"{base}/v1/audio/speech", json=long_body, timeout=60))  # fmt: skip
        first.start()
        wait_until(lambda: metric(base, "ownvoice_generating") >= 1 or engine.calls, 5)
        lines, t_headers = [], None
        t0 = time.monotonic()
        with httpx.stream("POST", f"{base}/v1/audio/speech", timeout=60, json={
            "model": "tts-1", "voice": "ryan", "input": "y" * 20, "stream_format": "sse",
            "response_format": "pcm",
        }) as r:  # fmt: skip
            t_headers = time.monotonic() - t0
            assert r.status_code == 200
            for line in r.iter_lines():
                if line:
                    lines.append(line)
        keepalives = [i for i, line in enumerate(lines) if line.startswith(":")]
        events = [json.loads(line[6:]) for line in lines if line.startswith("data: ")]
        assert t_headers < 1.5, t_headers  # not after the 2.4 s of the request ahead
        assert len(keepalives) >= 3, lines[:5]
        assert keepalives[-1] < lines.index(next(x for x in lines if x.startswith("data: ")))
        assert (
            events[0]["type"] == "speech.audio.delta" and events[-1]["type"] == "speech.audio.done"
        )
        audio = b"".join(__import__("base64").b64decode(e["audio"]) for e in events[:-1])
        assert len(audio) == 10 * 1920 * 2  # 20 characters -> 10 fake frames, all delivered
        # raw audio: the headers come while in line, the bytes with the audio
        first.join()
        first = threading.Thread(target=lambda: httpx.post(
            f"{base}/v1/audio/speech", json=long_body, timeout=60))  # fmt: skip
        first.start()
        wait_until(lambda: len(engine.calls) >= 3, 5)
        t0 = time.monotonic()
        with httpx.stream("POST", f"{base}/v1/audio/speech", timeout=60, json={
            "model": "tts-1", "voice": "ryan", "input": "y" * 20, "response_format": "pcm",
        }) as r:  # fmt: skip
            t_headers = time.monotonic() - t0
            data = r.read()
        first.join()
        assert r.status_code == 200 and t_headers < 1.5 and len(data) == 10 * 1920 * 2
