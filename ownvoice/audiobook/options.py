"""Knobs of one audiobook render: chunking, retries, loudness, pauses and output.

Frozen dataclasses with a `validate()` that names the field, the value and what is accepted.
Only what changes the synthesized audio of a chunk (text, voice, language, seed, model) is part
of a chunk's cache key; loudness, pauses and output settings are applied at assembly, so changing
them re-uses every finished chunk.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from ownvoice.audiobook.cast import NO_CAST, Cast
from ownvoice.audiobook.document import ReadOptions
from ownvoice.audiobook.lexicon import EMPTY, Lexicon
from ownvoice.audiobook.subtitles import subtitle_format
from ownvoice.errors import InvalidInput

OUTPUT_FORMATS = ("mp3", "m4b", "opus", "flac", "wav")


@dataclass(frozen=True)
class Pauses:
    """Seconds of silence put between chunks, after each chunk's own edge silence is trimmed."""

    sentence: float = 0.35  # between chunks of one paragraph
    paragraph: float = 0.8
    chapter: float = 2.0
    head: float = 0.5  # before the first chunk (ACX asks for 0.5-1 s of room tone)
    tail: float = 1.0  # after the last chunk (ACX: 1-5 s)

    def after(self, pause: str) -> float:
        """Seconds of silence after a chunk whose pause is `pause` ("sentence", "paragraph",
        "chapter", or "end": the tail)."""
        return self.tail if pause == "end" else getattr(self, pause)

    def validate(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if not 0 <= v <= 60:
                raise InvalidInput(f"pause {f.name} must be in [0, 60] s, got {v}", param=f.name)


@dataclass(frozen=True)
class BookOptions:
    # text
    language: str = "auto"  # "auto", a model language name ("english") or an ISO code ("en")
    chunk_chars: int | None = None  # None = 200, or 100 for text that is mostly CJK
    reading: ReadOptions = field(default_factory=ReadOptions)  # notes, tables, figures
    lexicon: Lexicon = EMPTY  # how words are said; applied to what is spoken only
    cast: Cast = NO_CAST  # narrator, dialogue and chapter voices; its lexicon follows `lexicon`
    # synthesis
    seed: int = 0  # base seed; each chunk and attempt derives its own from it
    # chunks in flight at once; None = as many as the model batches (its max_batch), which
    # keeps every step of the engine full
    jobs: int | None = None
    retries: int = 4  # per chunk, after the first attempt
    backoff_s: float = 1.0  # first wait before a retry; doubled each time, with jitter
    max_backoff_s: float = 30.0  # also caps a server's Retry-After
    # runaway: audio longer than runaway_factor x what the text implies + runaway_slack_s;
    # truncated: shorter than truncated_factor x that (only for texts implying > 1.5 s)
    runaway_factor: float = 2.5
    runaway_slack_s: float = 3.0
    truncated_factor: float = 0.2
    # loudness
    target_lufs: float = -18.0  # integrated loudness of every chunk (EBU R128 / BS.1770)
    peak_dbtp: float = -1.0  # true-peak ceiling (ACX wants -3)
    pauses: Pauses = field(default_factory=Pauses)
    # output
    format: str | None = None  # None = from the output file's extension
    bitrate: int | None = None  # bits per second; None = the format's default
    sample_rate: int | None = None  # None = 24000 (the model's rate); e.g. 44100 for ACX
    title: str | None = None  # override the book's own metadata
    author: str | None = None
    cover: str | None = None  # path to a .jpg or .png
    subtitles: tuple[str, ...] = ()  # .srt / .vtt files to write, a cue per sentence
    epub_overlay: str | None = None  # a read-along EPUB 3 (Media Overlays) to write

    @property
    def spoken_lexicon(self) -> Lexicon:
        """Every lexicon entry: --lexicon's, then the cast's."""
        return self.lexicon.then(self.cast.lexicon)

    def validate(self) -> None:
        self.reading.validate()
        for path in self.subtitles:
            subtitle_format(path)
        if self.epub_overlay is not None and not self.epub_overlay.lower().endswith(".epub"):
            raise InvalidInput(
                f"the read-along book must be an .epub file, got {self.epub_overlay!r}",
                param="epub_overlay",
            )
        if self.chunk_chars is not None and not 20 <= self.chunk_chars <= 4000:
            raise InvalidInput(
                f"chunk_chars must be in [20, 4000], got {self.chunk_chars}", param="chunk_chars"
            )
        if self.jobs is not None and not 1 <= self.jobs <= 64:
            raise InvalidInput(f"jobs must be in [1, 64], got {self.jobs}", param="jobs")
        if not 0 <= self.retries <= 100:
            raise InvalidInput(f"retries must be in [0, 100], got {self.retries}", param="retries")
        if self.backoff_s < 0 or self.max_backoff_s < 0:
            raise InvalidInput("backoff_s and max_backoff_s must be >= 0", param="backoff_s")
        if self.runaway_factor < 1:
            raise InvalidInput(
                f"runaway_factor must be >= 1, got {self.runaway_factor}", param="runaway_factor"
            )
        if not -70 <= self.target_lufs <= -5:
            raise InvalidInput(
                f"target_lufs must be in [-70, -5], got {self.target_lufs}", param="target_lufs"
            )
        if not -20 <= self.peak_dbtp <= 0:
            raise InvalidInput(
                f"peak_dbtp must be in [-20, 0], got {self.peak_dbtp}", param="peak_dbtp"
            )
        if self.format is not None and self.format not in OUTPUT_FORMATS:
            raise InvalidInput(
                f"format must be one of {OUTPUT_FORMATS}, got {self.format!r}", param="format"
            )
        if self.sample_rate is not None and self.sample_rate not in (
            16000,
            22050,
            24000,
            44100,
            48000,
        ):
            raise InvalidInput(
                f"sample_rate must be one of 16000, 22050, 24000, 44100, 48000, got {self.sample_rate}",
                param="sample_rate",
            )
        self.pauses.validate()
