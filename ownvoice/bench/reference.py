"""Importing the official `qwen-tts` package for side-by-side runs (benchmarks, parity tests).

`import qwen_tts` also imports its 25 Hz tokenizer, which needs sox, onnxruntime and torchaudio
even for the 12 Hz models. None of them is used on our paths, so empty modules stand in for any
that is not installed.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
from types import ModuleType

STUBBED = (
    "sox",
    "onnxruntime",
    "torchaudio",
    "torchaudio.compliance",
    "torchaudio.compliance.kaldi",
)


def import_qwen_tts() -> ModuleType:
    """Return the `qwen_tts` module; raise ImportError with an install hint if it is missing."""
    if importlib.util.find_spec("qwen_tts") is None:
        raise ImportError(
            "the official package is not installed; for comparisons install it next to its "
            "transformers: pip install --no-deps qwen-tts==0.1.1 transformers==4.57.3 librosa einops"
        )
    for name in STUBBED:
        top = name.split(".")[0]
        if name in sys.modules or (top not in sys.modules and importlib.util.find_spec(top)):
            continue  # already imported, or really installed
        stub = ModuleType(name)
        stub.__spec__ = importlib.machinery.ModuleSpec(name, loader=None)
        sys.modules[name] = stub
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(sys.modules[parent], child, sys.modules[name])
    return importlib.import_module("qwen_tts")
