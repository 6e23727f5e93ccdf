"""A PDF with a text layer to a Book, with pypdf.

A PDF has lines on pages, not paragraphs, so the reader puts them back together:

- running heads and feet are dropped: a line (digits ignored) at the top or bottom of at least
  half the pages, and a bare page number ("12", "- 12 -", "Page 12 of 40", "xii") there;
- a word hyphenated across lines is joined ("narra-" + "tor" -> "narrator"; "well-" + "Known"
  keeps its hyphen);
- a paragraph ends at a line clearly shorter than the book's usual line (its last line, or a
  heading on a line of its own);
- chapters start at the pages of the document outline (bookmarks) when it has one, else at
  headings: lines set larger than the body text (the size most of the characters have), ranked
  by size; chapters start at the largest size that more than one line has (document.
  chapter_level), and every heading is a paragraph of its own. Without either, the text is one
  chapter.

A PDF without a text layer (a scan), an encrypted one, a corrupt, truncated or hostile one
(pypdf's limits: decompression bombs, huge page trees, reference loops) gets a one-line error,
and the text counts against the book's budget (budget.py) page by page. Knows nothing about
audio.
"""

from __future__ import annotations

import contextlib
import logging
import math
import re
import statistics
from collections import Counter

from ownvoice.audiobook.budget import TextBudget
from ownvoice.audiobook.document import Book, Chapter, chapter_level, merge_title_only_chapters
from ownvoice.errors import InvalidInput

EDGE_LINES = 2  # lines at the top and at the bottom of a page where running heads and feet live
HEADING_SCALE = 1.15  # a line this much larger than the body text is a heading...
HEADING_CHARS = 100  # ...if it is no longer than this
_PAGE_NUMBER = re.compile(
    r"^[\W_]*(?:page\s*)?(?:\d{1,4}|[ivxlcdm]{1,7})(?:\s*(?:of|/)\s*\d{1,4})?[\W_]*$", re.I
)


def read_pdf(path: str, budget: TextBudget | None = None) -> Book:
    from pypdf import PdfReader
    from pypdf.errors import LimitReachedError

    budget = budget or TextBudget(path)
    _check_header(path)
    try:
        with _pypdf_quiet():
            reader = PdfReader(path)
            if reader.is_encrypted and not reader.decrypt(""):
                raise InvalidInput(f"{path}: the PDF is encrypted; save an unprotected copy first")
            pages = []
            for page in reader.pages:
                pages.append(_lines(page))
                budget.spend(sum(len(text) for text, _ in pages[-1]))
            marks = _outline(reader)
            meta = reader.metadata or {}
    except InvalidInput:
        raise
    except LimitReachedError as e:
        raise InvalidInput(
            f"{path}: not a readable PDF: past a limit that guards against hostile files "
            f"({_one_line(e)})"
        ) from e
    except Exception as e:
        # pypdf on a damaged file fails in many ways besides its own PdfReadError (IndexError,
        # AttributeError, RecursionError, zlib.error, ... from deep in its parser): all of them
        # mean the same to the user
        raise InvalidInput(f"{path}: not a readable PDF: {_one_line(e)}") from e
    if not any(pages):
        raise InvalidInput(
            f"{path}: the PDF has no text layer (a scan?); run OCR first, e.g. ocrmypdf"
        )
    pages = _without_running_lines(pages)
    levels = _heading_levels([line for page in pages for line in page])
    usual = statistics.median(len(text) for page in pages for text, _ in page)
    if marks:
        starts = sorted({page for _, page in marks} | {0})
        titles = {page: title for title, page in reversed(marks)}  # the first entry of a page
        parts = [
            (titles.get(start), [line for page in pages[start:end] for line in page])
            for start, end in zip(starts, [*starts[1:], len(pages)], strict=True)
        ]
    else:
        parts = _by_headings([line for page in pages for line in page], levels)
    chapters = [Chapter(title, tuple(_paragraphs(lines, usual, levels)))
                for title, lines in parts]  # fmt: skip
    return Book(
        title=_meta(meta, "/Title"),
        author=_meta(meta, "/Author"),
        chapters=tuple(merge_title_only_chapters(chapters)),
    )


def _check_header(path: str) -> None:
    """A PDF starts with "%PDF-" (readers allow some bytes before it): anything else is another
    kind of file with a .pdf name, which pypdf would report only as a damaged PDF."""
    try:
        with open(path, "rb") as f:
            head = f.read(1024)
    except OSError as e:
        raise InvalidInput(f"{path}: cannot read the file: {e}") from e
    if b"%PDF-" not in head:
        raise InvalidInput(
            f"{path}: not a readable PDF: it does not start with %PDF- (another kind of file?)"
        )


@contextlib.contextmanager
def _pypdf_quiet():
    """pypdf logs a warning for each flaw it works around (a bad header, a broken cross-reference
    table); the outcome -- a book, or a one-line error -- is what the user can act on."""
    logger = logging.getLogger("pypdf")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


Line = tuple[str, float]  # text, font size in points (as set on the page)


def _lines(page) -> list[Line]:
    """The page's text lines with the largest font size of each."""
    runs: list[Line] = []

    def visit(text, cm, tm, font, size):
        # the size on the page: the font size scaled by the text and page matrices
        scale = math.hypot(tm[2], tm[3]) * math.hypot(cm[2], cm[3])
        runs.append((text, float(size) * (scale or 1.0)))

    page.extract_text(visitor_text=visit)
    lines: list[Line] = []
    text, size = "", 0.0
    for run, points in runs:
        pieces = run.split("\n")
        for i, piece in enumerate(pieces):
            text += piece
            if piece.strip():
                size = max(size, points)
            if i < len(pieces) - 1:
                if text.strip():
                    lines.append((" ".join(text.split()), size))
                text, size = "", 0.0
    if text.strip():
        lines.append((" ".join(text.split()), size))
    return lines


def _heading_levels(lines: list[Line]) -> dict[float, int]:
    """Font size -> heading level (1 = largest) for the sizes clearly above the body's."""
    by_size = Counter()
    for text, size in lines:
        by_size[round(size, 1)] += len(text)
    if not by_size:
        return {}
    body = by_size.most_common(1)[0][0]
    sizes = sorted({round(size, 1) for text, size in lines
                    if size >= HEADING_SCALE * body and len(text) <= HEADING_CHARS}, reverse=True)  # fmt: skip
    return {size: level for level, size in enumerate(sizes, 1)}


def _level(line: Line, levels: dict[float, int]) -> int | None:
    text, size = line
    return levels.get(round(size, 1)) if len(text) <= HEADING_CHARS else None


def _by_headings(lines: list[Line], levels: dict[float, int]):
    """[(title, lines)]: the text cut before each heading of the chapter level."""
    level = chapter_level([n for n in (_level(line, levels) for line in lines) if n is not None])
    parts: list[tuple[str | None, list[Line]]] = [(None, [])]
    for line in lines:
        if level is not None and _level(line, levels) == level:
            parts.append((line[0], []))
        parts[-1][1].append(line)
    return [part for part in parts if part[1]]


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


def _without_running_lines(pages: list[list[Line]]) -> list[list[Line]]:
    def key(line: Line) -> str:
        return re.sub(r"\d+", "#", line[0].lower())

    edges = Counter()
    for lines in pages:
        edges.update({key(line) for line in lines[:EDGE_LINES] + lines[-EDGE_LINES:]})
    running = {k for k, n in edges.items() if len(pages) >= 3 and n >= len(pages) / 2}
    out = []
    for lines in pages:
        kept = []
        for i, line in enumerate(lines):
            at_edge = i < EDGE_LINES or i >= len(lines) - EDGE_LINES
            if at_edge and (key(line) in running or _PAGE_NUMBER.match(line[0])):
                continue
            kept.append(line)
        out.append(kept)
    return out


def _paragraphs(lines: list[Line], usual: float, levels: dict[float, int]) -> list[str]:
    """`usual`: the book's median line length (a chapter may be too short to tell). A paragraph
    ends at a line clearly shorter than that, and around a heading."""
    paragraphs, current = [], ""
    for line in lines:
        text = line[0]
        heading = _level(line, levels) is not None
        if heading and current:
            paragraphs.append(current)
            current = ""
        if current.endswith("-") and len(current) > 1 and current[-2].isalpha():
            # a word hyphenated across lines, or "well-" + "Known": a hyphen of the word
            current = current[:-1] + text if text[:1].islower() else current + text
        else:
            current = f"{current} {text}" if current else text
        if heading or len(text) < 0.7 * usual:
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
