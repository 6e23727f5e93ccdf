"""A cast: which voice says what. A narrator, a voice for quoted speech, voices per chapter,
and inline markers in the text for people who prepare scripts.

    # cast.yaml
    narrator: ryan            # a voice the backend knows (a server voice, or a model's speaker)
    dialogue: serena          # what stands in quotes: "…" “…” ‘…’ „…“ «…» »…« 「…」 『…』
    chapters:                 # by number (1-based, as the chapter marks) or by title
      3: vivian               # the narrator of chapter 3
      Epilogue: {narrator: aiden, dialogue: vivian}
    lexicon:                  # as --lexicon (lexicon.py); applied after --lexicon's entries
      all: {Qwen: Chwen}

In a .md or .txt book, `<!-- voice: alice -->` makes alice say everything after it (dialogue
too) until the next marker; `<!-- voice: narrator -->` gives the text back to the cast. Markers
are never spoken and work without a cast file. Quotes that open a paragraph and are not closed
in it run to its end (the convention for a speech over several paragraphs). Knows nothing about
audio.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from ownvoice.audiobook.lexicon import EMPTY, Lexicon, parse_lexicon
from ownvoice.errors import InvalidInput

VOICE_MARKER = re.compile(r"<!--\s*voice\s*:\s*(.*?)\s*-->", re.I | re.S)
BACK_TO_CAST = ("", "narrator", "default")  # marker names that end a marker's voice
MAX_VOICE_CHARS = 200

# opening quote -> the marks that close it; » opens and « closes in German only
_QUOTES = {"“": "”", "„": "“”", '"': '"', "「": "」", "『": "』", "«": "»", "‘": "’"}
_QUOTES_DE = {**_QUOTES, "»": "«"}
_QUOTES_DE.pop("«")
_LEADING_PUNCTUATION = re.compile(r"^[\s,.;:!?…]+")


@dataclass(frozen=True)
class ChapterVoices:
    key: int | str  # a 1-based chapter number or a chapter title
    narrator: str | None = None  # None = the cast's
    dialogue: str | None = None


@dataclass(frozen=True)
class Cast:
    narrator: str | None = None  # None = the voice the backend was given (--voice)
    dialogue: str | None = None  # None = quotes are said by the narrator
    chapters: tuple[ChapterVoices, ...] = ()
    lexicon: Lexicon = EMPTY

    def voices(self, index: int, title: str | None) -> tuple[str | None, str | None]:
        """(narrator, dialogue voice) of chapter `index` (0-based) titled `title`."""
        narrator, dialogue = self.narrator, self.dialogue
        for entry in self.chapters:
            if entry.key == index + 1 or (isinstance(entry.key, str) and _same(entry.key, title)):
                narrator = entry.narrator or narrator
                dialogue = entry.dialogue or dialogue
        return narrator, dialogue

    def check(self, titles: list[str | None]) -> None:
        """Every chapter the cast names is in the book."""
        for entry in self.chapters:
            if isinstance(entry.key, int):
                if not 1 <= entry.key <= len(titles):
                    raise InvalidInput(
                        f"cast: chapter {entry.key}: the book has chapters 1 to {len(titles)}",
                        param="cast",
                    )
            elif not any(_same(entry.key, t) for t in titles):
                known = ", ".join(repr(t) for t in titles if t) or "none"
                raise InvalidInput(
                    f"cast: no chapter is titled {entry.key!r} (titles: {known})", param="cast"
                )


NO_CAST = Cast()


def _same(a: str, b: str | None) -> bool:
    return b is not None and " ".join(a.split()).casefold() == " ".join(b.split()).casefold()


def split_markers(paragraph: str) -> list[tuple[str | None, str]]:
    """[(marker voice or None, text after it)]: the paragraph cut at its voice markers; the
    first piece has None (no marker before it)."""
    pieces: list[tuple[str | None, str]] = []
    voice, position = None, 0
    for m in VOICE_MARKER.finditer(paragraph):
        pieces.append((voice, paragraph[position : m.start()]))
        voice, position = " ".join(m.group(1).split()), m.end()
    pieces.append((voice, paragraph[position:]))
    return [(v, t) for i, (v, t) in enumerate(pieces) if i == 0 or v is not None]


def split_dialogue(text: str, language: str | None = None) -> list[tuple[bool, str]]:
    """[(quoted, text)]: narration and quoted speech in reading order, quote marks kept with
    the speech. Punctuation right after a closing quote ("…”, he said") stays with the speech."""
    quotes = _QUOTES_DE if (language or "").lower().startswith(("de", "german")) else _QUOTES
    out: list[tuple[bool, str]] = []
    position = 0
    i = 0
    while i < len(text):
        closers = quotes.get(text[i])
        # a straight quote or ‘ after a letter is an inch mark or an apostrophe, not speech
        if closers is None or (text[i] in '"‘' and i > 0 and text[i - 1].isalnum()):
            i += 1
            continue
        end = next((j for j in range(i + 1, len(text)) if text[j] in closers
                    and not (text[j] == "’" and text[j + 1 : j + 2].isalnum())), None)  # fmt: skip
        stop = len(text) if end is None else end + 1
        if sum(c.isalnum() for c in text[i:stop]) < 2:  # "rock ‘n’ roll": not speech
            i = stop
            continue
        _add(out, False, text[position:i])
        _add(out, True, text[i:stop])
        position = i = stop
    _add(out, False, text[position:])
    return out


def _add(out: list[tuple[bool, str]], quoted: bool, text: str) -> None:
    if not quoted and out:
        lead = _LEADING_PUNCTUATION.match(text)
        if lead and lead.group().strip():  # '”, he said' -> the comma goes with the speech
            out[-1] = (out[-1][0], out[-1][1] + lead.group().rstrip())
            text = text[lead.end() :]
    text = text.strip()
    if not any(c.isalnum() for c in text):
        if text and out:  # a lone mark: keep it with what came before (nothing is dropped)
            out[-1] = (out[-1][0], f"{out[-1][1]} {text}")
        return
    if out and out[-1][0] == quoted:
        out[-1] = (quoted, f"{out[-1][1]} {text}")
    else:
        out.append((quoted, text))


def parse_cast(data, where: str = "cast") -> Cast:
    if data is None:
        return NO_CAST
    if not isinstance(data, dict):
        raise InvalidInput(f"{where}: a mapping (narrator, dialogue, chapters, lexicon) is "
                           "needed", param="cast")  # fmt: skip
    unknown = set(data) - {"narrator", "dialogue", "chapters", "lexicon"}
    if unknown:
        raise InvalidInput(
            f"{where}: unknown keys {sorted(map(str, unknown))}; known: narrator, dialogue, "
            "chapters, lexicon",
            param="cast",
        )
    chapters = data.get("chapters") or {}
    if not isinstance(chapters, dict):
        raise InvalidInput(f"{where}: chapters: a mapping of chapters to voices is needed",
                           param="cast")  # fmt: skip
    entries = []
    for key, value in chapters.items():
        name = f"{where}: chapters: {key}"
        if isinstance(key, bool) or not isinstance(key, int | str):
            raise InvalidInput(f"{name}: a chapter number or title is needed", param="cast")
        key = int(key) if isinstance(key, str) and key.strip().isdigit() else key
        if isinstance(value, dict):
            extra = set(value) - {"narrator", "dialogue"}
            if extra:
                raise InvalidInput(f"{name}: unknown keys {sorted(map(str, extra))}; known: "
                                   "narrator, dialogue", param="cast")  # fmt: skip
            narrator, dialogue = value.get("narrator"), value.get("dialogue")
        else:
            narrator, dialogue = value, None
        entries.append(
            ChapterVoices(key, _voice(narrator, name, True), _voice(dialogue, name, True))
        )
    return Cast(
        narrator=_voice(data.get("narrator"), f"{where}: narrator", True),
        dialogue=_voice(data.get("dialogue"), f"{where}: dialogue", True),
        chapters=tuple(entries),
        lexicon=parse_lexicon(data.get("lexicon"), where=f"{where}: lexicon"),
    )


def _voice(value, where: str, optional: bool) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_VOICE_CHARS:
        raise InvalidInput(f"{where}: a voice name is needed, got {value!r}", param="cast")
    return value.strip()


def load_cast(path: str | Path) -> Cast:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise InvalidInput(f"cannot read cast {str(path)!r}: {e}", param="cast") from e
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise InvalidInput(f"cast {str(path)!r} is not valid YAML: {e}", param="cast") from e
    return parse_cast(data, where=f"cast {str(path)!r}")
