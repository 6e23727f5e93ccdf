"""ownvoice against the official qwen-tts 0.1.1, scenario by scenario (float32, CPU).

Greedy and seeded-sampled codes must be identical for all 16 codebooks of every frame, and the
waveforms equal within 1e-5 (absolute and relative) -- on tiny random checkpoints that carry
signal, loaded unchanged by both implementations.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from tests.parity.harness import Scenario, mismatches, run_ours, run_reference
from tests.parity.scenarios import GREEDY, LONG, SAMPLED, TEXT
from tests.reference import import_reference

pytestmark = pytest.mark.reference


@pytest.mark.parametrize(
    "like,scenario", GREEDY + SAMPLED + [LONG], ids=lambda v: getattr(v, "name", v)
)
def test_same_codes_and_audio(like, scenario, reference_outcome, our_engines):
    ref = reference_outcome(like, scenario)
    ours = run_ours(our_engines(like), scenario)
    # the comparison is only meaningful if there is signal to compare
    assert ref.wav.std() > 0.01, f"reference waveform is near silence (std {ref.wav.std():.2g})"
    assert len(np.unique(ref.codes[:, 0])) > 1, "reference codes are constant"
    assert not mismatches(ref, ours), mismatches(ref, ours)


@pytest.mark.parametrize("backend", ["cpu-kernels", "torch"])
@pytest.mark.parametrize("like,scenario", GREEDY + [LONG], ids=lambda v: getattr(v, "name", v))
def test_the_fast_path_matches_the_reference_greedy(like, scenario, backend, reference_outcome,
                                                    fast_engines):  # fmt: skip
    """The loop users run (static caches, our kernels or torch's ops) against the official
    package, not only against our eager loop."""
    ref = reference_outcome(like, scenario)
    ours = run_ours(fast_engines(like, backend), scenario)
    assert not mismatches(ref, ours), mismatches(ref, ours)


def test_text_reaches_the_codes(our_engines):
    """If text did not change the codes, text-path bugs would go unnoticed."""
    engine = our_engines("1.7B-CustomVoice")
    a = run_ours(engine, Scenario("a", "custom_voice", TEXT, speaker="ryan"))
    b = run_ours(engine, Scenario("b", "custom_voice", "Something else entirely.", speaker="ryan"))
    assert not np.array_equal(a.codes, b.codes)


def test_eos_at_the_two_frame_minimum(tiny_checkpoints, reference_models, our_engines, tmp_path):
    """Make EOS the greedy choice as early as allowed: both stop after exactly 2 frames."""
    like = "0.6B-CustomVoice"
    scenario = Scenario("eos", "custom_voice", TEXT, "english", "ryan", frames=12)
    first = run_ours(our_engines(like), scenario)
    chosen = int(first.codes[2, 0])
    folder = tmp_path / "eos"
    shutil.copytree(tiny_checkpoints[like], folder)
    weights = load_file(folder / "model.safetensors")
    head = weights["talker.codec_head.weight"]
    head[2150] = head[chosen] * 2  # exact in bf16
    save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})

    from ownvoice.engine.engine import Engine

    ref = run_reference(
        import_reference().Qwen3TTSModel.from_pretrained(str(folder), dtype=torch.float32),
        scenario,
    )
    for fast in (False, True):
        engine = Engine.load(str(folder), device="cpu", dtype="float32", fast=fast)
        ours = run_ours(engine, scenario)
        assert ours.extra["stop"] == "eos", fast
        assert ours.codes.shape[0] == 2 and ref.codes.shape[0] == 2, (
            ours.codes.shape,
            ref.codes.shape,
        )
        assert not mismatches(ref, ours), (fast, mismatches(ref, ours))
