"""The runaway cap belongs to the request (8.): a checkpoint that never says end of speech stops
at the frame cap its text allows, through the engine's own API and `ownvoice say` alike, not
after its 8191-frame (11 minute) maximum; an explicit max_frames still wins."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ownvoice.engine.options import SamplingOptions, SynthesisOptions, frame_cap

TEXT = "Hello there."  # 73 frames at most


@pytest.fixture(scope="module")
def never_ends(tmp_path_factory):
    from ownvoice.dev.random_checkpoint import write_random_checkpoint

    root = tmp_path_factory.mktemp("no-eos")
    return write_random_checkpoint(root / "cv", "0.6B-CustomVoice", tiny=True, no_eos=True)


@pytest.fixture(scope="module")
def engine(never_ends):
    from ownvoice.engine.engine import Engine

    return Engine.load(str(never_ends), device="cpu", dtype="float32")


def test_the_cap_follows_the_text():
    assert frame_cap(TEXT) == 73  # 40 + ceil(3 * 12.5 / 14 * 12)
    assert frame_cap("今天天气很好") == 40 + 49  # a CJK character weighs 3
    assert frame_cap("1234") > frame_cap("abcd")  # digits weigh 2


def test_synthesize_and_stream_stop_at_the_texts_cap(engine):
    options = SynthesisOptions(sampling=SamplingOptions.greedy())
    result = engine.synthesize(TEXT, voice="ryan", options=options)
    assert len(result.codes) == frame_cap(TEXT) and result.stop_reason == "max_frames"
    chunks = list(engine.stream(TEXT, voice="ryan", options=options))
    assert sum(c.num_frames for c in chunks) == frame_cap(TEXT)


def test_an_explicit_max_frames_wins_over_the_cap(engine):
    options = SynthesisOptions(sampling=SamplingOptions.greedy(), max_frames=90)
    assert len(engine.synthesize(TEXT, voice="ryan", options=options).codes) == 90


def test_an_open_text_is_capped_by_the_text_it_was_given(engine):
    from ownvoice.engine.opentext import TextSoFar

    options = SynthesisOptions(sampling=SamplingOptions.greedy())
    seq = engine.start_open(lambda: TextSoFar(TEXT, True), voice="ryan", options=options)
    engine.join(seq)
    frames = 0
    chunks = engine.ready_chunks()
    while True:
        for _, chunk in chunks:
            frames += chunk.num_frames
            if chunk.is_last:
                assert frames == frame_cap(TEXT)
                return
        chunks = engine.step()


def test_say_stops_at_the_texts_cap(never_ends, tmp_path):
    out = tmp_path / "out.wav"
    proc = subprocess.run(
        [sys.executable, "-m", "ownvoice", "say", TEXT, "--model", str(never_ends),
         "--speaker", "ryan", "--greedy", "--device", "cpu", "-o", str(out)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert f"{frame_cap(TEXT)} frames (stopped: max_frames)" in proc.stdout
