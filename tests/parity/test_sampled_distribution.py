"""Sampled generation draws from the reference's distribution, end to end.

The fast path samples by an exponential race (argmax of p / E), not by the reference's
torch.multinomial, so seeded sampled codes differ from the official package's by design (the
eager path matches them exactly: tests/parity). Here many seeded requests on a tiny model, on
the fast path with our CPU kernels and with torch's ops, draw the first frame's first code, and
a chi-square goodness-of-fit test (fixed seeds, so the test is deterministic) compares the
counts with the distribution the reference samples from: the model's own logits for that
position (teacher-forced, engine.forced_logits) with its masking and the request's
temperature and top-k applied in the reference's order.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.stats import chisquare

from ownvoice.engine.options import SamplingOptions, SynthesisOptions
from ownvoice.engine.sampling import talker_logit_mask, warp

DRAWS = 400
TEXT = "Hi."
# the tiny model's logits lie within ~0.6 of each other: a low temperature gives them a shape
SAMPLING = SamplingOptions(temperature=0.05, top_k=20)


def options(seed: int) -> SynthesisOptions:
    return SynthesisOptions(seed=seed, max_frames=2, language="english", sampling=SAMPLING)


def reference_distribution(engine) -> np.ndarray:
    """P(first code of frame 0) as the reference computes it: code-0 logits, the talker's
    forbidden ids and EOS (not allowed in the first frames) masked, then temperature, top-k."""
    first = engine.synthesize(TEXT, voice="ryan", options=options(0)).codes[:1]
    logits = engine.forced_logits(TEXT, first, voice="ryan", options=options(0)).code0[0]
    V = logits.shape[-1]
    eos = engine.model_config.talker.codec_eos_id
    masked = logits.masked_fill(talker_logit_mask(V, eos, logits.device), float("-inf"))
    masked[eos] = float("-inf")
    warped = warp(masked[None].float(), SAMPLING.temperature, SAMPLING.top_k, SAMPLING.top_p)
    return torch.softmax(warped, dim=-1)[0].double().numpy()


@pytest.mark.parametrize("backend", ["cpu-kernels", "torch"])
def test_fast_sampling_draws_from_the_reference_distribution(backend, fast_engines, our_engines):
    want = reference_distribution(our_engines("0.6B-CustomVoice"))
    engine = fast_engines("0.6B-CustomVoice", backend)
    draws = [engine.synthesize(TEXT, voice="ryan", options=options(1000 + s)).codes[0, 0]
             for s in range(DRAWS)]  # fmt: skip
    counts = np.bincount(draws, minlength=want.size)
    assert counts[want == 0].sum() == 0, "drew a code the warp removes"
    kept = want > 0
    assert 5 <= kept.sum() <= SAMPLING.top_k and want.max() > 2 / kept.sum(), "no shape to test"
    # pool the rare codes so that every expected count is at least 5
    order = np.argsort(-want[kept])
    p, c = want[kept][order], counts[kept][order]
    big = p * DRAWS >= 5
    expected = np.append(p[big], p[~big].sum()) * DRAWS
    observed = np.append(c[big], c[~big].sum())
    if expected[-1] == 0:
        expected, observed = expected[:-1], observed[:-1]
    result = chisquare(observed, expected * observed.sum() / expected.sum())
    assert result.pvalue > 1e-3, (result, observed, expected.round(1))
