"""What a book is once read: metadata and chapters of plain-text paragraphs.

The readers (txt, markdown, EPUB) produce a Book; the planner turns it into chunks. A chapter's
paragraphs are what is spoken, so a heading in the source is its first paragraph; `title` is only
the chapter mark in the output file. Knows nothing about file formats or audio.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ownvoice.audiobook.furniture import CODE_MODES, LINK_MODES
from ownvoice.errors import InvalidInput

NOTES_ANNOUNCEMENT = "Notes."
NAVIGATION_WORD = re.compile(r"^(?:Prev(?:ious)?|Next|Up|Home|Top|Contents|Index)$", re.I)
TABLE_NOTICE = "A table is left out here."


@dataclass(frozen=True)
class ReadOptions:
    """What of a book's apparatus is read: notes at the end of their chapter or not at all,
    tables row by row or as a short notice, figures by caption or not at all, code blocks as a
    short notice, not at all or read out, URLs and e-mail addresses by their site ("a link to
    debian.org"), not at all or as written (furniture.py)."""

    notes: str = "end"  # "end" | "skip"
    tables: str = "read"  # "read" | "skip"
    figures: str = "read"  # "read" | "skip"
    code: str = "announce"  # "announce" | "skip" | "read"
    links: str = "name"  # "name" | "skip" | "read"

    def validate(self) -> None:
        for name, allowed in (("notes", ("end", "skip")), ("tables", ("read", "skip")),
                              ("figures", ("read", "skip")), ("code", CODE_MODES),
                              ("links", LINK_MODES)):  # fmt: skip
            value = getattr(self, name)
            if value not in allowed:
                raise InvalidInput(
                    f"{name} must be {' or '.join(allowed)}, got {value!r}", param=name
                )


def with_notes_at_end(texts: list[str], notes: list[str]) -> tuple[str, ...]:
    """A chapter's paragraphs, then its notes after a short announcement."""
    return tuple(texts + ([NOTES_ANNOUNCEMENT, *notes] if notes else []))


def table_sentences(header: list[str], rows: list[list[str]]) -> list[str]:
    """One sentence per row, each cell after its column's header: "Boat Mary, crew 4."."""
    said = []
    for row in rows:
        parts = []
        for i, text in enumerate(row):
            if not text:
                continue
            name = header[i] if i < len(header) else ""
            if name and parts:  # mid-sentence: "crew", not "Crew" (but "ID" stays)
                name = name[0].lower() + name[1:] if name[1:] == name[1:].lower() else name
            parts.append(f"{name} {text}" if name else text)
        if parts:
            sentence = ", ".join(parts)
            said.append(sentence if sentence[-1] in ".!?…" else sentence + ".")
    return said


def read_table(header: list[str], rows: list[list[str]], options: ReadOptions,
               caption: str = "") -> list[str]:  # fmt: skip
    """What a table says: its caption and a sentence per row, or the notice (`tables: skip`),
    or nothing for an empty table."""
    if any(row and all(not cell or NAVIGATION_WORD.match(cell) for cell in row)
           and any(row) for row in [header, *rows]):  # fmt: skip
        return []  # a bar of Prev / Up / Next between web pages (DocBook's), not a table
    said = table_sentences(header, rows)
    if not (said or caption):
        return []
    if options.tables == "skip":
        return [TABLE_NOTICE]
    return ([caption] if caption else []) + said


def chapter_level(levels: list[int]) -> int | None:
    """The heading level chapters start at: 1 if the text has more than one such heading,
    else 2, else none (one chapter)."""
    return next((n for n in (1, 2) if levels.count(n) > 1), None)


@dataclass(frozen=True)
class Chapter:
    title: str | None  # the chapter mark; None = "Chapter N" in the output
    paragraphs: tuple[str, ...]  # plain text, one entry per paragraph, in reading order
    level: int = 1  # nesting depth in the source's table of contents (1 = top)


@dataclass(frozen=True)
class Book:
    title: str | None
    author: str | None
    chapters: tuple[Chapter, ...]
    cover: bytes | None = None  # image bytes for the output's cover art
    cover_type: str | None = None  # "image/jpeg" or "image/png"
    language: str | None = None  # as declared by the source (EPUB dc:language), else None
    # what the reader left out, per kind ("contents entries": 161, "code blocks": 4, ...)
    skipped: dict[str, int] = field(default_factory=dict, compare=False)


FRONT_MATTER = "Front matter"


def chapter_names(book: Book) -> list[str]:
    """Each chapter's mark: its title, else "Chapter N" counted without the front matter (an
    untitled first chapter before titled ones: a title page, a preface without a heading)."""
    chapters = book.chapters
    front = len(chapters) > 1 and chapters[0].title is None and any(c.title for c in chapters)
    return [
        c.title or (FRONT_MATTER if front and n == 0 else f"Chapter {n + (0 if front else 1)}")
        for n, c in enumerate(chapters)
    ]


def _norm(text: str | None) -> str:
    return " ".join((text or "").split())


TITLE_ONLY_CHARS = 60  # a chapter whose whole text is one line this short is just a heading


def merge_title_only_chapters(chapters: list[Chapter]) -> list[Chapter]:
    """Drop empty chapters and fold a chapter that says nothing but its title (a part page, or a
    book title right before chapter 1: one line of at most 60 characters) into the next one.

    The folded heading is still spoken; only the chapter mark moves, and the titles are joined:
    "Part One — Chapter 1" (a title the next chapter repeats is said once, and so is a heading
    it opens with again). Without this an audiobook gets two-second chapters.
    """
    out: list[Chapter] = []
    carry: Chapter | None = None
    for chapter in chapters:
        if carry is not None:
            titles = [t for t in (carry.title, chapter.title) if t]
            if len(titles) == 2 and _norm(titles[0]).lower() == _norm(titles[1]).lower():
                titles = titles[1:]  # said once: a book's title page, then its first heading
            paragraphs = carry.paragraphs + chapter.paragraphs
            if carry.paragraphs and chapter.paragraphs and _norm(carry.paragraphs[-1]).lower() \
                    == _norm(chapter.paragraphs[0]).lower():  # fmt: skip
                paragraphs = carry.paragraphs + chapter.paragraphs[1:]
            chapter = Chapter(
                title=" — ".join(titles) or None,
                paragraphs=paragraphs,
                level=min(carry.level, chapter.level),
            )
            carry = None
        said = [p for p in chapter.paragraphs if _norm(p)]
        if not said and chapter.title is None:
            continue
        if len(said) <= 1 and (not said or len(said[0]) <= TITLE_ONLY_CHARS):
            carry = chapter
            continue
        out.append(chapter)
    if carry is not None and any(_norm(p) for p in carry.paragraphs):
        out.append(carry)  # a lone heading at the very end is still read
    return out
