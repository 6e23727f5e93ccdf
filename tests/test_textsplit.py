"""Sentence splitting and chunking: what the server and the audiobook rely on."""

import pytest

from ownvoice.errors import InvalidInput
from ownvoice.textsplit import (
    TextChunk,
    chunk_paragraphs,
    chunk_text,
    cjk_fraction,
    hard_split,
    is_cjk,
    language_code,
    pack,
    split_paragraphs,
    split_sentences,
)


def _letters(text: str) -> str:
    return "".join(text.split())


def test_english_keeps_abbreviations_and_numbers():
    text = "Dr. Smith paid $3.50 at 5 p.m. on Jan. 5th, 2024. He left! Did he? Yes."
    got = split_sentences(text, "english")
    assert got == [
        "Dr. Smith paid $3.50 at 5 p.m. on Jan. 5th, 2024.",
        "He left!",
        "Did he?",
        "Yes.",
    ]


def test_german_keeps_ordinal_dates_and_abbreviations():
    text = "Dr. Müller kam am 3. Mai um 14 Uhr. Er brachte z.B. Kuchen mit. Alle freuten sich."
    got = split_sentences(text, "german")
    assert got == [
        "Dr. Müller kam am 3. Mai um 14 Uhr.",
        "Er brachte z.B. Kuchen mit.",
        "Alle freuten sich.",
    ]


def test_chinese_splits_on_full_width_punctuation_without_spaces():
    got = split_sentences("今天天气很好。我们去公园吧！你想去吗？好的", "chinese")
    assert got == ["今天天气很好。", "我们去公园吧！", "你想去吗？", "好的"]


def test_japanese_splits_with_auto_language():
    got = split_sentences("今日はいい天気です。公園に行きましょう！行きたいですか？", "auto")
    assert got == ["今日はいい天気です。", "公園に行きましょう！", "行きたいですか？"]


@pytest.mark.parametrize(
    "language, text, code",
    [
        ("english", "", "en"),
        ("German", "", "de"),
        ("pt-BR", "", "pt"),
        ("auto", "今日はいい天気です", "ja"),
        (None, "今天天气很好", "zh"),
        ("auto", "안녕하세요", "ko"),
        ("auto", "Привет, мир", "ru"),
        ("auto", "Hello there", "en"),
    ],
)
def test_language_names_codes_and_guessing(language, text, code):
    assert language_code(language, text) == code


def test_unknown_language_name_is_a_clear_error():
    with pytest.raises(InvalidInput, match="language must be"):
        language_code("klingonese")


def test_chunks_merge_sentences_up_to_the_limit():
    sentences = [f"Sentence number {i} is here." for i in range(20)]  # 26-27 chars each
    chunks = chunk_text(" ".join(sentences), max_chars=100)
    assert all(len(c) <= 100 for c in chunks), [len(c) for c in chunks]
    assert len(chunks) < len(sentences)
    # nothing lost, nothing split inside a sentence
    assert " ".join(chunks) == " ".join(sentences)
    for chunk in chunks:
        assert chunk.endswith("here.")


@pytest.mark.parametrize(
    "chunker", [chunk_text, lambda t, n: [c.text for c in chunk_paragraphs(t, n)]]
)
def test_the_limit_is_exact_at_under_and_over(chunker):
    """Two sentences whose join is exactly the limit are one request; one character less and
    they are two. A sentence of exactly the limit is kept whole; one more and it is cut."""
    a, b = "The first sentence ends here.", "And the second one too."
    joined = len(a) + 1 + len(b)
    assert chunker(f"{a} {b}", joined) == [f"{a} {b}"]
    assert chunker(f"{a} {b}", joined - 1) == [a, b]
    long = "Words without any punctuation go on and on until the very end."
    assert chunker(long, len(long)) == [long]
    cut = chunker(long, len(long) - 1)
    assert len(cut) == 2 and all(len(c) <= len(long) - 1 for c in cut)
    assert " ".join(cut) == long


def test_a_url_is_never_cut_at_its_own_punctuation():
    url = "https://www.debian.org/doc/debian-policy/ch-controlfields.html#s-f-vcs-fields"
    text = f"Read the policy at [{url}] before you upload anything, and see also the manual."
    chunks = chunk_text(text, max_chars=90)
    assert all(len(c) <= 90 for c in chunks)
    assert any(f"[{url}]" in c for c in chunks), chunks
    # its commas and semicolons are the URL's, not a clause's end
    cut = hard_split("See https://x.org/a,b;c:d for the list, then write to us soon", 32)
    assert cut[0] == "See https://x.org/a,b;c:d for", cut


def test_a_sentence_is_only_split_when_it_alone_is_too_long():
    long = (
        "This sentence is long, with clauses that go on, and on; it keeps going: "
        + "word " * 60
        + "end."
    )
    text = "Short one. " + long + " Short two."
    chunks = chunk_text(text, max_chars=80)
    assert all(len(c) <= 80 for c in chunks), [len(c) for c in chunks]
    assert _letters("".join(chunks)) == _letters(text)
    # the first cut is at clause punctuation, not in the middle of a clause
    assert any(c.endswith("on,") or c.endswith("going:") or c.endswith("on;") for c in chunks)


def test_hard_split_without_spaces_cuts_cjk_at_the_limit():
    text = "あ" * 130
    pieces = hard_split(text, 50)
    assert [len(p) for p in pieces] == [50, 50, 30]


def test_cjk_chunks_are_joined_without_spaces():
    text = "今天天气很好。我们去公园吧！你想去吗？"
    assert chunk_text(text, max_chars=100, language="chinese") == [text]


def test_paragraph_chunks_do_not_cross_paragraphs_and_mark_the_break():
    text = "One. Two.\nThree wrapped\nline.\n\nFour.\n\n* * *\n\nFive is alone."
    chunks = chunk_paragraphs(text, max_chars=15)
    assert chunks == [
        TextChunk("One. Two.", "sentence"),
        TextChunk("Three wrapped", "sentence"),  # one 19-char sentence: cut between words
        TextChunk("line.", "paragraph"),
        TextChunk("Four.", "paragraph"),
        TextChunk("Five is alone.", "paragraph"),
    ]
    assert all("*" not in c.text for c in chunks)  # the scene break says nothing


def test_paragraph_chunks_merge_within_a_paragraph():
    chunks = chunk_paragraphs("One. Two. Three.\n\nFour.", max_chars=100)
    assert chunks == [TextChunk("One. Two. Three.", "paragraph"), TextChunk("Four.", "paragraph")]


def test_hard_wrapped_lines_are_joined():
    assert split_paragraphs("a line\nwrapped\r\n\r\n第一行\n第二行") == [
        "a line wrapped",
        "第一行第二行",
    ]


@pytest.mark.parametrize("bad", [0, -5, 2.5])
def test_bad_limit_is_rejected(bad):
    with pytest.raises(InvalidInput, match="max_chars"):
        chunk_text("Hello.", max_chars=bad)


# Every language the model speaks: its abbreviations, numbers and punctuation.
SENTENCES = {
    "english": [
        ("Mr. Smith met Dr. Jones at 3.30 p.m. on Jan. 5th. He paid $3.50, i.e. too much! Did he? Yes.",
         ["Mr. Smith met Dr. Jones at 3.30 p.m. on Jan. 5th.", "He paid $3.50, i.e. too much!", "Did he?", "Yes."]),
        ("Gen. Lee and Capt. Kirk met. Messrs. Jones left. It was approx. ten. See vol. 2 of it. "
         "Call me at 10 a.m. Tomorrow is fine.",
         ["Gen. Lee and Capt. Kirk met.", "Messrs. Jones left.", "It was approx. ten.", "See vol. 2 of it.",
          "Call me at 10 a.m.", "Tomorrow is fine."]),
    ],
    "german": [
        ("Hr. Meier kam am 3. Mai mit Prof. Weber, z. B. um 14.30 Uhr. Das kostet 3,50 Euro! Wirklich? Ja.",
         ["Hr. Meier kam am 3. Mai mit Prof. Weber, z. B. um 14.30 Uhr.", "Das kostet 3,50 Euro!", "Wirklich?", "Ja."]),
        ("Er kam am 3. Mai. Siehe Abs. 3 dazu. Das ist z. B. gut.",
         ["Er kam am 3. Mai.", "Siehe Abs. 3 dazu.", "Das ist z. B. gut."]),
    ],
    "french": [
        ("M. Dupont et Mme Durand sont nés le 1er janv. 1990. Le prix est de 3,50 € ! Vraiment ? Oui.",
         ["M. Dupont et Mme Durand sont nés le 1er janv. 1990.", "Le prix est de 3,50 € !", "Vraiment ?", "Oui."]),
        ("Le Pr. Blanc arrive. C'est p. ex. vrai. Le Dr. Petit vient.",
         ["Le Pr. Blanc arrive.", "C'est p. ex. vrai.", "Le Dr. Petit vient."]),
    ],
    "spanish": [
        ("El Sr. García y D. Pedro llegaron a las 3.30. ¡Cuesta 3,50 €! ¿De verdad? Sí.",
         ["El Sr. García y D. Pedro llegaron a las 3.30.", "¡Cuesta 3,50 €!", "¿De verdad?", "Sí."]),
        ("La Sra. López vive en la Avda. Castilla. Llegó el Lic. Pérez. Usted, Ud. sabe.",
         ["La Sra. López vive en la Avda. Castilla.", "Llegó el Lic. Pérez.", "Usted, Ud. sabe."]),
    ],
    "italian": [
        ("Il Sig. Rossi e il Dott. Verdi arrivano alle 3.30. Costa 3,50 euro! Davvero? Sì.",
         ["Il Sig. Rossi e il Dott. Verdi arrivano alle 3.30.", "Costa 3,50 euro!", "Davvero?", "Sì."]),
        ("L'Avv. Galli arriva. Il Geom. Neri parla. Mons. Rossi arriva.",
         ["L'Avv. Galli arriva.", "Il Geom. Neri parla.", "Mons. Rossi arriva."]),
    ],
    "portuguese": [
        ("O Sr. Silva e a Dra. Souza chegaram às 3.30. Custa 3,50 reais! Verdade? Sim.",
         ["O Sr. Silva e a Dra. Souza chegaram às 3.30.", "Custa 3,50 reais!", "Verdade?", "Sim."]),
        ("O Eng. Lima chegou. A Profa. Costa falou. Vive na Av. Paulista.",
         ["O Eng. Lima chegou.", "A Profa. Costa falou.", "Vive na Av. Paulista."]),
    ],
    "russian": [
        ("А. С. Пушкин родился в 1799 г. в Москве. Это стоит 3,5 рубля! Правда? Да.",
         ["А. С. Пушкин родился в 1799 г. в Москве.", "Это стоит 3,5 рубля!", "Правда?", "Да."]),
        ("Он живёт на ул. Ленина. Это т. е. хорошо. В 1799 г. Он родился.",
         ["Он живёт на ул. Ленина.", "Это т. е. хорошо.", "В 1799 г. Он родился."]),
    ],
    "chinese": [
        ("价格是3.5元。今天天气很好！你想去吗？好的", ["价格是3.5元。", "今天天气很好！", "你想去吗？", "好的"]),
        ("Mr. 王来了。他说：“好。”然后走了。", ["Mr. 王来了。", "他说：“好。”", "然后走了。"]),
    ],
    "japanese": [
        ("3.5キロです。今日はいい天気ですね！明日は？はい", ["3.5キロです。", "今日はいい天気ですね！", "明日は？", "はい"]),
        ("彼は「はい。」と言った。それから帰った。", ["彼は「はい。」と言った。", "それから帰った。"]),
    ],
    "korean": [
        ("가격은 3.5달러입니다. 오늘 날씨가 좋네요! 내일은요? 네.", ["가격은 3.5달러입니다.", "오늘 날씨가 좋네요!", "내일은요?", "네."]),
        ("그는 '네.'라고 말했다. 그리고 갔다.", ["그는 '네.'라고 말했다.", "그리고 갔다."]),
    ],
}  # fmt: skip
# sentencex's zh, ja and ko rules extend its English ones: on alphabetic text they are the same
# rules, so swapping English for one of them changes nothing observable (and vice versa)
SAME_RULES = {("english", other) for other in ("chinese", "japanese", "korean")}
ALPHABETIC = ("english", "german", "french", "spanish", "italian", "portuguese", "russian")


@pytest.mark.parametrize("language", SENTENCES)
def test_sentence_rules_of_every_language(language):
    for text, expected in SENTENCES[language]:
        assert split_sentences(text, language) == expected


@pytest.mark.parametrize("language", ALPHABETIC)
def test_each_language_is_split_by_its_own_rules(language):
    """Another language's rules get at least one of these texts wrong, so a language mapped
    to the wrong rules is noticed."""
    for other in SENTENCES:
        if other == language or (language, other) in SAME_RULES:
            continue
        right = [split_sentences(t, other) == e for t, e in SENTENCES[language]]
        assert not all(right), f"{other}'s rules split {language} text just as well"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("M. Dupont est arrivé. Il a dit bonjour.", ["M. Dupont est arrivé.", "Il a dit bonjour."]),
        ("Il Sig. Rossi è arrivato. Ciao.", ["Il Sig. Rossi è arrivato.", "Ciao."]),
        ("La Sra. López llegó. Bien.", ["La Sra. López llegó.", "Bien."]),
        ("Mr. Smith left. Fine.", ["Mr. Smith left.", "Fine."]),
    ],
)
def test_guessed_latin_text_keeps_the_titles_of_every_latin_language(text, expected):
    assert split_sentences(text, "auto") == expected


# Script ranges: the first and last code point of each range written without spaces, and the
# code points just outside. Whether a space is put between two pieces, and whether a hard wrap
# is a word gap, depends on these.
CJK_RANGES = [
    (0x3000, 0x30FF),
    (0x3400, 0x4DBF),
    (0x4E00, 0x9FFF),
    (0xAC00, 0xD7AF),
    (0xF900, 0xFAFF),
    (0xFF00, 0xFFEF),
    (0x20000, 0x2FA1F),
]


@pytest.mark.parametrize("first, last", CJK_RANGES)
def test_cjk_ranges_are_exact_at_both_ends(first, last):
    assert is_cjk(chr(first)) and is_cjk(chr(last))
    assert not is_cjk(chr(first - 1)) and not is_cjk(chr(last + 1))


@pytest.mark.parametrize(
    "text, share", [("", 0.0), (" \n\t", 0.0), ("ab中文", 0.5), ("a 中", 0.5), ("中文。", 1.0)]
)
def test_cjk_fraction_counts_non_space_characters(text, share):
    assert cjk_fraction(text) == share


@pytest.mark.parametrize(
    "language, code",
    [("EN", "en"), (" English ", "en"), ("zh_TW", "zh"), ("fil", "fil"), ("AUTO", "ru")],
)
def test_language_codes_ignore_case_space_and_region(language, code):
    assert language_code(language, "Привет") == code


@pytest.mark.parametrize("bad", ["e", "engl", "12", "x1", ""])
def test_language_that_is_no_code_is_refused_naming_the_field(bad):
    with pytest.raises(InvalidInput) as caught:
        language_code(bad)
    assert caught.value.param == "language"


@pytest.mark.parametrize(
    "text, code",
    [
        (chr(0x3040) + "abc", "ja"),  # first of the kana block
        (chr(0x30FF), "ja"),  # last of it
        ("漢字漢字漢字かな", "ja"),  # any kana makes han Japanese
        (chr(0x4E00), "zh"),
        (chr(0x9FFF), "zh"),
        (chr(0x3400), "zh"),
        (chr(0x4DBF), "zh"),
        (chr(0xAC00), "ko"),
        (chr(0xD7AF), "ko"),
        ("韓國 한국어입니다", "ko"),  # the most frequent script wins
        ("中中中 한한", "zh"),
        ("한한한 中中", "ko"),
        ("中文中文 мир", "zh"),
        ("中 мир", "ru"),
        (chr(0x0400), "ru"),
        (chr(0x04FF), "ru"),
        (chr(0x03FF) + chr(0x0500) + chr(0x3100) + chr(0x4DC0) + chr(0xA000) + chr(0xD7B0), "en"),
        ("", "en"),
    ],
)
def test_guessed_language_follows_the_script(text, code):
    assert language_code("auto", text) == code


def test_paragraphs_split_on_blank_lines_of_any_newline_convention():
    assert split_paragraphs("a\r\rb\r\n \t\r\nc\n\n\nd") == ["a", "b", "c", "d"]
    assert split_paragraphs("a\rb") == split_paragraphs("a\r\nb") == ["a b"]


@pytest.mark.parametrize(
    "text, paragraph",
    [
        ("  a\tb   c  ", "a b c"),
        ("hello\n世界", "hello 世界"),  # a wrap between scripts is a word gap
        ("世界\nhello", "世界 hello"),
        ("世界\n  世界", "世界世界"),  # inside CJK it is not
        ("世\n中x", "世中x"),
        ("a\n  \n", "a"),
    ],
)
def test_lines_of_a_paragraph_are_joined_like_a_reader_would(text, paragraph):
    assert split_paragraphs(text) == [paragraph]


@pytest.mark.parametrize("call", [split_sentences, hard_split, chunk_text, chunk_paragraphs])
@pytest.mark.parametrize("bad", [0, -1, 1.0, "10"])
@pytest.mark.parametrize("text", ["Hello there.", ""])
def test_every_entry_point_refuses_a_bad_limit_naming_it(call, bad, text):
    with pytest.raises(InvalidInput) as caught:
        call(text, bad) if call is hard_split else call(text, max_chars=bad)
    assert caught.value.param == "max_chars"
    assert repr(bad) in str(caught.value)


def test_a_limit_of_one_is_allowed():
    assert chunk_text("ab", max_chars=1) == ["a", "b"]


def test_no_limit_keeps_long_sentences_whole():
    long = "word " * 200 + "end."
    assert split_sentences(long, "english", None) == [long.strip()]
    assert len(split_sentences(long, "english")) > 1  # the default limit cuts it


def test_cjk_sentences_cut_after_clause_marks_first():
    sentence = "我们今天去公园玩，然后去商店、再回家吃饭"
    assert hard_split(sentence, 10) == ["我们今天去公园玩，", "然后去商店、", "再回家吃饭"]
    assert hard_split(sentence, len(sentence)) == [sentence]


def test_spaced_and_unspaced_dashes_are_clause_breaks():
    assert hard_split("one two - three four—five six", 12) == [
        "one two -",
        "three four—",
        "five six",
    ]


def test_empty_clauses_and_sentences_leave_nothing():
    assert hard_split("   ", 5) == []
    assert hard_split("alpha beta gamma,", 6) == ["alpha", "beta", "gamma,"]  # no "" after ","
    assert hard_split(" alpha ,  beta ,", 7) == ["alpha ,", "beta ,"]


def test_pieces_are_joined_with_one_space_unless_either_side_is_cjk():
    assert pack(["Hi.", "There."], 100) == ["Hi. There."]
    assert pack(["好。", "There."], 100) == ["好。There."]
    assert pack(["Hi.", "好。"], 100) == ["Hi.好。"]
    assert pack(["", "Hi."], 100) == ["Hi."]


def test_paragraph_chunks_from_a_list_split_each_item_into_its_paragraphs():
    assert chunk_paragraphs(["One. Two.\n\nThree.", "* * *", "Four."], 9, "english") == [
        TextChunk("One. Two.", "paragraph"),
        TextChunk("Three.", "paragraph"),
        TextChunk("Four.", "paragraph"),
    ]


def test_chunkers_use_the_given_language():
    # German rules know "am 3. Mai"; guessed (English) rules end a sentence after "3."
    text = "Er kam am 3. Mai an. Dann ging er."
    assert chunk_text(text, 16, "german") == ["Er kam am 3. Mai", "an.", "Dann ging er."]
    assert [c.text for c in chunk_paragraphs(text, 16, "german")] == chunk_text(text, 16, "german")
    assert chunk_text(text, 16) == ["Er kam am 3.", "Mai an.", "Dann ging er."]


def test_guessed_language_picks_the_rules_of_each_paragraph():
    text = "Он живёт на ул. Ленина. Это далеко.\n\nIt is far. Yes."
    assert split_sentences(text) == ["Он живёт на ул. Ленина.", "Это далеко.", "It is far.", "Yes."]


@pytest.mark.parametrize(
    "text, sentences",
    [
        ("Wait. ... Then he left.", ["Wait. ...", "Then he left."]),  # a stray "..." says nothing
        ("It cost 5 dollars. 10 people came.", ["It cost 5 dollars.", "10 people came."]),
    ],
)
def test_sentences_that_start_or_end_oddly(text, sentences):
    assert split_sentences(text, "english") == sentences
