"""Graceful drain on SIGTERM/SIGINT, in a real server process (tests/server/drain_server.py):
/ready turns 503 at once, new requests get 503 `shutting_down`, a stream in flight finishes
(or is cut off after server.shutdown_timeout_s), and the process exits 0."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from websockets.exceptions import ConnectionClosed

from tests.server.fakes import FakeEngine
from tests.server.helpers import make_settings, serve
from tests.server.test_overload import wait_until
from tests.server.test_serve_command import free_port

REPO = Path(__file__).resolve().parents[2]
FRAME = 1920 * 2  # bytes of one 80 ms frame as pcm


@pytest.fixture
def start_server(tmp_path):
    procs = []

    def start(
        frame_delay: float, shutdown_timeout_s: float, wyoming: int | None = None
    ) -> tuple[subprocess.Popen, str]:
        port = free_port()
        args = [str(port), str(frame_delay), str(shutdown_timeout_s), str(tmp_path)]
        args += [str(wyoming)] if wyoming else []
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.server.drain_server", *args],
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )  # fmt: skip
        procs.append(proc)
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.stdout.read()
            assert time.monotonic() < deadline, "the server did not become ready in 60 s"
            try:
                if httpx.get(f"{base}/ready").status_code == 200:
                    return proc, base
            except httpx.TransportError:
                pass
            time.sleep(0.1)

    yield start
    for proc in procs:  # never leave a server behind
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def body(chars: int) -> dict:
    # the fake engine makes 0.5 frames per character
    return {"model": "tts-1", "voice": "alloy", "input": "x" * chars, "response_format": "pcm"}


def test_sigterm_lets_the_stream_finish_and_refuses_new_work(start_server):
    proc, base = start_server(frame_delay=0.05, shutdown_timeout_s=10)
    received = b""
    with httpx.stream("POST", f"{base}/v1/audio/speech", json=body(80), timeout=30) as r:
        chunks = r.iter_raw()  # 40 frames: 2 s of generation
        received += next(chunks)
        proc.send_signal(signal.SIGTERM)
        t0 = time.monotonic()
        while httpx.get(f"{base}/ready").status_code != 503:  # the listener stays open
            assert time.monotonic() - t0 < 1.0, "/ready did not turn 503 within 1 s"
            time.sleep(0.02)
        refused = httpx.post(f"{base}/v1/audio/speech", json=body(10), timeout=10)
        assert refused.status_code == 503 and refused.json()["error"]["code"] == "shutting_down"
        assert httpx.get(f"{base}/health").json()["draining"] is True
        for data in chunks:
            received += data
    assert len(received) == 40 * FRAME  # the stream in flight completed
    code = proc.wait(10)
    out = proc.stdout.read()
    assert code == 0, out
    assert time.monotonic() - t0 < 2.0 + 3.0, "the server did not exit soon after the stream"
    assert "shutting down: 1 request(s) in flight" in out


def test_sigint_cuts_off_what_runs_past_the_shutdown_timeout(start_server):
    proc, base = start_server(frame_delay=0.05, shutdown_timeout_s=1)
    received = b""
    with httpx.stream("POST", f"{base}/v1/audio/speech", json=body(400), timeout=30) as r:
        chunks = r.iter_raw()  # 200 frames: 10 s of generation
        received += next(chunks)
        proc.send_signal(signal.SIGINT)
        t0 = time.monotonic()
        with pytest.raises(httpx.RemoteProtocolError):  # the body ends incomplete
            for data in chunks:
                received += data
        cut = time.monotonic() - t0
    assert 0.9 < cut < 2.5, f"stream cut after {cut:.2f} s"
    assert len(received) < 100 * FRAME
    code = proc.wait(10)
    out = proc.stdout.read()
    assert code == 0, out
    # about 1.2 s of this is the interpreter exiting (torch's teardown) on a busy 2-core box
    assert time.monotonic() - t0 < 4.0, "the server took too long to exit"
    assert "stopping 1 request(s) still running" in out
    # one line says what happened to the request; no error from uvicorn about it
    assert "speech aborted" in out and "stop=shutdown" in out, out
    assert "without completing response" not in out and "cancelled" not in out, out


def test_an_aborted_drain_ends_sse_with_an_error_and_queued_requests_with_503(tmp_path):
    engine = FakeEngine("custom_voice", frame_delay=0.05)
    settings = make_settings(tmp_path, device="cpu", limits={"max_batch": 1, "queue_size": 1})
    with serve(settings, engines={"cv": engine}) as (base, app):
        queued: list[httpx.Response] = []
        sse = {**body(400), "stream_format": "sse"}
        with httpx.stream("POST", f"{base}/v1/audio/speech", json=sse, timeout=30) as r:
            lines = r.iter_lines()
            assert json.loads(next(lines)[len("data: ") :])["type"] == "speech.audio.delta"
            waiter = threading.Thread(
                target=lambda: queued.append(
                    httpx.post(f"{base}/v1/audio/speech", json=body(400), timeout=30)
                )
            )
            waiter.start()
            wait_until(lambda: app.state.service.pool.workers["cv"].admission.admitted == 2, 2.0)
            app.state.drain.begin()
            assert httpx.get(f"{base}/ready").status_code == 503
            refused = httpx.post(f"{base}/v1/audio/speech", json=body(10), timeout=10)
            assert refused.json()["error"]["code"] == "shutting_down"
            app.state.drain.abort()  # the shutdown timeout has passed
            events = [json.loads(line[len("data: ") :]) for line in lines if line]
        waiter.join(10)
        assert events[-1]["type"] == "speech.audio.error"
        assert events[-1]["error"]["code"] == "shutting_down"
        assert queued[0].status_code == 503
        assert queued[0].json()["error"]["code"] == "shutting_down"
        assert [c["voice"] for c in engine.calls] == ["vivian"]  # the queued one never ran
        wait_until(lambda: app.state.service.pool.workers["cv"].admission.admitted == 0, 2.0)


def ws_utterance_at_shutdown(start_server, shutdown_timeout_s: float) -> tuple[list, int, int, str]:
    """A WebSocket utterance of 40 frames (2 s here) that gets SIGTERM after its first audio:
    its events after the signal, the server's output and exit code."""
    from websockets.sync.client import connect

    proc, base = start_server(frame_delay=0.05, shutdown_timeout_s=shutdown_timeout_s)
    events, audio = [], 0
    with connect(base.replace("http://", "ws://") + "/v1/audio/speech/stream") as ws:
        ws.send(json.dumps({"type": "session.config", "voice": "alloy", "response_format": "pcm",
                            "stream_audio": True}))  # fmt: skip
        ws.send(json.dumps({"type": "input.text", "text": "x" * 80}))
        ws.send(json.dumps({"type": "input.done"}))
        while not isinstance(message := ws.recv(timeout=10), bytes):
            pass
        proc.send_signal(signal.SIGTERM)
        audio += len(message)
        with contextlib.suppress(ConnectionClosed):
            while True:
                message = ws.recv(timeout=10)
                if isinstance(message, bytes):
                    audio += len(message)
                else:
                    events.append(json.loads(message))
    code = proc.wait(10)
    return events, audio, code, proc.stdout.read()


def test_sigterm_lets_a_websocket_utterance_finish_with_its_done_events(start_server):
    """6. SIGTERM closed an utterance in flight with 1012 and no session.done."""
    events, audio, code, out = ws_utterance_at_shutdown(start_server, shutdown_timeout_s=10)
    assert code == 0, out
    assert [e["type"] for e in events] == ["audio.done", "session.done"], events
    assert events[-1]["cancelled"] is False and audio == 40 * FRAME
    assert "websocket 200" in out


def test_a_websocket_utterance_past_the_shutdown_timeout_is_cut_with_its_done_events(
    start_server,
):
    events, audio, code, out = ws_utterance_at_shutdown(start_server, shutdown_timeout_s=0.5)
    assert code == 0, out
    assert [e["type"] for e in events] == ["error", "audio.done", "session.done"], events
    assert events[0]["code"] == "shutting_down" and audio < 40 * FRAME
    assert "websocket aborted" in out and "stop=shutdown" in out


@pytest.mark.parametrize("shutdown_timeout_s,complete", [(10, True), (0.5, False)])
def test_sigterm_ends_a_wyoming_synthesize_with_its_audio_stop(
    start_server, shutdown_timeout_s, complete
):
    """6. SIGTERM cancelled a Wyoming synthesize without audio-stop; now it finishes (or, past
    server.shutdown_timeout_s, is cut short) with its audio-stop."""
    import asyncio

    from wyoming.client import AsyncTcpClient
    from wyoming.tts import Synthesize, SynthesizeVoice

    from tests.wyoming.test_wyoming import pcm_of, read_until

    wyoming = free_port()
    proc, _ = start_server(frame_delay=0.05, shutdown_timeout_s=shutdown_timeout_s,
                           wyoming=wyoming)  # fmt: skip

    async def speak() -> list:
        client = AsyncTcpClient("127.0.0.1", wyoming)
        await client.connect()
        await client.write_event(Synthesize(text="x" * 80, voice=SynthesizeVoice("alloy")).event())
        events = await read_until(client, "audio-chunk")
        proc.send_signal(signal.SIGTERM)
        events += await read_until(client, "audio-stop", "error")
        await client.disconnect()
        return events

    events = asyncio.run(speak())
    code = proc.wait(10)
    out = proc.stdout.read()
    assert code == 0, out
    assert events[-1].type == "audio-stop", [e.type for e in events]
    assert (len(pcm_of(events)) == 40 * FRAME) == complete
