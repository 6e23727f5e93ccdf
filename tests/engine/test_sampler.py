"""The device-side sampler draws from the same distribution as the reference-order warp."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.stats import chisquare

from ownvoice.engine.fast.sampler import SamplerSettings, penalize_seen, sample_no_sync, warp_probs
from ownvoice.engine.sampling import repetition_penalty, warp

N = 40000


def expected_probs(logits, temperature, top_k, top_p):
    """The eager path's distribution: HF-order warpers, then softmax."""
    return torch.softmax(warp(logits[None], temperature, top_k, top_p), dim=-1)[0]


@pytest.mark.parametrize(
    "temperature,top_k,top_p",
    [(1.0, 0, 1.0), (0.7, 0, 1.0), (0.9, 8, 1.0), (1.3, 0, 0.8), (0.9, 12, 0.6)],
)
def test_frequencies_follow_the_softmax(temperature, top_k, top_p):
    gen = torch.Generator().manual_seed(1234)
    logits = torch.randn(40, generator=gen) * 2
    want = expected_probs(logits, temperature, top_k, top_p)
    settings = SamplerSettings.make(True, temperature, top_k, top_p, N, "cpu")
    noise = torch.empty(N, 40).exponential_(generator=gen)
    draws = sample_no_sync(logits.expand(N, -1), settings, noise)
    counts = np.bincount(draws.numpy(), minlength=40)
    # tokens the warp removed are never drawn
    assert counts[(want == 0).numpy()].sum() == 0
    keep = (want > 0).numpy()
    assert keep.sum() > 1
    expected = want.double().numpy()[keep]
    expected = expected / expected.sum() * counts[keep].sum()
    stat = chisquare(counts[keep], expected)
    assert stat.pvalue > 1e-4, (stat, counts[keep], expected.round())


def test_warp_matches_reference_order():
    gen = torch.Generator().manual_seed(5)
    for _ in range(20):
        logits = torch.randn(1, 300, generator=gen) * 3
        for t, k, p in [(0.9, 50, 1.0), (1.0, 0, 0.9), (0.5, 20, 0.7), (1.0, 300, 0.95)]:
            s = SamplerSettings.make(True, t, k, p, 1, "cpu")
            probs = warp_probs(logits, s)
            torch.testing.assert_close(
                probs / probs.sum(-1, keepdim=True),
                torch.softmax(warp(logits, t, k, p), dim=-1),
                atol=1e-6,
                rtol=1e-5,
            )


def test_greedy_rows_take_the_argmax_and_ignore_noise():
    logits = torch.randn(3, 100)
    s = SamplerSettings.make(False, 0.9, 50, 1.0, 3, "cpu")
    noise = torch.empty(3, 100).exponential_()
    assert torch.equal(sample_no_sync(logits, s, noise), logits.argmax(-1))


def test_penalty_on_seen_ids_equals_the_gather_scatter_form():
    logits = torch.randn(1, 64, generator=torch.Generator().manual_seed(0))
    logits[0, 3], logits[0, 7] = -2.0, 1.5  # a negative and a positive logit among the seen
    history = torch.tensor([[3, 7, 7, 10, 63]])
    seen = torch.zeros(1, 64, dtype=torch.bool)
    seen[0, history[0]] = True
    torch.testing.assert_close(
        penalize_seen(logits, seen, torch.tensor([[1.3]])), repetition_penalty(logits, history, 1.3)
    )


def test_a_row_gets_the_same_bits_alone_and_in_any_batch():
    """The CPU ranks only max(top_k) values when it can and sorts the whole row otherwise: a
    row's probabilities must not depend on which way its batch went, ties included."""
    gen = torch.Generator().manual_seed(11)
    V = 2048
    logits = (torch.randn(6, V, generator=gen) * 2).round(decimals=1)  # many exact ties
    logits[2, :6] = torch.tensor([20.0, 19, 18, 17, 16, 16])  # its 5th tied with its 6th
    logits[3, 100:600] = 9.0  # more values tied at its k-th than any candidate list holds
    logits[4, 1024:] = float("-inf")  # suppressed ids, as the talker's
    settings = [(0.9, 50, 0.8), (1.0, 50, 1.0), (0.7, 5, 0.95), (0.9, 50, 0.9), (1.2, 2000, 0.7)]
    settings += [(1.0, 0, 0.9)]  # no top-k: the whole row is ranked
    solo = [
        warp_probs(logits[i : i + 1], SamplerSettings.make(True, t, k, p, 1, "cpu"))
        for i, (t, k, p) in enumerate(settings)
    ]
    for rows in ([0, 1, 2], [0, 3], [1, 5], [2, 4], list(range(6))):
        s = SamplerSettings.make(True, 1.0, 0, 1.0, len(rows), "cpu")
        for j, i in enumerate(rows):
            t, k, p = settings[i]
            s.temperature[j], s.top_k[j], s.top_p[j] = t, k, p
        batch = warp_probs(logits[rows], s)
        for j, i in enumerate(rows):
            assert torch.equal(batch[j], solo[i][0]), (rows, i)


def test_ranking_a_few_values_equals_sorting_the_row():
    from ownvoice.engine.fast.sampler import _ranked

    gen = torch.Generator().manual_seed(3)
    scaled = (torch.randn(8, 2048, generator=gen) * 3).round(decimals=2)  # some ties
    k = torch.randint(1, 40, (8, 1), generator=gen)
    values, ids = _ranked(scaled, k)
    assert values.shape[-1] < 2048, "took the whole-row sort"
    full_values, full_ids = torch.sort(scaled, dim=-1, descending=True, stable=True)
    n = values.shape[-1]
    assert torch.equal(values, full_values[:, :n])
    for row, kr in enumerate(k[:, 0].tolist()):  # the order every kept value is ranked in
        kept = int((scaled[row] >= full_values[row, kr - 1]).sum())
        assert torch.equal(ids[row, :kept], full_ids[row, :kept])
