"""Access to the official `qwen-tts==0.1.1` package, the reference our parity tests compare with.

It is installed with --no-deps (see the Makefile). Importing it pulls its 25 Hz tokenizer,
which imports sox, onnxruntime and torchaudio; inert stubs stand in for them.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

STUBS = Path(__file__).parent / "stubs"


def import_reference():
    """Import and return the `qwen_tts` module, or skip the test if it is not installed.

    With OWNVOICE_REQUIRE_REFERENCE=1 (set by `make test` / CI) a missing reference is an error,
    so parity tests can never pass by being skipped.
    """
    if str(STUBS) not in sys.path:
        sys.path.append(str(STUBS))
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        import qwen_tts  # noqa: F401
    except ImportError as e:
        if os.environ.get("OWNVOICE_REQUIRE_REFERENCE") == "1":
            raise
        pytest.skip(f"reference package qwen-tts not importable: {e}")
    return sys.modules["qwen_tts"]
