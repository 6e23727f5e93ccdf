"""The fast decode loop produces the same greedy codes as the eager parity loop, in every mode."""

from __future__ import annotations

import numpy as np
import pytest

from ownvoice.engine.options import SamplingOptions, SynthesisOptions
from tests.parity.scenarios import REF_TEXT, TEXT, reference_clip

CASES = [
    ("1.7B-CustomVoice", dict(voice="ryan", instruct="Calm."), "non-streaming"),
    ("0.6B-CustomVoice", dict(voice="eric"), "streaming"),
    ("1.7B-VoiceDesign", dict(instruct="A deep voice."), "non-streaming"),
    ("0.6B-Base", dict(clone=dict(x_vector_only=True)), "streaming"),
    ("1.7B-Base", dict(clone=dict(ref_text=REF_TEXT)), "streaming"),
    ("1.7B-Base", dict(clone=dict(ref_text=REF_TEXT)), "non-streaming"),
]


@pytest.fixture(scope="module")
def engines(tiny_engine):
    return lambda like, fast: tiny_engine(like, fast=fast)


@pytest.mark.parametrize("like,kwargs,text_mode", CASES)
def test_fast_equals_eager_greedy(like, kwargs, text_mode, engines):
    options = SynthesisOptions(
        language="auto", sampling=SamplingOptions.greedy(), max_frames=70, text_mode=text_mode
    )
    results = []
    for fast in (False, True):
        engine = engines(like, fast)
        kw = dict(kwargs)
        if "clone" in kw:
            kw["voice"] = engine.make_voice(reference_clip(), **kw.pop("clone"))
        results.append(engine.synthesize(TEXT, options=options, **kw))
    eager, fast = results
    assert eager.codes.shape[0] > 2
    assert np.array_equal(eager.codes, fast.codes), np.argwhere(eager.codes != fast.codes)[:3]
    np.testing.assert_allclose(fast.audio, eager.audio, atol=1e-5)


def test_fast_path_is_reusable_across_requests(engines):
    """Static buffers are reset between syntheses: a repeat gives the same codes."""
    engine = engines("0.6B-CustomVoice", True)
    opts = SynthesisOptions(sampling=SamplingOptions.greedy(), max_frames=20)
    first = engine.synthesize(
        "First request, a bit longer than the second.", voice="ryan", options=opts
    )
    engine.synthesize("Second.", voice="aiden", options=opts)
    again = engine.synthesize(
        "First request, a bit longer than the second.", voice="ryan", options=opts
    )
    assert np.array_equal(first.codes, again.codes)


def test_fast_sampling_is_seeded(engines):
    engine = engines("0.6B-CustomVoice", True)
    opts = SynthesisOptions(max_frames=16, seed=11)
    a = engine.synthesize(TEXT, voice="ryan", options=opts)
    b = engine.synthesize(TEXT, voice="ryan", options=opts)
    c = engine.synthesize(TEXT, voice="ryan", options=opts.with_(seed=12))
    assert np.array_equal(a.codes, b.codes)
    assert not np.array_equal(a.codes, c.codes)


@pytest.mark.parametrize("kernels_on", [True, False])
def test_cache_grows_past_its_first_capacity(tmp_path, monkeypatch, kernels_on):
    """A generation longer than the initially allocated cache keeps matching the eager path
    (both backends: our CPU kernels' per-row caches, torch's shared padded cache)."""
    from ownvoice import kernels
    from ownvoice.engine.engine import Engine
    from ownvoice.engine.fast import loop

    if not kernels_on:
        monkeypatch.setattr(kernels, "_state", {"module": None})
    from ownvoice.dev.random_checkpoint import write_random_checkpoint

    # start small: the request below needs ~100 positions; a checkpoint that never says EOS
    # makes all 80 frames, past position 64 (where the torch backend's attended span grows)
    monkeypatch.setattr(loop, "INITIAL_FRAMES", 8)
    path = str(write_random_checkpoint(tmp_path / "no-eos", "0.6B-CustomVoice", tiny=True,
                                       no_eos=True))  # fmt: skip
    eager = Engine.load(path, device="cpu", dtype="float32", fast=False)
    fast = Engine.load(path, device="cpu", dtype="float32", fast=True)
    assert fast.backend == ("cpu-kernels" if kernels_on else "torch")
    opts = SynthesisOptions(sampling=SamplingOptions.greedy(), max_frames=80)
    a = eager.synthesize(TEXT, voice="ryan", options=opts)
    b = fast.synthesize(TEXT, voice="ryan", options=opts)
    assert len(a.codes) == 80 and np.array_equal(a.codes, b.codes)


def test_compiled_fast_path_equals_eager(engines, tiny_checkpoints, monkeypatch):
    """use_compile: the torch.compile'd code-predictor phase gives the eager path's codes.

    The CPU kernels are switched off so the compiled torch phases are what runs (the path a
    GPU or a CPU without AVX2 takes). Inductor's C++ code generation takes minutes on two
    cores, so the phases go through dynamo with the "aot_eager" backend here (tracing, graph
    breaks, functionalisation); scripts/gpu_check.py compiles them for real on CUDA.
    """
    import functools

    import torch

    from ownvoice import kernels
    from ownvoice.engine.engine import Engine

    monkeypatch.setattr(kernels, "_state", {"module": None})
    monkeypatch.setattr(torch, "compile", functools.partial(torch.compile, backend="aot_eager"))
    compiled = Engine.load(
        str(tiny_checkpoints["0.6B-CustomVoice"]), device="cpu", dtype="float32", use_compile=True
    )
    assert compiled.backend == "torch" and compiled.compiled
    options = SynthesisOptions(sampling=SamplingOptions.greedy(), max_frames=24)
    eager = engines("0.6B-CustomVoice", False).synthesize(TEXT, voice="eric", options=options)
    fast = compiled.synthesize(TEXT, voice="eric", options=options)
    assert np.array_equal(eager.codes, fast.codes)


def test_the_torch_backends_span_covers_every_rows_newest_position(tiny_checkpoints, monkeypatch):
    """The talker step writes each row's key at its position and attends span positions from
    0: the span must include the newest one, also at a multiple of the 64-position bucket
    (where rounding up would otherwise stop just short of it)."""
    from types import SimpleNamespace

    from ownvoice import kernels
    from ownvoice.engine.engine import Engine

    monkeypatch.setattr(kernels, "_state", {"module": None})
    fast = Engine.load(
        str(tiny_checkpoints["0.6B-CustomVoice"]), device="cpu", dtype="float32", fast=True
    )
    loop = fast._loop
    assert loop.backend_name == "torch"
    loop.backend.ensure(0, 300)
    for positions in ([5], [63], [64], [63, 64], [127, 3], [128], [129]):
        monkeypatch.setattr(loop, "rows", [SimpleNamespace(position=p) for p in positions])
        span = loop._span(loop.rows)
        assert span > max(positions) and span % 64 == 0, (positions, span)
