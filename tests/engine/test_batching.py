"""Batched equals solo: a request's codes do not depend on what else shares its steps.

Each request runs alone (`Engine.stream`), then inside a batch with requests of other modes,
lengths, sampling settings and arrival times (rows joining and leaving mid-flight, one
cancelled, one ending at the 2-frame minimum). Greedy codes and seeded sampled codes must be
identical, and the audio equal within 1e-5, for every mode of every model type, with float and
with int8 / int4 weights.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from ownvoice.engine.options import SamplingOptions, SynthesisOptions
from tests.parity.scenarios import REF_TEXT, TEXT, reference_clip

GREEDY = SamplingOptions.greedy()


@dataclass
class Req:
    text: str
    voice: object = None  # speaker name, or dict(ref_text=..., x_vector_only=...) for a clone
    instruct: str | None = None
    options: SynthesisOptions = field(default_factory=SynthesisOptions)
    join_at: int = 0  # step at which it arrives
    cancel_at: int | None = None  # step at which its client goes away


def opts(**kw) -> SynthesisOptions:
    kw.setdefault("first_chunk_frames", 2)
    kw.setdefault("chunk_frames", 5)
    return SynthesisOptions(**kw)


MIXES = {
    "1.7B-CustomVoice": [
        Req(TEXT, "ryan", "Speak slowly.", opts(language="english", sampling=GREEDY, max_frames=26)),
        Req("A second sentence, said by another speaker.", "vivian", None, opts(seed=3, max_frames=33, text_mode="streaming"), join_at=0),
        Req("Short one.", "aiden", None, opts(sampling=GREEDY, max_frames=9), join_at=3),
        Req("今天天气很好，我们一起去公园散步吧。", "eric", None, opts(language="chinese", seed=9, max_frames=40), join_at=5, cancel_at=14),
        Req(TEXT, "ryan", None, opts(seed=21, max_frames=12, sampling=SamplingOptions(temperature=0.7, top_k=10, top_p=0.8, repetition_penalty=1.2)), join_at=11),
    ],
    "1.7B-VoiceDesign": [
        Req(TEXT, None, "A deep, slow male voice.", opts(sampling=GREEDY, max_frames=30)),
        Req("Something else to say, brightly.", None, "A bright young voice.", opts(seed=5, max_frames=24, text_mode="streaming"), join_at=2),
        Req("A third one.", None, "An old storyteller.", opts(seed=6, max_frames=18), join_at=4, cancel_at=9),
    ],
    "1.7B-Base": [
        Req(TEXT, dict(ref_text=REF_TEXT), None, opts(sampling=GREEDY, max_frames=28)),
        Req("Cloned, without the transcript.", dict(x_vector_only=True), None, opts(seed=4, max_frames=31), join_at=1),
        Req(TEXT, dict(ref_text=REF_TEXT), None, opts(seed=7, max_frames=20, text_mode="non-streaming"), join_at=6),
        Req("x-vector, whole text first.", dict(x_vector_only=True), None, opts(sampling=GREEDY, max_frames=15, text_mode="non-streaming"), join_at=6, cancel_at=12),
    ],
}  # fmt: skip


@pytest.fixture(scope="module")
def load(tiny_checkpoints):
    from ownvoice.engine.engine import Engine

    cache = {}

    def get(folder, **kw):
        key = (str(folder), tuple(sorted(kw.items())))
        if key not in cache:
            cache[key] = Engine.load(str(folder), device="cpu", dtype="float32", **kw)
        return cache[key]

    return get


def _voice(engine, req: Req):
    if isinstance(req.voice, dict):
        return engine.make_voice(reference_clip(), **req.voice)
    return req.voice


def solo(engine, req: Req):
    """codes (frames, 16), audio, stop reason of the request run alone (cancelled after the
    same number of frames as in the batch, when it was cancelled there)."""
    chunks = list(engine.stream(req.text, _voice(engine, req), req.instruct, req.options))
    return _join(chunks)


def batched(engine, reqs: list[Req]):
    """Run `reqs` through one batch with their arrival and cancel steps; per request what
    `solo` returns, plus the batch sizes seen."""
    seqs = [engine.start(r.text, _voice(engine, r), r.instruct, r.options) for r in reqs]
    chunks = {id(s): [] for s in seqs}
    sizes, step = [], 0
    while step == 0 or engine.running or any(r.join_at >= step for r in reqs):
        for r, s in zip(reqs, seqs, strict=True):
            if r.join_at == step:
                engine.join(s)
            if r.cancel_at == step:
                s.cancel()
        sizes.append(len(engine.running))
        for s, c in engine.step():
            chunks[id(s)].append(c)
        step += 1
        assert step < 500
    return [_join(chunks[id(s)]) for s in seqs], sizes


def _join(chunks):
    assert chunks and chunks[-1].is_last and sum(c.is_last for c in chunks) == 1
    return (
        np.concatenate([c.codes for c in chunks]).reshape(-1, 16),
        np.concatenate([c.samples for c in chunks]),
        chunks[-1].stop_reason,
    )


def assert_same(got, want, label):
    codes, audio, _ = got
    want_codes, want_audio, _ = want
    assert codes.shape[0] >= 2, label
    n = codes.shape[0]
    assert np.array_equal(codes, want_codes[:n]), (label, np.argwhere(codes != want_codes[:n])[:3])
    np.testing.assert_allclose(audio, want_audio[: len(audio)], atol=1e-5, err_msg=label)


@pytest.mark.parametrize("quantize", [None, "int8", "int4"])
@pytest.mark.parametrize("like", list(MIXES))
def test_batched_equals_solo(like, quantize, load, tiny_checkpoints):
    engine = load(tiny_checkpoints[like], quantize=quantize)
    assert engine.backend == "cpu-kernels" and engine.exact_batching
    assert engine.weight_info().label.startswith({"int8": "w8", "int4": "w4"}.get(quantize, ""))
    reqs = MIXES[like]
    alone = [solo(engine, r) for r in reqs]
    together, sizes = batched(engine, reqs)
    assert max(sizes) >= 3, sizes  # they really shared steps
    for i, (r, got, want) in enumerate(zip(reqs, together, alone, strict=True)):
        label = f"{like} request {i}"
        # (quantized weights make other codes: a row may reach its end before its cancel step)
        ended_first = quantize is not None and got[2] != "cancelled"
        if r.cancel_at is None or ended_first:
            assert got[2] == want[2] and got[0].shape == want[0].shape, (label, got[2], want[2])
        else:
            assert got[2] == "cancelled" and got[0].shape[0] < want[0].shape[0], label
        assert_same(got, want, label)
    assert not engine.running


def test_row_ending_at_the_two_frame_minimum(load, tiny_checkpoints, tmp_path):
    """EOS made the greedy choice at frame 2 for one request: it leaves the batch after exactly
    2 frames while the others go on, each still equal to its solo run."""
    like = "0.6B-CustomVoice"
    first = load(tiny_checkpoints[like]).synthesize(
        TEXT, "ryan", options=opts(language="english", sampling=GREEDY, max_frames=12)
    )
    folder = tmp_path / "eos"
    shutil.copytree(tiny_checkpoints[like], folder)
    weights = load_file(folder / "model.safetensors")
    head = weights["talker.codec_head.weight"]
    head[2150] = head[int(first.codes[2, 0])] * 2  # exact in bf16
    save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})
    engine = load(folder)
    reqs = [
        Req("A longer request that keeps going for a while.", "aiden", None, opts(seed=2, max_frames=20)),
        Req(TEXT, "ryan", None, opts(language="english", sampling=GREEDY, max_frames=12), join_at=1),
        Req("Another one.", "serena", None, opts(sampling=GREEDY, max_frames=14), join_at=1),
    ]  # fmt: skip
    alone = [solo(engine, r) for r in reqs]
    assert alone[1][2] == "eos" and alone[1][0].shape[0] == 2
    together, _ = batched(engine, reqs)
    for i, (got, want) in enumerate(zip(together, alone, strict=True)):
        assert got[2] == want[2] and got[0].shape == want[0].shape, i
        assert_same(got, want, f"request {i}")


def test_cross_row_bug_is_caught(load, tiny_checkpoints, monkeypatch):
    """A row attending at its neighbour's cache position must break the equality above."""
    from ownvoice.engine.fast.backends import KernelBackend

    engine = load(tiny_checkpoints["1.7B-CustomVoice"], max_batch=4)
    reqs = MIXES["1.7B-CustomVoice"][:3]
    alone = [solo(engine, r) for r in reqs]
    original = KernelBackend.talker

    def neighbours_position(self, n, x, pos, span):
        # a neighbour's position where it fits in this row's cache
        return original(self, n, x, torch.minimum(pos.roll(1), pos) if n > 1 else pos, span)

    monkeypatch.setattr(KernelBackend, "talker", neighbours_position)
    together, _ = batched(engine, reqs)
    assert any(
        not np.array_equal(got[0], want[0][: got[0].shape[0]])
        for got, want in zip(together, alone, strict=True)
    )


def test_torch_backend_batches_too(load, tiny_checkpoints, monkeypatch):
    """Without our kernels (torch's ops, the GPU path) batching works and agrees with solo
    runs; torch promises no batch invariance, so agreement is measured, not required exact."""
    from ownvoice import kernels

    monkeypatch.setattr(kernels, "_state", {"module": None})
    engine = load(tiny_checkpoints["1.7B-Base"], fast=True, attention="sdpa", max_batch=6)
    assert engine.backend == "torch" and not engine.exact_batching
    reqs = [r for r in MIXES["1.7B-Base"] if r.options.sampling is GREEDY]
    alone = [solo(engine, r) for r in reqs]
    together, _ = batched(engine, reqs)
    same = total = 0
    for got, want in zip(together, alone, strict=True):
        n = got[0].shape[0]
        same += int((got[0] == want[0][:n]).all(axis=1).sum())
        total += n
    assert same / total >= 0.9, (same, total)


def test_eager_engine_runs_batches_through_the_same_api(load, tiny_checkpoints):
    """fast=False (the parity path) takes the same join/step calls, one row after another."""
    engine = load(tiny_checkpoints["1.7B-VoiceDesign"], fast=False)
    reqs = MIXES["1.7B-VoiceDesign"]
    alone = [solo(engine, r) for r in reqs]
    together, _ = batched(engine, reqs)
    for i, (got, want) in enumerate(zip(together, alone, strict=True)):
        assert_same(got, want, f"eager request {i}")


def test_join_refuses_a_full_batch(load, tiny_checkpoints):
    engine = load(tiny_checkpoints["0.6B-CustomVoice"], max_batch=2)
    seqs = [engine.start("Hi.", "ryan", options=opts(max_frames=4)) for _ in range(3)]
    engine.join(seqs[0])
    engine.join(seqs[1])
    with pytest.raises(RuntimeError, match="batch full"):
        engine.join(seqs[2])
    engine.cancel_all()
    assert not engine.running
    with torch.inference_mode():
        assert engine.synthesize("Hi.", "ryan", options=opts(max_frames=3)).codes.shape[0] == 3
