"""Real documents no one here wrote, as a new user would feed them: Debian's Developer's
Reference and Guide for Debian Maintainers (EPUB), the New Maintainers' Guide and libtasn1's
manual (PDF), libffi's manual (texinfo's HTML pages, read as one file) and a .docx pandoc makes
from the New Maintainers' Guide's HTML chapters. From Debian's documentation packages, which
.ci/run installs (elsewhere the tests skip).

What the dry run would say -- every chunk, as sent -- holds no printed contents entry, no line
of code, no raw or cut URL, no pilcrow, no navigation line between web pages, no running head,
and no word of more than 30 letters that the document's own plain-text edition (Debian ships
one beside each) does not have. The oracles come from the sources, not from the reader: the
<pre> blocks of the HTML and EPUB editions, the NCX's and the outline's titles, the .txt and
info editions' words.
"""

from __future__ import annotations

import gzip
import os
import re
import subprocess
import zipfile
from collections import Counter
from html import unescape
from pathlib import Path

import pytest

from ownvoice.audiobook.options import BookOptions
from ownvoice.audiobook.pipeline import prepare
from tests.tools import need

MAINT_HTML = Path("/usr/share/doc/maint-guide/html")
LIBFFI_HTML = Path("/usr/share/doc/libffi8/html")
PACKAGES = {  # a file -> the Debian package that has it
    "/usr/share/developers-reference/developers-reference.epub": "developers-reference",
    "/usr/share/doc/debmake-doc/debmake-doc.en.epub": "debmake-doc",
    "/usr/share/doc/maint-guide/maint-guide.en.pdf": "maint-guide",
    "/usr/share/doc/libtasn1-doc/libtasn1.pdf": "libtasn1-doc",
    str(LIBFFI_HTML / "index.html"): "libffi-dev",
}


def need_file(path: str) -> Path:
    if not Path(path).is_file():
        message = f"{path} is missing (apt-get install {PACKAGES[path]})"
        if os.environ.get("OWNVOICE_REQUIRE_DEPLOY_TOOLS") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return Path(path)


class FakeBackend:
    def identity(self) -> dict:
        return {"voice": "ryan"}


# -- the sources' own furniture, found without the reader ------------------------------------


def pre_lines(markup: str) -> set[str]:
    """The code of the <pre> blocks (code, shell sessions), as what would show it was read:
    each two lines of a block one after the other, and each line of a one-line block. (One line
    alone is no proof: prose quotes a command in passing, "Setting “export DH_VERBOSE = 1”".)"""
    found = set()
    for block in re.findall(r"<pre\b[^>]*>(.*?)</pre>", markup, re.S | re.I):
        lines = [" ".join(line.split())
                 for line in unescape(re.sub(r"<[^>]+>", "", block)).splitlines()]  # fmt: skip
        lines = [line for line in lines if len(line) >= 4]
        found |= {f"{a} {b}" for a, b in zip(lines, lines[1:], strict=False)}
        if len(lines) == 1 and len(lines[0]) >= 24:
            found.add(lines[0])
    return {code for code in found if is_code(code)}


def is_code(text: str) -> bool:
    """Code's punctuation and hardly an English word (a <pre> may hold a licence's text)."""
    words = re.findall(r"\b(?:the|of|and|to|you|is|this|that|for|or|any|by|with)\b", text, re.I)
    return bool(re.search(r"[$#{}();=<>|]", text)) and len(words) < 2


def epub_sources(path: Path) -> tuple[set[str], list[str]]:
    """(<pre> lines, the NCX's titles) of an EPUB."""
    with zipfile.ZipFile(path) as z:
        markup = [z.read(n).decode("utf-8", "replace") for n in z.namelist()
                  if n.endswith((".xhtml", ".html"))]  # fmt: skip
        ncx = next(z.read(n).decode() for n in z.namelist() if n.endswith(".ncx"))
    titles = [" ".join(unescape(t).split()) for t in re.findall(r"<text>(.*?)</text>", ncx, re.S)]
    return set().union(*map(pre_lines, markup)), titles


def info_code(path: Path) -> set[str]:
    """An info file's examples (lines indented five spaces or more, among them one with C's or
    ASN.1's punctuation), as pre_lines() gives them: each two lines one after the other."""
    found, block = set(), []
    for line in [*gzip.open(path, "rt").read().splitlines(), ""]:
        if line.startswith("     ") and not line.lstrip().startswith(("*", "--")):
            block.append(" ".join(line.split()))
            continue
        if any(re.search(r"[;{}]|::=|#include", b) for b in block):
            found |= {f"{a} {b}" for a, b in zip(block, block[1:], strict=False) if a and b}
        block = []
    return {code for code in found if is_code(code)}


def plain_words(path: Path) -> set[str]:
    return set(re.findall(r"[A-Za-z]+", gzip.open(path, "rt", errors="replace").read()))


def pdf_outline(path: Path) -> list[str]:
    import pypdfium2 as pdfium

    doc = pdfium.PdfDocument(str(path))
    try:
        return [" ".join(item.get_title().split()) for item in doc.get_toc(max_depth=8)]
    finally:
        doc.close()


def libffi_in_one_file(folder: Path) -> Path:
    """texinfo's pages in reading order (each page, then the pages its menu lists), their
    bodies in one HTML file, as a user saves a manual to read it as one."""
    order: list[str] = []

    def visit(name: str) -> None:
        if name in order:
            return
        order.append(name)
        markup = (LIBFFI_HTML / name).read_text()
        menu = re.search(r'<ul class="section-toc">(.*?)</ul>', markup, re.S)
        for child in re.findall(r'href="([^"#]+)"', menu.group(1) if menu else ""):
            visit(child)
        following = re.search(r'<a href="([^"#]+)"[^>]*rel="next"', markup)
        if following:
            visit(following.group(1))

    visit("index.html")
    bodies = [re.search(r"<body[^>]*>(.*)</body>", (LIBFFI_HTML / n).read_text(), re.S).group(1)
              for n in order]  # fmt: skip
    out = folder / "libffi.html"
    out.write_text("<html><head><title>libffi manual</title></head><body>"
                   + "\n".join(bodies) + "</body></html>")  # fmt: skip
    return out


# -- what the dry run would say ---------------------------------------------------------------


def spoken(path: Path, **reading) -> tuple[object, list[str]]:
    from ownvoice.audiobook.document import ReadOptions

    options = BookOptions(reading=ReadOptions(**reading))
    book, jobs, _, _ = prepare(str(path), FakeBackend(), options)
    return book, [job.said for job in jobs]


# a scheme and a host, not the scheme named alone ("a https:// URL")
URL = re.compile(r"\b(?:https?|ftp)://[\w\[]|\bwww\.\w|\bmailto:\w", re.I)
CUT_URL = re.compile(r"(?:https?|ftp):$|^//", re.I)
LEADERS = re.compile(r"(?:\.\s?){4,}\s*\d")
NAVIGATION = re.compile(
    r"\b(?:Next|Previous|Prev|Up):\s|Jump to:|^(?:Prev|Next|Home|Up)(?:\W+(?:Prev|Next|Home|Up))*\W*$"
)


def assert_no_furniture(chunks: list[str], code: set[str] = frozenset(), words: set[str] = None,
                        heads: re.Pattern | None = None) -> None:  # fmt: skip
    said = "\n".join(chunks)
    flat = " ".join(said.split())
    assert not [c for c in chunks if URL.search(c) or CUT_URL.search(c.strip())], "a raw URL"
    assert "¶" not in said
    assert not [c for c in chunks if LEADERS.search(c)], "a contents entry with its dot leaders"
    assert not [c for c in chunks if NAVIGATION.search(c)], "a navigation line"
    assert not [line for line in code if line in flat], "a line of code"
    if heads is not None:
        assert not [c for c in chunks if heads.search(c)], "a running head"
    if words is not None:
        glued = {w for w in re.findall(r"[A-Za-z]{31,}", said) if w not in words}
        assert not glued, sorted(glued)[:5]


def assert_contents_said_once(chunks: list[str], titles: list[str]) -> None:
    """A contents page says every heading once more, each as a chunk of its own: a heading may
    be a chunk only where a section of that name begins."""
    whole = [" ".join(c.split()) for c in chunks]
    for title, sections in Counter(t for t in titles if len(t) > 3).items():
        numbered = re.compile(rf"^(?:[\dA-Z]+(?:\.\d+)*\.?\s+)?{re.escape(title)}$")
        assert sum(bool(numbered.match(c)) for c in whole) <= sections, title


# -- the documents ------------------------------------------------------------------------------


def test_developers_reference_as_epub():
    path = need_file("/usr/share/developers-reference/developers-reference.epub")
    code, titles = epub_sources(path)
    book, chunks = spoken(path)
    assert_no_furniture(chunks, code, plain_words(path.with_name("developers-reference.txt.gz")))
    assert_contents_said_once(chunks, titles)
    top = [c.title for c in book.chapters if c.level == 1]
    assert top[:3] == ["Debian Developer's Reference", "Scope of This Document",
                       "Applying to Become a Member — Getting started"]  # fmt: skip
    assert "Overview of Debian Maintainer Tools" in top and "Index" not in top
    assert book.skipped["contents pages"] >= 1 and book.skipped["code blocks"] >= 40
    # the code is announced, once for each run of blocks; URLs said by their site
    assert "A code example is left out here." in chunks
    assert any("a link to debian.org" in c for c in chunks)


def test_guide_for_debian_maintainers_as_epub():
    path = need_file("/usr/share/doc/debmake-doc/debmake-doc.en.epub")
    code, titles = epub_sources(path)
    book, chunks = spoken(path)
    assert_no_furniture(chunks, code, plain_words(path.with_name("debmake-doc.en.txt.gz")))
    assert_contents_said_once(chunks, titles)
    # the NCX's top entries (its contents page is no chapter of its own any more)
    assert [c.title for c in book.chapters if c.level <= 2][:4] == [
        "Guide for Debian Maintainers", "Preface", "1. Overview", "2. Prerequisites"]  # fmt: skip
    # --code read: the same blocks, read out
    _, read = spoken(path, code="read")
    assert "A code example is left out here." not in read
    assert any("debmake" in c and "$ " in c for c in read)


def test_new_maintainers_guide_as_pdf():
    path = need_file("/usr/share/doc/maint-guide/maint-guide.en.pdf")
    code = set().union(*(pre_lines(p.read_text()) for p in MAINT_HTML.glob("*.en.html")))
    book, chunks = spoken(path)
    heads = re.compile(r"Debian New Maintainers.\s?Guide\s+(?:\d+\s*/\s*\d+|[ivx]+)\b")
    assert_no_furniture(chunks, code, plain_words(path.with_name("maint-guide.en.txt.gz")), heads)
    outline = pdf_outline(path)
    assert [c.title for c in book.chapters][1:] == [t for t in outline if t in {
        c.title for c in book.chapters}] and len(book.chapters) == 11  # fmt: skip
    assert book.chapters[0].title is None  # the front matter: "Front matter", not "Chapter 1"
    said = " ".join(chunks)
    # footnotes at the end of their chapter, their marks gone from the text
    assert "need to be a wizard. You" not in said and "wizard. 2" not in said
    notes = book.chapters[1].paragraphs[book.chapters[1].paragraphs.index("Notes.") :]
    assert any(n.startswith("The document assumes you are using a jessie") for n in notes)
    # the contents pages: no entry of them is said
    assert not any(re.match(r"^1\.1 Social ?dynamics of Debian\s*\d", c) for c in chunks)


def test_libtasn1_manual_as_pdf():
    path = need_file("/usr/share/doc/libtasn1-doc/libtasn1.pdf")
    info = Path("/usr/share/info/libtasn1.info.gz")
    book, chunks = spoken(path)
    heads = re.compile(r"Chapter \d+: [A-Z][\w. ]+ \d+$|^\d+ GNU Libtasn1")
    assert_no_furniture(chunks, info_code(info), plain_words(info), heads)
    titles = [c.title for c in book.chapters]
    assert titles == [None, "1 Introduction", "2 ASN.1 structure handling", "3 Utilities",
                      "4 Function reference", "A Copying Information"]  # fmt: skip
    assert book.skipped["contents and index chapters"] == 1  # "Function and Data Index"


def test_libffi_manual_as_html(tmp_path):
    need_file(str(LIBFFI_HTML / "index.html"))
    path = libffi_in_one_file(tmp_path)
    book, chunks = spoken(path)
    code = pre_lines(path.read_text())
    assert code and len(code) > 20
    assert_no_furniture(chunks, code, plain_words(Path("/usr/share/info/libffi.info.gz")))
    said = " ".join(chunks)
    assert "Jump to" not in said and "[Index]" not in said
    assert said.count("libffi: the portable foreign function interface library") <= 1
    assert "ffi_prep_cif" in said  # inline code is read as words


def test_a_docx_pandoc_made_from_the_html_chapters(tmp_path):
    pandoc = need("pandoc")
    need_file("/usr/share/doc/maint-guide/maint-guide.en.pdf")
    pages = [MAINT_HTML / f"{n}.en.html" for n in ("index", "start", "first", "modify")]
    out = tmp_path / "guide.docx"
    subprocess.run([pandoc, "-o", str(out), *map(str, pages)], check=True, capture_output=True,
                   cwd=MAINT_HTML)  # fmt: skip
    code = set().union(*(pre_lines(p.read_text()) for p in pages))
    book, chunks = spoken(out)
    assert_no_furniture(chunks, code, plain_words(MAINT_HTML.parent / "maint-guide.en.txt.gz"))
    assert "A code example is left out here." in chunks
    assert [c.title for c in book.chapters][-3:] == [
        "Chapter 1. Getting started The Right Way", "Chapter 2. First steps",
        "Chapter 3. Modifying the source"]  # fmt: skip
