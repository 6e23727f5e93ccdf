"""Split long text into sentences and into chunks of a target length, in many languages.

    split_sentences("Dr. Müller kam am 3. Mai. Er blieb.", "german")  # ['Dr. Müller kam am 3. Mai.', 'Er blieb.']
    chunk_text(long_text, max_chars=200)                            # sentences merged up to 200 chars
    chunk_paragraphs(long_text, max_chars=200)                      # same, never across paragraphs,
                                                                    # each chunk says which break follows

Sentences come from sentencex (Wikimedia; rules for ~300 languages, including zh/ja which end
sentences with 。！？ and no space). Where it cuts too eagerly, pieces are joined again
(`_continues`): after a title of the language (TITLES; French "M. Dupont" was cut after "M."),
before a lowercase word ("approx. ten"), before a number after an abbreviation made for
numbers ("vol. 2"), and before a quoting particle after a closing quote (「はい。」と言った).
Text whose language is guessed ("auto") as Latin-script uses the titles of every Latin-script
language the model speaks. A sentence longer than the limit is cut at clause punctuation
(, ; : 、 ，…), then between words, and only as a last resort inside a run of characters.

Languages are our model's names ("english", "chinese", ...), ISO codes ("en", "pt-BR"), or
None/"auto", which guesses per paragraph from the script (kana → ja, hangul → ko, han → zh,
cyrillic → ru, anything else → en; the en rules also serve other Latin-script languages well).

Knows nothing about audio, models or files. Shared by the server (long inputs) and the audiobook.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import pairwise

from sentencex import segment

from ownvoice.errors import InvalidInput
from ownvoice.languages import ISO_CODES

# a sentence longer than this is hard-split even when the caller sets no limit
DEFAULT_MAX_SENTENCE_CHARS = 400

# Abbreviations that stand before a name or a number and so do not end a sentence, per language
# (compared without their final period, case kept). Only what sentencex gets wrong needs to be
# here; the rest is listed so that each language's table reads whole.
TITLES = {
    "en": "Mr Mrs Ms Messrs Dr Prof Rev Hon Gen Col Capt Lt Sgt",
    "de": "Hr Hrn Fr Dr Prof Nr",
    "fr": "M MM Mme Mmes Mlle Mlles Dr Pr Me Mgr Vve St Ste "
    "janv févr avr juil sept oct nov déc",  # "le 1er janv. 1990"
    "es": "Sr Sra Srta Sres Sras D Dña Dr Dra Prof Profa Lic Ing Arq Avda Av Ud Uds Sto Sta",
    "it": "Sig Sigg Sig.ra Sig.na Dott Dott.ssa Prof Prof.ssa Ing Avv Arch Geom On Mons",
    "pt": "Sr Sra Srta Srs Sras D Dr Dra Prof Profa Eng Av",
    "ru": "г гг ул д пр им тов ст",
}
# abbreviations before a number, in any of the languages ("vol. 2", "S. 12", "стр. 5")
BEFORE_NUMBERS = frozenset(
    "vol Vol p pp no No nr Nr fig Fig ch chap sec art Art approx ca S Bd Abs n° env pág pag núm "
    "т с стр".split()
)
# what follows a closing quote inside a sentence: 「はい。」と言った, '네.'라고 말했다
_QUOTE_CLOSERS = "」』”’'\")»"
_QUOTE_PARTICLES = ("と", "って", "라고", "이라고", "하고", "고 ")
_TITLES = {code: frozenset(words.split()) for code, words in TITLES.items()}
_LATIN_TITLES = frozenset().union(*(_TITLES[c] for c in ("en", "de", "fr", "es", "it", "pt")))
_LAST_WORD = re.compile(r"(?:^|[\s'’(«\"“])([^\s'’(«\"“]+)\.$")

# where a long sentence may be cut: after clause punctuation, or after a spaced dash
_CLAUSE_END = re.compile(r"[,;:，、；：]\s*|\s[—–-]\s+|—")
# a URL or an e-mail address: its colons and commas are no clause's end
_LINK = re.compile(r"(?:\b[a-z][a-z0-9+.-]*://|\bwww\.)\S+|[\w.+-]+@[\w-]+(?:\.[\w-]+)+", re.I)
_PARAGRAPH_BREAK = re.compile(r"\n[ \t\r\f\v]*\n\s*")
_WORD = re.compile(r"\S+\s*")


@dataclass(frozen=True)
class TextChunk:
    """One piece of text to synthesize and the kind of break that follows it."""

    text: str
    pause: str  # "sentence" (more of the same paragraph follows) or "paragraph"


def is_cjk(ch: str) -> bool:
    """Han, kana, hangul and CJK/full-width punctuation: scripts written without spaces."""
    o = ord(ch)
    return (
        0x3000 <= o <= 0x30FF  # CJK punctuation, hiragana, katakana
        or 0x3400 <= o <= 0x4DBF  # han extension A
        or 0x4E00 <= o <= 0x9FFF  # han
        or 0xAC00 <= o <= 0xD7AF  # hangul syllables
        or 0xF900 <= o <= 0xFAFF  # han compatibility
        or 0xFF00 <= o <= 0xFFEF  # full-width forms (，！？)
        or 0x20000 <= o <= 0x2FA1F  # han extensions B+
    )


def cjk_fraction(text: str) -> float:
    """Share of non-space characters that are CJK (0.0 for empty text)."""
    chars = [c for c in text if not c.isspace()]
    return sum(map(is_cjk, chars)) / len(chars) if chars else 0.0


def language_code(language: str | None, text: str = "") -> str:
    """Map a language name, code or "auto" (guess from `text`) to a sentencex code."""
    if language is None or language.lower() == "auto":
        return _guess_code(text)
    name = language.strip().lower()
    if name in ISO_CODES:
        return ISO_CODES[name]
    primary = re.split(r"[-_]", name)[0]
    if primary.isalpha() and 2 <= len(primary) <= 3:
        return primary
    raise InvalidInput(
        f"language must be 'auto', one of {sorted(ISO_CODES)} or an ISO code like 'en', "
        f"got {language!r}",
        param="language",
    )


def _guess_code(text: str) -> str:
    counts = {"ko": 0, "zh": 0, "ru": 0}
    for ch in text:
        o = ord(ch)
        if 0x3040 <= o <= 0x30FF:
            return "ja"  # Japanese mixes kana with han; any kana decides it
        if 0xAC00 <= o <= 0xD7AF:
            counts["ko"] += 1
        elif 0x4E00 <= o <= 0x9FFF or 0x3400 <= o <= 0x4DBF:
            counts["zh"] += 1
        elif 0x0400 <= o <= 0x04FF:
            counts["ru"] += 1
    best = max(counts, key=counts.get)
    return best if counts[best] else "en"


def split_paragraphs(text: str) -> list[str]:
    """Paragraphs are separated by blank lines; lines inside one are joined (hard wraps undone)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    paragraphs = (_normalize_space(p) for p in _PARAGRAPH_BREAK.split(text))
    return [p for p in paragraphs if p]


def _normalize_space(paragraph: str) -> str:
    # a line break between two CJK characters is a hard wrap, not a word gap
    lines = [line.strip() for line in paragraph.split("\n")]
    out = ""
    for line in filter(None, lines):
        if out and not (is_cjk(out[-1]) and is_cjk(line[0])):
            out += " "
        out += line
    return re.sub(r"\s+", " ", out).strip()


def split_sentences(
    text: str, language: str | None = None, max_chars: int | None = DEFAULT_MAX_SENTENCE_CHARS
) -> list[str]:
    """Sentences of `text` in order, stripped; none longer than `max_chars` (None = no limit)."""
    _check_max(max_chars)
    sentences: list[str] = []
    for paragraph in split_paragraphs(text):
        sentences += _paragraph_sentences(paragraph, language, max_chars)
    return sentences


def _paragraph_sentences(paragraph: str, language: str | None, max_chars: int | None) -> list[str]:
    code = language_code(language, paragraph)
    guessed = language is None or language.lower() == "auto"
    titles = _LATIN_TITLES if guessed and code == "en" else _TITLES.get(code, frozenset())
    pieces: list[str] = []
    for piece in segment(code, paragraph):
        piece = piece.strip()
        if not piece:
            continue
        if pieces and _continues(pieces[-1], piece, titles):
            pieces[-1] = _join(pieces[-1], piece)
        else:
            pieces.append(piece)
    if max_chars is None:
        return pieces
    return [part for piece in pieces for part in hard_split(piece, max_chars)]


def _continues(previous: str, piece: str, titles: frozenset) -> bool:
    """Whether `piece` goes on the sentence `previous` rather than starting one."""
    if not any(c.isalnum() for c in piece):
        return True  # a stray "…" or closing quote
    if piece[0].islower():
        return True  # alphabetic scripts start sentences with a capital (caseless ones: False)
    found = _LAST_WORD.search(previous)
    word = found.group(1) if found else None
    if word in titles or (piece[0].isdigit() and word in BEFORE_NUMBERS):
        return True
    return previous[-1] in _QUOTE_CLOSERS and piece.startswith(_QUOTE_PARTICLES)


def hard_split(sentence: str, max_chars: int) -> list[str]:
    """Cut one over-long sentence into pieces of at most `max_chars`: at clause punctuation
    first (never inside a URL), then between words, and only then inside a run of characters
    (CJK, or a URL longer than a whole piece)."""
    _check_max(max_chars)
    sentence = sentence.strip()
    if len(sentence) <= max_chars:
        return [sentence] if sentence else []
    links = [m.span() for m in _LINK.finditer(sentence)]
    cuts = [m.end() for m in _CLAUSE_END.finditer(sentence)
            if not any(a < m.start() < b for a, b in links)]  # never "https:" | "//…"  # fmt: skip
    clauses = _cut(sentence, cuts)
    pieces: list[str] = []
    for clause in pack(clauses, max_chars):
        if len(clause) <= max_chars:
            pieces.append(clause)
            continue
        words = [w.strip() for w in _WORD.findall(clause)]
        for part in pack(words, max_chars):
            pieces += [part[i : i + max_chars] for i in range(0, len(part), max_chars)]
    return pieces


def _cut(text: str, positions: list[int]) -> list[str]:
    bounds = [0, *positions, len(text)]
    parts = (text[a:b].strip() for a, b in pairwise(bounds))
    return [p for p in parts if p]


def pack(parts: Iterable[str], max_chars: int) -> list[str]:
    """Greedily join consecutive parts while the result stays within `max_chars`."""
    out: list[str] = []
    for part in parts:
        if out and len(_join(out[-1], part)) <= max_chars:
            out[-1] = _join(out[-1], part)
        else:
            out.append(part)
    return out


def _join(a: str, b: str) -> str:
    # CJK text has no spaces between sentences or clauses
    if not a or not b or is_cjk(a[-1]) or is_cjk(b[0]):
        return a + b
    return a + " " + b


def chunk_text(text: str, max_chars: int, language: str | None = None) -> list[str]:
    """Sentences merged into chunks of at most `max_chars`; a sentence is only split when it
    alone is longer than `max_chars`. Paragraph breaks are not kept (see chunk_paragraphs)."""
    _check_max(max_chars)
    return pack(split_sentences(text, language, max_chars), max_chars)


def chunk_paragraphs(
    text_or_paragraphs: str | Iterable[str], max_chars: int, language: str | None = None
) -> list[TextChunk]:
    """Like chunk_text, but chunks never span a paragraph; the last chunk of each paragraph
    is marked pause="paragraph", the others pause="sentence". Paragraphs with no letter or
    digit (scene breaks like "* * *") are dropped."""
    _check_max(max_chars)
    if isinstance(text_or_paragraphs, str):
        paragraphs = split_paragraphs(text_or_paragraphs)
    else:
        paragraphs = [p for para in text_or_paragraphs for p in split_paragraphs(para)]
    chunks: list[TextChunk] = []
    for paragraph in paragraphs:
        if not any(c.isalnum() for c in paragraph):
            continue  # a scene break like "* * *" has nothing to say
        texts = pack(_paragraph_sentences(paragraph, language, max_chars), max_chars)
        chunks += [TextChunk(t, "sentence") for t in texts[:-1]]
        chunks.append(TextChunk(texts[-1], "paragraph"))
    return chunks


def _check_max(max_chars: int | None) -> None:
    if max_chars is not None and (not isinstance(max_chars, int) or max_chars < 1):
        raise InvalidInput(
            f"max_chars must be an integer >= 1, got {max_chars!r}", param="max_chars"
        )
