"""`ownvoice book --dry-run`: what a render would say, how long it would be, and how long it
would take here -- without synthesizing the book.

The chapters and every chunk are printed as they would be sent (after the lexicon), with the
cast's voice in brackets where it is not the backend's own. The audio
length is estimated from the text (plan.expected_seconds) plus the pauses; the time from one
short sample synthesized with the same backend, voice and language, measured on this machine.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from ownvoice.audiobook.backends import SAMPLE_RATE
from ownvoice.audiobook.document import chapter_names
from ownvoice.audiobook.options import BookOptions
from ownvoice.audiobook.plan import expected_seconds

SAMPLE_TEXT = "This short sentence is read once, to measure how fast this machine speaks."


@dataclass(frozen=True)
class DryRun:
    text: str  # what is printed
    chunks: int
    audio_seconds: float  # estimated length of the finished book
    realtime_factor: float | None  # wall seconds per audio second of the sample (None: no sample)


def dry_run(
    source: str,
    backend,
    options: BookOptions | None = None,
    input_format: str | None = None,
    measure: bool = True,
) -> DryRun:
    from ownvoice.audiobook.pipeline import prepare

    options = options or BookOptions()
    options.validate()
    book, jobs, identity, max_chars = prepare(source, backend, options, input_format)
    pauses = options.pauses  # as assembly puts them: the head, then a pause after each chunk
    audio = pauses.head + sum(expected_seconds(j.said) + j.chunk.gap(pauses) for j in jobs)
    factor = _measure(backend, identity["language"], options.seed) if measure else None

    lines = [f"{book.title or source}" + (f" — {book.author}" if book.author else "")]
    voice = identity.get("voice") or identity.get("instructions") or "the model's default"
    lines.append(
        f"{len(jobs)} chunks of at most {max_chars} characters in {len(book.chapters)} chapters; "
        f"voice {voice}; language {identity['language']}"
    )
    lines.append(f"estimated audio: {_clock(audio)}")
    if factor is not None:
        lines.append(
            f"estimated time here: {_clock(audio * factor)} one chunk at a time "
            f"({factor:.2f} s per second of audio, measured on a sample)"
        )
    if book.skipped:
        lines.append("left out: " + ", ".join(f"{n} {kind}" for kind, n in book.skipped.items()))
    names = chapter_names(book)
    chapter = None
    for n, job in enumerate(jobs, 1):
        if job.chunk.chapter != chapter:
            chapter = job.chunk.chapter
            lines.append(f"\n== {names[chapter]}")
        voice = f"[{job.chunk.voice}] " if job.chunk.voice else ""
        lines.append(f"{n:5d}  {voice}{job.said}")
    return DryRun("\n".join(lines) + "\n", len(jobs), audio, factor)


def _measure(backend, language: str, seed: int) -> float:
    t0 = time.monotonic()
    rendered = backend.synthesize(SAMPLE_TEXT, seed=seed, language=language, max_seconds=30.0)
    wall = time.monotonic() - t0
    return wall / max(len(rendered.audio) / SAMPLE_RATE, 1e-3)


def _clock(seconds: float) -> str:
    seconds = round(seconds)
    h, rest = divmod(seconds, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60}:{rest % 60:02d}"
