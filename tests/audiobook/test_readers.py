"""Reading .txt, .md and stdin, and planning chunks with the right pauses."""

from __future__ import annotations

import io
import sys

import pytest

from ownvoice.audiobook.document import Book, Chapter, ReadOptions
from ownvoice.audiobook.furniture import CODE_NOTICE
from ownvoice.audiobook.markdown import parse_markdown
from ownvoice.audiobook.plan import default_chunk_chars, expected_seconds, plan_chunks
from ownvoice.audiobook.reader import read_book
from ownvoice.errors import InvalidInput
from tests.audiobook.conftest import STORY_CHUNK_CHARS, STORY_CHUNKS, STORY_GAPS, story_texts


def test_markdown_chapters_come_from_headings_and_markup_is_not_spoken():
    md = """---
title: "The Tale"
author: Ann Author
---
# Chapter One

It was a *dark* and **stormy** night. See [the map](http://x.y/map) and ![a pic](a.png).
The snake_case_name stays.

- first item
- second item

### A section

```
code_is_not_read()
```

Chapter Two
-----------

> A quote that
> wraps.

<!-- a comment -->
Last words.
"""
    book = parse_markdown(md)
    assert (book.title, book.author) == ("The Tale", "Ann Author")
    assert [c.title for c in book.chapters] == ["Chapter One", "Chapter Two"]
    assert book.chapters[0].paragraphs == (
        "Chapter One",
        "It was a dark and stormy night. See the map and. The snake_case_name stays.",
        "first item",
        "second item",
        "A section",
        CODE_NOTICE,  # the code block, announced (ReadOptions.code)
    )
    assert book.chapters[1].paragraphs == ("Chapter Two", "A quote that wraps.", "Last words.")
    skipped = parse_markdown(md, options=ReadOptions(code="skip")).chapters[0].paragraphs
    assert skipped == book.chapters[0].paragraphs[:-1]
    read = parse_markdown(md, options=ReadOptions(code="read")).chapters[0].paragraphs
    assert read[-1] == "code_is_not_read()"


def test_a_book_title_heading_folds_into_the_first_chapter():
    book = parse_markdown("# My Book\n\n## Chapter 1\n\nText here.\n\n## Chapter 2\n\nMore text.\n")
    assert [c.title for c in book.chapters] == ["My Book — Chapter 1", "Chapter 2"]
    assert book.chapters[0].paragraphs == ("My Book", "Chapter 1", "Text here.")


def test_text_file_is_one_chapter_of_paragraphs(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_bytes("\ufeffFirst line\nwrapped.\n\n\nSecond paragraph.\n".encode())
    book = read_book(str(path))
    assert book.title == "notes"
    assert book.chapters == (Chapter(None, ("First line wrapped.", "Second paragraph.")),)


def test_stdin_is_read_as_text_or_markdown(monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"# Head\n\nBody text.\n")))
    book = read_book("-", "md")
    assert [c.title for c in book.chapters] == ["Head"]


@pytest.mark.parametrize(
    "name, data, message",
    [
        ("latin.txt", "caf\xe9".encode("latin-1"), "not UTF-8"),
        ("empty.md", b"# \n\n---\n", "no text to read"),
        ("book.docx", b"x", "not a readable Word document"),
        ("book.pdf", b"x", "not a readable PDF"),
        ("book.odt", b"x", "cannot tell the format"),
    ],
)
def test_unreadable_input_is_a_clear_error(tmp_path, name, data, message):
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(InvalidInput, match=message):
        read_book(str(path))


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(InvalidInput, match="does not exist"):
        read_book(str(tmp_path / "nope.txt"))


def test_story_plan_has_the_chunks_and_pauses_its_structure_implies(story):
    plan = plan_chunks(read_book(str(story)), STORY_CHUNK_CHARS)
    assert [c.text for c in plan] == story_texts()
    assert len(plan) == STORY_CHUNKS and plan[-1].pause == "end"
    for kind, n in STORY_GAPS.items():
        assert sum(c.pause == kind for c in plan) == n
    assert [c.chapter for c in plan] == [0] * 8 + [1] * 8
    assert all(len(c.text) <= STORY_CHUNK_CHARS for c in plan)


def test_cjk_books_get_shorter_chunks():
    zh = Book("t", None, (Chapter(None, ("今天天气很好。" * 30,)),))
    en = Book("t", None, (Chapter(None, ("The weather is fine. " * 30,)),))
    assert default_chunk_chars(zh) < default_chunk_chars(en)


def test_expected_duration_counts_scripts_and_digits():
    assert expected_seconds("Hello world.") == pytest.approx(10 * 0.075 + 0.15)
    assert expected_seconds("1999") > expected_seconds("abcd")
    assert expected_seconds("你好世界") > expected_seconds("abcd")
