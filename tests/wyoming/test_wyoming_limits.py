"""Wyoming's limits (5.): idle connections, half-sent events and a flood of connections cannot
hold the process's file descriptors; a client that reads nothing is dropped. A FakeEngine
speaks, so each test takes seconds."""

from __future__ import annotations

import asyncio
import json
import socket
import time

from wyoming.client import AsyncTcpClient
from wyoming.tts import Synthesize, SynthesizeVoice

from tests.server.fakes import FakeEngine
from tests.server.helpers import make_settings, serve
from tests.server.test_overload import wait_until
from tests.wyoming.test_wyoming import read_until, synthesize


def closed_within(sock: socket.socket, seconds: float) -> float | None:
    """Seconds until the server closed `sock` (it reads b""), or None if it stayed open."""
    sock.settimeout(seconds)
    t0 = time.monotonic()
    try:
        while sock.recv(4096):
            pass
    except TimeoutError:
        return None
    except ConnectionError:
        pass
    return time.monotonic() - t0


def wyoming_server(tmp_path, engine=None, **limits):
    wyoming = {"uri": "tcp://127.0.0.1:0", **limits.pop("wyoming", {})}
    settings = make_settings(tmp_path, device="cpu", limits=limits, wyoming=wyoming)
    return serve(settings, engines={"cv": engine or FakeEngine()})


def test_an_idle_connection_and_a_half_sent_event_are_closed(tmp_path):
    with wyoming_server(tmp_path, idle_timeout_s=0.5) as (_, app):
        port = app.state.wyoming.port
        idle = socket.create_connection(("127.0.0.1", port))
        half = socket.create_connection(("127.0.0.1", port))
        half.sendall(b'{"type": "synthesize", "data": {"te')  # and never the rest
        with idle, half:
            assert closed_within(idle, 10) is not None
            assert closed_within(half, 10) is not None
        # a connection that talks is served as before
        assert asyncio.run(synthesize(port, "Still here.", "ryan"))[-1].type == "audio-stop"


def test_connections_past_the_cap_are_closed_at_once(tmp_path):
    with wyoming_server(tmp_path, wyoming={"max_connections": 2}) as (_, app):
        port = app.state.wyoming.port
        held = [socket.create_connection(("127.0.0.1", port)) for _ in range(2)]
        time.sleep(0.2)  # both accepted
        extra = socket.create_connection(("127.0.0.1", port))
        with extra:
            assert closed_within(extra, 5) is not None  # closed as it was accepted
        for sock in held:  # the two within the cap stay open
            assert closed_within(sock, 0.3) is None
            sock.close()
        wait_until(lambda: not app.state.wyoming._connections, 5.0)
        assert asyncio.run(synthesize(port, "A place again.", "ryan"))[-1].type == "audio-stop"


def test_a_client_that_reads_nothing_is_dropped_and_its_row_freed(tmp_path):
    # ~20 s of generation at ~2 MB of audio a second: the kernel's send buffer (autotuned to a
    # few MB) is full within seconds
    engine = FakeEngine(frame_delay=0.002, frames_per_char=4.0)
    with wyoming_server(tmp_path, engine, send_timeout_s=1.0) as (_, app):
        port = app.state.wyoming.port
        admission = app.state.service.pool.workers["cv"].admission
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect(("127.0.0.1", port))
        with sock:
            data = {"text": "x" * 4000, "voice": {"name": "ryan"}}  # capped at 10,756 frames
            sock.sendall(json.dumps({"type": "synthesize", "data": data}).encode() + b"\n")
            wait_until(lambda: admission.running == 1, 5.0)
            wait_until(lambda: admission.admitted == 0, 15.0)
        assert engine.frames_generated < 6000


def test_utterances_queued_on_one_connection_are_capped(tmp_path):
    engine = FakeEngine(frame_delay=0.02)

    async def flood(port: int) -> list[str]:
        client = AsyncTcpClient("127.0.0.1", port)
        await client.connect()
        # one more than the cap, the first long enough to still be speaking when the last
        # arrives; no more than that, or a write can meet the connection the refusal closed
        texts = ["The first utterance, a long one. " * 8, "The second.", "The third."]
        for text in texts:
            await client.write_event(Synthesize(text=text, voice=SynthesizeVoice("ryan")).event())
        events = await read_until(client, "error")
        await client.disconnect()
        return [e.type for e in events] + [events[-1].data["code"]]

    with wyoming_server(tmp_path, engine, max_queued_utterances=2) as (_, app):
        kinds = asyncio.run(flood(app.state.wyoming.port))
    assert kinds[-1] == "too_many_utterances"
