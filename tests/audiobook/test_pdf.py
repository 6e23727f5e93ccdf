"""PDF input: running heads and page numbers dropped, hyphenation joined, chapters from the
outline; scans, encrypted and corrupt files get a one-line error."""

from __future__ import annotations

import pytest
from pypdf import PdfReader, PdfWriter

from ownvoice.audiobook.reader import read_book
from ownvoice.errors import InvalidInput
from tests.audiobook.pdf_builder import write_pdf

HEAD = "The Harbour Book"
BODY = [
    "The harbour was quiet in the early morning and the boats lay still",
    "on the water while the gulls circled over the old stone pier. The",
    "keeper walked along the quay, and the story that the narra-",
    "tor tells begins right there.",
    "Then from the inn at the end of the street there came a well-",
    "Known song, and everybody who heard it stopped for a moment to",
    "listen to the old tune.",
]


def book_pages() -> list[list[str]]:
    return [
        [HEAD, "Chapter One", *BODY[:4], "- 1 -"],
        [HEAD, *BODY[4:], "- 2 -"],
        [HEAD, "Chapter Two", "The second chapter is short.", "3"],
        [HEAD, "The end of the book comes on the fourth page after all of this.", "Page 4 of 4"],
    ]


def test_running_lines_go_hyphens_join_and_the_outline_makes_chapters(tmp_path):
    path = write_pdf(tmp_path / "b.pdf", book_pages(), [("Chapter One", 0), ("Chapter Two", 2)])
    book = read_book(str(path))
    assert [c.title for c in book.chapters] == ["Chapter One", "Chapter Two"]
    one, two = (c.paragraphs for c in book.chapters)
    assert one == (
        "Chapter One",
        " ".join(BODY[:2]) + " keeper walked along the quay, and the story that the narrator "
        "tells begins right there.",
        "Then from the inn at the end of the street there came a well-Known song, and everybody "
        "who heard it stopped for a moment to listen to the old tune.",
    )
    assert two == (
        "Chapter Two",
        "The second chapter is short.",
        "The end of the book comes on the fourth page after all of this.",
    )
    said = " ".join(p for c in book.chapters for p in c.paragraphs)
    assert HEAD not in said and "- 1 -" not in said and "Page 4" not in said


def test_without_an_outline_or_headings_the_text_is_one_chapter(tmp_path):
    book = read_book(str(write_pdf(tmp_path / "b.pdf", book_pages())))
    assert len(book.chapters) == 1 and book.chapters[0].paragraphs[0] == "Chapter One"


SECTION = "A Section on the Inn at the End of the Long Street"  # as long as a line of text


def test_without_an_outline_chapters_come_from_headings_set_larger(tmp_path):
    """A title in 28 pt, chapters in 18 pt, section headings in 14 pt, body text in 11, an
    imprint in 8."""
    pages = [
        [HEAD, ("Tales of the Harbour", 28), "1"],
        [HEAD, ("Chapter One", 18), *BODY[:4], (SECTION, 14), *BODY[4:6], "2"],
        [HEAD, *BODY[6:], "3"],
        [
            HEAD,
            ("Chapter Two", 18),
            "The second chapter is short.",
            ("Another Section", 14),
            "Two sections.",
            ("Printed in the harbour town.", 8),
            "4",
        ],
    ]
    book = read_book(str(write_pdf(tmp_path / "b.pdf", pages)))
    # the title page is read with the first chapter (a one-line chapter is folded into the next)
    assert [c.title for c in book.chapters] == ["Chapter One", "Chapter Two"]
    one, two = (c.paragraphs for c in book.chapters)
    assert one[:3] == ("Tales of the Harbour", "Chapter One", one[2])
    assert one[2].endswith("the narrator tells begins right there.")
    # a heading is a paragraph of its own even after a long line
    assert one[3:] == (SECTION, "Then from the inn at the end of the street there came a "
                       "well-Known song, and everybody who heard it stopped for a moment to "
                       "listen to the old tune.")  # fmt: skip
    assert two == ("Chapter Two", "The second chapter is short.", "Another Section",
                   "Two sections.", "Printed in the harbour town.")  # fmt: skip


def test_a_scan_an_encrypted_and_a_corrupt_pdf_get_one_line_each(tmp_path):
    scan = write_pdf(tmp_path / "scan.pdf", [[], []])  # pages without a text layer
    locked = tmp_path / "locked.pdf"
    writer = PdfWriter(clone_from=PdfReader(str(write_pdf(tmp_path / "b.pdf", book_pages()))))
    writer.encrypt("secret")
    writer.write(str(locked))
    corrupt = tmp_path / "corrupt.pdf"
    corrupt.write_bytes(b"%PDF-1.4\n1 0 obj << /Type /Catalog >> garbage")
    for path, message in (
        (scan, "the PDF has no text layer (a scan?); run OCR first, e.g. ocrmypdf"),
        (locked, "the PDF is encrypted; save an unprotected copy first"),
        (corrupt, "not a readable PDF: "),
    ):
        with pytest.raises(InvalidInput) as caught:
            read_book(str(path))
        assert str(caught.value).startswith(f"{path}: {message}"), str(caught.value)
        assert "\n" not in str(caught.value)
