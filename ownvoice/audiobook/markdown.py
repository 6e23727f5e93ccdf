"""Markdown to a Book: chapters from `#` and `##` headings, text stripped of markup.

Deeper headings stay in the text as their own paragraph. Images, code blocks, HTML tags, link
targets and table rules are not spoken; link text, emphasis text and list items are. A YAML front
matter block gives `title` and `author`. This is a reader for prose, not a full CommonMark parser.
"""

from __future__ import annotations

import html
import re

from ownvoice.audiobook.document import Book, Chapter, merge_title_only_chapters

CHAPTER_LEVELS = 2  # headings with at most this many '#' start a chapter

_ATX = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)(?:\s+#+)?\s*$")
_SETEXT = re.compile(r"^\s{0,3}(=+|-+)\s*$")
_FENCE = re.compile(r"^\s{0,3}(```|~~~)")
_RULE = re.compile(r"^\s{0,3}([-*_])(\s*\1){2,}\s*$")
_LIST_ITEM = re.compile(r"^\s*(?:[-*+]|\d{1,9}[.)])\s+")
_LINK_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*\S+")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")
_INLINE = [
    (re.compile(r"<!--.*?-->", re.S), ""),
    (re.compile(r"!\[[^\]]*\]\([^)]*\)"), ""),  # images
    (re.compile(r"!\[[^\]]*\]\[[^\]]*\]"), ""),
    (re.compile(r"\[([^\]]*)\]\([^)]*\)"), r"\1"),  # [text](url)
    (re.compile(r"\[([^\]]+)\]\[[^\]]*\]"), r"\1"),  # [text][ref]
    (re.compile(r"<(?:https?|mailto):[^>]+>"), ""),  # autolinks
    (re.compile(r"<[^>\n]+>"), ""),  # inline HTML tags
    (re.compile(r"`+([^`]*)`+"), r"\1"),
    (re.compile(r"(?<![\w*])(\*{1,3}|_{1,3})(?=\S)(.+?)(?<=\S)\1(?![\w*])"), r"\2"),
    (re.compile(r"~~(.+?)~~"), r"\1"),
    (re.compile(r"\\([\\`*_{}\[\]()#+\-.!>|])"), r"\1"),
]


def parse_markdown(text: str, default_title: str | None = None) -> Book:
    meta, text = _front_matter(text.replace("\r\n", "\n").replace("\r", "\n"))
    chapters: list[Chapter] = []
    title: str | None = None
    level = 1
    paragraphs: list[str] = []
    current: list[str] = []

    def end_paragraph() -> None:
        spoken = _inline(" ".join(current))
        if spoken:
            paragraphs.append(spoken)
        current.clear()

    def start_chapter(new_title: str, new_level: int) -> None:
        nonlocal title, level
        end_paragraph()
        if paragraphs or title is not None:
            chapters.append(Chapter(title, tuple(paragraphs), level))
        paragraphs.clear()
        title, level = new_title, new_level

    lines = text.split("\n")
    in_fence = False
    i = 0
    while i < len(lines):
        line = lines[i]
        next_line = lines[i + 1] if i + 1 < len(lines) else ""
        i += 1
        if _FENCE.match(line):
            in_fence = not in_fence
            end_paragraph()
            continue
        if in_fence or _LINK_DEF.match(line) or ("|" in line and _TABLE_RULE.match(line)):
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
    )


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
