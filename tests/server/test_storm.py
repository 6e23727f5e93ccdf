"""Overload and disconnect storm against one server, with the figures printed: a burst far past
the queue (accepted, 429 with Retry-After, never 5xx), then clients that vanish mid-stream and
mid-queue (every slot comes back), then the server still answers."""

from __future__ import annotations

import json
import socket
from concurrent.futures import ThreadPoolExecutor

import httpx

from tests.server.fakes import FakeEngine
from tests.server.helpers import make_settings, serve
from tests.server.test_overload import wait_until


def vanish(port: int, body: dict, after_bytes: int) -> None:
    """Send a request, read `after_bytes` of the answer (0: none), and drop the connection."""
    data = json.dumps(body).encode()
    head = (
        f"POST /v1/audio/speech HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(data)}\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(head + data)
        got = 0
        while got < after_bytes:
            chunk = s.recv(4096)
            if not chunk:
                break
            got += len(chunk)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\0\0\0\0\0\0\0")  # RST


def test_overload_and_disconnect_storm(tmp_path):
    engine = FakeEngine("custom_voice", frame_delay=0.02)
    settings = make_settings(tmp_path, device="cpu", limits={"max_batch": 2, "queue_size": 4})
    with serve(settings, engines={"cv": engine}) as (base, app):
        port = int(base.rsplit(":", 1)[1])
        admission = app.state.service.pool.workers["cv"].admission
        formats = ["pcm", "mp3", "opus", "flac", "wav", "aac"]

        def post(i: int) -> httpx.Response:
            body = {"model": "tts-1", "voice": "alloy", "input": "x" * 30,
                    "response_format": formats[i % 6],
                    "stream_format": "sse" if i % 4 == 0 else "audio"}  # fmt: skip
            return httpx.post(f"{base}/v1/audio/speech", json=body, timeout=60)

        with ThreadPoolExecutor(40) as pool:
            burst = list(pool.map(post, range(40)))
        statuses = [r.status_code for r in burst]
        accepted = statuses.count(200)
        refused = [r for r in burst if r.status_code == 429]
        with_retry_after = [r for r in refused if int(r.headers.get("retry-after", "0")) >= 1]
        server_errors = [s for s in statuses if s >= 500]

        long_body = {
            "model": "tts-1",
            "voice": "alloy",
            "input": "x" * 400,
            "response_format": "pcm",
        }  # fmt: skip  (200 frames, 4 s)
        with ThreadPoolExecutor(20) as pool:  # half mid-stream, half while queued or planning
            list(pool.map(lambda i: vanish(port, long_body, 4000 if i % 2 else 0), range(20)))
        freed = wait_until(lambda: admission.admitted == 0 and engine.active == 0, 10.0)
        after = post(1)

        print(
            f"\nstorm: 40 requests at once (max_batch 2, queue 4): {accepted} accepted, "
            f"{len(refused)} refused with 429 ({len(with_retry_after)} with Retry-After), "
            f"{len(server_errors)} 5xx, other {len(burst) - accepted - len(refused)}; "
            f"20 clients vanished (10 mid-stream, 10 at once): every slot free after "
            f"{freed:.2f} s, {engine.cancelled} generations cancelled; next request: "
            f"{after.status_code}"
        )
        assert server_errors == [] and accepted + len(refused) == 40, statuses
        assert accepted >= 6 and len(refused) >= 1  # the batch and the queue, then refusals
        assert len(with_retry_after) == len(refused)
        assert after.status_code == 200 and after.content
        assert admission.admitted == 0
