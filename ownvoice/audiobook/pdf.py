"""A PDF with a text layer to a Book, with pypdf.

A PDF has lines on pages, not paragraphs, so the reader puts them back together:

- running heads and feet are dropped: a line (digits ignored) at the top or bottom of at least
  half the pages, and a bare page number ("12", "- 12 -", "Page 12 of 40", "xii") there;
- a word hyphenated across lines is joined ("narra-" + "tor" -> "narrator"; "well-" + "Known"
  keeps its hyphen);
- a paragraph ends at a line clearly shorter than the book's usual line (its last line, or a
  heading on a line of its own);
- chapters start at the pages of the document outline (bookmarks) when it has one, else the
  text is one chapter.

A PDF without a text layer (a scan), an encrypted one or a corrupt one gets a one-line error.
Knows nothing about audio.
"""

from __future__ import annotations

import re
import statistics
from collections import Counter

from ownvoice.audiobook.document import Book, Chapter, merge_title_only_chapters
from ownvoice.errors import InvalidInput

EDGE_LINES = 2  # lines at the top and at the bottom of a page where running heads and feet live
_PAGE_NUMBER = re.compile(
    r"^[\W_]*(?:page\s*)?(?:\d{1,4}|[ivxlcdm]{1,7})(?:\s*(?:of|/)\s*\d{1,4})?[\W_]*$", re.I
)


def read_pdf(path: str) -> Book:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(path)
        if reader.is_encrypted and not reader.decrypt(""):
            raise InvalidInput(f"{path}: the PDF is encrypted; save an unprotected copy first")
        pages = [_lines(page.extract_text() or "") for page in reader.pages]
        marks = _outline(reader)
        meta = reader.metadata or {}
    except InvalidInput:
        raise
    except (PdfReadError, ValueError, KeyError, TypeError, OSError) as e:
        raise InvalidInput(f"{path}: not a readable PDF: {_one_line(e)}") from e
    if not any(pages):
        raise InvalidInput(
            f"{path}: the PDF has no text layer (a scan?); run OCR first, e.g. ocrmypdf"
        )
    pages = _without_running_lines(pages)
    starts = sorted({page for _, page in marks} | {0})
    titles = {page: title for title, page in reversed(marks)}  # the first entry of a page
    usual = statistics.median(len(line) for page in pages for line in page) if any(pages) else 0
    chapters = []
    for start, end in zip(starts, [*starts[1:], len(pages)], strict=True):
        lines = [line for page in pages[start:end] for line in page]
        chapters.append(Chapter(titles.get(start), tuple(_paragraphs(lines, usual))))
    return Book(
        title=_meta(meta, "/Title"),
        author=_meta(meta, "/Author"),
        chapters=tuple(merge_title_only_chapters(chapters)),
    )


def _lines(text: str) -> list[str]:
    return [" ".join(line.split()) for line in text.splitlines() if line.strip()]


def _outline(reader) -> list[tuple[str, int]]:
    """(title, 0-based page) of the top-level outline entries, in reading order."""
    out = []
    for item in reader.outline or []:
        if isinstance(item, list):
            continue  # nested entries: sections, not chapters
        try:
            out.append(
                (" ".join(str(item.title).split()), reader.get_destination_page_number(item))
            )
        except (AttributeError, KeyError, TypeError, ValueError):
            continue
    return [(title, page) for title, page in out if page is not None and page >= 0]


def _without_running_lines(pages: list[list[str]]) -> list[list[str]]:
    def key(line: str) -> str:
        return re.sub(r"\d+", "#", line.lower())

    edges = Counter()
    for lines in pages:
        edges.update({key(line) for line in lines[:EDGE_LINES] + lines[-EDGE_LINES:]})
    running = {k for k, n in edges.items() if len(pages) >= 3 and n >= len(pages) / 2}
    out = []
    for lines in pages:
        kept = []
        for i, line in enumerate(lines):
            at_edge = i < EDGE_LINES or i >= len(lines) - EDGE_LINES
            if at_edge and (key(line) in running or _PAGE_NUMBER.match(line)):
                continue
            kept.append(line)
        out.append(kept)
    return out


def _paragraphs(lines: list[str], usual: float) -> list[str]:
    """`usual`: the book's median line length (a chapter may be too short to tell)."""
    paragraphs, current = [], ""
    for line in lines:
        if (
            current.endswith("-")
            and len(current) > 1
            and current[-2].isalpha()
            and line[:1].islower()
        ):
            current = current[:-1] + line  # a word hyphenated across lines
        elif current.endswith("-") and len(current) > 1 and current[-2].isalpha():
            current += line  # "well-" + "Known": a hyphen that belongs to the word
        else:
            current = f"{current} {line}" if current else line
        if len(line) < 0.7 * usual:
            paragraphs.append(current)
            current = ""
    if current:
        paragraphs.append(current)
    return paragraphs


def _meta(meta, key: str) -> str | None:
    value = meta.get(key)
    return " ".join(str(value).split()) or None if value else None


def _one_line(e: Exception) -> str:
    return " ".join(str(e).split()) or type(e).__name__
