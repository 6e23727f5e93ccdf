"""Subtitles of a finished book, one cue per sentence: SRT and WebVTT.

Times come from the assembly (assemble.Assembly): where each trimmed chunk starts in the
finished audio and how long it is. Inside a chunk, its sentences share its time in proportion
to how long each takes to say (plan.expected_seconds of what is spoken, after the lexicon), so
every cue lies inside its own chunk's audio. Cues show the text as written, never the lexicon's.
Knows nothing about encoding audio.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ownvoice.audiobook.plan import PlannedChunk, expected_seconds
from ownvoice.errors import InvalidInput
from ownvoice.textsplit import split_sentences

SUBTITLE_FORMATS = {".srt": "srt", ".vtt": "vtt"}


@dataclass(frozen=True)
class Cue:
    start: float  # seconds in the finished audio
    end: float
    text: str
    chunk: int = -1  # the index of the chunk it is part of


def cues(
    plan: Sequence[PlannedChunk],
    starts: Sequence[int],
    lengths: Sequence[int],
    sample_rate: int,
    language: str | None,
    say=lambda text: text,
) -> list[Cue]:
    """A cue per sentence of every chunk; `starts`/`lengths` in samples, `say` the lexicon."""
    out: list[Cue] = []
    for chunk, start, length in zip(plan, starts, lengths, strict=True):
        if length <= 0:
            continue
        sentences = split_sentences(chunk.text, language, None) or [chunk.text]
        weights = [max(expected_seconds(say(s)), 0.05) for s in sentences]
        t, total = start / sample_rate, sum(weights)
        for sentence, weight in zip(sentences, weights, strict=True):
            span = length / sample_rate * weight / total
            out.append(Cue(t, t + span, sentence, chunk.index))
            t += span
    return out


def subtitle_format(path: str) -> str:
    fmt = SUBTITLE_FORMATS.get(Path(path).suffix.lower())
    if fmt is None:
        raise InvalidInput(f"subtitles must be .srt or .vtt, got {path!r}", param="subtitles")
    return fmt


def write_subtitles(path: str, items: Sequence[Cue]) -> None:
    fmt = subtitle_format(path)
    if fmt == "srt":
        blocks = [f"{i}\n{_stamp(c.start, ',')} --> {_stamp(c.end, ',')}\n{c.text}\n"
                  for i, c in enumerate(items, 1)]  # fmt: skip
        text = "\n".join(blocks)
    else:
        blocks = [f"{_stamp(c.start, '.')} --> {_stamp(c.end, '.')}\n{_vtt_text(c.text)}\n"
                  for c in items]  # fmt: skip
        text = "WEBVTT\n\n" + "\n".join(blocks)
    Path(path).write_text(text, encoding="utf-8")


def _stamp(seconds: float, comma: str) -> str:
    ms = round(seconds * 1000)
    h, rest = divmod(ms, 3_600_000)
    m, rest = divmod(rest, 60_000)
    s, ms = divmod(rest, 1000)
    return f"{h:02d}:{m:02d}:{s:02d}{comma}{ms:03d}"


def _vtt_text(text: str) -> str:
    # WebVTT cue text: & and < start markup; "-->" would end the timing line
    return text.replace("&", "&amp;").replace("<", "&lt;").replace("-->", "--&gt;")
