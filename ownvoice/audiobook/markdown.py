"""Markdown to a Book: chapters from `#` and `##` headings, text stripped of markup.

Deeper headings stay in the text as their own paragraph. A fenced code block is a short notice,
nothing, or read (ReadOptions.code); HTML tags and link targets are not spoken; link text, emphasis text and list items are. As in EPUBs (xhtml.py): footnote
references (`[^1]`) are never spoken and their notes (`[^1]: ...`) come at the end of the chapter
that refers to them; a pipe table is read row by row with its header; an image alone in its
paragraph is a figure, read by its alt text; other images are not spoken (ReadOptions). A YAML
front matter block gives `title` and `author`. This is a reader for prose, not a full CommonMark
parser.
"""

from __future__ import annotations

import html
import re
from collections import Counter

from ownvoice.audiobook.document import (
    Book,
    Chapter,
    ReadOptions,
    merge_title_only_chapters,
    read_table,
    with_notes_at_end,
)
from ownvoice.audiobook.furniture import CODE_NOTICE, code_said

CHAPTER_LEVELS = 2  # headings with at most this many '#' start a chapter

_ATX = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)(?:\s+#+)?\s*$")
_SETEXT = re.compile(r"^\s{0,3}(=+|-+)\s*$")
_FENCE = re.compile(r"^\s{0,3}(```|~~~)")
_RULE = re.compile(r"^\s{0,3}([-*_])(\s*\1){2,}\s*$")
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d{1,9}[.)])\s+")
_LINK_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*\S+")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")
_NOTE_DEF = re.compile(r"^\s{0,3}\[\^([^\]\s]+)\]:\s?(.*)$")
_NOTE_REF = re.compile(r"\[\^([^\]\s]+)\]")
_FIGURE = re.compile(r"^\s*!\[([^\]]*)\]\([^)]*\)\s*$")
_INLINE = [
    (re.compile(r"<!--(?!\s*voice\s*:).*?-->", re.S), ""),  # voice markers stay (cast.py)
    (re.compile(r"!\[[^\]]*\]\([^)]*\)"), ""),  # images
    (re.compile(r"!\[[^\]]*\]\[[^\]]*\]"), ""),
    (re.compile(r"\[([^\]]*)\]\([^)]*\)"), r"\1"),  # [text](url)
    (re.compile(r"\[([^\]]+)\]\[[^\]]*\]"), r"\1"),  # [text][ref]
    (re.compile(r"<(?:https?|mailto):[^>]+>"), ""),  # autolinks
    (re.compile(r"<(?!!--)[^>\n]+>"), ""),  # inline HTML tags
    (re.compile(r"`+([^`]*)`+"), r"\1"),
    (re.compile(r"(?<![\w*])(\*{1,3}|_{1,3})(?=\S)(.+?)(?<=\S)\1(?![\w*])"), r"\2"),
    (re.compile(r"~~(.+?)~~"), r"\1"),
    (re.compile(r"\^([^\s^\[\]]+)\^"), r"\1"),  # pandoc's superscript: m^2^
    (re.compile(r"(?<!~)~([^\s~]+)~(?!~)"), r"\1"),  # and subscript: H~2~O
    (re.compile(r"\\([\\`*_{}\[\]()#+\-.!>|])"), r"\1"),
]


def parse_markdown(
    text: str, default_title: str | None = None, options: ReadOptions | None = None
) -> Book:
    options = options or ReadOptions()
    meta, text = _front_matter(text.replace("\r\n", "\n").replace("\r", "\n"))
    text, notes = _footnotes(text)
    chapters: list[Chapter] = []
    title: str | None = None
    level = 1
    paragraphs: list[str] = []
    current: list[str] = []
    referred: list[str] = []  # note ids referred to in this chapter, in order
    skipped: Counter = Counter()

    def end_paragraph() -> None:
        joined = " ".join(current)
        figure = _FIGURE.match(joined)
        if figure:  # an image alone in its paragraph: a figure, said by its alt text
            joined = figure.group(1) if options.figures == "read" else ""
        for note_id in _NOTE_REF.findall(joined):
            if note_id in notes and note_id not in referred:
                referred.append(note_id)
        spoken = _inline(_NOTE_REF.sub("", joined))
        if spoken:
            paragraphs.append(spoken)
        current.clear()

    def start_chapter(new_title: str, new_level: int) -> None:
        nonlocal title, level
        end_paragraph()
        said = [_inline(notes.pop(n)) for n in referred] if options.notes == "end" else []
        referred.clear()
        if paragraphs or title is not None:
            chapters.append(Chapter(title, with_notes_at_end(paragraphs, said), level))
        paragraphs.clear()
        title, level = new_title, new_level

    lines = text.split("\n")
    in_fence = False
    code: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        next_line = lines[i + 1] if i + 1 < len(lines) else ""
        i += 1
        if _FENCE.match(line):
            end_paragraph()
            if in_fence:  # a code block: a short notice, nothing, or read (ReadOptions.code)
                skipped["code blocks"] += 1
                said = code_said(code, options.code)
                if said != [CODE_NOTICE] or not paragraphs or paragraphs[-1] != CODE_NOTICE:
                    paragraphs.extend(said)
                code.clear()
            in_fence = not in_fence
            continue
        if in_fence:
            code.append(line)
            continue
        if _LINK_DEF.match(line) or ("|" in line and _TABLE_RULE.match(line)):
            continue
        if "|" in line and "|" in next_line and _TABLE_RULE.match(next_line):
            end_paragraph()
            rows = []
            i += 1  # the rule under the header
            while i < len(lines) and "|" in lines[i] and lines[i].strip():
                rows.append(_cells(lines[i]))
                i += 1
            paragraphs.extend(read_table(_cells(line), rows, options))
            continue
        heading = _heading(line, next_line, bool(current))
        if heading is not None:
            depth, heading_text, underlined = heading
            i += underlined  # skip a setext underline
            spoken = _inline(heading_text)
            if depth <= CHAPTER_LEVELS:
                start_chapter(spoken, depth)
            else:
                end_paragraph()
            if spoken:
                paragraphs.append(spoken)
            continue
        if not line.strip() or _RULE.match(line):
            end_paragraph()
            continue
        line = re.sub(r"^\s{0,3}(>\s?)+", "", line)
        if _LIST_ITEM.match(line):
            end_paragraph()  # each list item is read as its own paragraph
            line = _LIST_ITEM.sub("", line)
        current.append(line.replace("|", " ").strip())
    start_chapter("", 1)  # flush the last chapter
    book_title = meta.get("title") or default_title
    chapters = [Chapter(c.title or None, c.paragraphs, c.level) for c in chapters]
    return Book(
        title=book_title,
        author=meta.get("author"),
        chapters=tuple(merge_title_only_chapters(chapters)),
        language=meta.get("lang") or meta.get("language"),
        skipped=dict(skipped),
    )


def _footnotes(text: str) -> tuple[str, dict[str, str]]:
    """The text without its footnote definitions (`[^id]: ...` and the indented lines that
    continue it), and those notes by id."""
    notes: dict[str, str] = {}
    kept: list[str] = []
    current: str | None = None
    for line in text.split("\n"):
        m = _NOTE_DEF.match(line)
        if m:
            current = m.group(1)
            notes[current] = m.group(2)
        elif current is not None and (line.startswith(("    ", "\t")) or not line.strip()):
            notes[current] += " " + line.strip()
        else:
            current = None
            kept.append(line)
    return "\n".join(kept), {k: " ".join(v.split()) for k, v in notes.items()}


def _cells(line: str) -> list[str]:
    line = line.strip()
    line = line[1:] if line.startswith("|") else line
    line = line[:-1] if line.endswith("|") else line
    return [_inline(cell) for cell in line.split("|")]


def _heading(line: str, next_line: str, in_paragraph: bool) -> tuple[int, str, int] | None:
    """(level, text, 1 if the next line is a setext underline else 0), or None."""
    m = _ATX.match(line)
    if m:
        return len(m.group(1)), m.group(2), 0
    # setext: one line of text underlined with === (level 1) or --- (level 2)
    if line.strip() and not in_paragraph and not _LIST_ITEM.match(line):
        u = _SETEXT.match(next_line)
        if u:
            return (1 if u.group(1)[0] == "=" else 2), line.strip(), 1
    return None


def _inline(text: str) -> str:
    for pattern, repl in _INLINE:
        text = pattern.sub(repl, text)
    text = " ".join(html.unescape(text).split())
    return re.sub(r" ([.,;:!?])", r"\1", text)  # "see ![img](x)." leaves "see ."


def _front_matter(text: str) -> tuple[dict[str, str], str]:
    """A leading `---` ... `---` block of `key: value` lines (YAML subset) and the rest."""
    m = re.match(r"---\n(.*?)\n(?:---|\.\.\.)\s*\n", text, re.S)
    if not m:
        return {}, text
    meta = {}
    for line in m.group(1).split("\n"):
        key, sep, value = line.partition(":")
        if sep and value.strip():
            meta[key.strip().lower()] = value.strip().strip("'\"")
    return meta, text[m.end() :]
