"""Word documents: chapters from heading styles, tables by row, properties, clear errors."""

from __future__ import annotations

import docx
import pytest

from ownvoice.audiobook.document import TABLE_NOTICE, ReadOptions
from ownvoice.audiobook.reader import read_book
from ownvoice.errors import InvalidInput

FOREWORD = "A foreword before any chapter, long enough to be a chapter of its own."


def make_docx(path, headings: int = 1) -> str:
    document = docx.Document()
    props = document.core_properties
    props.title, props.author, props.language = "The Word Book", "Dee Writer", "de-DE"
    document.add_paragraph(FOREWORD)
    for n in (1, 2):
        document.add_heading(f"Chapter {n}", level=headings)
        document.add_paragraph(f"The story of chapter {n} goes on.")
        document.add_heading("A section", level=headings + 1)
        document.add_paragraph("  Spaced   text\tis  tidied.  ")
        document.add_paragraph("")  # empty paragraphs are not read
    table = document.add_table(rows=3, cols=2)
    for r, (a, b) in enumerate((("Boat", "Crew"), ("Mary", "4"), ("Anne", "3"))):
        table.cell(r, 0).text, table.cell(r, 1).text = a, b
    document.add_paragraph("After the table.")
    document.save(str(path))
    return str(path)


@pytest.mark.parametrize("level", [1, 2])
def test_chapters_come_from_heading_styles(tmp_path, level):
    book = read_book(make_docx(tmp_path / "b.docx", level))
    assert (book.title, book.author, book.language) == ("The Word Book", "Dee Writer", "de-DE")
    assert [c.title for c in book.chapters] == [None, "Chapter 1", "Chapter 2"]
    assert book.chapters[0].paragraphs == (FOREWORD,)
    assert book.chapters[1].paragraphs == (
        "Chapter 1", "The story of chapter 1 goes on.", "A section", "Spaced text is tidied.",
    )  # fmt: skip
    assert book.chapters[2].paragraphs[-3:] == (
        "Boat Mary, crew 4.", "Boat Anne, crew 3.", "After the table.",
    )  # fmt: skip
    skipped = read_book(str(tmp_path / "b.docx"), options=ReadOptions(tables="skip"))
    assert skipped.chapters[2].paragraphs[-2:] == (TABLE_NOTICE, "After the table.")


def _zip(files: dict[str, str]) -> bytes:
    import io
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
    return buf.getvalue()


@pytest.mark.parametrize(
    "content",
    [b"", b"not a zip", b"PK\x03\x04 broken zip", _zip({"a.txt": "an EPUB? no"}),
     _zip({"[Content_Types].xml": "<Types xmlns='http://schemas.openxmlformats.org/package/"
                                  "2006/content-types'/>"})],
)  # fmt: skip
def test_a_file_that_is_not_a_docx_gets_one_line(tmp_path, content):
    path = tmp_path / "b.docx"
    path.write_bytes(content)
    with pytest.raises(InvalidInput) as caught:
        read_book(str(path))
    message = str(caught.value)
    assert message.startswith(f"{path}: not a readable Word document (.docx): ")
    assert "\n" not in message


def test_a_docx_is_not_read_from_stdin():
    with pytest.raises(InvalidInput, match="a .docx file cannot be read from stdin"):
        read_book("-", "docx")
