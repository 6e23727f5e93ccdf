"""EPUB reading: nested chapters, images ignored, and clear errors for broken or hostile files."""

from __future__ import annotations

import zipfile

import pytest

from ownvoice.audiobook.archive import ArchiveLimits
from ownvoice.audiobook.document import ReadOptions
from ownvoice.audiobook.epub import read_epub
from ownvoice.cli import main
from ownvoice.errors import InvalidInput
from tests.audiobook import epub_builder as eb


def _spoken(book) -> str:
    return " ".join(p for c in book.chapters for p in c.paragraphs)


def test_nested_chapters_follow_the_nav_document(tmp_path):
    book = read_epub(str(eb.write_epub(tmp_path / "b.epub")))
    assert (book.title, book.author, book.language) == ("The Nested Book", "Bea Writer", "en-GB")
    assert [(c.title, c.level) for c in book.chapters] == [
        ("The Nested Book", 1),  # front matter before the first TOC entry, named by its heading
        ("Part One — Chapter 1: Arrival", 1),  # a part page with only its heading folds forward
        ("Chapter 2: Departure", 2),
        ("The Long Road", 3),  # starts mid-document, at its anchor
    ]
    assert book.chapters[1].paragraphs == (
        "Part One",
        "Chapter 1: Arrival",
        "The train came in at dawn — late, as always.",  # entities decoded
        "A SPOKEN ALT TEXT",  # a figure without a caption is read by its image's alt text
        "She stepped onto the platform and looked around.",  # <br/> is a space
    )
    assert book.chapters[3].paragraphs[-1] == "At last she reached the sea."
    assert book.cover == eb.png() and book.cover_type == "image/png"


def test_images_scripts_and_non_linear_documents_are_not_read(tmp_path):
    text = _spoken(read_epub(str(eb.write_epub(tmp_path / "b.epub"))))
    for hidden in ("SVG TEXT", "SCRIPT TEXT", "color: red", "NOTES", "Contents"):
        assert hidden not in text
    without_figures = read_epub(str(tmp_path / "b.epub"), options=ReadOptions(figures="skip"))
    assert "SPOKEN ALT TEXT" in text and "SPOKEN ALT TEXT" not in _spoken(without_figures)


def test_ncx_is_used_without_a_nav_document(tmp_path):
    files = eb.good_files()
    files["OEBPS/content.opf"] = eb.OPF.replace(' properties="nav"', "")
    book = read_epub(str(eb.write_epub(tmp_path / "b.epub", files)))
    assert [c.title for c in book.chapters][1:] == [
        "Part One (ncx) — Chapter 1 (ncx)",
        "Chapter 2 (ncx)",
        "The Long Road (ncx)",
    ]


def test_without_any_toc_each_document_is_a_chapter(tmp_path):
    files = eb.good_files()
    opf = eb.OPF.replace(' properties="nav"', "").replace(' toc="ncx"', "")
    files["OEBPS/content.opf"] = opf.replace(
        '<item id="ncx" href="toc.ncx" media-type="application/x-dtbncx+xml"/>', ""
    )
    book = read_epub(str(eb.write_epub(tmp_path / "b.epub", files)))
    assert [c.title for c in book.chapters] == [
        "The Nested Book",
        "Part One — Chapter 1: Arrival",
        "Chapter 2: Departure",
    ]


def _broken(tmp_path, **changes):
    files = eb.good_files()
    for name, data in changes.items():
        key = {"opf": "OEBPS/content.opf", "container": "META-INF/container.xml"}[name]
        if data is None:
            del files[key]
        else:
            files[key] = data
    return str(eb.write_epub(tmp_path / "bad.epub", files))


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"container": None}, "container file 'META-INF/container.xml' is missing"),
        ({"container": eb.CONTAINER.replace("content.opf", "missing.opf")}, "package file 'OEBPS/missing.opf' is missing"),
        ({"opf": eb.OPF.replace("</manifest>", "")}, "content.opf is not well-formed XML"),
        ({"opf": eb.OPF.replace('idref="ch1"', 'idref="nope"')}, "spine entry 'nope' is not in the manifest"),
        ({"opf": eb.OPF.replace('href="text/ch1.xhtml"', 'href="text/gone.xhtml"')}, "spine document 'OEBPS/text/gone.xhtml' is missing"),
        ({"opf": eb.OPF.replace("<spine", "<nospine").replace("</spine>", "</nospine>")}, "has no <spine>"),
    ],
)  # fmt: skip
def test_malformed_epub_gives_a_clear_error(tmp_path, changes, message):
    with pytest.raises(InvalidInput, match=message.replace("(", r"\(")):
        read_epub(_broken(tmp_path, **changes))


def test_not_a_zip_is_a_clear_error(tmp_path):
    path = tmp_path / "fake.epub"
    path.write_text("just text")
    with pytest.raises(InvalidInput, match="not a readable EPUB"):
        read_epub(str(path))


XXE = eb.OPF.replace(
    '<?xml version="1.0" encoding="UTF-8"?>',
    '<?xml version="1.0"?><!DOCTYPE package [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>',
).replace("The Nested Book", "&xxe;")
LAUGHS = (
    '<?xml version="1.0"?><!DOCTYPE c [<!ENTITY a "aaaaaaaaaa">'
    + "".join(
        f'<!ENTITY {x} "{("&" + p + ";") * 10}">' for p, x in zip("abcdefg", "bcdefgh", strict=True)
    )
    + "]><container>&h;</container>"
)


@pytest.mark.parametrize(
    "changes", [{"opf": XXE}, {"container": LAUGHS}], ids=["xxe", "billion-laughs"]
)
def test_entity_tricks_are_refused(tmp_path, changes):
    with pytest.raises(InvalidInput, match="unsafe XML .* entity declarations"):
        read_epub(_broken(tmp_path, **changes))


def test_zip_bomb_by_ratio_is_refused_before_inflating(tmp_path):
    files = eb.good_files()
    files["OEBPS/text/bomb.xhtml"] = b"\0" * (20 * 2**20)  # 20 MiB of zeros deflate ~1000:1
    with pytest.raises(InvalidInput, match=r"compressed \d+:1.*zip bomb"):
        read_epub(str(eb.write_epub(tmp_path / "bomb.epub", files)))


def test_zip_bomb_by_total_size_is_refused(tmp_path):
    path = str(eb.write_epub(tmp_path / "b.epub"))
    with pytest.raises(
        InvalidInput, match=r"unpacks to [\d.]+ KiB, more than the 4.0 KiB allowed \(zip bomb"
    ):
        read_epub(path, ArchiveLimits(max_total_bytes=4096))


def test_corrupt_entry_is_a_clear_error(tmp_path):
    path = eb.write_epub(tmp_path / "b.epub")
    with zipfile.ZipFile(path) as z:
        info = z.getinfo("OEBPS/text/ch1.xhtml")
        offset = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra) + 10
    data = bytearray(path.read_bytes())
    data[offset : offset + 8] = b"\xff" * 8
    path.write_bytes(bytes(data))
    with pytest.raises(InvalidInput, match="cannot unpack OEBPS/text/ch1.xhtml"):
        read_epub(str(path))


def test_cli_reports_a_bad_epub_in_one_line(tmp_path, capsys):
    files = eb.good_files()
    files["OEBPS/text/bomb.xhtml"] = b"\0" * (20 * 2**20)
    bomb = eb.write_epub(tmp_path / "bomb.epub", files)
    with pytest.raises(SystemExit) as exit_info:
        main(["book", str(bomb), "-o", str(tmp_path / "o.m4b"), "--server", "http://127.0.0.1:9"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("ownvoice book: error:") and "zip bomb" in err and "\n" not in err
