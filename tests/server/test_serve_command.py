"""`ownvoice serve` as a user runs it: a separate process, real engine, real port."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import subprocess
import sys
import time

import httpx
import openai
import pytest

from tests.server.test_real_engine import real_checkpoints


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(args, env_extra=None, cwd=None) -> subprocess.Popen:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env_extra or {})}
    return subprocess.Popen(
        [sys.executable, "-m", "ownvoice", "serve", *args],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=cwd,
    )  # fmt: skip


def stop(proc: subprocess.Popen, sig=signal.SIGTERM) -> tuple[int, str]:
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
    out = proc.stdout.read()
    return proc.wait(), out


def wait_ready(proc: subprocess.Popen, base: str) -> None:
    deadline = time.monotonic() + 300
    while True:
        assert proc.poll() is None, f"ownvoice serve exited: {proc.stdout.read()}"
        assert time.monotonic() < deadline, "not ready after 300 s"
        try:
            if httpx.get(f"{base}/ready").status_code == 200:
                return
        except httpx.ConnectError:
            pass
        time.sleep(0.2)


def test_serve_a_local_checkpoint(tiny_checkpoints, tmp_path):
    folder = real_checkpoints(tiny_checkpoints)["cv"]
    port, wyoming_port = free_port(), free_port()
    proc = start(
        [
            "--model",
            str(folder),
            "--port",
            str(port),
            "--device",
            "cpu",
            "--voices-dir",
            str(tmp_path),
            "--wyoming",
            f"tcp://127.0.0.1:{wyoming_port}",
        ]
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_ready(proc, base)
        assert "ryan" in asyncio.run(wyoming_voices(wyoming_port))  # Home Assistant's side too
        health = httpx.get(f"{base}/health").json()
        assert health["roles"] == {"presets": folder.name}  # the role follows the checkpoint's type
        client = openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0, timeout=120)
        audio = client.audio.speech.create(
            model="tts-1",
            voice="alloy",
            input="Hello.",
            response_format="wav",
            extra_body={"max_frames": 2},
        )
        assert audio.content[:4] == b"RIFF" and len(audio.content) > 44
    finally:
        code, out = stop(proc)
    assert code == 0, out
    assert f"Model {folder.name} ready on cpu" in out
    assert re.search(r"speech 200 id=\w+ voice=alloy", out) and "Hello." not in out  # no text


async def wyoming_voices(port: int) -> list[str]:
    from wyoming.client import AsyncTcpClient
    from wyoming.info import Describe, Info

    async with AsyncTcpClient("127.0.0.1", port) as client:
        await client.write_event(Describe().event())
        event = await asyncio.wait_for(client.read_event(), 30)
    return [v.name for v in Info.from_event(event).tts[0].voices]


def test_a_bad_wyoming_uri_is_named():
    from ownvoice.errors import InvalidInput
    from ownvoice.server.settings import load_settings

    with pytest.raises(InvalidInput, match=r"wyoming\.uri.*tcp://host:port"):
        load_settings(None, wyoming={"uri": "http://127.0.0.1:10200"})


def test_serve_without_config_serves_the_default_model_on_8880(tmp_path):
    """Offline here, so the download fails; the attempt shows what would be served, and where."""
    proc = start([], env_extra={"HF_HUB_OFFLINE": "1"}, cwd=tmp_path)
    try:
        code = proc.wait(120)
    except subprocess.TimeoutExpired:
        pytest.fail("ownvoice serve did not stop after failing to load the model")
    out = proc.stdout.read()
    assert "serving on 127.0.0.1:8880" in out
    assert "Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice" in out
    assert code == 1 and "ownvoice serve: error:" in out
    # after uvicorn's "running on", what comes next; the error names the model once, and the fix
    assert "loading cv (Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice); requests wait" in out
    (error,) = [line for line in out.splitlines() if line.startswith("ownvoice serve: error:")]
    assert error.count("model 'cv'") == 1, error
    assert "`hf download Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice`" in error
    assert "ownvoice serve --model DIR" in error


def test_serve_without_config_finds_the_default_model_in_the_hub_cache(tiny_checkpoints, tmp_path):
    """A first start downloads into the Hugging Face cache; later starts (offline too) use it.

    The cache is laid out as huggingface_hub writes it (refs/main -> snapshots/<commit>), with a
    tiny checkpoint standing in for the real download, so the default hub id really loads.
    """
    import shutil

    repo = tmp_path / "hf" / "hub" / "models--Qwen--Qwen3-TTS-12Hz-0.6B-CustomVoice"
    commit = "0123456789abcdef0123456789abcdef01234567"
    shutil.copytree(real_checkpoints(tiny_checkpoints)["cv"], repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    env = {"HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1"}
    port = free_port()
    proc = start(["--port", str(port), "--device", "cpu"], env_extra=env, cwd=tmp_path)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_ready(proc, base)
        models = httpx.get(f"{base}/v1/audio/models").json()
        assert models["models"], models
        r = httpx.post(
            f"{base}/v1/audio/speech",
            json={"model": "tts-1", "voice": "alloy", "input": "Hi.", "response_format": "pcm",
                  "max_frames": 2},
            timeout=120,
        )  # fmt: skip
        assert r.status_code == 200 and len(r.content) == 2 * 1920 * 2
    finally:
        code, out = stop(proc)
    assert code == 0, out
    assert "Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice" in out
