"""A PDF with a text layer to a Book (its lines come from pdf_text.py, with PDFium).

A PDF has lines on pages, not paragraphs, so the reader puts them back together and leaves out
what is printed for the eye:

- running heads and feet: a line at the top or bottom of a page that recurs there with the
  page's number in it ("Chapter 4: Function reference 9", "Debian New Maintainers' Guide iii",
  "7 / 57"), or recurs on half the pages, and a bare page number ("12", "- 12 -", "xii");
- printed contents pages: a page with dot leaders ("2.1 ASN.1 syntax . . . . 2") loses its
  entries and its "Contents" heading;
- footnotes: the small lines at a page's foot that start with a note mark move to the end of
  their chapter (as EPUB notes do), and the marks in the text ("a wizard.2") are not read;
- code: a run of lines set in a fixed-pitch font (or shaped as C: "x = f(…", "…);") is one
  short notice, nothing, or read (ReadOptions.code);
- a word hyphenated across lines is joined ("narra-" + "tor" -> "narrator"; "well-" + "Known"
  keeps its hyphen), and so is a URL cut at a line's end;
- a paragraph ends at a line clearly shorter than the book's usual line (its last line, or a
  heading on a line of its own);
- chapters start at the pages of the document outline's top entries when it has one, else at
  headings: lines set larger than the body text (the size most of the characters have), ranked
  by size; chapters start at the largest size that more than one line has (document.
  chapter_level), and every heading is a paragraph of its own. Without either, the text is one
  chapter.

A PDF without a text layer (a scan), an encrypted one, a corrupt or truncated one, or one with
more than 20,000 pages gets a one-line error, and the text counts against the book's budget
(budget.py) page by page; PDFium's own limits stop the other hostile shapes (a stream that
inflates to gigabytes, a stream whose length refers to itself) within the memory a book takes
(tests/audiobook/test_hostile_inputs.py). Knows
nothing about audio.
"""

from __future__ import annotations

import re
import statistics
from collections import Counter
from dataclasses import replace

from ownvoice.audiobook.budget import TextBudget
from ownvoice.audiobook.document import (
    Book,
    Chapter,
    ReadOptions,
    chapter_level,
    merge_title_only_chapters,
    with_notes_at_end,
)
from ownvoice.audiobook.furniture import CODE_NOTICE, is_apparatus_title, is_contents_line
from ownvoice.audiobook.pdf_text import Line, PdfText, one_line
from ownvoice.errors import InvalidInput

MAX_PAGES = 20_000  # far more than any book; a page tree past it is built to exhaust the reader
EDGE_LINES = 2  # lines at the top and at the bottom of a page where running heads and feet live
RUNNING_PAGES = 2  # a line at the edge with the page's number in it, on this many pages
HEADING_SCALE = 1.15  # a line this much larger than the body text is a heading...
HEADING_CHARS = 100  # ...if it is no longer than this
NOTE_SCALE = 0.9  # footnotes are set at most this large against the body text
CONTENTS_LEADERS = 3  # a page with this many dot-leader lines is a contents page
_PAGE_NUMBER = re.compile(
    r"^[\W_]*(?:page\s*)?(?:\d{1,4}|[ivxlcdm]{1,7})(?:\s*(?:of|/)\s*\d{1,4})?[\W_]*$", re.I
)
_NUMBER = re.compile(r"\b(?:\d{1,4}|[ivxlcdm]{1,7})\b", re.I)
_ENTRY = re.compile(
    r"^(?:[A-Z]|\d{1,3})(?:\.\d{1,3})*\.?\s+\S|^.{1,100}\s(?:\d{1,4}|[ivxlc]{1,6})$"
)
# code set in the text's own font (texinfo's examples in a reference section): an assignment of
# a call ("result=asn1_write_value(cert, …"), a statement's end ("1);"), a lone brace, an include
_CODE_SHAPE = re.compile(r"^\w+\s?=\s?\w[\w ]*\(|\);$|^[{}]$|^#include\b")
_GLUED_MARK = re.compile(r"^([0-9⁰¹²³⁴⁵⁶⁷⁸⁹]{1,3})(?=[A-Z“\"‘(])")
_URL_END = re.compile(r"(?:https?://|www\.)\S*[^\s.,;:!?)]$", re.I)
# the rest of a URL cut at a line's end: a path, a query, or what closes the parenthesis
_URL_REST = re.compile(r"^(?:\S*[/?=&#%_]\S*|[\w.~-]+\)\S*)(?:\s|$)")


def read_pdf(
    path: str, budget: TextBudget | None = None, options: ReadOptions | None = None
) -> Book:
    budget = budget or TextBudget(path)
    options = options or ReadOptions()
    _check_header(path)
    try:
        with PdfText(path) as pdf:
            if len(pdf) > MAX_PAGES:
                raise InvalidInput(
                    f"{path}: not a readable PDF: past a limit that guards against hostile files "
                    f"({len(pdf):,} pages, at most {MAX_PAGES:,})"
                )
            pages = []
            for index in range(len(pdf)):
                pages.append(pdf.lines(index))
                budget.spend(sum(len(line.text) for line in pages[-1]))
            outline, meta = pdf.outline(), pdf.metadata()
    except InvalidInput:
        raise
    except Exception as e:  # PDFium on a damaged file: all mean the same to the user
        raise InvalidInput(f"{path}: not a readable PDF: {one_line(e)}") from e
    if not any(pages):
        raise InvalidInput(
            f"{path}: the PDF has no text layer (a scan?); run OCR first, e.g. ocrmypdf"
        )
    skipped: Counter = Counter()
    pages = _without_running_lines(pages, skipped)
    pages = _without_contents(pages, skipped)
    body = _body_size(pages)
    pages, notes = _without_footnotes(pages, body)
    every = [line for page in pages for line in page]
    levels = _heading_levels([line for line in every if not line.mono], body)
    prose = [len(line.text) for line in every if not line.mono]
    usual = statistics.median(prose) if prose else 60
    top = min((entry.level for entry in outline), default=0)
    marks = sorted({(e.page, e.title) for e in outline if e.level == top}, key=lambda m: m[0])
    if marks:
        starts = sorted({page for page, _ in marks} | {0})
        titles: dict[int, str] = {}
        for page, title in marks:
            titles.setdefault(page, title)  # the first entry of a page
        parts = [(titles.get(start), range(start, end))
                 for start, end in zip(starts, [*starts[1:], len(pages)], strict=True)]  # fmt: skip
        chapters = [
            _chapter(title, [line for p in span for line in pages[p]],
                     [n for p in span for n in notes[p]], usual, levels, options, skipped)
            for title, span in parts
        ]  # fmt: skip
    else:
        chapters = [
            _chapter(title, lines, chapter_notes, usual, levels, options, skipped)
            for title, lines, chapter_notes in _by_headings(pages, notes, levels)
        ]
    return Book(
        title=meta.get("Title") or None,
        author=meta.get("Author") or None,
        chapters=tuple(merge_title_only_chapters(chapters)),
        skipped=dict(skipped),
    )


def _chapter(title, lines, notes, usual, levels, options, skipped) -> Chapter:
    return Chapter(
        title, with_notes_at_end(_paragraphs(lines, usual, levels, options, skipped), notes)
    )


def _check_header(path: str) -> None:
    """A PDF starts with "%PDF-" (readers allow some bytes before it): anything else is another
    kind of file with a .pdf name, which would be reported only as a damaged PDF."""
    try:
        with open(path, "rb") as f:
            head = f.read(1024)
    except OSError as e:
        raise InvalidInput(f"{path}: cannot read the file: {e}") from e
    if b"%PDF-" not in head:
        raise InvalidInput(
            f"{path}: not a readable PDF: it does not start with %PDF- (another kind of file?)"
        )


# -- what is printed for the eye ---------------------------------------------------------------


def _numbers(text: str) -> list[int]:
    """The page-like numbers in a line: arabic, or roman ("iii")."""
    out = []
    for token in _NUMBER.findall(text):
        out.append(int(token) if token.isdigit() else _roman(token.lower()))
    return [n for n in out if n > 0]


def _roman(token: str) -> int:
    values = {"i": 1, "v": 5, "x": 10, "l": 50, "c": 100, "d": 500, "m": 1000}
    total = 0
    for a, b in zip(token, token[1:] + " ", strict=True):
        total += -values[a] if values.get(b, 0) > values[a] else values[a]
    return total


def _without_running_lines(pages: list[list[Line]], skipped: Counter) -> list[list[Line]]:
    def key(line: Line) -> str:
        return _NUMBER.sub("#", line.text.lower())

    def edges(lines: list[Line]) -> list[Line]:
        return lines[:EDGE_LINES] + lines[-EDGE_LINES:]

    seen: Counter = Counter()  # key -> pages with it at an edge
    offsets: Counter = Counter()  # (key, page index - a number in it): the page's own number
    for index, lines in enumerate(pages):
        for line in {key(line): line for line in edges(lines)}.values():
            seen[key(line)] += 1
            offsets.update({(key(line), index - n) for n in _numbers(line.text)})
    running = {k for k, n in seen.items() if len(pages) >= 3 and n >= len(pages) / 2}
    running |= {k for (k, _), n in offsets.items() if n >= RUNNING_PAGES}
    out = []
    for lines in pages:
        kept = []
        for i, line in enumerate(lines):
            at_edge = i < EDGE_LINES or i >= len(lines) - EDGE_LINES
            if at_edge and (key(line) in running or _PAGE_NUMBER.match(line.text)):
                skipped["running heads and page numbers"] += 1
                continue
            kept.append(line)
        out.append(kept)
    return out


def _without_contents(pages: list[list[Line]], skipped: Counter) -> list[list[Line]]:
    """A contents page (dot leaders on several lines) keeps only what is not an entry."""
    out = []
    for lines in pages:
        if sum(is_contents_line(line.text) for line in lines) < CONTENTS_LEADERS:
            out.append(lines)
            continue
        kept = []
        for line in lines:
            if (
                is_contents_line(line.text)
                or _ENTRY.match(line.text)
                or is_apparatus_title(line.text)
            ):
                skipped["contents entries"] += 1
            else:
                kept.append(line)
        out.append(kept)
    return out


def _body_size(pages: list[list[Line]]) -> float:
    sizes = Counter()
    for line in (line for page in pages for line in page):
        sizes[round(line.size, 1)] += len(line.text)
    return sizes.most_common(1)[0][0] if sizes else 0.0


def _without_footnotes(pages, body: float):
    """(pages, notes per page): the lines at a page's foot set smaller than the body text,
    from the first that starts with a note mark, are that page's footnotes; their marks in the
    page's text ("a wizard. 2", "(RFA).3", set as plain digits by some typesetters) go."""
    out, notes = [], []
    for lines in pages:
        start = len(lines)
        while start > 0 and 0 < lines[start - 1].size <= NOTE_SCALE * body:
            start -= 1
        while start < len(lines) and _note_start(lines[start]) is None:
            start += 1
        said: list[str] = []
        marks: set[str] = set()
        for line in lines[start:]:
            mark = _note_start(line)
            if mark is not None or not said:
                marks.add(mark or "")
                said.append(line.text[len(mark or "") :].lstrip())
            else:
                said[-1] = _joined(said[-1], line.text)
        out.append(_without_marks(lines[:start], marks - {""}))
        notes.append(said)
    return out, notes


def _note_start(line: Line) -> str | None:
    """The mark a footnote starts with: "" when pdf_text took a superscript one, else the
    digits glued to its first word ("1The document assumes …"), or None."""
    if line.note:
        return ""
    found = _GLUED_MARK.match(line.text)
    return found.group(1) if found else None


def _without_marks(lines: list[Line], marks: set[str]) -> list[Line]:
    if not marks:
        return lines
    alternatives = "|".join(sorted(map(re.escape, marks), key=len, reverse=True))
    # after a word's end and its punctuation ("wizard. 2"), never inside a number ("1.1")
    after_text = re.compile(rf"(?<=[^\d\s][.,;:!?)\]”’\"'])\s?(?:{alternatives})(?=\s|$)")
    opening = re.compile(rf"^(?:{alternatives})\s+(?=\S)")
    out, previous = [], ""
    for line in lines:
        text = after_text.sub("", line.text)
        if previous[-1:] in ".,;:!?)”’" and previous:
            text = opening.sub("", text)  # the mark of the line before, wrapped
        out.append(replace(line, text=text) if text != line.text else line)
        previous = text
    return out


# -- chapters and paragraphs ---------------------------------------------------------------------


def _heading_levels(lines: list[Line], body: float) -> dict[float, int]:
    """Font size -> heading level (1 = largest) for the sizes clearly above the body's."""
    sizes = sorted({round(line.size, 1) for line in lines
                    if line.size >= HEADING_SCALE * body and len(line.text) <= HEADING_CHARS},
                   reverse=True)  # fmt: skip
    return {size: level for level, size in enumerate(sizes, 1)}


def _level(line: Line, levels: dict[float, int]) -> int | None:
    if line.mono or len(line.text) > HEADING_CHARS:
        return None
    return levels.get(round(line.size, 1))


def _by_headings(pages, notes, levels):
    """[(title, lines, notes)]: the text cut before each heading of the chapter level."""
    every = [line for page in pages for line in page]
    level = chapter_level([n for n in (_level(line, levels) for line in every) if n is not None])
    parts: list[tuple[str | None, list[Line], list[str]]] = [(None, [], [])]
    for lines, page_notes in zip(pages, notes, strict=True):
        for line in lines:
            if level is not None and _level(line, levels) == level:
                parts.append((line.text, [], []))
            parts[-1][1].append(line)
        parts[-1][2].extend(page_notes)
    return [part for part in parts if part[1] or part[2]]


def _joined(current: str, text: str) -> str:
    """Two lines of one paragraph: a hyphenated word or a URL cut at the line's end is joined."""
    if current.endswith("-") and len(current) > 1 and current[-2].isalpha():
        # a word hyphenated across lines, or "well-" + "Known": a hyphen of the word
        return current[:-1] + text if text[:1].islower() else current + text
    if _URL_END.search(current) and _URL_REST.match(text):
        return current + text  # "(http://bugs.debian.org/" + "pkgreport.cgi?pkg=wnpp)"
    return f"{current} {text}" if current else text


def _paragraphs(lines, usual, levels, options: ReadOptions, skipped: Counter) -> list[str]:
    """`usual`: the book's median line length (a chapter may be too short to tell). A paragraph
    ends at a line clearly shorter than that, and around a heading and a block of code."""
    paragraphs: list[str] = []
    current, code = "", []

    def end_code():
        if not code:
            return
        skipped["code blocks"] += 1
        if options.code == "read":
            paragraphs.append(" ".join(code))
        elif options.code == "announce" and (not paragraphs or paragraphs[-1] != CODE_NOTICE):
            paragraphs.append(CODE_NOTICE)
        code.clear()

    for line in lines:
        if line.mono or _CODE_SHAPE.search(line.text):
            if current:
                paragraphs.append(current)
                current = ""
            code.append(line.text)
            continue
        end_code()
        heading = _level(line, levels) is not None
        if heading and current:
            paragraphs.append(current)
            current = ""
        current = _joined(current, line.text)
        if heading or len(line.text) < 0.7 * usual:
            paragraphs.append(current)
            current = ""
    end_code()
    if current:
        paragraphs.append(current)
    return paragraphs
