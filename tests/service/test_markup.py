"""A request's input read into parts: pause tags in plain text, the merging and splitting
rules every input shares, which input is SSML (has_markup, parse_input's input_format), and
the refusals, each with a message that names what to change."""

from __future__ import annotations

import pytest

from ownvoice.errors import InvalidInput
from ownvoice.service.markup import (
    MAX_PAUSE_S,
    Boundary,
    Pause,
    Span,
    assemble,
    duration_seconds,
    has_markup,
    parse_input,
    parse_text,
)


@pytest.mark.parametrize(
    "tag, seconds",
    [
        ("[pause:1.5]", 1.5),
        ("[pause:1.5s]", 1.5),
        ("[pause:300ms]", 0.3),
        ("[pause:2]", 2.0),
        ("[pause:.25]", 0.25),
        ("[pause]", 0.5),
        ("[PAUSE:1S]", 1.0),
        ("[Pause:250MS]", 0.25),
        ("[ pause : 2 ]", 2.0),
        ("[pause: 1.5 s]", 1.5),
    ],
)
def test_pause_tag_forms(tag, seconds):
    assert parse_input(f"Hello {tag} world") == [Span("Hello"), Pause(seconds), Span("world")]


def test_pause_tags_split_text_in_order():
    parts = parse_input("One. [pause:1] Two. [pause:300ms] Three.")
    assert parts == [Span("One."), Pause(1.0), Span("Two."), Pause(0.3), Span("Three.")]


def test_text_without_tags_is_one_stripped_span_with_its_inner_whitespace():
    assert parse_input("  Hello,\n  world.  ") == [Span("Hello,\n  world.")]


def test_text_like_a_tag_but_not_one_is_spoken():
    # [paused] and [pauses:1] are words in brackets, not tags
    text = "He [paused] and [pauses:1] went on"
    assert parse_input(text) == [Span(text)]


def test_a_long_pause_is_clamped_not_refused():
    assert parse_input("a [pause:60] b") == [Span("a"), Pause(MAX_PAUSE_S), Span("b")]
    assert parse_input("a [pause:99999ms] b")[1] == Pause(MAX_PAUSE_S)


def test_adjacent_pauses_are_summed_then_clamped():
    assert parse_input("a [pause:1][pause:2] [pause] b") == [Span("a"), Pause(3.5), Span("b")]
    assert parse_input("a [pause:6] [pause:6] b") == [Span("a"), Pause(MAX_PAUSE_S), Span("b")]


def test_leading_and_trailing_pauses_are_kept():
    parts = parse_input("[pause:1] Hello [pause:2]")
    assert parts == [Pause(1.0), Span("Hello"), Pause(2.0)]


def test_a_zero_pause_separates_spans_without_silence():
    assert parse_input("Hello [pause:0] world") == [Span("Hello"), Span("world")]


def test_only_tags_give_only_pauses_from_parse_text():
    assert parse_text("  [pause:1]  [pause:2] ") == [Pause(3.0)]
    assert parse_text("   ") == []


@pytest.mark.parametrize("text", ["", "   ", "[pause:1]", " [pause] [pause:2s] "])
def test_parse_input_refuses_input_with_nothing_to_speak(text):
    with pytest.raises(InvalidInput, match="input has nothing to speak") as e:
        parse_input(text)
    assert e.value.param == "input"


@pytest.mark.parametrize("tag", ["[pause:abc]", "[pause:-1]", "[pause:]", "[pause:1.5 min]"])
def test_a_bad_pause_value_is_refused_quoting_the_tag(tag):
    with pytest.raises(InvalidInput) as e:
        parse_input(f"Hello {tag} world")
    assert e.value.param == "input"
    assert repr(tag) in e.value.message
    assert "[pause:300ms]" in e.value.message  # says what would be accepted


@pytest.mark.parametrize(
    "value, seconds",
    [("1.5", 1.5), ("1.5s", 1.5), ("300ms", 0.3), (" 2 ", 2.0), ("0", 0.0), ("20", 20.0)],
)
def test_duration_seconds(value, seconds):
    assert duration_seconds(value) == pytest.approx(seconds)


@pytest.mark.parametrize("value", ["", "abc", "-1", "1.5m", "1e3", "s", "1,5"])
def test_duration_seconds_refuses_what_is_not_a_duration(value):
    assert duration_seconds(value) is None


# -- the rules every input shares (SSML builds its pieces into parts the same way) --


def test_touching_pieces_with_the_same_voice_are_joined_as_written():
    parts = assemble([Span("I said "), Span("no"), Span(". Un"), Span("til")])
    assert parts == [Span("I said no. Until")]


def test_pieces_with_another_voice_language_or_rate_stay_apart():
    pieces = [Span("a"), Span("b", voice="x"), Span("c", language="de"), Span("d", rate=2.0)]
    assert assemble(pieces) == pieces


def test_spans_that_meet_once_an_empty_one_is_dropped_are_joined_with_one_space():
    parts = assemble([Span("a"), Span("   ", voice="x"), Span("b")])
    assert parts == [Span("a b")]


def test_collapse_whitespace_makes_runs_one_space():
    parts = assemble([Span("  a \n\t b  "), Span(" c")], collapse_whitespace=True)
    assert parts == [Span("a b c")]


def test_a_boundary_separates_spans_and_adds_its_silence_only_between_spans():
    pieces = [Boundary(0.75), Span("a"), Boundary(0.75), Boundary(0.75), Span("b"), Boundary(0.75)]
    assert assemble(pieces) == [Span("a"), Pause(0.75), Span("b")]


def test_a_zero_boundary_separates_spans_without_silence():
    assert assemble([Span("a"), Boundary(), Span("a")]) == [Span("a"), Span("a")]


def test_a_pause_and_a_boundary_between_spans_add_up():
    pieces = [Span("a"), Boundary(0.75), Pause(1.0), Boundary(0.75), Span("b")]
    assert assemble(pieces) == [Span("a"), Pause(1.75), Span("b")]


def test_pause_tags_inside_a_piece_keep_the_piece_voice():
    parts = assemble([Span("a [pause:1] b", voice="x", rate=1.5)])
    assert parts == [Span("a", voice="x", rate=1.5), Pause(1.0), Span("b", voice="x", rate=1.5)]


# -- which input is markup, and how parse_input reads it --


@pytest.mark.parametrize(
    "text",
    [
        "<speak>Hello</speak>",
        "  \n<speak version='1.0'>Hello</speak>",
        "<speak/>",
        "<?xml version='1.0' encoding='UTF-8'?>\n<speak>Hello</speak>",
        "\ufeff<speak>Hello</speak>",
        "Hello [pause] world",
    ],
)
def test_has_markup_recognises_ssml_and_pause_tags(text):
    assert has_markup(text, None)
    assert has_markup(text, "text")


@pytest.mark.parametrize(
    "text",
    [
        "Hello world",
        "Type <speak>Hello</speak> to use SSML",
        "<speaker>Hello</speaker>",
        "<p>Hello</p>",
        "<?xml version='1.0'?> no speak here",
    ],
)
def test_has_markup_leaves_plain_text_alone(text):
    assert not has_markup(text, None)
    assert not has_markup(text, "text")


def test_has_markup_is_true_for_ssml_or_an_unknown_format():
    assert has_markup("Hello", "ssml")
    assert has_markup("Hello", "markdown")  # parse_input is the one to refuse it


def test_speak_first_is_read_as_ssml():
    parts = parse_input("<speak>Hello <break time='1s'/> world</speak>")
    assert parts == [Span("Hello"), Pause(1.0), Span("world")]


def test_an_xml_declaration_before_speak_is_read_as_ssml():
    parts = parse_input("<?xml version='1.0'?>\n<speak>Hello<break/>world</speak>")
    assert parts == [Span("Hello"), Pause(0.5), Span("world")]


def test_speak_in_the_middle_of_plain_text_is_spoken_as_written():
    text = "Wrap it in <speak> and </speak> tags"
    assert parse_input(text) == [Span(text)]


def test_input_format_text_speaks_ssml_as_written_but_honours_pause_tags():
    parts = parse_input("<speak>Hi</speak> [pause:1] there", input_format="text")
    assert parts == [Span("<speak>Hi</speak>"), Pause(1.0), Span("there")]


def test_input_format_ssml_reads_ssml():
    parts = parse_input("<speak><voice name='ryan'>Hi</voice></speak>", input_format="ssml")
    assert parts == [Span("Hi", voice="ryan")]


@pytest.mark.parametrize("text", ["Just some text", "<p>Not rooted at speak</p>"])
def test_input_format_ssml_refuses_a_document_not_rooted_at_speak(text):
    with pytest.raises(InvalidInput, match="speak") as e:
        parse_input(text, input_format="ssml")
    assert e.value.param == "input"


def test_parse_input_passes_the_request_language_to_say_as():
    text = "<speak><say-as interpret-as='cardinal'>21</say-as></speak>"
    assert parse_input(text, language="de") == [Span("einundzwanzig")]
    assert parse_input(text) == [Span("twenty-one")]


@pytest.mark.parametrize("fmt", ["SSML", "markdown", "", "xml"])
def test_an_unknown_input_format_is_refused_naming_the_choices(fmt):
    with pytest.raises(InvalidInput) as e:
        parse_input("Hello", input_format=fmt)
    assert e.value.param == "input_format"
    assert "'text'" in e.value.message and "'ssml'" in e.value.message
