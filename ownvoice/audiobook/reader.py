"""Read a book from a .txt, .md, .epub, .html, .docx or .pdf file, or from stdin ("-"), into a Book.

Plain text is one chapter of blank-line-separated paragraphs, titled by the file name. An HTML
file is one document read as an EPUB's are (notes, tables, figures, page numbers: xhtml.py),
with a chapter at each of its top-level headings. The format comes from the file extension
unless given. Every format's book then goes through tidy.py (contents lines, navigation, URLs).
Knows nothing about audio.

Every format counts its text against one budget for the book (budget.py): the EPUB, .docx and
PDF readers as they extract it, the text formats from a file read no further than the budget
could fill.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ownvoice.audiobook.budget import MAX_BOOK_CHARS, TextBudget
from ownvoice.audiobook.document import Book, Chapter, ReadOptions
from ownvoice.audiobook.epub import read_epub
from ownvoice.audiobook.html import parse_html
from ownvoice.audiobook.markdown import parse_markdown
from ownvoice.audiobook.pdf import read_pdf
from ownvoice.audiobook.tidy import tidy_book
from ownvoice.audiobook.word import read_docx
from ownvoice.errors import InvalidInput
from ownvoice.textsplit import split_paragraphs

INPUT_FORMATS = ("txt", "md", "epub", "html", "docx", "pdf")
_EXTENSIONS = {
    ".txt": "txt", ".text": "txt", ".md": "md", ".markdown": "md", ".epub": "epub",
    ".html": "html", ".htm": "html", ".xhtml": "html", ".docx": "docx", ".pdf": "pdf",
}  # fmt: skip
# a text, Markdown or HTML file past this holds more than the budget of text, or is mostly
# markup: 4 bytes a character, UTF-8's widest
MAX_TEXT_FILE_BYTES = 4 * MAX_BOOK_CHARS


def input_format(path: str, explicit: str | None = None) -> str:
    if explicit is not None:
        if explicit not in INPUT_FORMATS:
            raise InvalidInput(
                f"input format must be one of {INPUT_FORMATS}, got {explicit!r}",
                param="input_format",
            )
        return explicit
    if path == "-":
        return "txt"
    fmt = _EXTENSIONS.get(Path(path).suffix.lower())
    if fmt is None:
        raise InvalidInput(
            f"cannot tell the format of {path!r} from its extension; use one of "
            f"{sorted(_EXTENSIONS)} or pass --input-format {'/'.join(INPUT_FORMATS)}",
            param="input_format",
        )
    return fmt


def read_book(path: str, fmt: str | None = None, options: ReadOptions | None = None) -> Book:
    """The Book in `path` ("-" = stdin). Raises InvalidInput for unreadable or empty input."""
    fmt = input_format(path, fmt)
    options = options or ReadOptions()
    budget = TextBudget(path)
    if fmt in ("epub", "docx", "pdf"):
        if path == "-":
            raise InvalidInput(f"a .{fmt} file cannot be read from stdin; pass its path",
                               param="input")  # fmt: skip
        _check_exists(path)
        if fmt == "epub":
            book = read_epub(path, options=options, budget=budget)
        elif fmt == "docx":
            book = read_docx(path, options, budget)
        else:
            book = read_pdf(path, budget, options)
    else:
        text = _read_text(path)
        stem = None if path == "-" else Path(path).stem
        if fmt == "html":
            book = parse_html(text, default_title=stem, options=options)
        elif fmt == "md":
            book = parse_markdown(text, default_title=stem, options=options)
        else:
            book = Book(
                title=stem, author=None, chapters=(Chapter(None, tuple(split_paragraphs(text))),)
            )
        budget.spend(sum(len(p) for ch in book.chapters for p in ch.paragraphs))
    book = tidy_book(book, options)
    if not any(any(c.isalnum() for c in p) for ch in book.chapters for p in ch.paragraphs):
        raise InvalidInput(f"{path}: no text to read", param="input")
    return book


def _check_exists(path: str) -> None:
    if not Path(path).is_file():
        raise InvalidInput(f"input file {path!r} does not exist", param="input")


def _read_text(path: str) -> str:
    if path == "-":
        data = sys.stdin.buffer.read(MAX_TEXT_FILE_BYTES + 1)
    else:
        _check_exists(path)
        with open(path, "rb") as f:
            data = f.read(MAX_TEXT_FILE_BYTES + 1)
    if len(data) > MAX_TEXT_FILE_BYTES:
        raise InvalidInput(
            f"{path}: larger than {MAX_TEXT_FILE_BYTES:,} bytes, more than a book's "
            f"{MAX_BOOK_CHARS:,} characters of text; split it into parts",
            param="input",
        )
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise InvalidInput(
            f"{path}: not UTF-8 text (byte {e.start}); convert it first, e.g. "
            "`iconv -f latin1 -t utf-8`",
            param="input",
        ) from e
