"""The limits every reader keeps, in-process and quick: the book's text budget in each format,
the size of a text file, the bound on one archive entry, and no entities in a .docx's XML.
(test_hostile_inputs.py runs real hostile files through the CLI and measures memory.)"""

from __future__ import annotations

import functools

import pytest

from ownvoice.audiobook import reader
from ownvoice.audiobook.archive import ArchiveLimits
from ownvoice.audiobook.budget import TextBudget
from ownvoice.audiobook.epub import read_epub
from ownvoice.errors import InvalidInput
from tests.audiobook import epub_builder as eb
from tests.audiobook import hostile_files as hf
from tests.audiobook.pdf_builder import write_pdf

TEXT = "A sentence that is long enough to go past a tiny budget. " * 3


def _files(tmp_path) -> dict[str, str]:
    html = f"<html><body><p>{TEXT}</p></body></html>"
    for name, text in (("b.txt", TEXT), ("b.md", f"# One\n\n{TEXT}"), ("b.html", html)):
        (tmp_path / name).write_text(text)
    return {
        "txt": str(tmp_path / "b.txt"),
        "md": str(tmp_path / "b.md"),
        "html": str(tmp_path / "b.html"),
        "epub": str(eb.write_epub(tmp_path / "b.epub")),
        "docx": str(hf.small_docx(tmp_path / "b.docx")),
        "pdf": str(write_pdf(tmp_path / "b.pdf", [[TEXT[:80]] * 3])),
    }


@pytest.mark.parametrize("fmt", ["txt", "md", "html", "epub", "docx", "pdf"])
def test_every_format_stops_at_the_text_budget(tmp_path, monkeypatch, fmt):
    path = _files(tmp_path)[fmt]
    reader.read_book(path)  # within the real budget
    monkeypatch.setattr(reader, "TextBudget", functools.partial(TextBudget, limit=50))
    with pytest.raises(InvalidInput, match=f"^{path}: more than 50 characters of text"):
        reader.read_book(path)


def test_a_text_file_past_what_the_budget_could_fill_is_not_read(tmp_path, monkeypatch):
    path = tmp_path / "b.txt"
    path.write_text(TEXT)
    monkeypatch.setattr(reader, "MAX_TEXT_FILE_BYTES", 100)
    with pytest.raises(InvalidInput, match="larger than 100 bytes"):
        reader.read_book(str(path))


def test_an_entry_past_the_entry_bound_is_not_inflated(tmp_path):
    path = str(eb.write_epub(tmp_path / "b.epub"))
    with pytest.raises(InvalidInput, match=r"container.xml unpacks to more than 0.1 KiB"):
        read_epub(path, ArchiveLimits(max_entry_bytes=100))


def test_an_external_entity_in_a_docx_is_refused(tmp_path):
    xml = (
        '<?xml version="1.0"?><!DOCTYPE d [<!ENTITY x SYSTEM "file:///etc/passwd">]>'
        f'<w:document xmlns:w="{hf.W_NS}"><w:body><w:p><w:r><w:t>&x;</w:t></w:r></w:p>'
        "</w:body></w:document>"
    )
    path = hf.docx_with_document_xml(tmp_path / "xxe.docx", [xml.encode()])
    with pytest.raises(InvalidInput, match="unsafe XML in word/document.xml"):
        reader.read_book(str(path))


def test_a_docx_with_a_picture_reads_without_unpacking_it(tmp_path):
    import io

    import docx

    document = docx.Document()
    document.add_paragraph("Text before a picture.")
    document.add_picture(io.BytesIO(eb.png(40, 30)))
    document.add_paragraph("Text after it.")
    document.save(str(tmp_path / "pic.docx"))
    book = reader.read_book(str(tmp_path / "pic.docx"))
    assert book.chapters[0].paragraphs == ("Text before a picture.", "Text after it.")
