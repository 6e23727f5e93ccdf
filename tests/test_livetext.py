"""LiveText decides a piece only as far as the whole text would: for any text and any prefix of
it, the pieces it calls decided are the first pieces of the HTTP split of the whole text, and
the open piece so far is the start of the next one (Hypothesis, many texts and languages)."""

from __future__ import annotations

import os

from hypothesis import given, settings
from hypothesis import strategies as st

from ownvoice.engine.tokenizer import TextTokenizer
from ownvoice.service.generation import PENDING
from ownvoice.service.livetext import LiveText, split_input

WORDS = ["Sure", "the", "weather", "Dr.", "Smith", "3.5", "km", "and", "so", "on", "U.S.",
         "e.g.", "Hello", "world", "it's", "well", "—", "(yes)", "\"quoted\"", "approx."]  # fmt: skip
ENDS = [".", "!", "?", ",", ";", ":", "", "", "", "..."]
GAPS = [" ", " ", " ", "  ", "\n", "\n\n", " \n "]


@st.composite
def texts(draw):
    parts = []
    for _ in range(draw(st.integers(1, 30))):
        parts.append(draw(st.sampled_from(WORDS)) + draw(st.sampled_from(ENDS)))
        parts.append(draw(st.sampled_from(GAPS)))
    return draw(st.sampled_from(["", " ", "\n"])) + "".join(parts)


@settings(max_examples=int(os.environ.get("OWNVOICE_LIVETEXT_EXAMPLES", 300)), deadline=None,
          database=None, derandomize=True)  # fmt: skip
@given(texts(), st.sampled_from([40, 80, 300]), st.sampled_from(["english", "auto", "german"]))
def test_what_is_decided_early_is_what_the_whole_text_gives(text, max_chars, language):
    final = split_input(text, max_chars, language)
    live = LiveText(max_chars, language, limit=10_000)
    for end in range(1, len(text) + 1):
        live.push(text[end - 1])
        k = 0
        while (now := live.piece(k)) is not PENDING and now is not None and now.final:
            assert k < len(final) and now.text == final[k], (text[:end], k)
            k += 1
        if now is not PENDING and now is not None and now.text:  # the open piece so far
            assert k < len(final) and final[k].startswith(now.text), (text[:end], now.text)
    live.close()
    assert [live.piece(k).text for k in range(len(final))] == final
    assert live.piece(len(final)) is None


def test_words_are_decided_before_the_sentence_ends():
    live = LiveText(300, "english", limit=10_000)
    live.push("The weather tomorrow looks")
    now = live.piece(0)
    assert not now.final and now.text.startswith("The weather tomorrow")
    assert live.piece(1) is PENDING
    # after a comma, the words wait for the sentence's end: were the clause that follows to
    # pass max_chars, the split would cut the sentence at the comma
    live = LiveText(300, "english", limit=10_000)
    live.push("Sure, the weather tomorrow looks")
    assert live.piece(0).text == "Sure,"
    live.push(" fine. And")
    assert live.piece(0).text == "Sure, the weather tomorrow looks fine."


def test_a_piece_ends_once_the_next_sentence_cannot_fit():
    live = LiveText(40, "english", limit=10_000)
    live.push("The first sentence is here. The second one is far too long to")
    assert live.piece(0).final and live.piece(0).text == "The first sentence is here."
    assert not live.piece(1).final


def test_the_stable_prefix_holds_back_only_the_last_pre_token():
    tok = TextTokenizer(None)
    assert tok.stable_prefix("Hello there, how are") == "Hello there, how"
    assert tok.stable_prefix("Hello there, ") == "Hello there,"
    assert tok.stable_prefix("It costs 3.") == "It costs 3"
    assert tok.stable_prefix("Hi") == ""


def test_a_text_closed_while_its_first_piece_is_read_still_has_that_piece():
    """The WebSocket's input.done can land while the engine's thread reads piece 0: the pieces
    and whether the text ended must come from the same reading, or the piece of a text with
    words looks like the end of an empty one (None) and the utterance ends with no audio."""
    live = LiveText(300, "english", limit=10_000)
    live.push("Hi")
    decide = live._decide

    def then_closed():
        decided = decide()  # the text as it was: open, nothing decided yet
        live.close()  # input.done arrives now
        return decided

    live._decide = then_closed
    now = live.piece(0)
    assert now is not None and not now.final, now  # the open text as read, not the end
    live._decide = decide
    assert live.piece(0).text == "Hi" and live.piece(0).final and live.piece(1) is None
