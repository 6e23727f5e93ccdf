"""The server killed with SIGKILL at every moment of a voice upload and a voice delete: after a
restart the library lists, every listed voice speaks, the voice that was being written is
either whole or absent, and no hidden leftovers (.tmp-*, .trash-*) remain."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from ownvoice.service.library import VoiceLibrary
from tests.server.crash_server import MOMENTS
from tests.server.helpers import speech_clip, wav_bytes
from tests.server.test_serve_command import free_port

REPO = Path(__file__).resolve().parents[2]
CLIP = wav_bytes(speech_clip(4.0))


def start(voices: Path, moment: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.server.crash_server", str(port), str(voices), moment],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
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


def check_library(base: str, voices: Path) -> set[str]:
    """Lists, every clone voice speaks, nothing hidden left; the clone voices' names."""
    listing = httpx.get(f"{base}/v1/audio/voices", timeout=30)
    assert listing.status_code == 200
    clones = {v["id"] for v in listing.json()["voices"] if v["id"].startswith("clone:")}
    for voice in clones:
        body = {"model": "tts-1", "voice": voice, "input": "Hi.", "response_format": "pcm"}
        r = httpx.post(f"{base}/v1/audio/speech", json=body, timeout=30)
        assert r.status_code == 200 and r.content, (voice, r.text)
    hidden = [p.name for p in voices.rglob(".*") if p.name.startswith((".tmp-", ".trash-"))]
    assert hidden == [], hidden
    return clones


def write_victim(base: str, delete: bool) -> httpx.Response:
    if delete:
        return httpx.delete(f"{base}/v1/audio/voices/victim", timeout=30)
    files = {"audio_sample": ("a.wav", CLIP, "audio/wav")}
    data = {"name": "victim", "consent": "true", "ref_text": "Hello there."}
    return httpx.post(f"{base}/v1/audio/voices", data=data, files=files, timeout=30)


def test_sigkill_during_uploads_and_deletes_leaves_a_library_that_works(tmp_path):
    voices = tmp_path / "voices"
    VoiceLibrary(voices).add("keeper", CLIP, ref_text="Hello there.")
    survived = []
    proc, base = start(voices, MOMENTS[0])
    try:
        for i, moment in enumerate(MOMENTS):
            if moment.startswith("delete") and not (voices / "victim").is_dir():
                VoiceLibrary(voices).add("victim", CLIP, ref_text="Hello there.")  # to delete
            with pytest.raises(httpx.TransportError):  # the process died mid-request
                write_victim(base, delete=moment.startswith("delete"))
            assert proc.wait(30) == -9, proc.stdout.read()
            following = MOMENTS[i + 1] if i + 1 < len(MOMENTS) else "none"
            proc, base = start(voices, following)
            clones = check_library(base, voices)
            assert "clone:keeper" in clones, moment
            whole = "clone:victim" in clones
            survived.append(f"{moment}: victim {'whole' if whole else 'absent'}")
            # once renamed into place an upload is whole; a delete's rename removes it at once
            assert whole == (moment == MOMENTS[3]), moment
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    print("\n".join(["", "SIGKILL during writes:", *survived]))
