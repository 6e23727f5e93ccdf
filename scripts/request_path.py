"""Which of ownvoice's files one HTTP cloned-voice request passes through, and which classes.

    python scripts/request_path.py [--list]

Builds a tiny random Base checkpoint, serves it in process (FastAPI's TestClient, the real app
and engine), stores a voice `clone:Reader` in a fresh library, then profiles one
`POST /v1/audio/speech` with that voice (mp3, speed 1.25, its first use, so the voice prompt is
encoded as part of it): every Python function of the package entered on any thread while the
request runs is counted by file and by class. A measure for refactors of the request path
(docs/testing.md), not a test.
"""

from __future__ import annotations

import argparse
import io
import sys
import tempfile
import threading
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "ownvoice"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="list the files and classes")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))

    import numpy as np

    from ownvoice.audio import write_wav
    from ownvoice.dev.random_checkpoint import write_random_checkpoint

    files: Counter = Counter()
    classes: set[str] = set()
    recording = threading.Event()

    def profile(frame, event, arg):
        if event != "call" or not recording.is_set():
            return
        path = frame.f_code.co_filename
        if not path.startswith(str(PACKAGE)):
            return
        files[str(Path(path).relative_to(ROOT))] += 1
        owner = frame.f_locals.get("self")
        if owner is not None and type(owner).__module__.startswith("ownvoice"):
            classes.add(f"{type(owner).__module__}.{type(owner).__qualname__}")

    threading.setprofile(profile)  # threads made from now on (the engine's scheduler among them)
    sys.setprofile(profile)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        checkpoint = write_random_checkpoint(tmp / "base", "0.6B-Base", tiny=True, seed=0)
        from fastapi.testclient import TestClient

        from ownvoice.server import create_app
        from ownvoice.server.settings import ServerSettings

        settings = ServerSettings(
            voices_dir=str(tmp / "voices"),
            device="cpu",
            dtype="float32",
            models={"clone": {"source": str(checkpoint)}},
        )
        rate = 24000
        t = np.arange(int(3.5 * rate)) / rate
        clip = 0.3 * np.sin(2 * np.pi * 120 * t) * (0.55 + 0.45 * np.sin(8 * np.pi * t))
        wav = io.BytesIO()
        write_wav(wav, clip.astype(np.float32), rate)
        app = create_app(settings, run_doctor=False)
        with TestClient(app, base_url="http://127.0.0.1") as client:
            r = client.post(
                "/v1/audio/voices",
                data={"name": "Reader", "ref_text": "Hello, this is my voice.", "consent": "true"},
                files={"audio_sample": ("me.wav", wav.getvalue(), "audio/wav")},
            )
            assert r.status_code in (200, 201), r.text
            body = {
                "model": "tts-1",
                "voice": "clone:Reader",
                "input": "Hello there, how are you?",
                "response_format": "mp3",
                "speed": 1.25,
                "max_frames": 6,
                "seed": 0,
            }
            recording.set()
            r = client.post("/v1/audio/speech", json=body)
            recording.clear()
            assert r.status_code == 200, r.text
    sys.setprofile(None)
    threading.setprofile(None)
    print(f"{len(files)} files, {len(classes)} classes of ownvoice on one cloned-voice request")
    if args.list:
        for name in sorted(files):
            print(f"  {name}")
        for name in sorted(classes):
            print(f"  class {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
