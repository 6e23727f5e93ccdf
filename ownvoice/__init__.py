"""ownvoice: local, private text-to-speech with the Qwen3-TTS models."""

# ruff: noqa: E402  (the wait policy must be set before the imports below load torch)

# before anything imports torch (its OpenMP runtime reads this once): threads that wait sleep
# instead of spinning, so two processes on the same cores share them (see threads.py)
from ownvoice.threads import prefer_passive_waiting

prefer_passive_waiting()

from ownvoice.engine.engine import Engine
from ownvoice.engine.options import EngineConfig, SamplingOptions, SynthesisOptions
from ownvoice.engine.results import AudioChunk, Synthesis
from ownvoice.engine.voice import VoicePrompt
from ownvoice.errors import (
    AudioError,
    EngineBusy,
    InvalidInput,
    ModelLoadError,
    OwnvoiceError,
    VoiceNotFound,
)

__version__ = "0.1.0"

__all__ = [
    "AudioChunk",
    "AudioError",
    "Engine",
    "EngineBusy",
    "EngineConfig",
    "InvalidInput",
    "ModelLoadError",
    "OwnvoiceError",
    "SamplingOptions",
    "Synthesis",
    "SynthesisOptions",
    "VoiceNotFound",
    "VoicePrompt",
    "__version__",
]
