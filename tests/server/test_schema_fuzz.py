"""Schemathesis over the whole OpenAPI document of a live server (fake engines, an API key):
every operation, stateful sequences through the document's links, every check, once with the
key and once without it (every answer then is the open routes' or a 401 in the envelope, which
the document must say: each operation's coverage cases, run to the end). The runs with the key
are bounded to about two minutes (OWNVOICE_FUZZ_SECONDS, split between them: as long as before
for each); the figures are printed.

One exception, said in the config below: the requests whose validity a schema cannot express
(the audio inside a voice upload or a one-shot clone must decode as 3-30 s of speech) are not
held to "documented-valid data is accepted"; every other check runs on them, and
test_library_properties.py feeds them real and damaged audio instead.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.server.fakes import FakeEngine
from tests.server.helpers import make_settings, serve
from tests.server.test_errors import KEY

MAX_TIME = int(os.environ.get("OWNVOICE_FUZZ_SECONDS", "130"))
CONFIG = """
seed = 20261203
max-failures = 20
continue-on-failure = true

[generation]
max-examples = 25
database = "none"
"""
# the operations that carry audio: every check but "documented-valid data is accepted"
AUDIO = ("POST /v1/audio/voices", "POST /v1/audio/voice-clone")


def st() -> str:
    found = shutil.which("st", path=str(Path(sys.executable).parent))
    if found is None:
        pytest.fail("schemathesis is not installed (make install-test installs it)")
    return found


def test_schemathesis_finds_nothing(tmp_path):
    voices = tmp_path / "voices"
    voices.mkdir()
    engines = {
        "cv": FakeEngine("custom_voice"),
        "design": FakeEngine("voice_design"),
        "clone": FakeEngine("base"),
    }
    settings = make_settings(
        voices, device="cpu", server={"api_key": KEY}, limits={"max_input_chars": 300}
    )
    config = tmp_path / "schemathesis.toml"
    config.write_text(CONFIG)
    common = ["--request-timeout", "30", "--workers", "1", "--checks", "all"]
    key = ["-H", f"Authorization: Bearer {KEY}"]
    runs = {
        "every operation but the audio uploads": [
            *key, *[arg for name in AUDIO for arg in ("--exclude-name", name)],
            "--max-time", str(MAX_TIME * 2 // 3),
        ],
        "the audio uploads": [
            *key, *[arg for name in AUDIO for arg in ("--include-name", name)],
            "--exclude-checks", "positive_data_acceptance", "--max-time", str(MAX_TIME // 3),
        ],
        # a client without the key: 401s in the envelope, as documented; the open routes answer.
        # The key is checked before anything in the request is read, so every operation's
        # coverage cases (each documented shape, and the edges of each field) are all it takes
        "every operation, without the key": ["--phases", "examples,coverage"],
    }  # fmt: skip
    results = {}
    with serve(settings, engines=engines) as (base, _):
        for name, args in runs.items():
            results[name] = subprocess.run(
                [st(), "--config-file", str(config), "--no-color", "run",
                 f"{base}/openapi.json", *common, *args],
                capture_output=True, text=True, timeout=600,
            )  # fmt: skip
    for name, run in results.items():
        out = run.stdout + run.stderr
        start = next(
            (out.find(h) for h in ("ERRORS", "FAILURES", "WARNINGS", "SUMMARY") if h in out), -1
        )
        print(f"\n--- schemathesis, {name}:\n" + (out[start:] if start >= 0 else out[-3000:]))
    for name, run in results.items():
        assert run.returncode == 0, f"schemathesis found failures in {name} (printed above)"
    # whatever names and paths it sent, the server wrote nowhere but the voices folder
    assert {p.name for p in tmp_path.iterdir()} == {"voices", "schemathesis.toml"}
