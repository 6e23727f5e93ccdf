"""The final report of a render: what was done, what failed, how long and how loud.

Real-time factor = synthesis wall time / seconds of audio synthesized in this run (below 1 is
faster than real time); speed = its inverse, minutes of audio per minute of wall time. Batch =
rows the engine advanced per step while the book rendered, of the most it batches. Loudness
spread = loudest - quietest measurable chunk, in LU; with a cast, also per voice.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class BookReport:
    chunks: int = 0
    chapters: int = 0
    reused: int = 0  # finished in an earlier run, not requested again
    rendered: int = 0
    failed: int = 0
    retries: dict[str, int] = field(default_factory=dict)  # reason -> count
    failures: list[dict] = field(default_factory=list)  # {"chunk": n, "text": ..., "error": ...}
    audio_seconds: float = 0.0  # length of the output file
    synth_seconds: float = 0.0  # wall time spent synthesizing
    new_audio_seconds: float = 0.0  # audio synthesized in this run
    loudness_before: tuple[float, float] | None = None  # (min, max) LUFS of the raw chunks
    loudness_after: tuple[float, float] | None = None
    limited_chunks: int = 0
    loudness_by_voice: dict[str, float] = field(default_factory=dict)  # with more than one voice
    batch_rows: float | None = None  # mean rows per engine step during synthesis
    batch_size: int | None = None  # the most rows the backend batches
    output: str | None = None  # None when the book is incomplete
    format: str | None = None
    work_dir: str | None = None
    epub_overlay: str | None = None  # the read-along EPUB written, if any

    @property
    def complete(self) -> bool:
        return self.output is not None

    @property
    def retry_count(self) -> int:
        return sum(self.retries.values())

    @property
    def real_time_factor(self) -> float | None:
        return self.synth_seconds / self.new_audio_seconds if self.new_audio_seconds else None

    @property
    def speed(self) -> float | None:
        """Minutes of new audio per minute of synthesis."""
        return self.new_audio_seconds / self.synth_seconds if self.synth_seconds else None

    @staticmethod
    def _spread(pair: tuple[float, float] | None) -> float | None:
        return pair[1] - pair[0] if pair else None

    @property
    def spread_before(self) -> float | None:
        return self._spread(self.loudness_before)

    @property
    def spread_after(self) -> float | None:
        return self._spread(self.loudness_after)

    def to_dict(self) -> dict:
        d = asdict(self)
        d.update(
            complete=self.complete,
            retry_count=self.retry_count,
            real_time_factor=self.real_time_factor,
            speed=self.speed,
            spread_before=self.spread_before,
            spread_after=self.spread_after,
        )
        return d

    def text(self) -> str:
        lines = [
            f"chunks      {self.chunks} ({self.reused} reused, {self.rendered} rendered, "
            f"{self.failed} failed)",
            f"retries     {self.retry_count}"
            + (
                " (" + ", ".join(f"{k} {v}" for k, v in sorted(self.retries.items())) + ")"
                if self.retries
                else ""
            ),
        ]
        if self.complete:
            lines.append(
                f"audio       {_clock(self.audio_seconds)}, {self.chapters} chapters -> "
                f"{self.output} ({self.format})"
            )
        if self.epub_overlay:
            lines.append(f"read-along  {self.epub_overlay} (EPUB 3 with Media Overlays)")
        rtf = self.real_time_factor
        if rtf is not None:
            lines.append(
                f"synthesis   {_clock(self.synth_seconds)} for {_clock(self.new_audio_seconds)} "
                f"of new audio (real-time factor {rtf:.2f}, {self.speed:.2f} audio minutes per "
                "minute)"
            )
        if self.batch_rows is not None:
            lines.append(
                f"batch       {self.batch_rows:.1f} rows per step on average, of {self.batch_size}"
            )
        if self.loudness_before:
            after = f"{self.spread_after:.1f} LU" if self.spread_after is not None else "n/a"
            lines.append(
                f"loudness    spread {self.spread_before:.1f} LU before "
                f"({self.loudness_before[0]:.1f} to {self.loudness_before[1]:.1f} LUFS), "
                f"{after} after; {self.limited_chunks} chunks peak-limited"
            )
        if len(self.loudness_by_voice) > 1:
            levels = self.loudness_by_voice.values()
            lines.append(
                "voices      "
                + ", ".join(f"{v} {x:.1f}" for v, x in self.loudness_by_voice.items())
                + f" LUFS (spread {max(levels) - min(levels):.1f} LU)"
            )
        for f in self.failures:
            text = f["text"] if len(f["text"]) <= 60 else f["text"][:57] + "..."
            lines.append(f"FAILED      chunk {f['chunk']}: {f['error']} -- {text!r}")
        if not self.complete and self.work_dir:
            lines.append(
                f"incomplete: finished chunks are kept in {self.work_dir}; run the same command "
                "again to retry only what is missing"
            )
        elif self.work_dir:
            lines.append(f"work folder {self.work_dir} (reruns and --redo N reuse it)")
        return "\n".join(lines)


def _clock(seconds: float) -> str:
    s = round(seconds)
    h, rest = divmod(s, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60}:{rest % 60:02d}"
