"""A speech request's inline markup, read into the parts it is spoken as.

The input is plain text or SSML (ssml.py). Both may carry pause tags, `[pause:1.5]`, which
plain-text clients (chat front ends, scripts) can type without learning SSML:

    "Hello [pause:1.5] world"  ->  [Span("Hello"), Pause(1.5), Span("world")]

A Span is text with its own voice, language and rate where markup set them (None and 1.0: the
request's); a Pause is silence. Pure functions, no I/O: the caller checks that a voice exists
and maps an xml:lang value to a model language.

How pieces become parts (`assemble`, shared with ssml.py): pieces of text with the same voice,
language and rate that touch are joined as written; pause tags split them; spans are stripped
and empty ones dropped; pauses that touch are summed (then capped at MAX_PAUSE_S). A Boundary
(an SSML sentence or paragraph edge) keeps the spans on either side apart and adds its silence
only between two spans, never at the start or the end.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace

from ownvoice.errors import InvalidInput


@dataclass(frozen=True)
class Span:
    """Text to speak, with its own voice/language/rate where markup set them."""

    text: str
    voice: str | None = None  # None: the request's voice
    language: str | None = None  # None: the request's; else an xml:lang value as written
    rate: float = 1.0  # multiplies the request's speed (nested prosody multiplies)


@dataclass(frozen=True)
class Pause:
    seconds: float


@dataclass(frozen=True)
class Boundary:
    """Where spans must not be joined (an SSML <s> or <p> edge): silence only between spans."""

    seconds: float = 0.0


Part = Span | Pause
MAX_PAUSE_S = 10.0  # one pause (tag or <break>) is capped at this (clamped, not refused)
BARE_PAUSE_S = 0.5  # [pause] with no duration
INPUT_FORMATS = (None, "text", "ssml")

# [pause], [pause:1.5], [ PAUSE : 300ms ]: whatever follows the colon is checked by
# duration_seconds, so that [pause:abc] is refused rather than read aloud
_PAUSE_TAG = re.compile(r"\[\s*pause\s*(?::([^\[\]]*))?\]", re.IGNORECASE)
_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*(ms|s)?", re.IGNORECASE)
# an SSML document: <speak> first, after whitespace (a BOM too) and an optional XML declaration
_SPEAK_FIRST = re.compile(r"\ufeff?\s*(?:<\?xml\b[^>]*\?>\s*)?<speak[\s>/]")
_WHITESPACE = re.compile(r"\s+")


def has_markup(text: str, input_format: str | None) -> bool:
    """Whether `text` needs parse_input: SSML by format or by its <speak> root, or pause tags.

    An input_format other than None/"text"/"ssml" also answers True, so that parse_input is
    the one to refuse it."""
    if input_format not in (None, "text"):
        return True
    return looks_like_ssml(text) or _PAUSE_TAG.search(text) is not None


def looks_like_ssml(text: str) -> bool:
    """Whether `text` starts with <speak> (after whitespace and an optional <?xml ...?>)."""
    return _SPEAK_FIRST.match(text) is not None


def parse_input(
    text: str, input_format: str | None = None, language: str | None = None
) -> list[Part]:
    """The parts `text` is spoken as; InvalidInput if it is malformed or has nothing to speak.

    input_format: None (SSML when it starts with <speak>, else plain text), "text" (plain
    text; pause tags still honoured) or "ssml" (must be an SSML document). `language` is the
    request's (an ISO code such as "en", or None), for SSML's say-as."""
    if input_format not in INPUT_FORMATS:
        raise InvalidInput(
            f"input_format {input_format!r} is not supported; use 'text' (pause tags such as "
            "[pause:1.5] are honoured) or 'ssml', or leave it out to read input starting with "
            "<speak> as SSML",
            param="input_format",
        )
    if input_format == "ssml" or (input_format is None and looks_like_ssml(text)):
        # imported here: ssml.py builds its parts with this module
        from ownvoice.service.ssml import parse_ssml

        return parse_ssml(text, language)
    parts = parse_text(text)
    check_speakable(parts)
    return parts


def parse_text(text: str) -> list[Part]:
    """Plain text split at its pause tags. May hold only Pauses, or nothing, for input that is
    only tags or whitespace: the caller decides whether that is an error."""
    return assemble([Span(text)])


def check_speakable(parts: list[Part]) -> None:
    """InvalidInput unless some part is a Span."""
    if not any(isinstance(part, Span) for part in parts):
        raise InvalidInput(
            "input has nothing to speak; send some text (pause tags and <break> alone are silence)",
            param="input",
        )


def duration_seconds(value: str) -> float | None:
    """'1.5', '1.5s', '300ms' -> seconds, uncapped; None if it is not a duration of zero or
    more."""
    match = _DURATION.fullmatch(value.strip())
    if match is None:
        return None
    number, unit = float(match.group(1)), (match.group(2) or "s").lower()
    return number / 1000 if unit == "ms" else number


def assemble(
    pieces: Iterable[Span | Pause | Boundary], *, collapse_whitespace: bool = False
) -> list[Part]:
    """Parts from raw pieces in document order (see the module docstring for the rules).
    collapse_whitespace: SSML's, where a run of whitespace reads as one space."""
    items: list[Span | Pause | Boundary] = []
    for piece in _join_touching(pieces):
        if isinstance(piece, Span):
            text = _WHITESPACE.sub(" ", piece.text) if collapse_whitespace else piece.text
            items.extend(_split_at_pause_tags(text, piece))
        else:
            items.append(piece)
    return _close_gaps(items)


def _same_voice(a: Span, b: Span) -> bool:
    return (a.voice, a.language, a.rate) == (b.voice, b.language, b.rate)


def _join_touching(pieces: Iterable[Span | Pause | Boundary]) -> Iterator[Span | Pause | Boundary]:
    """Pieces of text that touch, with the same voice, joined as written ('un' + 'til')."""
    pending: Span | None = None
    for piece in pieces:
        if isinstance(piece, Span) and pending is not None and _same_voice(pending, piece):
            pending = replace(pending, text=pending.text + piece.text)
            continue
        if pending is not None:
            yield pending
            pending = None
        if isinstance(piece, Span):
            pending = piece
        else:
            yield piece
    if pending is not None:
        yield pending


def _split_at_pause_tags(text: str, like: Span) -> Iterator[Span | Pause]:
    """Stripped, non-empty Spans (with `like`'s voice) and the Pauses of the tags between."""
    start = 0
    for tag in _PAUSE_TAG.finditer(text):
        if chunk := text[start : tag.start()].strip():
            yield replace(like, text=chunk)
        yield Pause(_tag_seconds(tag))
        start = tag.end()
    if chunk := text[start:].strip():
        yield replace(like, text=chunk)


def _tag_seconds(tag: re.Match) -> float:
    value = tag.group(1)
    if value is None:
        return BARE_PAUSE_S
    seconds = duration_seconds(value)
    if seconds is None:
        raise InvalidInput(
            f"pause tag {tag.group(0)!r} needs a duration of zero or more, such as "
            "[pause:1.5], [pause:1.5s] or [pause:300ms] ([pause] alone is "
            f"{BARE_PAUSE_S} s)",
            param="input",
        )
    return min(seconds, MAX_PAUSE_S)


def _close_gaps(items: list[Span | Pause | Boundary]) -> list[Part]:
    """Spans and the silence between them: touching pauses summed, boundaries honoured."""
    parts: list[Part] = []
    spoken = False  # a Span has been placed: a boundary from here on may add its silence
    pause, boundary, gap = 0.0, 0.0, False  # what lies between the last span and the next
    for item in items:
        if isinstance(item, Pause):
            pause, gap = pause + item.seconds, True
        elif isinstance(item, Boundary):
            boundary, gap = max(boundary, item.seconds), True
        else:
            silence = min(pause + (boundary if spoken else 0.0), MAX_PAUSE_S)
            if silence > 0:
                parts.append(Pause(silence))
            last = parts[-1] if parts else None
            if not gap and isinstance(last, Span) and _same_voice(last, item):
                parts[-1] = replace(last, text=f"{last.text} {item.text}")
            else:
                parts.append(item)
            spoken, pause, boundary, gap = True, 0.0, 0.0, False
    if pause > 0:  # a trailing boundary adds nothing: there is no span after it
        parts.append(Pause(min(pause, MAX_PAUSE_S)))
    return parts
