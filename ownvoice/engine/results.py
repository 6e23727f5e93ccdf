"""What the engine hands back: audio chunks while streaming, a whole synthesis at the end."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SAMPLE_RATE = 24000
SAMPLES_PER_FRAME = 1920  # one codec frame = 80 ms at 24 kHz (12.5 frames per second)


@dataclass(frozen=True)
class AudioChunk:
    """A piece of the waveform, final as soon as it is yielded.

    `samples` is a fresh float32 array (mono, 24 kHz, in [-1, 1]) that the caller owns;
    `codes` (frames x 16, int64) are the codec frames it was decoded from.
    """

    samples: np.ndarray
    codes: np.ndarray
    index: int  # 0, 1, 2, ... within one synthesis
    start_frame: int  # first frame of this chunk
    is_last: bool
    # set on the last chunk: "eos" (the model ended), "max_frames" (cap hit), "cancelled",
    # "error" (this sequence failed on its own; the exception is its Sequence's `error`)
    stop_reason: str | None = None
    sample_rate: int = SAMPLE_RATE

    @property
    def num_frames(self) -> int:
        return int(self.codes.shape[0])


@dataclass(frozen=True)
class Synthesis:
    """A whole utterance: the concatenation of every chunk `Engine.stream` yields."""

    audio: np.ndarray  # float32, mono, 24 kHz
    codes: np.ndarray  # (frames, 16) int64
    stop_reason: str
    sample_rate: int = SAMPLE_RATE

    @property
    def duration(self) -> float:
        return len(self.audio) / self.sample_rate
