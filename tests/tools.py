"""Outside tools some tests drive (docker-compose, hadolint, pandoc, epubcheck, java, chromium,
chromedriver): such a test skips where the tool is missing, and fails in CI instead
(OWNVOICE_REQUIRE_DEPLOY_TOOLS=1, set by .ci/run, which installs them)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest


def need(tool: str) -> str:
    """The tool's path (on PATH, or next to this Python: pip-installed ones)."""
    found = shutil.which(tool) or shutil.which(tool, path=str(Path(sys.executable).parent))
    if found is None:
        if os.environ.get("OWNVOICE_REQUIRE_DEPLOY_TOOLS") == "1":
            pytest.fail(f"{tool} is not installed (OWNVOICE_REQUIRE_DEPLOY_TOOLS=1)")
        pytest.skip(f"{tool} is not installed")
    return found
