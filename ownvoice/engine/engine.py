"""The public front door: load a checkpoint, make voices, synthesize and stream speech.

    engine = Engine.load("Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice")        # or a local folder
    for chunk in engine.stream("Hello there.", voice="ryan"):            # AudioChunk generator
        sink.write(chunk.samples)
    result = engine.synthesize("Hello there.", voice="ryan")            # = concat of stream()
    voice = engine.make_voice("me.wav", ref_text="what I say in me.wav")  # Base models only

`voice` is a speaker name (CustomVoice), a VoicePrompt (Base), or None (VoiceDesign, which takes
`instruct` instead). Knows nothing about HTTP, files of the voice library or output formats.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from ownvoice.engine.options import EngineConfig, SynthesisOptions
from ownvoice.engine.results import AudioChunk, Synthesis
from ownvoice.engine.voice import VoicePrompt


class Engine:
    """Owns the model on one device. Not thread-safe: one synthesis at a time per engine."""

    model_type: str  # "custom_voice" | "voice_design" | "base"
    device: str  # e.g. "cpu", "cuda:0"
    dtype: str  # "float32" | "bfloat16" | "float16"

    @classmethod
    def load(cls, path_or_id: str, config: EngineConfig | None = None, **overrides) -> Engine:
        """Load a checkpoint folder or a Hugging Face hub id (downloaded to the HF cache).

        `overrides` are EngineConfig fields, e.g. `Engine.load(p, device="cpu", dtype="float32")`.
        """
        raise NotImplementedError

    @property
    def supported_speakers(self) -> list[str]:
        raise NotImplementedError

    @property
    def supported_languages(self) -> list[str]:
        raise NotImplementedError

    @property
    def instruct_supported(self) -> bool:
        raise NotImplementedError

    def warmup(self) -> float:
        """Run one short synthesis so later requests pay no first-call costs; returns seconds."""
        raise NotImplementedError

    def make_voice(
        self,
        audio,
        ref_text: str | None = None,
        x_vector_only: bool = False,
    ) -> VoicePrompt:
        """Encode a reference clip (path, bytes, or (np.ndarray, sample_rate)) into a VoicePrompt."""
        raise NotImplementedError

    def stream(
        self,
        text: str,
        voice: str | VoicePrompt | None = None,
        instruct: str | None = None,
        options: SynthesisOptions | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> Iterator[AudioChunk]:
        """Yield audio as it is generated. `should_stop()` is polled between frames."""
        raise NotImplementedError

    def synthesize(
        self,
        text: str,
        voice: str | VoicePrompt | None = None,
        instruct: str | None = None,
        options: SynthesisOptions | None = None,
    ) -> Synthesis:
        raise NotImplementedError
