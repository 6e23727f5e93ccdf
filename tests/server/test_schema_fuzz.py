"""Schemathesis over the whole OpenAPI document of a live server (fake engines, an API key):
every operation, stateful sequences through the document's links, every check. Bounded to a
few minutes; the figures are printed.

One exception, said in the config below: the requests whose validity a schema cannot express
(the audio inside a voice upload or a one-shot clone must decode as 3-30 s of speech) are not
held to "documented-valid data is accepted"; every other check runs on them, and
test_library_properties.py feeds them real and damaged audio instead.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.server.fakes import FakeEngine
from tests.server.helpers import make_settings, serve
from tests.server.test_errors import KEY

CONFIG = """
seed = 20261203
max-failures = 20
continue-on-failure = true

[generation]
max-examples = {examples}
database = "none"

[checks]
enabled = true

[[operations]]
include-path-regex = "^/v1/audio/(voices|voice-clone)$"
include-method = "POST"
checks.positive_data_acceptance.enabled = false
"""


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
    config.write_text(CONFIG.format(examples=25))
    with serve(settings, engines=engines) as (base, _):
        run = subprocess.run(
            [st(), "--config-file", str(config), "--no-color", "run", f"{base}/openapi.json",
             "--checks", "all", "-H", f"Authorization: Bearer {KEY}",
             "--max-time", "240", "--request-timeout", "30", "--workers", "1"],
            capture_output=True, text=True, timeout=600,
        )  # fmt: skip
    out = run.stdout + run.stderr
    summary = out[out.rfind("SUMMARY") :] if "SUMMARY" in out else out[-3000:]
    print("\n" + summary)
    assert run.returncode == 0, out[-20000:]
    # whatever names and paths it sent, the server wrote nowhere but the voices folder
    assert {p.name for p in tmp_path.iterdir()} == {"voices", "schemathesis.toml"}
