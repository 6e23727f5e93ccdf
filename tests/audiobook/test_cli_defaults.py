"""`ownvoice book` run with no sound flags does what the README promises: every chunk at
-18 LUFS, peaks under -1 dBTP, and pauses of 0.35 s between sentences, 0.8 s between paragraphs
and 2 s between chapters. The numbers are read from the README, so the documentation and the
CLI cannot drift apart unnoticed."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import numpy as np
import pyloudnorm
import pytest
import soundfile as sf

from ownvoice.audiobook.assemble import TRIM_MARGIN_S
from ownvoice.cli import main
from tests.audiobook.conftest import STORY_CHUNK_CHARS, STORY_CHUNKS, STORY_GAPS, story_texts
from tests.audiobook.fake_server import SR, speech_samples
from tests.audiobook.test_render import _segments

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def promised() -> dict[str, float]:
    text = " ".join(README.split())  # the sentence wraps across lines
    m = re.search(
        r"levelled to (-?[\d.]+) LUFS .*? under a (-?[\d.]+) dBTP .*? between sentences "
        r"\(([\d.]+) s\), paragraphs \(([\d.]+) s\) and chapters \(([\d.]+) s\)",
        text,
    )
    assert m, "the README no longer states the book's loudness and pauses"
    lufs, peak, sentence, paragraph, chapter = map(float, m.groups())
    return dict(lufs=lufs, peak=peak, sentence=sentence, paragraph=paragraph, chapter=chapter)


def test_book_with_no_flags_keeps_the_readmes_promises(story, server, tmp_path):
    texts = story_texts()
    server.gain_db = lambda text: 4.0 if texts.index(text) % 2 else -4.0  # uneven chunks
    spiked = texts[3]
    server.spike = lambda text: text == spiked  # its gain must stop at the peak ceiling
    out = tmp_path / "story.wav"
    requests_log = logging.getLogger("ownvoice.requests")
    with pytest.raises(SystemExit) as done:
        main(["book", str(story), "-o", str(out), "--server", server.url, "--voice", "ryan",
              "--chunk-chars", str(STORY_CHUNK_CHARS), "--no-progress"])  # fmt: skip
    assert done.value.code in (0, None)
    # the book quiets the per-request lines while it runs, not for the rest of the process
    assert requests_log.level == logging.NOTSET
    want = promised()

    audio, _ = sf.read(out, dtype="float64")
    chunks = _segments(audio)
    assert len(chunks) == STORY_CHUNKS
    margin = round(TRIM_MARGIN_S * SR)
    meter = pyloudnorm.Meter(SR)
    levels = [meter.integrated_loudness(np.pad(c, margin)) for c in chunks]
    del levels[3]  # the clicked chunk is held under the ceiling, so quieter
    assert all(abs(level - want["lufs"]) <= 0.5 for level in levels), levels
    peak = 20 * np.log10(np.abs(audio).max())
    assert want["peak"] - 1.5 <= peak <= want["peak"], peak  # the click reached the ceiling

    # the gaps between chunks, longest first: one chapter, then paragraphs, then sentences
    speech = sum(speech_samples(t) / SR + 2 * TRIM_MARGIN_S for t in texts)
    gaps = sum(n * want[kind] for kind, n in STORY_GAPS.items())
    edges = len(audio) / SR - speech - gaps  # the head and tail silences
    assert 0 < edges < 3.0, edges
    silences = sorted(_gaps(audio))
    # each pause plus the quiet margins kept at the two chunks' edges (silent in these clips)
    expected = sorted(
        want[kind] + 2 * TRIM_MARGIN_S for kind, n in STORY_GAPS.items() for _ in range(n)
    )
    assert np.allclose(silences, expected, atol=0.03), (silences, expected)


def _gaps(audio: np.ndarray, min_gap_s: float = 0.2) -> list[float]:
    """Seconds of digital silence between consecutive chunks (runs of exact zeros of at least
    min_gap_s, the chunks' own zero crossings aside), the head and tail left out."""
    silent = np.concatenate([[False], audio == 0, [False]]).astype(np.int8)
    starts = np.flatnonzero(np.diff(silent) == 1)
    ends = np.flatnonzero(np.diff(silent) == -1)
    runs = [(a, b) for a, b in zip(starts, ends, strict=True) if b - a >= min_gap_s * SR]
    return [(b - a) / SR for a, b in runs if a > 0 and b < len(audio)]


def test_each_sound_flag_sets_its_option_and_the_rest_keep_theirs():
    from ownvoice.audiobook import BookOptions, Pauses
    from ownvoice.cli import build_parser
    from ownvoice.cli.book import book_options

    base = ["book", "b.md", "-o", "b.wav", "--server", "http://x"]
    assert book_options(build_parser().parse_args(base)) == BookOptions()
    flags = {"--target-lufs": ("target_lufs", -23.0), "--peak": ("peak_dbtp", -3.0)}
    pauses = {"--pause-sentence": "sentence", "--pause-paragraph": "paragraph",
              "--pause-chapter": "chapter", "--head": "head", "--tail": "tail"}  # fmt: skip
    for flag, (field, value) in flags.items():
        got = book_options(build_parser().parse_args([*base, flag, str(value)]))
        assert got == BookOptions(**{field: value}), flag
    for flag, field in pauses.items():
        got = book_options(build_parser().parse_args([*base, flag, "7.5"]))
        assert got == BookOptions(pauses=Pauses(**{field: 7.5})), flag


def test_the_help_states_the_defaults_the_book_uses_and_the_readme_promises(capsys):
    """`ownvoice book --help` says each sound flag's real default (no "(default: None)"), the
    same as BookOptions' and Pauses', and as the README's."""
    from ownvoice.audiobook import BookOptions, Pauses

    with pytest.raises(SystemExit):
        main(["book", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "(default: None)" not in text

    def said(flag: str) -> float:
        m = re.search(rf"{flag} [A-Z_]+ [^()\[\]]*\(default: (-?[\d.]+)\)", text)
        assert m, flag
        return float(m.group(1))

    book, pauses, want = BookOptions(), Pauses(), promised()
    assert said("--target-lufs") == book.target_lufs == want["lufs"]
    assert said("--peak") == book.peak_dbtp == want["peak"]
    assert said("--pause-sentence") == pauses.sentence == want["sentence"]
    assert said("--pause-paragraph") == pauses.paragraph == want["paragraph"]
    assert said("--pause-chapter") == pauses.chapter == want["chapter"]
    assert said("--head") == pauses.head and said("--tail") == pauses.tail
