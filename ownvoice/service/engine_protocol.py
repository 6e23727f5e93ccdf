"""What the service needs of an engine: the public API of ownvoice.engine.Engine.

Schedulers drive engines only through these members, so a test double that implements them
(tests/server/fakes.py) stands in for a real model everywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol

from ownvoice.engine.opentext import TextSoFar
from ownvoice.engine.options import SamplingOptions, SynthesisOptions
from ownvoice.engine.results import AudioChunk
from ownvoice.engine.sequence import Sequence
from ownvoice.engine.voice import VoicePrompt


class SpeechEngine(Protocol):
    model_type: str  # custom_voice | voice_design | base
    device: str
    sample_rate: int  # of the audio it makes
    dtype: str

    @property
    def supported_speakers(self) -> list[str]: ...

    @property
    def supported_languages(self) -> list[str]: ...

    @property
    def instruct_supported(self) -> bool: ...

    @property
    def model_fingerprint(self) -> str: ...

    @property
    def speaker_embedding_size(self) -> int | None: ...

    @property
    def default_sampling(self) -> SamplingOptions: ...

    @property
    def max_batch(self) -> int: ...

    @property
    def running(self) -> list[Sequence]: ...

    @property
    def first_chunks_due(self) -> bool: ...

    def warmup(self) -> float: ...

    def make_voice(
        self, audio, ref_text: str | None = None, x_vector_only: bool = False
    ) -> VoicePrompt: ...

    def start(
        self,
        text: str,
        voice: str | VoicePrompt | None = None,
        instruct: str | None = None,
        options: SynthesisOptions | None = None,
        tag: object = None,
    ) -> Sequence: ...

    def start_open(
        self,
        source: Callable[[], TextSoFar],
        voice: str | VoicePrompt | None = None,
        instruct: str | None = None,
        options: SynthesisOptions | None = None,
        tag: object = None,
    ) -> Sequence: ...

    def startable(self, seq: Sequence) -> bool: ...

    @property
    def waiting_for_text(self) -> bool: ...

    def join(self, seq: Sequence) -> None: ...

    def step(self) -> Iterable[tuple[Sequence, AudioChunk]]: ...

    def ready_chunks(self) -> Iterable[tuple[Sequence, AudioChunk]]: ...

    def cancel_all(self) -> list[tuple[Sequence, AudioChunk]]: ...
