"""A pronunciation lexicon: words or patterns mapped to how they should be said.

    # lexicon.yaml -- per language (a name or ISO code), or `all` for every book
    all:
      Qwen: Chwen                     # a word: matched whole, case as written
    english:
      SQL: sequel
      /\\b(\\d+) ?km\\b/: \\1 kilometres   # /.../ is a regular expression; \\1 its groups
    de:
      z.B.: zum Beispiel

Applied to what is spoken only, never to the text a reader sees (subtitles, a read-along EPUB):
the chunk sent for synthesis is `lexicon.apply(text, language)`. Entries of `all` apply first,
then the book language's, each in file order. Knows nothing about audio.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from ownvoice.errors import InvalidInput
from ownvoice.languages import model_language

MAX_ENTRIES = 10_000


@dataclass(frozen=True)
class Entry:
    pattern: re.Pattern
    replacement: str


@dataclass(frozen=True)
class Lexicon:
    entries: dict[str, tuple[Entry, ...]]  # "all" or a model language name -> its entries

    def apply(self, text: str, language: str | None) -> str:
        """`text` as it should be said in `language` (a model name, code, or "auto")."""
        wanted = ["all", model_language(language) or "auto"]
        for lang in dict.fromkeys(wanted):
            for entry in self.entries.get(lang, ()):
                text = entry.pattern.sub(entry.replacement, text)
        return text

    def __bool__(self) -> bool:
        return any(self.entries.values())

    def then(self, other: Lexicon) -> Lexicon:
        """This lexicon's entries, then `other`'s (per language, in order)."""
        merged = dict(self.entries)
        for language, entries in other.entries.items():
            merged[language] = merged.get(language, ()) + entries
        return Lexicon(merged)


EMPTY = Lexicon({})


def parse_lexicon(data, where: str = "lexicon") -> Lexicon:
    """A lexicon from its YAML data ({language: {word or /regex/: said as}})."""
    if data is None:
        return EMPTY
    if not isinstance(data, dict):
        raise InvalidInput(f"{where}: a mapping of languages to entries is needed", param="lexicon")
    out: dict[str, list[Entry]] = {}
    count = 0
    for language, entries in data.items():
        name = (
            "all"
            if str(language).strip().lower() in ("all", "*")
            else model_language(str(language))
        )
        if not isinstance(entries, dict):
            raise InvalidInput(
                f"{where}: {language}: a mapping of words to how they are said is needed",
                param="lexicon",
            )
        for key, said in entries.items():
            count += 1
            if count > MAX_ENTRIES:
                raise InvalidInput(f"{where}: more than {MAX_ENTRIES} entries", param="lexicon")
            out.setdefault(name or "all", []).append(_entry(str(key), said, f"{where}: {language}"))
    return Lexicon({k: tuple(v) for k, v in out.items()})


def _entry(key: str, said, where: str) -> Entry:
    if not isinstance(said, str | int | float):
        raise InvalidInput(f"{where}: {key!r} must map to text, got {said!r}", param="lexicon")
    if len(key) > 2 and key.startswith("/") and key.endswith("/"):
        try:
            return Entry(re.compile(key[1:-1]), str(said))
        except re.error as e:
            raise InvalidInput(
                f"{where}: {key} is not a regular expression: {e}", param="lexicon"
            ) from e
    if not key.strip():
        raise InvalidInput(f"{where}: an empty word", param="lexicon")
    # a word is matched whole: not inside a longer word ("Qwen" not in "Qwens")
    pattern = re.compile(rf"(?<!\w){re.escape(key)}(?!\w)")
    return Entry(pattern, str(said).replace("\\", "\\\\"))


def load_lexicon(path: str | Path) -> Lexicon:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise InvalidInput(f"cannot read lexicon {str(path)!r}: {e}", param="lexicon") from e
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise InvalidInput(f"lexicon {str(path)!r} is not valid YAML: {e}", param="lexicon") from e
    return parse_lexicon(data, where=f"lexicon {str(path)!r}")
