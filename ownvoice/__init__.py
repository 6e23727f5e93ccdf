"""ownvoice: local, private text-to-speech with the Qwen3-TTS models."""

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
