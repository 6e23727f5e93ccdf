"""Loudness, true-peak limiting and silence trimming of chunks."""

from __future__ import annotations

import numpy as np
import pytest

from ownvoice import loudness
from ownvoice.audiobook.assemble import TRIM_MARGIN_S, measure, spread, stream, trim_silence
from ownvoice.audiobook.options import Pauses
from ownvoice.audiobook.plan import PlannedChunk
from tests.audiobook.fake_server import LEAD_S, speech, speech_samples

SR = 24000


def _noise_speech(seconds: float, gain_db: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(round(seconds * SR)) / SR
    x = rng.normal(0, 0.05, len(t)) * (0.6 + 0.4 * np.sin(2 * np.pi * 3 * t))
    return (x * 10 ** (gain_db / 20)).astype(np.float32)


class _Stats:
    def __init__(self, asm):
        self.before_lufs, self.after_lufs, self.limited = (
            asm.before_lufs,
            asm.after_lufs,
            asm.limited,
        )


def level_chunks(chunks, sr, target_lufs, peak_dbtp):
    """Both passes over in-memory chunks with no pauses; the levelled chunks and the stats."""
    plan = [PlannedChunk(i, "text", 0, "sentence") for i in range(len(chunks))]

    def load(chunk):
        return chunks[chunk.index]

    asm = measure(plan, load, sr, Pauses(0, 0, 0, 0, 0), target_lufs)
    blocks = list(stream(plan, load, asm, peak_dbtp))
    return blocks[1::2], _Stats(asm)  # [head, chunk, gap, chunk, gap, ...]


def test_a_6_db_spread_is_levelled_to_within_1_lu_of_the_target():
    chunks = [
        _noise_speech(2.0 + i % 3, gain, i) for i, gain in enumerate([-3, 3, 0, -2, 2, 1, -1, 3])
    ]
    out, stats = level_chunks(chunks, SR, target_lufs=-18.0, peak_dbtp=-1.0)
    assert spread(stats.before_lufs) == pytest.approx(6.0, abs=0.5)
    assert spread(stats.after_lufs) <= 1.0
    for audio in out:
        assert loudness.integrated_loudness(audio, SR) == pytest.approx(-18.0, abs=0.5)


def test_short_and_silent_chunks_are_guarded():
    normal = [_noise_speech(2.0, 6.0, i) for i in range(3)]  # all need the same gain
    short = _noise_speech(0.2, 6.0, 9)  # pyloudnorm cannot measure under 0.4 s
    silent = np.zeros(SR, dtype=np.float32)  # pyloudnorm says -inf
    out, stats = level_chunks([*normal, short, silent], SR, -18.0, -1.0)
    assert stats.before_lufs[3] is None and stats.before_lufs[4] is None
    gain = out[0].std() / normal[0].std()
    assert out[3].std() / short.std() == pytest.approx(gain, rel=0.01)  # the book's median gain
    assert not out[4].any()  # silence stays silence
    assert all(np.isfinite(a).all() for a in out)


def test_true_peak_stays_under_the_ceiling_after_gain():
    # quiet on average but with sharp peaks: the gain to -18 LUFS would push them past 0 dBFS
    x = _noise_speech(3.0, -10.0, 1)
    x[SR : SR + 40] = 0.9 * np.sign(np.sin(np.arange(40)))
    out, stats = level_chunks([x], SR, target_lufs=-18.0, peak_dbtp=-1.0)
    assert stats.limited == 1
    assert loudness.true_peak_db(out[0]) <= -1.0 + 1e-3
    # the limiter only touched the neighbourhood of the peak
    untouched = np.r_[0 : SR - 2400, SR + 4000 : len(x)]
    ratio = out[0][untouched] / np.where(x[untouched] == 0, 1, x[untouched])
    assert np.allclose(ratio[x[untouched] != 0], ratio[x[untouched] != 0][0], rtol=1e-3)


def test_true_peak_sees_inter_sample_peaks():
    # a sine at fs/4 sampled at +-45 degrees: samples reach 0.707, the wave reaches 1.0
    n = np.arange(4800)
    x = np.sin(np.pi / 2 * n + np.pi / 4).astype(np.float32)
    assert 20 * np.log10(np.abs(x).max()) == pytest.approx(-3.01, abs=0.01)
    assert loudness.true_peak_db(x) == pytest.approx(0.0, abs=0.2)


def test_trim_keeps_speech_and_a_margin():
    text = "Some words to say here."
    x = speech(text)  # exact-zero silence around the speech
    lead = round(LEAD_S * SR)
    trimmed = trim_silence(x, SR)
    margin = round(TRIM_MARGIN_S * SR)
    assert len(trimmed) == speech_samples(text) + 2 * margin
    assert np.array_equal(trimmed[margin : margin + 100], x[lead : lead + 100])


def test_trim_of_silence_is_empty():
    assert len(trim_silence(np.zeros(SR, dtype=np.float32), SR)) == 0


def test_layout_puts_each_pause_after_its_chunk_and_marks_chapter_starts():
    x = speech("Twelve chars")  # exact-zero edges: trimmed to speech + margins
    n = speech_samples("Twelve chars") + 2 * round(TRIM_MARGIN_S * SR)
    plan = [
        PlannedChunk(0, "a", 0, "sentence"),
        PlannedChunk(1, "b", 0, "paragraph"),
        PlannedChunk(2, "c", 0, "chapter"),
        PlannedChunk(3, "d", 1, "end"),
    ]
    pauses = Pauses(sentence=0.25, paragraph=0.5, chapter=2.0, head=0.125, tail=1.0)
    asm = measure(plan, lambda c: x, SR, pauses, -18.0)
    gaps = [0.25, 0.5, 2.0, 1.0]
    assert asm.lengths == [n] * 4 and asm.gaps == [round(g * SR) for g in gaps]
    assert asm.chapter_ids == [0, 1]
    assert asm.chapter_starts == [0, round(0.125 * SR) + 3 * n + round(2.75 * SR)]
    blocks = list(stream(plan, lambda c: x, asm, -1.0))
    assert sum(len(b) for b in blocks) == asm.total == round(3.875 * SR) + 4 * n


def test_a_pause_tags_silence_is_exact_between_the_trimmed_chunks():
    chunks = [_noise_speech(1.0, 0, 1), _noise_speech(1.0, 0, 2)]
    plan = [PlannedChunk(0, "a", 0, "sentence", pause_s=1.25), PlannedChunk(1, "b", 0, "end")]
    pauses = Pauses(sentence=0.35, paragraph=0.8, chapter=2.0, head=0.5, tail=1.0)
    asm = measure(plan, lambda c: chunks[c.index], SR, pauses, -18.0)
    assert asm.gaps == [round(1.25 * SR), SR]  # the tag's, not the sentence pause's 0.35 s
    blocks = list(stream(plan, lambda c: chunks[c.index], asm, -1.0))
    assert len(blocks[2]) == 30000 and not blocks[2].any()
