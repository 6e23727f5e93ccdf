"""Subtitles of a finished book: a cue per sentence, inside its chunk's audio, in order."""

from __future__ import annotations

import html
import json

import numpy as np
import pytest
import soundfile as sf
import srt
import webvtt

from ownvoice.audiobook.plan import PlannedChunk
from ownvoice.audiobook.subtitles import Cue, cues, write_subtitles
from ownvoice.cli import main
from ownvoice.errors import InvalidInput
from ownvoice.textsplit import split_sentences

BOOK = """# First

One short sentence. Then a second, longer sentence follows it here. A third!

Another paragraph & its <tag> --> arrow.

# Second

The last chapter has one sentence.
"""


def speech_spans(path, min_gap_s: float = 0.1) -> list[tuple[float, float]]:
    """(start, end) seconds of the sounding stretches of the finished file: the fake server's
    speech never has 0.1 s of exact zeros inside it; the pauses are exact zeros."""
    audio, rate = sf.read(path, dtype="float32")
    zero = np.abs(audio) == 0
    spans, start, run = [], None, 0
    for i, z in enumerate(zero):
        if z:
            run += 1
            if start is not None and run == int(min_gap_s * rate):
                spans.append((start / rate, (i - run + 1) / rate))
                start = None
        else:
            if start is None:
                start = i
            run = 0
    if start is not None:
        spans.append((start / rate, len(audio) / rate))
    return spans


@pytest.mark.parametrize("suffix", [".srt", ".vtt"])
def test_cues_cover_the_book_in_order_inside_their_chunks(tmp_path, server, suffix):
    book = tmp_path / "book.md"
    book.write_text(BOOK)
    out, subs, lexicon = tmp_path / "book.wav", tmp_path / f"book{suffix}", tmp_path / "l.yaml"
    lexicon.write_text("all: {short: very very very short}\n")
    with pytest.raises(SystemExit) as done:
        main(["book", str(book), "-o", str(out), "--server", server.url, "--voice", "ryan",
              "--no-progress", "--chunk-chars", "40", "--subtitles", str(subs),
              "--lexicon", str(lexicon)])  # fmt: skip
    assert done.value.code == 0
    if suffix == ".srt":
        parsed = [(c.start.total_seconds(), c.end.total_seconds(), c.content)
                  for c in srt.parse(subs.read_text())]  # fmt: skip
    else:  # webvtt-py leaves the cue text escaped
        parsed = [(c.start_time.in_milliseconds() / 1000, c.end_time.in_milliseconds() / 1000,
                   html.unescape(c.text)) for c in webvtt.read(str(subs))]  # fmt: skip
    chunks = json.loads((tmp_path / "book.wav.work" / "manifest.json").read_text())["chunks"]
    # every sentence of every chunk, as written (never the lexicon's), once, in order
    expected = [
        (n, s) for n, c in enumerate(chunks) for s in split_sentences(c["text"], None, None)
    ]
    assert [t for _, _, t in parsed] == [s for _, s in expected]
    assert any("short" in t for _, _, t in parsed)
    timings = json.loads((tmp_path / "book.wav.work" / "timings.json").read_text())
    spans = speech_spans(out)
    assert len(spans) == len(chunks) == len(timings) == 7  # a sounding stretch per chunk
    for (lo, hi), timing in zip(spans, timings, strict=True):  # the timings are the audio's
        assert timing["start"] - 0.001 <= lo < hi <= timing["end"] + 0.001, (lo, hi, timing)
        assert (lo - timing["start"]) + (timing["end"] - hi) < 0.2  # the trim margins only
    for (start, end, text), (n, _) in zip(parsed, expected, strict=True):
        timing = timings[n]
        assert timing["start"] - 0.001 <= start < end <= timing["end"] + 0.001, (text, timing)
    assert all(a[1] <= b[0] + 0.001 for a, b in zip(parsed, parsed[1:], strict=False))


def test_a_chunk_shares_its_time_by_how_long_each_sentence_takes():
    chunk = PlannedChunk(0, "Hi. This one is much longer than the first.", 0, "end")
    (a, b) = cues([chunk], [24000], [48000], 24000, "english")
    assert (a.start, b.end) == (1.0, 3.0) and a.end == b.start
    assert a.end - a.start < b.end - b.start
    assert cues([chunk], [0], [0], 24000, "english") == []  # a chunk with no audio: no cue


def test_stamps_and_escaping(tmp_path):
    items = [Cue(3661.2345, 3662.0, "a <b> & c --> d")]
    write_subtitles(str(tmp_path / "s.srt"), items)
    write_subtitles(str(tmp_path / "s.vtt"), items)
    assert (tmp_path / "s.srt").read_text() == (
        "1\n01:01:01,234 --> 01:01:02,000\na <b> & c --> d\n"
    )
    assert (tmp_path / "s.vtt").read_text() == (
        "WEBVTT\n\n01:01:01.234 --> 01:01:02.000\na &lt;b> &amp; c --&gt; d\n"
    )
    with pytest.raises(InvalidInput) as caught:
        write_subtitles(str(tmp_path / "s.txt"), items)
    assert caught.value.param == "subtitles"
