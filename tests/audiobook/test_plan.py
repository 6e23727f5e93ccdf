"""Planning a book: chunk sizes by script, the languages used, chunk order and pauses, and how
long a text should sound (the yardstick of runaway detection)."""

from __future__ import annotations

import pytest

from ownvoice.audiobook.document import Book, Chapter
from ownvoice.audiobook.options import Pauses
from ownvoice.audiobook.plan import (
    CHUNK_CHARS,
    CHUNK_CHARS_CJK,
    PlannedChunk,
    default_chunk_chars,
    expected_seconds,
    plan_chunks,
    split_language,
    synthesis_language,
)
from ownvoice.errors import InvalidInput


def book(*chapters: list[str], language: str | None = None) -> Book:
    return Book("T", "A", tuple(Chapter(None, tuple(p)) for p in chapters), language=language)


@pytest.mark.parametrize(
    "paragraphs, chars",
    [
        (["中中中中", "abcdefghi"], CHUNK_CHARS_CJK),  # 4 of 13 characters: more than 30 %
        (["中中中", "abcdefg"], CHUNK_CHARS),  # exactly 30 %: not more
        (["abc"] * 20 + ["中" * 100] * 5, CHUNK_CHARS),  # only the first 20 paragraphs count
        (["a" * 10_000, "b" * 9_999, "中" * 9_000], CHUNK_CHARS),  # and only 20 000 characters
    ],
)
def test_chunk_size_follows_the_script_of_the_opening(paragraphs, chars):
    assert default_chunk_chars(book(paragraphs)) == chars


def test_every_chapter_contributes_its_opening():
    assert default_chunk_chars(book(["abc"] * 25, ["中" * 80])) == CHUNK_CHARS_CJK


@pytest.mark.parametrize(
    "asked, declared, split, spoken",
    [
        ("german", "fr", "german", "german"),  # what is asked wins
        ("auto", "de-DE", "de", "german"),
        ("AUTO", "pt_BR", "pt", "portuguese"),
        ("auto", "zh", "zh", "chinese"),
        ("auto", "tlh", "tlh", "auto"),  # a code the model does not speak
        ("auto", "klingon-x", None, "auto"),  # not a code at all
        ("auto", None, None, "auto"),
    ],
)
def test_languages_come_from_the_request_then_the_book(asked, declared, split, spoken):
    b = book(["Hello."], language=declared)
    assert split_language(b, asked) == split
    assert synthesis_language(b, asked) == spoken


def test_chunks_are_numbered_in_reading_order_with_their_pauses():
    b = book(["One. Two.", "Three."], ["Four."])
    assert plan_chunks(b, 6) == [
        PlannedChunk(0, "One.", 0, "sentence"),
        PlannedChunk(1, "Two.", 0, "paragraph"),
        PlannedChunk(2, "Three.", 0, "chapter"),
        PlannedChunk(3, "Four.", 1, "end"),
    ]
    assert plan_chunks(book([]), 6) == []


def test_a_pause_tag_ends_its_chunk_and_sets_the_silence_after_it_exactly():
    b = book(["One. [pause:1.5] Two.", "[pause:300ms]Three. [PAUSE]"], ["Four."])
    chunks = plan_chunks(b, 200)
    assert chunks == [
        PlannedChunk(0, "One.", 0, "sentence", pause_s=1.5),
        PlannedChunk(1, "Two.", 0, "paragraph", pause_s=0.3),  # the next paragraph's leading tag
        PlannedChunk(2, "Three.", 0, "chapter", pause_s=0.5),
        PlannedChunk(3, "Four.", 1, "end"),
    ]
    pauses = Pauses()
    assert [c.gap(pauses) for c in chunks] == [1.5, 0.3, 0.5, pauses.tail]
    with pytest.raises(InvalidInput, match="pause:soon"):
        plan_chunks(book(["Wait [pause:soon] here."]), 200)


def test_chunks_are_split_in_the_language_given():
    b = book(["Er kam am 3. Mai an. Dann ging er."])
    assert [c.text for c in plan_chunks(b, 16, "german")] == [
        "Er kam am 3. Mai",
        "an.",
        "Dann ging er.",
    ]
    assert [c.text for c in plan_chunks(b, 16)] == ["Er kam am 3.", "Mai an.", "Dann ging er."]


@pytest.mark.parametrize(
    "text, seconds",
    [
        ("ab", 2 * 0.075),
        ("19", 2 * 0.25),
        ("中文", 2 * 0.2),
        ("。！？，、；：", 7 * 0.15),
        (".,;:!?", 6 * 0.15),
        (" -()\"'", 0.0),
        ("Hi, 2 中。", 2 * 0.075 + 0.15 + 0.25 + 0.2 + 0.15),
    ],
)
def test_expected_seconds_per_kind_of_character(text, seconds):
    assert expected_seconds(text) == pytest.approx(seconds)
