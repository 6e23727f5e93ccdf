"""Text that arrives while it is spoken (Engine.start_open) gives the codes of the whole text.

A sequence starts on its first stable token and takes the rest as it comes; when it reads past
the known text it sits steps out instead of reading padding. Its greedy and seeded codes, and
its audio, must equal `start()` with the final text in the streaming text mode, however the
text is cut and however long each piece takes, alone or beside other rows, in every mode.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from ownvoice.engine.opentext import TextSoFar
from ownvoice.engine.options import SamplingOptions, SynthesisOptions
from tests.parity.scenarios import REF_TEXT, reference_clip

TEXT = "Well, the weather tomorrow looks sunny, with highs around twenty degrees and a light wind."

CASES = {
    "custom-greedy": ("0.6B-CustomVoice", "ryan", None, dict(sampling=SamplingOptions.greedy())),
    "custom-seeded": ("0.6B-CustomVoice", "ryan", None, dict(seed=11)),
    "design": ("1.7B-VoiceDesign", None, "A calm, low voice.", dict(seed=5)),
    "clone-icl": ("0.6B-Base", dict(ref_text=REF_TEXT), None, dict(seed=3)),
    "clone-xvector": ("0.6B-Base", dict(x_vector_only=True), None, dict(sampling=SamplingOptions.greedy())),
}  # fmt: skip


@pytest.fixture(scope="module")
def engines(tiny_engine):
    return tiny_engine


class Typist:
    """A text source that reveals `text` in the given cuts, one cut every `every[i]` polls."""

    def __init__(self, text: str, cuts: list[int], every: list[int]):
        self.text, self.cuts, self.every = text, cuts, every
        self.shown, self.polls, self.index = 0, 0, 0

    def __call__(self) -> TextSoFar:
        self.polls += 1
        if self.index < len(self.cuts) and self.polls >= self.every[self.index]:
            self.shown = self.cuts[self.index]
            self.index += 1
            self.polls = 0
        return TextSoFar(self.text[: self.shown], self.shown == len(self.text))


def random_cuts(text: str, rng: random.Random) -> tuple[list[int], list[int]]:
    cuts = sorted(rng.sample(range(1, len(text)), rng.randint(1, 8))) + [len(text)]
    return cuts, [rng.choice([1, 1, 2, 5, 12]) for _ in cuts]


def options(extra, **kw):
    return SynthesisOptions(text_mode="streaming", max_frames=60, first_chunk_frames=2,
                            chunk_frames=4, **extra, **kw)  # fmt: skip


def run(engine, seqs):
    """Drive the engine until every sequence ended; returns {seq: (codes, audio)}."""
    out = {seq: ([], []) for seq in seqs}
    waiting = list(seqs)
    for _ in range(2000):
        for seq in list(waiting):
            if engine.startable(seq):
                engine.join(seq)
                waiting.remove(seq)
                for s, chunk in engine.ready_chunks():
                    out[s][0].append(chunk.codes)
                    out[s][1].append(chunk.samples)
        if not waiting and not engine.running:
            break
        for s, chunk in engine.step():
            out[s][0].append(chunk.codes)
            out[s][1].append(chunk.samples)
    assert not waiting and not engine.running
    return {s: (np.concatenate(c), np.concatenate(a)) for s, (c, a) in out.items()}


def voice_of(engine, voice):
    return engine.make_voice(reference_clip(), **voice) if isinstance(voice, dict) else voice


@pytest.mark.parametrize("case", list(CASES))
def test_any_cut_gives_the_codes_of_the_whole_text(case, engines):
    like, voice, instruct, extra = CASES[case]
    engine = engines(like)
    voice = voice_of(engine, voice)
    whole = engine.synthesize(TEXT, voice, instruct, options(extra))
    assert len(whole.codes) > 10
    rng = random.Random(case)
    for trial in range(3):
        cuts, every = random_cuts(TEXT, rng)
        source = Typist(TEXT, cuts, every)
        seq = engine.start_open(source, voice, instruct, options(extra))
        ((codes, audio),) = run(engine, [seq]).values()
        assert np.array_equal(codes, whole.codes), (case, trial, cuts, every)
        np.testing.assert_allclose(audio, whole.audio, atol=1e-5, rtol=0)


def test_an_open_text_starts_before_the_text_is_whole(engines):
    """Its first frames come after its first word, and it waits (makes no frame) when it reads
    past the text it has."""
    engine = engines("0.6B-CustomVoice")
    shown = {"text": "Well, the"}
    seq = engine.start_open(lambda: TextSoFar(shown["text"], False), "ryan", None,
                            options(dict(sampling=SamplingOptions.greedy())))  # fmt: skip
    assert engine.startable(seq)
    engine.join(seq)
    frames = seq.frames
    for _ in range(6):
        list(engine.step())
    assert seq.frames <= 3 and seq.text.waited > 0 and engine.waiting_for_text
    shown["text"] = TEXT
    before = seq.frames
    list(engine.step())
    assert seq.frames == before + 1 and frames >= 1
    engine.cancel_all()


def test_waiting_rows_do_not_disturb_the_others(engines):
    """Two open texts arriving at different paces beside a plain request: each gives its own
    solo codes (a waiting row draws no noise and keeps its cache and slot data)."""
    engine = engines("0.6B-CustomVoice")
    other = "A plain request, spoken beside the others while they wait for their words."
    solo = {
        "a": engine.synthesize(TEXT, "ryan", None, options(dict(seed=1))).codes,
        "b": engine.synthesize(other, "vivian", None, options(dict(seed=2))).codes,
        "c": engine.synthesize(other, "aiden", None, options(dict(seed=3))).codes,
    }
    rng = random.Random(7)
    a = engine.start_open(
        Typist(TEXT, *random_cuts(TEXT, rng)), "ryan", None, options(dict(seed=1))
    )
    b = engine.start_open(Typist(other, [10, 30, len(other)], [1, 30, 40]), "vivian", None,
                          options(dict(seed=2)))  # fmt: skip
    c = engine.start("A plain request, spoken beside the others while they wait for their words.",
                     "aiden", None, options(dict(seed=3)))  # fmt: skip
    got = run(engine, [c, a, b])
    assert np.array_equal(got[a][0], solo["a"])
    assert np.array_equal(got[b][0], solo["b"])
    assert np.array_equal(got[c][0], solo["c"])


def test_a_cancelled_waiting_row_leaves(engines):
    engine = engines("0.6B-CustomVoice")
    seq = engine.start_open(lambda: TextSoFar("Hello there, how", False), "ryan", None,
                            options(dict(seed=1)))  # fmt: skip
    engine.join(seq)
    for _ in range(5):
        list(engine.step())
    seq.cancel()
    chunks = list(engine.step())
    assert seq.stop_reason == "cancelled" and not engine.running
    assert chunks and chunks[-1][1].is_last


def test_non_streaming_text_mode_is_refused(engines):
    from ownvoice.errors import InvalidInput

    engine = engines("0.6B-CustomVoice")
    with pytest.raises(InvalidInput, match="streaming text mode"):
        engine.start_open(lambda: TextSoFar("Hi", False), "ryan", None,
                          SynthesisOptions(text_mode="non-streaming"))  # fmt: skip


class WideProjection(torch.nn.Module):
    """A text projection as wide as a real checkpoint's (2048), where torch's matrix product
    rounds a row differently depending on how many rows it multiplies (the tiny checkpoints'
    are too narrow to show it)."""

    def __init__(self, inner: torch.nn.Module, text_hidden: int, hidden: int):
        super().__init__()
        torch.manual_seed(0)
        self.inner = inner
        self.up = torch.nn.Linear(hidden, 2048)
        self.down = torch.nn.Linear(2048, hidden)
        for layer in (self.up, self.down):
            torch.nn.init.normal_(layer.weight, std=layer.weight.shape[1] ** -0.5)

    def forward(self, x):
        h = self.inner(x)
        return h + 0.1 * self.down(torch.nn.functional.silu(self.up(h)))


@pytest.fixture(scope="module")
def wide_engine(tiny_checkpoints):
    from ownvoice.engine.engine import Engine

    engine = Engine.load(str(tiny_checkpoints["0.6B-CustomVoice"]), device="cpu", dtype="float32")
    talker = engine._m.model.talker  # the test swaps in a wider layer; no API exposes it
    talker.text_projection = WideProjection(
        talker.text_projection, talker.cfg.text_hidden_size, talker.cfg.hidden_size
    ).eval()
    return engine


def test_text_rows_do_not_depend_on_how_much_text_is_known(wide_engine):
    from ownvoice.engine.prompt import embed_text_rows

    talker = wide_engine._m.model.talker
    ids = list(range(40, 40 + 77))
    whole = embed_text_rows(talker, ids)
    for n in (1, 3, 8, 13, 40, 77):
        assert torch.equal(embed_text_rows(talker, ids[:n]), whole[:, :n]), n
    # the plain way does depend on it at this width (else this test would prove nothing)
    with torch.inference_mode():
        plain = talker.embed_text(torch.tensor([ids]))
        assert any(
            not torch.equal(talker.embed_text(torch.tensor([ids[:n]])), plain[:, :n])
            for n in (1, 3, 13, 40)
        )


def test_any_cut_at_full_width(wide_engine):
    engine = wide_engine
    extra = dict(seed=4)
    whole = engine.synthesize(TEXT, "ryan", None, options(extra))
    rng = random.Random(3)
    for trial in range(3):
        seq = engine.start_open(Typist(TEXT, *random_cuts(TEXT, rng)), "ryan", None, options(extra))
        ((codes, audio),) = run(engine, [seq]).values()
        assert np.array_equal(codes, whole.codes), trial
        np.testing.assert_allclose(audio, whole.audio, atol=1e-5, rtol=0)


def test_the_rows_fed_are_bit_for_bit_those_of_the_whole_text(wide_engine):
    """Codes alone could hide a last-bit difference; the rows themselves must be equal."""
    engine = wide_engine
    long_text = " ".join([TEXT] * 3)
    whole = engine.start(long_text, "ryan", None, options({})).prompt
    rng = random.Random(5)
    for _ in range(4):
        cuts = sorted(rng.sample(range(1, len(long_text)), 12)) + [len(long_text)]
        source = Typist(long_text, cuts, [1] * len(cuts))
        seq = engine.start_open(source, "ryan", None, options({}))
        while not engine.startable(seq):
            pass
        assert torch.equal(seq.prompt.embeds, whole.embeds)
        for k in range(400):
            if seq.text_row(k) is None:
                continue
            if seq.text.final:
                break
        assert torch.equal(seq.text.rows, whole.trailing[:, :-1])
        assert torch.equal(seq.text_row(seq.text.rows.shape[1]), whole.trailing[:, -1:])
