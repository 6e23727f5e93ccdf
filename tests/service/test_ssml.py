"""SSML read into parts: every supported element and attribute, nesting, and each refusal with
a message that names the element, attribute or value to change; then <say-as>'s words
(sayas.py) in English, German and French, checked against num2words where it says them."""

from __future__ import annotations

import pytest
from num2words import num2words

from ownvoice.errors import InvalidInput
from ownvoice.service.markup import MAX_PAUSE_S, Pause, Span
from ownvoice.service.sayas import language_code, say_as
from ownvoice.service.ssml import SUPPORTED, parse_ssml


def ssml(body: str, **kwargs) -> list:
    return parse_ssml(f"<speak>{body}</speak>", **kwargs)


def refusal(text: str) -> InvalidInput:
    with pytest.raises(InvalidInput) as e:
        parse_ssml(text)
    assert e.value.param == "input"
    return e.value


# -- the document --


def test_speak_attributes_and_namespaces_are_accepted():
    text = (
        '<?xml version="1.0"?><speak version="1.1" xmlns="http://www.w3.org/2001/10/synthesis" '
        'xmlns:mstts="https://www.w3.org/2001/mstts">Hello</speak>'
    )
    assert parse_ssml(text) == [Span("Hello")]


def test_speak_xml_lang_sets_the_document_language():
    assert parse_ssml('<speak xml:lang="de-DE">Hallo</speak>') == [Span("Hallo", language="de-DE")]


def test_whitespace_runs_collapse_and_spans_are_stripped():
    assert ssml("\n   Hello,\n\t  world.  \n") == [Span("Hello, world.")]


def test_entities_and_character_references_are_text():
    assert ssml("Tom &amp; Jerry &lt;3 caf&#233; &#x263A;") == [Span("Tom & Jerry <3 café ☺")]


def test_pause_tags_in_text_nodes_are_honoured():
    assert ssml("Hello [pause:2] world") == [Span("Hello"), Pause(2.0), Span("world")]


def test_comments_are_ignored_and_text_around_them_joined_as_written():
    assert ssml("Hel<!-- a comment -->lo") == [Span("Hello")]


@pytest.mark.parametrize(
    "body", ["", "   ", "<break time='1s'/>", "<p> </p>", "<sub alias=''>x</sub>"]
)
def test_a_document_with_nothing_to_speak_is_refused(body):
    assert "input has nothing to speak" in refusal(f"<speak>{body}</speak>").message


def test_a_malformed_document_names_expat_message_and_its_line():
    message = refusal("<speak>\nHello\n<break time='1s'>\n</speak>").message
    assert message.startswith("input is not well-formed SSML: mismatched tag at line 4, column")


def test_an_undefined_entity_is_malformed():
    assert "undefined entity at line 1" in refusal("<speak>&nbsp;</speak>").message


@pytest.mark.parametrize(
    "doctype",
    [
        '<!DOCTYPE speak [<!ENTITY lol "lol">]>',
        '<!DOCTYPE speak [<!ENTITY xxe SYSTEM "file:///etc/passwd">]>',
        '<!DOCTYPE speak [<!ENTITY pic SYSTEM "a.png" NDATA png>]>',
        '<!DOCTYPE speak [<!ENTITY % p SYSTEM "http://example.invalid/x"> %p;]>',
    ],
)
def test_entity_declarations_are_refused(doctype):
    message = refusal(f"{doctype}<speak>Hello</speak>").message
    assert "may not declare entities" in message


def test_an_external_dtd_is_never_read_and_its_entities_are_refused():
    dtd = '<!DOCTYPE speak SYSTEM "http://example.invalid/speak.dtd">'
    assert parse_ssml(f"{dtd}<speak>Hi</speak>") == [Span("Hi")]
    assert "may not declare entities" in refusal(f"{dtd}<speak>Hi &foo;</speak>").message


def test_the_root_must_be_speak():
    assert "rooted at <speak>; found <p>" in refusal("<p>Hello</p>").message


def test_plain_text_given_as_ssml_is_refused_with_what_to_do():
    assert "wrap the text in <speak>" in refusal("Hello world").message


def test_speak_inside_speak_is_refused():
    assert "only as the root" in refusal("<speak><speak>Hi</speak></speak>").message


def test_nesting_deeper_than_64_is_refused():
    deep = "<s>" * 64 + "Hi" + "</s>" * 64
    assert "64 deep" in refusal(f"<speak>{deep}</speak>").message
    shallow = "<s>" * 63 + "Hi" + "</s>" * 63
    assert ssml(shallow) == [Span("Hi")]


@pytest.mark.parametrize("element", ["audio", "mark", "phoneme", "mstts:express-as", "bookmark"])
def test_an_unsupported_element_is_refused_by_name_listing_the_supported(element):
    message = refusal(f"<speak><{element}>Hi</{element}></speak>").message
    assert message.startswith(f"SSML element <{element}> is not supported; supported: ")
    assert ", ".join(SUPPORTED) in message


@pytest.mark.parametrize(
    "tag, message",
    [
        ('<prosody pitch="high">', "SSML <prosody pitch> is not supported; only rate"),
        ('<prosody volume="loud">', "SSML <prosody volume> is not supported; only rate"),
        ('<voice gender="female">', "SSML <voice gender> is not supported; only name"),
        ('<voice name="a" languages="en">', "SSML <voice languages> is not supported; only name"),
        ('<p id="x">', "SSML <p id> is not supported; only xml:lang"),
        ('<voice name="a" mstts:x="1">', "SSML <voice mstts:x> is not supported; only name"),
        ('<s xmlns="urn:x">', "SSML <s xmlns> is not supported; only xml:lang"),
        ('<sub alias="a" xml:lang="de">', "SSML <sub xml:lang> is not supported; only alias"),
    ],
)
def test_an_unsupported_attribute_is_refused_by_name(tag, message):
    element = tag[1:].split()[0]
    assert refusal(f"<speak>{tag}Hi</{element}></speak>").message.startswith(message)


def test_an_unsupported_speak_attribute_is_refused():
    assert "<speak onlangfailure>" in refusal('<speak onlangfailure="x">Hi</speak>').message


# -- <break> --


@pytest.mark.parametrize(
    "attrs, seconds",
    [('time="500ms"', 0.5), ('time="1.5s"', 1.5), ('time="2"', 2.0), ('time="2S"', 2.0),
     ('strength="x-weak"', 0.1), ('strength="weak"', 0.25), ('strength="medium"', 0.5),
     ('strength="strong"', 0.75), ('strength="x-strong"', 1.0), ("", 0.5),
     ('time="3s" strength="weak"', 3.0), ('time="60s"', MAX_PAUSE_S)],
)  # fmt: skip
def test_break_gives_a_pause(attrs, seconds):
    assert ssml(f"a<break {attrs}/>b") == [Span("a"), Pause(seconds), Span("b")]


@pytest.mark.parametrize("attrs", ['time="0"', 'time="0ms"', 'strength="none"'])
def test_a_zero_break_separates_spans_without_a_pause(attrs):
    assert ssml(f"a <break {attrs}/> b") == [Span("a"), Span("b")]


def test_breaks_that_touch_are_summed():
    assert ssml('a<break time="1s"/> <break time="2s"/>b') == [Span("a"), Pause(3.0), Span("b")]


@pytest.mark.parametrize(
    "attrs, quoted",
    [('time="fast"', "'fast'"), ('time="-1s"', "'-1s'"), ('strength="loud"', "'loud'")],
)
def test_a_bad_break_value_is_refused_naming_it(attrs, quoted):
    assert quoted in refusal(f"<speak>a<break {attrs}/>b</speak>").message


@pytest.mark.parametrize("content", ["text", "<s>text</s>"])
def test_break_must_be_empty(content):
    assert "<break> must be empty" in refusal(f"<speak><break>{content}</break></speak>").message


# -- <p> and <s> --


def test_paragraphs_are_their_own_spans_with_a_strong_pause_between():
    parts = ssml("Intro <p>One. Two.</p><p>Three.</p> Outro")
    pause = Pause(0.75)
    assert parts == [Span("Intro"), pause, Span("One. Two."), pause, Span("Three."), pause,
                     Span("Outro")]  # fmt: skip


def test_a_paragraph_at_the_edges_adds_no_silence():
    assert ssml("<p>One.</p>") == [Span("One.")]


def test_sentences_are_their_own_spans_without_silence():
    assert ssml("<s>One.</s> <s>Two.</s> three") == [Span("One."), Span("Two."), Span("three")]


def test_xml_lang_on_a_paragraph_sets_its_language():
    assert ssml('<p xml:lang="fr">Salut</p>') == [Span("Salut", language="fr")]


# -- <voice>, <prosody>, <lang> --


def test_voice_sets_the_voice_of_its_content():
    parts = ssml('Hi <voice name="Uncle Fu">there</voice> you')
    assert parts == [Span("Hi"), Span("there", voice="Uncle Fu"), Span("you")]


@pytest.mark.parametrize("tag", ["<voice>", '<voice name="  ">'])
def test_voice_needs_a_name(tag):
    assert "<voice> needs a name" in refusal(f"<speak>{tag}Hi</voice></speak>").message


@pytest.mark.parametrize(
    "rate, multiplier",
    [("x-slow", 0.5), ("slow", 0.75), ("medium", 1.0), ("fast", 1.25), ("X-FAST", 1.5),
     ("default", 1.0), ("150%", 1.5), ("+20%", 1.2), ("-10%", 0.9), ("1.2", 1.2), ("0.5", 0.5)],
)  # fmt: skip
def test_prosody_rate(rate, multiplier):
    [span] = ssml(f'<prosody rate="{rate}">Hi</prosody>')
    assert span.rate == pytest.approx(multiplier)


def test_prosody_without_rate_keeps_the_rate():
    assert ssml("<prosody>Hi</prosody>") == [Span("Hi")]


@pytest.mark.parametrize("rate", ["0", "0%", "-100%", "-150%", "quick", "+1.2", "-1", "1.2x"])
def test_a_bad_rate_is_refused_naming_it(rate):
    message = refusal(f'<speak><prosody rate="{rate}">Hi</prosody></speak>').message
    assert f"rate={rate!r}> is not a rate" in message


def test_voice_in_a_paragraph_with_nested_prosody_multiplies_rates():
    parts = ssml(
        '<p><voice name="ryan">Slow <prosody rate="50%">slower <prosody rate="x-fast">'
        "back</prosody></prosody></voice></p> Done"
    )
    assert parts == [
        Span("Slow", voice="ryan"),
        Span("slower", voice="ryan", rate=0.5),
        Span("back", voice="ryan", rate=0.75),
        Pause(0.75),
        Span("Done"),
    ]


def test_lang_sets_the_language_as_written():
    parts = ssml('Say <lang xml:lang="de-DE">Guten Tag</lang> now')
    assert parts == [Span("Say"), Span("Guten Tag", language="de-DE"), Span("now")]


@pytest.mark.parametrize("tag", ["<lang>", '<lang xml:lang="">'])
def test_lang_needs_a_language(tag):
    message = refusal(f"<speak>{tag}Hi</lang></speak>").message
    assert "<lang" in message and "xml:lang" in message


# -- <sub>, <emphasis>, <say-as> --


def test_sub_speaks_its_alias_instead_of_its_content():
    assert ssml('The <sub alias="World Wide Web">WWW</sub> is big') == [
        Span("The World Wide Web is big")
    ]


def test_sub_needs_an_alias_and_only_text():
    assert "<sub> needs alias" in refusal("<speak><sub>WWW</sub></speak>").message
    message = refusal('<speak><sub alias="a"><emphasis>b</emphasis></sub></speak>').message
    assert "<sub> may contain only text; found <emphasis>" in message


def test_emphasis_is_read_as_plain_text():
    assert ssml('I said <emphasis level="strong">no</emphasis>.') == [Span("I said no.")]


def test_say_as_speaks_words_in_the_text():
    parts = ssml('Born <say-as interpret-as="date" format="dmy">7/12/2026</say-as>.')
    assert parts == [Span("Born December seventh, twenty twenty-six.")]


def test_say_as_uses_the_innermost_language_then_the_request_language():
    body = '<say-as interpret-as="cardinal">21</say-as>'
    de, fr = num2words(21, lang="de"), num2words(21, lang="fr")
    assert ssml(f'<lang xml:lang="de-DE">{body}</lang>') == [Span(de, language="de-DE")]
    assert ssml(body, language="fr") == [Span(fr)]
    assert ssml(f'<lang xml:lang="fr"><lang xml:lang="de">{body}</lang></lang>', language="en") == [
        Span(de, language="de")
    ]


def test_say_as_detail_is_ignored():
    assert ssml('<say-as interpret-as="cardinal" detail="2">5</say-as>') == [Span("five")]


@pytest.mark.parametrize(
    "tag, says",
    [
        ('<say-as interpret-as="currency">', "interpret-as 'currency' is not supported"),
        ('<say-as interpret-as="cardinal" format="dmy">', "applies only to interpret-as 'date'"),
        ("<say-as>", "<say-as> needs interpret-as"),
        ('<say-as interpret-as="date" format="qq">', "'qq' is not a date format"),
    ],
)
def test_bad_say_as_attributes_are_refused(tag, says):
    assert says in refusal(f"<speak>{tag}12</say-as></speak>").message


def test_say_as_content_that_is_not_what_it_says_is_refused_quoting_it():
    message = refusal('<speak><say-as interpret-as="cardinal">twelve</say-as></speak>').message
    assert "'twelve' is not a number" in message
    message = refusal('<speak><say-as interpret-as="date">2026-13-01</say-as></speak>').message
    assert "'2026-13-01'" in message and "month from 1 to 12" in message


# -- say_as itself --


@pytest.mark.parametrize(
    "text, kind, fmt, words",
    [
        ("2026-12-07", "date", None, "December seventh, twenty twenty-six"),
        ("12/07/2026", "date", None, "December seventh, twenty twenty-six"),
        ("07.12.2026", "date", "dmy", "December seventh, twenty twenty-six"),
        ("2026/12/07", "date", None, "December seventh, twenty twenty-six"),
        ("12/7", "date", "md", "December seventh"),
        ("7-12", "date", "dm", "December seventh"),
        ("12/2026", "date", "my", "December twenty twenty-six"),
        ("2026", "date", "y", "twenty twenty-six"),
        ("12", "date", "m", "December"),
        ("7", "date", "d", "seventh"),
        ("2/29", "date", "md", "February twenty-ninth"),
        ("1,234", "cardinal", None, "one thousand, two hundred and thirty-four"),
        ("-12", "number", None, "minus twelve"),
        ("3.5", "cardinal", None, "three point five"),
        ("21st", "ordinal", None, "twenty-first"),
        ("3rd", "ordinal", None, "third"),
        ("3", "ordinal", None, "third"),
        ("ABC123", "characters", None, "A B C 1 2 3"),
        ("AB-12 cd", "spell-out", None, "A B 1 2, c d"),
        ("555.1234", "telephone", None, "five five five, one two three four"),
    ],
)
def test_say_as_in_english(text, kind, fmt, words):
    assert say_as(text, kind, "en", fmt) == words
    assert say_as(text, kind, None, fmt) == words  # English when no language is in force


def test_say_as_telephone_speaks_digits_by_group():
    said = say_as("+1 (555) 010-0199", "telephone", "en")
    assert said == "plus one, five five five, zero one zero, zero one nine nine"


def test_say_as_cardinal_in_german_and_french_reads_their_separators():
    assert say_as("1.234", "cardinal", "de") == num2words(1234, lang="de")
    assert say_as("1.234,5", "cardinal", "de-DE") == num2words(1234.5, lang="de")
    assert say_as("3.5", "cardinal", "de") == num2words(3.5, lang="de")  # a plain 3.5 too
    assert say_as("1 234,5", "cardinal", "fr") == num2words(1234.5, lang="fr")
    assert say_as("1234", "cardinal", "french") == num2words(1234, lang="fr")


def test_say_as_ordinal_in_german_and_french():
    assert say_as("3.", "ordinal", "de") == num2words(3, lang="de", to="ordinal")
    assert say_as("1er", "ordinal", "fr") == num2words(1, lang="fr", to="ordinal")


def test_say_as_date_in_german_french_and_spanish():
    month_de, month_fr = "Dezember", "décembre"
    de_year, fr_year = num2words(2026, lang="de", to="year"), num2words(2026, lang="fr", to="year")
    de_day = num2words(7, lang="de", to="ordinal")
    assert say_as("07.12.2026", "date", "de") == f"{de_day} {month_de} {de_year}"
    assert say_as("7/12/2026", "date", "fr") == f"{num2words(7, lang='fr')} {month_fr} {fr_year}"
    assert say_as("1/12/2026", "date", "fr").startswith("premier décembre")
    assert say_as("7/12", "date", "es", "dm") == f"{num2words(7, lang='es')} de diciembre"


def test_say_as_date_in_chinese_japanese_and_korean_keeps_digits():
    assert say_as("2026-12-07", "date", "ja") == "2026年12月7日"
    assert say_as("2026/12/7", "date", "zh") == "2026年12月7日"
    assert say_as("2026-12-07", "date", "ko") == "2026년 12월 7일"


def test_say_as_numbers_stay_digits_in_chinese_and_use_num2words_in_japanese():
    assert say_as("1,234", "cardinal", "zh") == "1234"
    assert say_as("3", "ordinal", "zh-CN") == "第3"
    assert say_as("7", "cardinal", "ja") == num2words(7, lang="ja")
    assert say_as("12", "telephone", "ko") == f"{num2words(1, lang='ko')} {num2words(2, lang='ko')}"


def test_say_as_telephone_in_german_and_french():
    one, two = num2words(1, lang="de"), num2words(2, lang="de")
    assert say_as("+1 2", "telephone", "de") == f"plus {one}, {two}"
    assert say_as("12", "telephone", "fr") == f"{num2words(1, lang='fr')} {num2words(2, lang='fr')}"


@pytest.mark.parametrize(
    "language, code",
    [("en", "en"), ("de-DE", "de"), ("pt_BR", "pt"), ("english", "en"), ("German", "de"),
     (None, "en"), ("auto", "en"), ("nl-BE", "nl"), ("xx", "en")],
)  # fmt: skip
def test_language_code(language, code):
    assert language_code(language) == code


@pytest.mark.parametrize(
    "text, kind, fmt, quoted",
    [
        ("12a", "cardinal", None, "'12a'"),
        ("1,2345", "cardinal", None, "'1,2345'"),
        ("", "number", None, "''"),
        ("9" * 31, "cardinal", None, "at most 30 digits"),
        ("third", "ordinal", None, "'third'"),
        ("-3", "ordinal", None, "'-3'"),
        ("2026-12-32", "date", None, "day from 1 to 31"),
        ("2/30/2026", "date", None, "day from 1 to 28"),
        ("12/07", "date", None, "format 'mdy'"),
        ("Dec 7", "date", None, "'Dec 7'"),
        ("555-CALL", "telephone", None, "'555-CALL'"),
        ("++1", "telephone", None, "'++1'"),
        ("--", "characters", None, "'--'"),
        ("5", "roman", None, "'roman' is not supported"),
        ("5", "cardinal", "dmy", "applies only to interpret-as 'date'"),
    ],
)
def test_say_as_refuses_bad_input_quoting_it(text, kind, fmt, quoted):
    with pytest.raises(InvalidInput) as e:
        say_as(text, kind, "en", fmt)
    assert e.value.param == "input"
    assert quoted in e.value.message
