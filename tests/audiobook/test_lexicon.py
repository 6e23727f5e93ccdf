"""A pronunciation lexicon changes what is spoken and nothing else; a dry run shows a render
without making it."""

from __future__ import annotations

import json

import pytest

from ownvoice.audiobook.dryrun import SAMPLE_TEXT
from ownvoice.audiobook.lexicon import load_lexicon, parse_lexicon
from ownvoice.audiobook.plan import expected_seconds
from ownvoice.cli import main
from ownvoice.errors import InvalidInput

LEXICON = """
all:
  Qwen: Chwen
english:
  SQL: sequel
  /\\b(\\d+) ?km\\b/: \\1 kilometres
de:
  z.B.: zum Beispiel
"""
BOOK = """# Roads

Qwen wrote SQL for 12 km of road. The Qwens and MySQL stayed as they were.

# More

Nothing to change here.
"""


def test_words_match_whole_and_patterns_use_their_groups(tmp_path):
    (tmp_path / "l.yaml").write_text(LEXICON)
    lexicon = load_lexicon(tmp_path / "l.yaml")
    text = "Qwen wrote SQL for 12 km, then 3km more. The Qwens and MySQL stayed."
    assert lexicon.apply(text, "english") == (
        "Chwen wrote sequel for 12 kilometres, then 3 kilometres more. The Qwens and MySQL stayed."
    )
    assert lexicon.apply(text, "german") == text.replace("Qwen wrote", "Chwen wrote")
    assert lexicon.apply("Das ist z.B. gut.", "de-DE") == "Das ist zum Beispiel gut."
    assert lexicon.apply("Qwen und SQL", "auto") == "Chwen und SQL"  # only `all`
    assert parse_lexicon({"en": {"a\\b": "c\\d"}}).apply("x a\\b y", "english") == "x c\\d y"


@pytest.mark.parametrize(
    "data, message",
    [
        (["x"], "a mapping of languages to entries is needed"),
        ({"english": ["x"]}, "english: a mapping of words to how they are said is needed"),
        ({"english": {"/(/": "x"}}, "english: /(/ is not a regular expression"),
        ({"english": {"word": ["x"]}}, "english: 'word' must map to text"),
        ({"english": {" ": "x"}}, "english: an empty word"),
    ],
)
def test_a_bad_lexicon_is_named(data, message):
    with pytest.raises(InvalidInput) as caught:
        parse_lexicon(data, where="lexicon 'l.yaml'")
    assert caught.value.param == "lexicon"
    assert str(caught.value).startswith(f"lexicon 'l.yaml': {message}")


def test_unreadable_and_unparsable_lexicon_files(tmp_path):
    with pytest.raises(InvalidInput, match="cannot read lexicon"):
        load_lexicon(tmp_path / "missing.yaml")
    (tmp_path / "bad.yaml").write_text("a: [\n")
    with pytest.raises(InvalidInput, match="is not valid YAML"):
        load_lexicon(tmp_path / "bad.yaml")


def render(server, tmp_path, book, *flags):
    out = tmp_path / "book.wav"
    with pytest.raises(SystemExit) as done:
        main(["book", str(book), "-o", str(out), "--server", server.url, "--voice", "ryan",
              "--no-progress", "--language", "english", *flags])  # fmt: skip
    assert done.value.code == 0
    return json.loads((tmp_path / "book.wav.work" / "manifest.json").read_text())


def test_the_lexicon_changes_what_is_spoken_and_not_what_is_shown(tmp_path, server):
    book, lexicon = tmp_path / "book.md", tmp_path / "l.yaml"
    book.write_text(BOOK)
    lexicon.write_text(LEXICON)
    plain = render(server, tmp_path, book)
    said_before = set(server.counts)
    manifest = render(server, tmp_path, book, "--lexicon", str(lexicon))
    changed = "Qwen wrote SQL for 12 km of road. The Qwens and MySQL stayed as they were."
    spoken = (
        "Chwen wrote sequel for 12 kilometres of road. The Qwens and MySQL stayed as they were."
    )
    assert set(server.counts) - said_before == {spoken}  # only the changed chunk is made again
    (entry,) = [c for c in manifest["chunks"] if c["text"] == changed]  # shown as written
    assert entry["spoken"] == spoken
    assert all("spoken" not in c for c in manifest["chunks"] if c["text"] != changed)
    assert [c["text"] for c in manifest["chunks"]] == [c["text"] for c in plain["chunks"]]


def test_a_dry_run_shows_the_render_and_makes_none_of_it(tmp_path, server, capsys):
    book, lexicon = tmp_path / "book.md", tmp_path / "l.yaml"
    book.write_text(BOOK)
    lexicon.write_text(LEXICON)
    with pytest.raises(SystemExit) as done:
        main(["book", str(book), "--dry-run", "--server", server.url, "--voice", "ryan",
              "--lexicon", str(lexicon), "--language", "english"])  # fmt: skip
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert set(server.counts) == {SAMPLE_TEXT}  # one short sample, none of the book
    assert not list(tmp_path.glob("*.work"))
    lines = out.splitlines()
    assert lines[1].startswith("4 chunks of at most 200 characters in 2 chapters; voice ryan")
    assert "== Roads" in lines and "== More" in lines
    assert "    2  Chwen wrote sequel for 12 kilometres of road." in out  # after the lexicon
    texts = ["Roads", "Chwen wrote sequel for 12 kilometres of road. The Qwens and MySQL stayed "
             "as they were.", "More", "Nothing to change here."]  # fmt: skip
    pauses = 0.5 + 1.0 + 0.8 + 2.0 + 0.8  # head, tail, after each chunk but the last
    audio = sum(expected_seconds(t) for t in texts) + pauses
    minutes, seconds = divmod(round(audio), 60)
    assert f"estimated audio: {minutes}:{seconds:02d}" in lines
    assert any(line.startswith("estimated time here: ") for line in lines)


def test_output_is_needed_unless_it_is_a_dry_run(tmp_path, server, capsys):
    book = tmp_path / "book.md"
    book.write_text(BOOK)
    with pytest.raises(SystemExit) as done:
        main(["book", str(book), "--server", server.url, "--voice", "ryan"])
    assert done.value.code != 0
    assert "-o/--output is required (or --dry-run)" in capsys.readouterr().err
