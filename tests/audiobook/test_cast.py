"""A cast: narration, quoted speech, chapters and inline markers each go to the voice the cast
names, and the voices come out equally loud."""

from __future__ import annotations

import json

import numpy as np
import pytest
import soundfile as sf
import yaml

from ownvoice.audiobook import BookOptions, EngineBackend, ServerBackend, render_book
from ownvoice.audiobook.cast import load_cast, parse_cast, split_dialogue, split_markers
from ownvoice.cli import main
from ownvoice.errors import InvalidInput
from ownvoice.loudness import integrated_loudness
from tests.audiobook.test_engine_backend import FakeEngine

CAST = """
narrator: ryan
dialogue: serena
chapters:
  2: vivian
  The Storm: {narrator: aiden, dialogue: eric}
lexicon:
  all: {Qwen: Chwen}
"""
BOOK = """# The Pier

Alpha came in at dawn. “Is anyone there?” the keeper called. Nobody answered Qwen.

“Yes,” said the girl. “I have been waiting here for a very long time.”

# The Hill

Bravo walked up the hill. “Wait for me,” she cried, and ran after him.

# The Storm

Charlie saw the clouds. “Run!” he shouted to the others.

<!-- voice: sohee -->
Delta read this part alone, “quotes” and all.

Echo is still read by Sohee.

<!-- voice: narrator -->
Foxtrot is the narrator again. “Indeed,” said Eric.
"""
# what each request must be said by: (start of the text sent, voice)
EXPECTED = [
    ("The Pier", "ryan"),
    ("Alpha came in at dawn.", "ryan"),
    ("“Is anyone there?”", "serena"),
    ("the keeper called. Nobody answered Chwen.", "ryan"),
    ("“Yes,”", "serena"),
    ("said the girl.", "ryan"),
    ("“I have been waiting here for a very long time.”", "serena"),
    ("The Hill", "vivian"),
    ("Bravo walked up the hill.", "vivian"),
    ("“Wait for me,”", "serena"),
    ("she cried, and ran after him.", "vivian"),
    ("The Storm", "aiden"),
    ("Charlie saw the clouds.", "aiden"),
    ("“Run!”", "eric"),
    ("he shouted to the others.", "aiden"),
    ("Delta read this part alone, “quotes” and all.", "sohee"),
    ("Echo is still read by Sohee.", "sohee"),
    ("Foxtrot is the narrator again.", "aiden"),
    ("“Indeed,”", "eric"),
    ("said Eric.", "aiden"),
]


@pytest.fixture
def cast_book(tmp_path):
    (tmp_path / "book.md").write_text(BOOK)
    (tmp_path / "cast.yaml").write_text(CAST)
    return tmp_path / "book.md", tmp_path / "cast.yaml"


def test_each_voice_says_what_the_cast_gives_it(cast_book, server, tmp_path):
    book, cast = cast_book
    options = BookOptions(cast=load_cast(cast), backoff_s=0.01)
    report = render_book(str(book), str(tmp_path / "b.wav"), ServerBackend(server.url, voice="dylan"),
                         options, show_progress=False)  # fmt: skip
    assert report.complete, report.text()
    said = sorted((b["input"], b["voice"]) for b in server.bodies)
    assert said == sorted(EXPECTED)
    assert "dylan" not in {v for _, v in said}  # the cast's narrator replaces --voice
    manifest = json.loads((tmp_path / "b.wav.work" / "manifest.json").read_text())
    assert [(c["text"], c.get("voice")) for c in manifest["chunks"]][1:3] == [
        ("Alpha came in at dawn.", "ryan"), ("“Is anyone there?”", "serena")]  # fmt: skip


def test_markers_work_without_a_cast_and_are_never_spoken(tmp_path, server):
    book = tmp_path / "script.md"
    book.write_text("# One\n\nOpening words by the default voice.\n\n<!-- voice: serena -->\n"
                    "A line for Serena, “quoted” too.\n\n# Two\n\nSerena still reads the next "
                    "chapter. <!-- voice: -->Back to the default.\n")  # fmt: skip
    render_book(str(book), str(tmp_path / "s.wav"), ServerBackend(server.url, voice="ryan"),
                BookOptions(), show_progress=False)  # fmt: skip
    assert sorted((b["input"], b["voice"]) for b in server.bodies) == [
        ("A line for Serena, “quoted” too.", "serena"),
        ("Back to the default.", "ryan"),
        ("One", "ryan"),
        ("Opening words by the default voice.", "ryan"),
        ("Serena still reads the next chapter.", "serena"),  # a marker holds across chapters
        ("Two", "serena"),
    ]


def test_a_changed_cast_renders_only_the_chunks_it_changes(cast_book, server, tmp_path):
    book, cast = cast_book
    out = str(tmp_path / "b.wav")
    backend = ServerBackend(server.url, voice="dylan")
    render_book(str(book), out, backend, BookOptions(cast=load_cast(cast)), show_progress=False)
    server.counts.clear()
    server.bodies.clear()
    changed = parse_cast({**yaml.safe_load(CAST), "dialogue": "ono_anna"})
    report = render_book(str(book), out, backend, BookOptions(cast=changed), show_progress=False)
    redone = sorted(b["input"] for b in server.bodies)
    # the quotes of chapters 1 and 2; chapter 3's dialogue voice is its own (eric)
    assert redone == sorted(t for t, v in EXPECTED if v == "serena")
    assert {b["voice"] for b in server.bodies} == {"ono_anna"}
    assert report.reused == len(EXPECTED) - len(redone)


def test_voices_come_out_equally_loud(tmp_path, server):
    """Serena's voice is 9 dB louder and Eric's 7 dB quieter than the narrator's; her short
    replies are too short to measure alone, so they must take her typical gain, not the book's."""
    book = tmp_path / "talk.md"
    book.write_text("\n\n".join(
        f"Narration number {n} goes on for a while before anyone speaks. “Yes.” She nodded. "
        f"“I agree with all of that, every word, number {n}.” He shook his head. “No.” "
        f"<!-- voice: eric -->Then the quiet man "
        f"said he thinks otherwise, number {n}. <!-- voice: narrator -->"
        for n in range(4)))  # fmt: skip
    server.voice_gain_db = {"serena": 9.0, "eric": -7.0}
    cast = parse_cast({"narrator": "ryan", "dialogue": "serena"})
    out = tmp_path / "talk.wav"
    report = render_book(str(book), str(out), ServerBackend(server.url, voice="x"),
                         BookOptions(cast=cast, backoff_s=0.01), show_progress=False)  # fmt: skip
    assert report.complete, report.text()
    voices = {b["voice"] for b in server.bodies}
    assert voices == {"ryan", "serena", "eric"}

    audio, sr = sf.read(out, dtype="float32")
    work = tmp_path / "talk.wav.work"
    timings = json.loads((work / "timings.json").read_text())
    chunks = json.loads((work / "manifest.json").read_text())["chunks"]
    per_voice: dict[str, list[np.ndarray]] = {}
    for chunk, t in zip(chunks, timings, strict=True):
        clip = audio[round(t["start"] * sr) : round(t["end"] * sr)]
        per_voice.setdefault(chunk["voice"], []).append(clip)
    short = [c for c in chunks if c["text"] in ("“Yes.”", "“No.”")]
    assert len(short) == 8 and all(c["voice"] == "serena" for c in short)
    levels = {v: integrated_loudness(np.concatenate(c), sr) for v, c in per_voice.items()}
    replies = integrated_loudness(
        np.concatenate([audio[round(timings[c["n"] - 1]["start"] * sr):
                              round(timings[c["n"] - 1]["end"] * sr)] for c in short]), sr)  # fmt: skip
    assert max(levels.values()) - min(levels.values()) <= 1.0, levels
    assert abs(replies - levels["ryan"]) <= 1.0, (replies, levels)  # the short ones too
    assert report.loudness_by_voice.keys() == {"ryan", "serena", "eric"}
    assert max(report.loudness_by_voice.values()) - min(report.loudness_by_voice.values()) <= 1.0


@pytest.mark.parametrize(
    ("text", "language", "parts"),
    [
        (
            "He said, “Come here.” She left.",
            None,
            [(False, "He said,"), (True, "“Come here.”"), (False, "She left.")],
        ),
        (
            "“Come,” he said, “now.”",
            None,
            [(True, "“Come,”"), (False, "he said,"), (True, "“now.”")],
        ),
        ("“Come”, he said.", None, [(True, "“Come”,"), (False, "he said.")]),
        (
            'She said "go" and went. A 5" pipe.',
            None,
            [(False, "She said"), (True, '"go"'), (False, 'and went. A 5" pipe.')],
        ),
        (
            "Er rief: „Komm her!“ Dann ging er.",
            "de",
            [(False, "Er rief:"), (True, "„Komm her!“"), (False, "Dann ging er.")],
        ),
        (
            "Er rief: »Komm her!« Dann ging er.",
            "de",
            [(False, "Er rief:"), (True, "»Komm her!«"), (False, "Dann ging er.")],
        ),
        (
            "Il dit : « Viens ici ! » Puis il partit.",
            "fr",
            [(False, "Il dit :"), (True, "« Viens ici ! »"), (False, "Puis il partit.")],
        ),
        (
            "彼は「こっちに来て」と言った。",
            "ja",
            [(False, "彼は"), (True, "「こっちに来て」"), (False, "と言った。")],
        ),
        (
            "‘I don’t know,’ said the boys’ father.",
            None,
            [(True, "‘I don’t know,’"), (False, "said the boys’ father.")],
        ),
        (
            "“This speech goes on into the next paragraph",
            None,
            [(True, "“This speech goes on into the next paragraph")],
        ),
        ("No speech at all here.", None, [(False, "No speech at all here.")]),
        (
            "They played rock ‘n’ roll all night.",
            None,
            [(False, "They played rock ‘n’ roll all night.")],
        ),
        ("「はい」と答えた。", "ja", [(True, "「はい」"), (False, "と答えた。")]),
    ],
)
def test_quoted_speech_in_the_marks_of_each_language(text, language, parts):
    assert split_dialogue(text, language) == parts


def test_markers_split_a_paragraph():
    assert split_markers("a <!-- voice: Bob --> b <!--voice:narrator-->c") == [
        (None, "a "), ("Bob", " b "), ("narrator", "c")]  # fmt: skip
    assert split_markers("no markers") == [(None, "no markers")]


def test_the_engine_backend_speaks_a_cast_with_its_speakers(cast_book, tmp_path):
    book = tmp_path / "two.md"
    book.write_text("Ryan reads this. “Serena says this.”\n")
    engine = FakeEngine()
    backend = EngineBackend(engine, model_id="m", voice="ryan")
    cast = parse_cast({"dialogue": "Serena"})  # speakers are matched ignoring case
    report = render_book(str(book), str(tmp_path / "t.wav"), backend, BookOptions(cast=cast),
                         show_progress=False)  # fmt: skip
    assert report.complete
    assert sorted((t, v) for t, v, _ in engine.calls) == [
        ("Ryan reads this.", "ryan"), ("“Serena says this.”", "serena")]  # fmt: skip
    assert report.batch_rows is not None and report.batch_size == 4

    bad = EngineBackend(FakeEngine(), model_id="m", voice="ryan")
    with pytest.raises(InvalidInput, match="'nobody' is not a speaker of this model; speakers: "
                                           "ryan, serena"):  # fmt: skip
        render_book(str(book), str(tmp_path / "u.wav"), bad,
                    BookOptions(cast=parse_cast({"dialogue": "nobody"})), show_progress=False)  # fmt: skip


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"narator": "ryan"}, r"unknown keys \['narator'\]"),
        ({"narrator": 3}, "narrator: a voice name is needed, got 3"),
        ({"chapters": ["ryan"]}, "chapters: a mapping of chapters to voices is needed"),
        ({"chapters": {1: {"voice": "x"}}}, r"chapters: 1: unknown keys \['voice'\]"),
        ({"chapters": {9: "ryan"}}, "chapter 9: the book has chapters 1 to 3"),
        ({"chapters": {"The End": "ryan"}}, "no chapter is titled 'The End'"),
        ({"lexicon": {"all": "x"}}, "lexicon: all: a mapping of words"),
        ("ryan", "a mapping"),
    ],
)
def test_a_bad_cast_is_named(cast_book, tmp_path, server, data, message):
    book, _ = cast_book
    with pytest.raises(InvalidInput, match=message):
        render_book(str(book), str(tmp_path / "b.wav"), ServerBackend(server.url, voice="ryan"),
                    BookOptions(cast=parse_cast(data)), show_progress=False)  # fmt: skip
    assert not server.bodies  # refused before any synthesis


def test_the_dry_run_shows_who_says_each_chunk(cast_book, server, capsys):
    book, cast = cast_book
    with pytest.raises(SystemExit) as done:
        main(["book", str(book), "--dry-run", "--server", server.url, "--voice", "dylan",
              "--cast", str(cast)])  # fmt: skip
    out = capsys.readouterr().out
    assert done.value.code == 0
    assert "    3  [serena] “Is anyone there?”" in out
    assert "    4  [ryan] the keeper called. Nobody answered Chwen." in out  # after the lexicon
    assert "[sohee] Delta read this part alone" in out
    assert "<!--" not in out
