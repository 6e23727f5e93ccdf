"""Turn finished chunks into one PCM stream: trim, level, limit, and join with pauses.

For each chunk, in this order:
  1. trim the silence the model leaves at both ends (energy threshold; a short margin is kept so
     soft onsets and final consonants survive),
  2. bring it to the target integrated loudness (chunks too short or silent to measure get the
     book's median gain),
  3. hold its true peak under the ceiling.
Then each chunk is followed by the configured silence.

Two passes, so memory stays at one chunk however long the book: `measure` reads every chunk
once for its trimmed length and loudness (hence the chapter start samples, needed before
encoding begins), and `stream` reads them again and yields the finished audio block by block.
Knows nothing about synthesis or file formats.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np

from ownvoice import loudness
from ownvoice.audiobook.options import Pauses
from ownvoice.audiobook.plan import PlannedChunk

TRIM_FRAME_S = 0.01  # energy is measured in 10 ms frames
TRIM_MARGIN_S = 0.04  # kept on each side of the first/last frame above the threshold
TRIM_RELATIVE_DB = -45.0  # a frame is silence when this far below the chunk's loudest frame...
TRIM_FLOOR_DB = -60.0  # ...or below this absolute level (dBFS RMS), whichever is higher

Loader = Callable[[PlannedChunk], np.ndarray]


@dataclass
class Assembly:
    """What the first pass learned, and what the second adds."""

    sample_rate: int
    lengths: list[int]  # samples of each trimmed chunk
    gaps: list[int]  # samples of silence after each chunk (the tail after the last)
    head: int  # samples of silence before the first chunk
    before_lufs: list[float | None]  # None = unmeasurable (under 0.4 s, or silent)
    gains_db: list[float]
    chapter_starts: list[int] = field(default_factory=list)  # first sample of each chapter
    chapter_ids: list[int] = field(default_factory=list)  # which book chapter each start is
    after_lufs: list[float | None] = field(default_factory=list)  # filled by stream()
    limited: int = 0  # chunks whose peaks the limiter pulled down (filled by stream())

    @property
    def total(self) -> int:
        return self.head + sum(self.lengths) + sum(self.gaps)

    @property
    def chunk_starts(self) -> list[int]:
        """First sample of each trimmed chunk in the finished track."""
        starts, position = [], self.head
        for length, gap in zip(self.lengths, self.gaps, strict=True):
            starts.append(position)
            position += length + gap
        return starts


def trim_silence(audio: np.ndarray, sample_rate: int) -> np.ndarray:
    """`audio` without its leading and trailing silence (all of it if it is all silence)."""
    frame = max(1, int(TRIM_FRAME_S * sample_rate))
    n = len(audio) // frame
    if n == 0:
        return audio[:0]
    rms = np.sqrt(np.mean(audio[: n * frame].reshape(n, frame) ** 2, axis=1) + 1e-20)
    db = 20 * np.log10(rms)
    threshold = max(TRIM_FLOOR_DB, float(db.max()) + TRIM_RELATIVE_DB)
    loud = np.nonzero(db > threshold)[0]
    if len(loud) == 0:
        return audio[:0]
    margin = int(TRIM_MARGIN_S * sample_rate)
    start = max(0, loud[0] * frame - margin)
    end = min(len(audio), (loud[-1] + 1) * frame + margin)
    return audio[start:end]


def measure(
    plan: Sequence[PlannedChunk],
    load: Loader,
    sample_rate: int,
    pauses: Pauses,
    target_lufs: float,
) -> Assembly:
    """First pass: trimmed lengths, loudness and gains, gaps and chapter starts."""
    lengths, before = [], []
    for chunk in plan:
        audio = trim_silence(load(chunk), sample_rate)
        lengths.append(len(audio))
        before.append(loudness.integrated_loudness(audio, sample_rate))
    gains = _gains(plan, before, target_lufs)
    gaps = [round(c.gap(pauses) * sample_rate) for c in plan]
    asm = Assembly(sample_rate, lengths, gaps, round(pauses.head * sample_rate), before, gains)
    position = asm.head
    for chunk, length, gap in zip(plan, lengths, gaps, strict=True):
        if not asm.chapter_ids or asm.chapter_ids[-1] != chunk.chapter:
            asm.chapter_starts.append(position if asm.chapter_ids else 0)  # 1st includes the head
            asm.chapter_ids.append(chunk.chapter)
        position += length + gap
    return asm


def _gains(plan: Sequence[PlannedChunk], before: list[float | None], target: float) -> list[float]:
    """Each chunk's gain to the target. A chunk too short to measure gets the typical gain of
    its own voice (a cast's voices differ in level; a "Yes." in a louder voice must not take
    the narrator's gain), else of the whole book."""
    by_voice: dict[str | None, list[float]] = {}
    for chunk, measured in zip(plan, before, strict=True):
        if measured is not None:
            by_voice.setdefault(chunk.voice, []).append(loudness.gain_db(measured, target))
    every = [g for gains in by_voice.values() for g in gains]
    book = float(np.median(every)) if every else 0.0
    typical = {voice: float(np.median(gains)) for voice, gains in by_voice.items()}
    return [
        typical.get(chunk.voice, book) if m is None else loudness.gain_db(m, target)
        for chunk, m in zip(plan, before, strict=True)
    ]


def stream(
    plan: Sequence[PlannedChunk], load: Loader, asm: Assembly, peak_dbtp: float
) -> Iterator[np.ndarray]:
    """Second pass: the finished track as float32 blocks (one chunk or one pause each)."""
    asm.after_lufs, asm.limited = [], 0
    yield np.zeros(asm.head, dtype=np.float32)
    for chunk, gain, gap in zip(plan, asm.gains_db, asm.gaps, strict=True):
        audio = trim_silence(load(chunk), asm.sample_rate)
        audio, engaged = level(audio, gain, peak_dbtp, asm.sample_rate)
        asm.limited += engaged
        asm.after_lufs.append(loudness.integrated_loudness(audio, asm.sample_rate))
        yield audio
        yield np.zeros(gap, dtype=np.float32)


def level(
    audio: np.ndarray, gain_db: float, peak_dbtp: float, sample_rate: int
) -> tuple[np.ndarray, bool]:
    """Apply the gain, then the true-peak ceiling; returns (audio, limiter engaged)."""
    return loudness.limit(loudness.apply_gain(audio, gain_db), peak_dbtp, sample_rate)


def loudness_by_voice(plan: Sequence[PlannedChunk], asm: Assembly) -> dict[str | None, float]:
    """Loudness of each voice's chunks after levelling (LUFS; their mean power weighted by
    length), for the voices with measurable chunks. Needs `stream()` to have run."""
    power: dict[str | None, list[float]] = {}
    for chunk, lufs, n in zip(plan, asm.after_lufs, asm.lengths, strict=True):
        if lufs is not None:
            total = power.setdefault(chunk.voice, [0.0, 0.0])
            total[0] += n * 10 ** (lufs / 10)
            total[1] += n
    return {voice: 10 * np.log10(p / n) for voice, (p, n) in power.items()}


def spread(values: Sequence[float | None]) -> float | None:
    """max - min of the measurable values, in LU; None when fewer than two."""
    v = [x for x in values if x is not None]
    return max(v) - min(v) if len(v) >= 2 else None
