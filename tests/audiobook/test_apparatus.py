"""Books as real tools make them: footnotes, back-links, tables, figures and page numbers are read
the way a narrator would, in EPUB 3 and 2, HTML and Markdown -- checked on the texts the speech
server is actually asked to say."""

from __future__ import annotations

import subprocess

import pytest

from ownvoice.audiobook.document import NOTES_ANNOUNCEMENT, TABLE_NOTICE, ReadOptions
from ownvoice.audiobook.reader import read_book
from ownvoice.audiobook.xhtml import parse_xhtml
from ownvoice.cli import main
from tests.audiobook import epub_builder as eb
from tests.tools import need

MARKDOWN = """---
title: A Small Book
author: Test Writer
lang: en
---

# The Harbour

This small book was written for testing[^1]. It has boats and people.

| Boat | Crew |
|------|------|
| Mary | 4    |
| Anne | 3    |

![A boat at sea](boat.png)

The water was m^2^ deep and H~2~O was everywhere.

[^1]: A footnote that a narrator might skip or read at the end.

# The Voyage

They sailed at dawn[^2] and came back at night.

[^2]: Dawn was at six.
"""
BODY = [
    "The Harbour",
    "This small book was written for testing. It has boats and people.",
    "Boat Mary, crew 4.",
    "Boat Anne, crew 3.",
    "A boat at sea",
    "The water was m2 deep and H2O was everywhere.",
    "The Voyage",
    "They sailed at dawn and came back at night.",
]
NOTES = ["A footnote that a narrator might skip or read at the end.", "Dawn was at six."]
TITLE_PAGE = ["A Small Book", "Test Writer"]  # pandoc's EPUB title page; Markdown has none


@pytest.fixture(scope="module")
def pandoc_books(tmp_path_factory):
    """The same Markdown book as pandoc makes it: EPUB 3, EPUB 2 and standalone HTML."""
    pandoc = need("pandoc")
    folder = tmp_path_factory.mktemp("pandoc")
    (folder / "book.md").write_text(MARKDOWN)
    (folder / "boat.png").write_bytes(eb.png())
    books = {"md": folder / "book.md"}
    for kind, args in (("epub3", ["-t", "epub3"]), ("epub2", ["-t", "epub2"]), ("html", ["-s"])):
        out = folder / f"book.{'html' if kind == 'html' else 'epub'}"
        out = out.with_stem(kind)
        subprocess.run([pandoc, "book.md", *args, "-o", out.name], cwd=folder, check=True)
        books[kind] = out
    return books


def requested(server, book, tmp_path, *flags) -> set[str]:
    out = tmp_path / f"{book.stem}-{'-'.join(flags) or 'default'}.wav"
    with pytest.raises(SystemExit) as done:
        main(["book", str(book), "-o", str(out), "--server", server.url, "--voice", "ryan",
              "--no-progress", *flags])  # fmt: skip
    assert done.value.code == 0
    return set(server.counts)


@pytest.mark.parametrize("kind", ["epub3", "epub2", "html", "md"])
def test_what_the_server_is_asked_to_say(pandoc_books, server, tmp_path, kind):
    title = [] if kind == "md" else TITLE_PAGE
    said = requested(server, pandoc_books[kind], tmp_path)
    assert said == {*title, *BODY, NOTES_ANNOUNCEMENT, *NOTES}
    server.counts.clear()
    skipped = requested(server, pandoc_books[kind], tmp_path, "--notes", "skip", "--tables",
                        "skip", "--figures", "skip")  # fmt: skip
    assert skipped == {*title, *(t for t in BODY if t[:4] not in ("Boat", "A bo")), TABLE_NOTICE}


@pytest.mark.parametrize("kind", ["epub3", "epub2", "html", "md"])
def test_notes_come_at_the_end_of_the_chapter_that_refers_to_them(pandoc_books, kind):
    chapters = read_book(str(pandoc_books[kind])).chapters
    harbour, voyage = chapters[-2:]
    assert harbour.paragraphs[-2:] == (NOTES_ANNOUNCEMENT, NOTES[0])
    assert voyage.paragraphs == ("The Voyage", BODY[-1], NOTES_ANNOUNCEMENT, NOTES[1])


# -- hand-written books: EPUB 3 semantics, and the EPUB 2 shapes of scanned-book projects -------

EPUB3_CHAPTER = """
<h1>One</h1>
<p>A reference<a epub:type="noteref" href="#n1">1</a> and an endnote<a href="notes.xhtml#e1"
 role="doc-noteref"><sup>[2]</sup></a> in the same sentence.</p>
<aside epub:type="footnote" id="n1"><p>The aside's note.</p></aside>
<p>Page<span epub:type="pagebreak" id="p12" title="12"/> breaks vanish, even
 mid-sentence<span role="doc-pagebreak" aria-label="13">13</span> here.</p>
<figure><img src="x.png" alt="Only an alt text"/></figure>
<figure><img src="x.png" alt="not this"/><figcaption>The caption wins</figcaption></figure>
<table><caption>Ships</caption><tr><td>Mary</td><td>4</td></tr></table>
<p>Area in m<sup>2</sup>, water as H<sub>2</sub>O, see chapter <a href="#c2">2</a>.</p>
"""
EPUB3_NOTES = """
<section epub:type="endnotes" role="doc-endnotes"><h2>Notes</h2><ol>
<li id="e1" epub:type="endnote"><p>The endnote, from the back of the book.
 <a href="one.xhtml#r2" role="doc-backlink">↑</a></p></li></ol></section>
"""
EPUB2_CHAPTER = """
<h1>Two</h1>
<p>It was cold<a id="FNanchor_1" href="#Footnote_1" class="fnanchor">[1]</a> and
 dark<sup><a href="#n2">2</a></sup> that <span class="pagenum"><a id="Page_23">[Pg 23]</a></span>
 winter, said page [Pg 24] of it.</p>
<div class="footnote"><p><a id="Footnote_1" href="#FNanchor_1" class="label">[1]</a> Below
 zero.</p></div>
<p id="n2"><a href="#r2">2.</a> Darker than usual. <a href="#r2">Return</a></p>
"""


def _epub(path, version: str, chapters: dict[str, str]):
    names = list(chapters)
    manifest = "".join(
        f'<item id="d{i}" href="{n}" media-type="application/xhtml+xml"/>'
        for i, n in enumerate(names)
    )
    spine = "".join(f'<itemref idref="d{i}"/>' for i in range(len(names)))
    opf = (
        f'<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="{version}" '
        'unique-identifier="id"><metadata xmlns:dc="http://purl.org/dc/elements/1.1/">'
        "<dc:identifier id='id'>x</dc:identifier><dc:title>Hand Made</dc:title>"
        f"<dc:language>en</dc:language></metadata><manifest>{manifest}</manifest>"
        f"<spine>{spine}</spine></package>"
    )
    files = {"META-INF/container.xml": eb.CONTAINER, "OEBPS/content.opf": opf}
    for name, body in chapters.items():
        files[f"OEBPS/{name}"] = (
            '<?xml version="1.0" encoding="UTF-8"?><html xmlns="http://www.w3.org/1999/xhtml" '
            f'xmlns:epub="http://www.idpf.org/2007/ops"><head><title>t</title></head><body>{body}'
            "</body></html>"
        )
    return eb.write_epub(path, files)


def test_an_epub3_with_semantics(tmp_path):
    book = read_book(str(_epub(tmp_path / "b.epub", "3.0",
                               {"one.xhtml": EPUB3_CHAPTER, "notes.xhtml": EPUB3_NOTES})))  # fmt: skip
    assert [c.paragraphs for c in book.chapters] == [(
        "One",
        "A reference and an endnote in the same sentence.",
        "Page breaks vanish, even mid-sentence here.",
        "Only an alt text",
        "The caption wins",
        "Ships",
        "Mary, 4.",
        "Area in m2, water as H2O, see chapter 2.",  # not note references: read as text
        NOTES_ANNOUNCEMENT,
        "The aside's note.",
        "The endnote, from the back of the book.",  # moved to the chapter that refers to it
    )]  # and the endnotes section's own heading ("Notes") is not read: the notes are announced  # fmt: skip


def test_an_epub2_from_a_scanned_book_project(tmp_path):
    path = _epub(tmp_path / "b.epub", "2.0", {"two.xhtml": EPUB2_CHAPTER})
    (chapter,) = read_book(str(path)).chapters
    assert chapter.paragraphs == (
        "Two",
        "It was cold and dark that winter, said page of it.",
        NOTES_ANNOUNCEMENT,
        "Below zero.",
        "Darker than usual.",
    )
    (skipped,) = read_book(str(path), options=ReadOptions(notes="skip")).chapters
    assert skipped.paragraphs == chapter.paragraphs[:2]


@pytest.mark.parametrize("version", ["3.0", "2.0"])
def test_hand_written_books_reach_the_server_without_marks(tmp_path, server, version):
    chapters = (
        {"one.xhtml": EPUB3_CHAPTER, "notes.xhtml": EPUB3_NOTES}
        if version == "3.0"
        else {"two.xhtml": EPUB2_CHAPTER}
    )
    path = _epub(tmp_path / "b.epub", version, chapters)
    said = requested(server, path, tmp_path)
    assert said == {p for c in read_book(str(path)).chapters for p in c.paragraphs}
    for text in said:  # no mark, arrow or page number, wherever it stood
        assert not any(mark in text for mark in ("[", "]", "↩", "↑", "Pg", "12", "13", "23"))
        assert "Return" not in text and not text[-1].isdigit()


# -- tables ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "table, rows",
    [
        ("<tr><th>Boat</th><th>Crew</th></tr><tr><td>Mary</td><td>4</td></tr>",
         ["Boat Mary, crew 4."]),
        ("<thead><tr><td>Name</td><td>ID</td></tr></thead><tr><td>Ann</td><td>7</td></tr>",
         ["Name Ann, ID 7."]),  # a header row by <thead>; "ID" keeps its capitals
        ("<tr><td>a</td><td></td><td>c!</td></tr>", ["a, c!"]),  # no header, an empty cell
        ("<tr><th>K</th></tr><tr><td><p>one</p><p>two</p></td></tr>", ["K one two."]),
        ("<tr><td>x<table><tr><td>in</td></tr></table></td></tr>", ["x in."]),  # nested
    ],
)  # fmt: skip
def test_a_table_is_read_row_by_row_with_its_header(table, rows):
    blocks = parse_xhtml(f"<p>Before.</p><table>{table}</table><p>After.</p>").blocks
    assert [b.text for b in blocks] == ["Before.", *rows, "After."]
    skipped = parse_xhtml(f"<table>{table}</table>", ReadOptions(tables="skip")).blocks
    assert [b.text for b in skipped] == [TABLE_NOTICE]


@pytest.mark.parametrize(
    "bad, field",
    [({"notes": "middle"}, "notes"), ({"tables": "no"}, "tables"), ({"figures": 1}, "figures")],
)
def test_reading_options_are_checked(bad, field):
    from ownvoice.errors import InvalidInput

    with pytest.raises(InvalidInput) as caught:
        ReadOptions(**bad).validate()
    assert caught.value.param == field


def test_notes_are_read_in_the_order_they_are_referred_to():
    from ownvoice.audiobook.html import parse_html

    book = parse_html(
        '<h1>One</h1><p>First<a epub:type="noteref" href="#b">1</a>.</p>'
        '<p>Second<a epub:type="noteref" href="#a">2</a>.</p>'
        '<aside epub:type="footnote" id="a"><p>Note A.</p></aside>'
        '<aside epub:type="footnote" id="b"><p>Note B.</p></aside>'
    )
    (chapter,) = book.chapters
    assert chapter.paragraphs == (
        "One",
        "First.",
        "Second.",
        NOTES_ANNOUNCEMENT,
        "Note B.",
        "Note A.",
    )
