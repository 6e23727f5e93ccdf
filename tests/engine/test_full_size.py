"""Fast path = eager path on full-size random checkpoints (0.6B), not only on tiny ones.

Tiny checkpoints exercise the logic; full size exercises what tiny shapes cannot: real head
counts and widths in the C++ layer kernel, 16-bit weight packing of 1024-wide rows, huge-page
arenas, KV caches past their first capacity with long prompts. Greedy codes must be identical.
About a minute and a half on two cores (eager decoding at ~1 s/frame), plus writing the two
2.4 GB checkpoints on a machine's first run (tests/checkpoint_cache.py keeps them).
"""

from __future__ import annotations

import numpy as np
import pytest

from ownvoice.engine.options import SamplingOptions, SynthesisOptions
from tests.checkpoint_cache import cached_random_checkpoint
from tests.parity.scenarios import REF_TEXT, TEXT, reference_clip

FRAMES = 20


@pytest.fixture(scope="module")
def full_size():
    return {
        like: cached_random_checkpoint(like, tiny=False, seed=3, no_eos=True)
        for like in ("0.6B-CustomVoice", "0.6B-Base")
    }


def both(path):
    from ownvoice.engine.engine import Engine

    return [Engine.load(str(path), device="cpu", dtype="float32", fast=f) for f in (False, True)]


def greedy(text_mode):
    return SynthesisOptions(
        language="english", sampling=SamplingOptions.greedy(), max_frames=FRAMES,
        text_mode=text_mode,
    )  # fmt: skip


def assert_same(eager, fast):
    assert eager.codes.shape == (FRAMES, 16)
    assert np.array_equal(eager.codes, fast.codes), np.argwhere(eager.codes != fast.codes)[:3]
    np.testing.assert_allclose(fast.audio, eager.audio, atol=1e-5)


def test_custom_voice_full_size(full_size):
    eager, fast = both(full_size["0.6B-CustomVoice"])
    for mode in ("non-streaming", "streaming"):
        assert_same(
            *(e.synthesize(TEXT, voice="ryan", options=greedy(mode)) for e in (eager, fast))
        )


def test_voice_clone_full_size(full_size):
    eager, fast = both(full_size["0.6B-Base"])
    for kwargs, mode in (
        (dict(ref_text=REF_TEXT), "streaming"),
        (dict(x_vector_only=True), "non-streaming"),
    ):
        voice = eager.make_voice(reference_clip(), **kwargs)
        results = [e.synthesize(TEXT, voice=voice, options=greedy(mode)) for e in (eager, fast)]
        assert_same(*results)
