"""What a narrator leaves out, rule by rule, on small made-up inputs (the real documents are in
test_real_documents.py): a contents page whatever its markup, navigation, code, URLs, anchor
marks, a title said twice, front matter counted as a chapter."""

from __future__ import annotations

import pytest

from ownvoice.audiobook.document import Book, Chapter, ReadOptions, chapter_names, read_table
from ownvoice.audiobook.furniture import CODE_NOTICE, speak_links
from ownvoice.audiobook.html import parse_html
from ownvoice.audiobook.tidy import tidy_book

BODY = "<p>The harbour was quiet in the early morning, and the boats lay still.</p>"


def said(markup: str, **options) -> list[str]:
    """What an HTML file of `markup` says, read as `ownvoice book` reads it."""
    reading = ReadOptions(**options)
    book = tidy_book(parse_html(f"<html><body>{markup}</body></html>", options=reading), reading)
    return [p for c in book.chapters for p in c.paragraphs]


def test_a_contents_page_of_bare_links_is_left_out_whatever_its_markup():
    calibre = "".join(f'<p class="calibre5"><a href="ch{n}.html">Chapter {n}</a></p>'
                      for n in range(1, 6))  # fmt: skip
    assert said(calibre + BODY) == [said(BODY)[0]]
    # two links are a sentence's, not a contents page; links out of the book are content
    two = '<p><a href="#a">One</a></p><p><a href="#b">Two</a></p>'
    assert said(two + BODY)[:2] == ["One", "Two"]
    out = "".join(f'<p><a href="https://x.org/{n}">Site {n}</a></p>' for n in range(4))
    assert len(said(out + BODY)) == 5
    # a bar of four or more links, all in one line: navigation
    bar = '<p><a href="a.html">A</a> | <a href="b.html">B</a> | <a href="c.html">C</a> | ' \
          '<a href="d.html">D</a></p>'  # fmt: skip
    assert said(bar + BODY) == said(BODY)


@pytest.mark.parametrize("markup", [
    '<div class="toc"><p>Table of Contents</p><dl><dt><a href="c.html">1. One</a></dt></dl></div>',
    '<nav epub:type="toc"><ol><li><a href="c.html">One</a></li></ol></nav>',
    '<section role="doc-index"><p>apple, 3</p></section>',
    '<div class="navheader"><table><tr><td>Prev</td><td>Next</td></tr></table></div>',
    '<div class="header"><p>Next: <a href="t.html">Types</a>, Previous: <a href="i.html">'
    'Intro</a>, Up: <a href="u.html">Using</a> [<a href="x.html">Index</a>]</p></div>',
    '<h2>Heading<a class="headerlink" href="#h">¶</a></h2>',
])  # fmt: skip
def test_markup_that_is_furniture_is_never_read(markup):
    for text in said(markup + BODY):
        assert text in ("Heading", said(BODY)[0]), text


def test_code_is_a_notice_nothing_or_read_and_inline_code_is_words():
    code = "<pre>$ dpkg-buildpackage -us -uc\n$ lintian</pre><pre>$ debsign</pre>"
    markup = f"<p>Build it with <code>dpkg-buildpackage</code> as follows.</p>{code}{BODY}"
    assert said(markup) == [
        "Build it with dpkg-buildpackage as follows.", CODE_NOTICE, said(BODY)[0],
    ]  # fmt: skip
    assert CODE_NOTICE not in said(markup, code="skip") and len(said(markup, code="skip")) == 2
    assert "$ dpkg-buildpackage -us -uc $ lintian" in said(markup, code="read")


def test_urls_are_said_by_their_site_and_addresses_with_at():
    text = ("See the guide [https://www.debian.org/doc/devel-manuals#debmake] and "
            "https://salsa.debian.org/a/b. Write to debian-mentors@lists.debian.org.")  # fmt: skip
    assert speak_links(text) == (
        "See the guide (a link to debian.org) and a link to salsa.debian.org. "
        "Write to debian-mentors at lists.debian.org."
    )
    assert speak_links(text, "skip") == "See the guide and. Write to."
    assert speak_links(text, "read") == text
    # a URL is a word of the text: the chunker never cuts it
    assert "://" not in " ".join(said(f"<p>{text}</p>"))


def test_a_navigation_table_is_no_table():
    assert (
        read_table(["Guide"], [["Prev", "", "Next"], ["One", "Home", "Two"]], ReadOptions()) == []
    )
    assert read_table(["Boat", "Crew"], [["Mary", "4"]], ReadOptions()) == ["Boat Mary, crew 4."]


def test_a_title_page_then_the_same_heading_is_said_once():
    markup = "<h1>The Manual</h1><h1>The Manual</h1>" + BODY + "<h1>Two</h1>" + BODY
    book = parse_html(f"<html><body>{markup}</body></html>")
    assert [c.title for c in book.chapters] == ["The Manual", "Two"]
    assert book.chapters[0].paragraphs.count("The Manual") == 1


def test_front_matter_is_not_chapter_one():
    book = Book("B", None, (Chapter(None, ("x",)), Chapter("One", ("y",)), Chapter(None, ("z",))))
    assert chapter_names(book) == ["Front matter", "One", "Chapter 2"]
    alone = Book("B", None, (Chapter(None, ("x",)), Chapter(None, ("y",))))
    assert chapter_names(alone) == ["Chapter 1", "Chapter 2"]


def test_the_dry_run_says_what_was_left_out(tmp_path):
    from ownvoice.audiobook.dryrun import dry_run

    class Backend:
        def identity(self):
            return {"voice": "ryan"}

    page = tmp_path / "m.html"
    page.write_text('<html><body><div class="toc"><a href="#a">A</a></div><pre>$ ls -l</pre>'
                    f'{BODY}</body></html>')  # fmt: skip
    text = dry_run(str(page), Backend(), measure=False).text
    assert "left out: 1 contents pages, 1 code blocks" in text


def test_the_command_takes_code_and_links(tmp_path, server, capsys):
    from ownvoice.cli import main

    page = tmp_path / "m.html"
    page.write_text("<html><body><p>See https://www.debian.org/doc/ first.</p>"
                    "<pre>$ dpkg-buildpackage -us -uc</pre></body></html>")  # fmt: skip
    outs = {}
    for flags in ([], ["--code", "read", "--links", "read"], ["--code", "skip", "--links", "skip"]):
        with pytest.raises(SystemExit) as done:
            main(["book", str(page), "--dry-run", "--server", server.url, "--voice", "ryan",
                  *flags])  # fmt: skip
        assert done.value.code == 0
        outs[" ".join(flags)] = capsys.readouterr().out
    assert "See a link to debian.org first." in outs[""] and CODE_NOTICE in outs[""]
    read = outs["--code read --links read"]
    assert "https://www.debian.org/doc/" in read and "$ dpkg-buildpackage -us -uc" in read
    skipped = outs["--code skip --links skip"]
    assert "See first." in skipped and "dpkg" not in skipped and CODE_NOTICE not in skipped
