"""Test helpers: a real uvicorn on 127.0.0.1 in a thread, settings, reference clips, decoding."""

from __future__ import annotations

import contextlib
import io
import socket
import threading
import time
from collections.abc import Iterator

import httpx
import numpy as np
import uvicorn

from ownvoice.audio import write_wav
from ownvoice.server import create_app
from ownvoice.server.malformed import enveloped_http
from ownvoice.server.settings import ServerSettings


def make_settings(voices_dir, **overrides) -> ServerSettings:
    data = {"voices_dir": str(voices_dir), "models": {}}
    data.update(overrides)
    if not data["models"]:
        data.pop("models")
    return ServerSettings(**data)


@contextlib.contextmanager
def live_server(
    app, wait_ready: bool = True, timeout: float = 120.0, send_buffer: int | None = None
) -> Iterator[str]:
    """Run `app` under uvicorn on a free loopback port; yields the base URL; always stops it.

    `send_buffer` fixes the kernel's send buffer of accepted connections (Linux copies it from
    the listening socket), so a client that stops reading blocks the server after a few KB
    instead of after the megabytes that buffer autotuning allows.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if send_buffer is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send_buffer)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app, log_level="warning", access_log=False, lifespan="on", http=enveloped_http()
    )  # as runner.run_server configures it
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        if wait_ready:
            while httpx.get(f"{base}/ready").status_code != 200:
                health = httpx.get(f"{base}/health")
                if health.status_code == 503 or time.monotonic() > deadline:  # a model failed
                    raise RuntimeError(f"models not ready: {health.text}")
                time.sleep(0.05)
        yield base
    finally:
        server.should_exit = True
        thread.join(15)
        sock.close()


@contextlib.contextmanager
def serve(settings, engines=None, **kw) -> Iterator[tuple[str, object]]:
    app = create_app(settings, engines=engines, run_doctor=False)
    with live_server(app, **kw) as base:
        yield base, app


def speech_clip(
    seconds: float = 4.0, rate: int = 16000, level: float = 0.3, seed: int = 0
) -> np.ndarray:
    """A voiced, speech-like test clip: a 120 Hz harmonic tone with a syllable-rate envelope."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * rate)) / rate
    tone = sum(np.sin(2 * np.pi * 120 * k * t) / k for k in range(1, 6))
    envelope = 0.55 + 0.45 * np.sin(2 * np.pi * 4 * t)
    x = tone * envelope + 0.02 * rng.standard_normal(t.size)
    return (level * x / np.abs(x).max()).astype(np.float32)


def wav_bytes(samples: np.ndarray, rate: int = 16000) -> bytes:
    buf = io.BytesIO()
    write_wav(buf, samples, rate)
    return buf.getvalue()


def decode(data: bytes, fmt: str) -> tuple[int, int]:
    """(samples, sample_rate) of an encoded file, decoded with PyAV; pcm is raw s16le 24 kHz."""
    if fmt == "pcm":
        return len(data) // 2, 24000
    import av

    with av.open(io.BytesIO(data)) as container:
        n, rate = 0, None
        for frame in container.decode(audio=0):
            n += frame.samples
            rate = frame.sample_rate
    return n, rate


def duration(data: bytes, fmt: str) -> float:
    n, rate = decode(data, fmt)
    return n / rate
