"""SSML, read into the parts it is spoken as (markup.py's Span and Pause).

The supported subset is what a single-speaker TTS model can honour: pauses (<break>), sentence
and paragraph edges (<s>, <p>), another voice (<voice name>), speed (<prosody rate>), another
language (<lang>), substitutions (<sub>), numbers and dates in words (<say-as>) and <emphasis>
(read as plain text: the model has no emphasis control). Anything else is refused by name
rather than silently dropped, so that an author knows what was not honoured.

expat reads the document event by event, with no tree. Entity declarations and external
entities are refused: a declared entity is how a few hundred bytes expand into gigabytes
(billion laughs), and an external one is how XXE reads local files. The predefined entities
(&amp; ...) and character references (&#233;) are fine.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from xml.parsers import expat

from ownvoice.errors import InvalidInput
from ownvoice.service.markup import (
    MAX_PAUSE_S,
    Boundary,
    Part,
    Pause,
    Span,
    assemble,
    check_speakable,
    duration_seconds,
)

SUPPORTED = ("speak", "break", "p", "s", "voice", "prosody", "lang", "sub", "say-as", "emphasis")
# the attributes each element takes; xmlns declarations are also allowed on <speak>
ATTRIBUTES = {
    "speak": ("version", "xml:lang"),
    "break": ("time", "strength"),
    "p": ("xml:lang",),
    "s": ("xml:lang",),
    "voice": ("name",),
    "prosody": ("rate",),
    "lang": ("xml:lang",),
    "sub": ("alias",),
    "say-as": ("interpret-as", "format", "detail"),
    "emphasis": ("level",),
}
MAX_DEPTH = 64
BREAK_STRENGTHS = {
    "none": 0.0,
    "x-weak": 0.1,
    "weak": 0.25,
    "medium": 0.5,
    "strong": 0.75,
    "x-strong": 1.0,
}
PARAGRAPH_S = BREAK_STRENGTHS["strong"]  # the silence between two paragraphs
RATES = {"x-slow": 0.5, "slow": 0.75, "medium": 1.0, "fast": 1.25, "x-fast": 1.5, "default": 1.0}
_RATE = re.compile(r"([+-]?)(\d+(?:\.\d*)?|\.\d+)(%?)")


@dataclass(frozen=True)
class _Scope:
    """What an open element sets for the text inside it."""

    element: str
    voice: str | None = None
    language: str | None = None
    rate: float = 1.0


def parse_ssml(text: str, language: str | None = None) -> list[Part]:
    """The parts of an SSML document rooted at <speak>; InvalidInput, saying what to change, if
    it is malformed, uses what is not supported, or has nothing to speak. `language` is the
    request's, for <say-as> outside any xml:lang (None: English)."""
    if not text.lstrip("\ufeff \t\r\n").startswith("<"):
        raise InvalidInput(
            "input is not SSML: an SSML document starts with <speak>; wrap the text in "
            "<speak>...</speak>, or send input_format 'text'",
            param="input",
        )
    reader = _Reader(language)
    # the encoding is fixed: the text is already decoded, whatever its declaration says
    parser = expat.ParserCreate(encoding="utf-8")
    parser.buffer_text = True  # one call per run of text, not one per line or entity
    parser.StartElementHandler = reader.start
    parser.EndElementHandler = reader.end
    parser.CharacterDataHandler = reader.text
    parser.EntityDeclHandler = _refuse_entities
    parser.UnparsedEntityDeclHandler = _refuse_entities
    parser.ExternalEntityRefHandler = _refuse_entities
    # an entity that only an external DTD could define: refused, not silently skipped
    parser.SkippedEntityHandler = _refuse_entities
    try:
        parser.Parse(text.encode("utf-8"), True)
    except expat.ExpatError as e:
        raise InvalidInput(
            f"input is not well-formed SSML: {expat.ErrorString(e.code)} at line {e.lineno}, "
            f"column {e.offset + 1}",
            param="input",
        ) from None
    parts = assemble(reader.pieces, collapse_whitespace=True)
    check_speakable(parts)
    return parts


def _refuse_entities(*_) -> None:
    raise InvalidInput(
        "SSML may not declare entities (<!ENTITY ...>) or refer to external ones; write the "
        "text out (&amp; &lt; &gt; &quot; &apos; and &#...; references are fine)",
        param="input",
    )


def _refuse(message: str) -> InvalidInput:
    return InvalidInput(message, param="input")


class _Reader:
    """expat's events -> pieces (markup.assemble makes them parts), with a stack of scopes."""

    def __init__(self, language: str | None):
        self.language = language
        self.pieces: list[Span | Pause | Boundary] = []
        self.scopes: list[_Scope] = []
        # the text of an open <say-as> or <sub> (spoken at its end), with its attributes
        self.captured: list[str] | None = None
        self.capture_attrs: dict[str, str] = {}

    def start(self, name: str, attrs: dict[str, str]) -> None:
        self._check_element(name, attrs)
        outer = self.scopes[-1] if self.scopes else _Scope("")
        scope = replace(outer, element=name)
        if "xml:lang" in attrs:
            scope = replace(scope, language=_language(name, attrs["xml:lang"]))
        elif name == "lang":
            raise _refuse('SSML <lang> needs xml:lang, such as <lang xml:lang="de-DE">')
        if name == "voice":
            scope = replace(scope, voice=_voice(attrs))
        elif name == "prosody":
            scope = replace(scope, rate=outer.rate * _rate(attrs.get("rate", "default")))
        elif name == "break":
            self.pieces.append(Pause(_break_seconds(attrs)))
        elif name == "p":
            self.pieces.append(Boundary(PARAGRAPH_S))
        elif name == "s":
            self.pieces.append(Boundary())
        elif name in ("say-as", "sub"):
            _check_capture(name, attrs)
            self.captured, self.capture_attrs = [], attrs
        self.scopes.append(scope)

    def end(self, name: str) -> None:
        scope = self.scopes.pop()
        if name == "say-as":
            attrs, language = self.capture_attrs, scope.language or self.language
            from ownvoice.service.sayas import say_as  # num2words, babel: on first use

            said = say_as("".join(self.captured), attrs["interpret-as"], language,
                          attrs.get("format"))  # fmt: skip
            self._speak(said, scope)
        elif name == "sub":
            self._speak(self.capture_attrs["alias"], scope)
        elif name == "p":
            self.pieces.append(Boundary(PARAGRAPH_S))
        elif name == "s":
            self.pieces.append(Boundary())
        if name in ("say-as", "sub"):
            self.captured = None

    def text(self, data: str) -> None:
        if not self.scopes:
            return  # whitespace around the root
        scope = self.scopes[-1]
        if scope.element == "break" and data.strip():
            raise _refuse(f"SSML <break> must be empty; found text {data.strip()!r}")
        if self.captured is not None:
            self.captured.append(data)
        else:
            self._speak(data, scope)

    def _speak(self, text: str, scope: _Scope) -> None:
        self.pieces.append(Span(text, scope.voice, scope.language, scope.rate))

    def _check_element(self, name: str, attrs: dict[str, str]) -> None:
        if not self.scopes and name != "speak":
            raise _refuse(f"SSML must be rooted at <speak>; found <{name}>")
        if self.scopes and name == "speak":
            raise _refuse("SSML <speak> may appear only as the root; remove the inner <speak>")
        if name not in SUPPORTED:
            raise _refuse(
                f"SSML element <{name}> is not supported; supported: {', '.join(SUPPORTED)}"
            )
        if self.scopes and self.scopes[-1].element == "break":
            raise _refuse(f"SSML <break> must be empty; found <{name}> inside it")
        if self.captured is not None:
            outer = self.scopes[-1].element
            raise _refuse(f"SSML <{outer}> may contain only text; found <{name}> inside it")
        if len(self.scopes) >= MAX_DEPTH:
            raise _refuse(f"SSML nests elements more than {MAX_DEPTH} deep; flatten it")
        allowed = ATTRIBUTES[name]
        for attr in attrs:
            if name == "speak" and (attr == "xmlns" or attr.startswith("xmlns:")):
                continue
            if attr not in allowed:
                only = f"only {', '.join(allowed)}" if allowed else "it takes no attributes"
                raise _refuse(f"SSML <{name} {attr}> is not supported; {only}")


def _language(element: str, value: str) -> str:
    if not value.strip():
        raise _refuse(f"SSML <{element} xml:lang> is empty; give a language such as de-DE")
    return value.strip()


def _voice(attrs: dict[str, str]) -> str:
    name = attrs.get("name", "").strip()
    if not name:
        raise _refuse('SSML <voice> needs a name, such as <voice name="ryan">')
    return name


def _check_capture(element: str, attrs: dict[str, str]) -> None:
    """<say-as> needs interpret-as and <sub> an alias (an empty alias says nothing)."""
    needed = "interpret-as" if element == "say-as" else "alias"
    if needed not in attrs:
        example = 'interpret-as="cardinal"' if element == "say-as" else 'alias="World Wide Web"'
        raise _refuse(f"SSML <{element}> needs {needed}, such as <{element} {example}>")


def _break_seconds(attrs: dict[str, str]) -> float:
    """time wins over strength; neither is a medium break. Capped at MAX_PAUSE_S."""
    strength = attrs.get("strength", "medium").strip().lower()
    if strength not in BREAK_STRENGTHS:
        raise _refuse(
            f"SSML <break strength={attrs['strength']!r}> is not a strength; use one of "
            f"{', '.join(BREAK_STRENGTHS)}"
        )
    if "time" not in attrs:
        return BREAK_STRENGTHS[strength]
    seconds = duration_seconds(attrs["time"])
    if seconds is None:
        raise _refuse(
            f"SSML <break time={attrs['time']!r}> is not a duration; use seconds or "
            'milliseconds of zero or more, such as "1.5s" or "300ms"'
        )
    return min(seconds, MAX_PAUSE_S)


def _rate(value: str) -> float:
    """x-slow..x-fast, '150%' (1.5), '+20%' / '-10%' (1.2 / 0.9), '1.2' -> a speed multiplier."""
    word = value.strip().lower()
    if word in RATES:
        return RATES[word]
    match = _RATE.fullmatch(word)
    rate = None
    if match is not None:
        sign, number, percent = match.group(1), float(match.group(2)), match.group(3)
        if sign and percent:  # a relative change
            rate = 1 + (number if sign == "+" else -number) / 100
        elif not sign:
            rate = number / 100 if percent else number
    if rate is None or rate <= 0:
        raise _refuse(
            f"SSML <prosody rate={value!r}> is not a rate; use a positive multiplier such as "
            f"1.2, a percentage such as 120%, a change such as +20% or -10%, or one of "
            f"{', '.join(RATES)}"
        )
    return rate
