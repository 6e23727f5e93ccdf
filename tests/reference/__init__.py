"""Access to the official `qwen-tts==0.1.1` package, the reference our parity tests compare with.

It is installed with --no-deps (see the Makefile); `ownvoice.bench.reference` puts empty modules
in place of the sox / onnxruntime / torchaudio imports of its unused 25 Hz code.
"""

from __future__ import annotations

import os

import pytest


def import_reference():
    """Import and return the `qwen_tts` module, or skip the test if it is not installed.

    With OWNVOICE_REQUIRE_REFERENCE=1 (set by `make test` / CI) a missing reference is an error,
    so parity tests can never pass by being skipped.
    """
    from ownvoice.bench.reference import import_qwen_tts

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        return import_qwen_tts()
    except ImportError as e:
        if os.environ.get("OWNVOICE_REQUIRE_REFERENCE") == "1":
            raise
        pytest.skip(f"reference package qwen-tts not importable: {e}")
