"""Sampling on the device, without a host sync, with the settings as tensors.

Same distribution as the eager path (temperature -> top-k -> top-p -> softmax -> draw), but the
draw is the exponential race: argmax(p / E) with E ~ Exp(1) picks index i with probability p_i.
The noise is an input, drawn outside any captured CUDA graph; every setting is a tensor, so one
graph serves every request. Greedy rows take the argmax of the processed logits.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

NEG_INF = float("-inf")


@dataclass
class SamplerSettings:
    """Per-row settings as (B, 1) device tensors."""

    greedy: torch.Tensor  # bool
    temperature: torch.Tensor  # float32
    top_k: torch.Tensor  # int64, 0 = off
    top_p: torch.Tensor  # float32, 1.0 = off

    @classmethod
    def make(cls, do_sample: bool, temperature: float, top_k: int, top_p: float, batch, device):
        def full(value, dtype):
            return torch.full((batch, 1), value, dtype=dtype, device=device)

        return cls(
            greedy=full(not do_sample, torch.bool),
            temperature=full(temperature, torch.float32),
            top_k=full(top_k, torch.long),
            top_p=full(top_p, torch.float32),
        )

    def copy_(self, other: SamplerSettings) -> None:
        """Overwrite in place (the tensors may be inputs of a captured graph)."""
        for name in ("greedy", "temperature", "top_k", "top_p"):
            getattr(self, name).copy_(getattr(other, name))


def warp_probs(logits: torch.Tensor, s: SamplerSettings) -> torch.Tensor:
    """Probabilities after temperature, top-k and top-p. logits (B, V) float32 -> (B, V).

    Not renormalised after top-p (the draw below is scale-invariant): divide by the row sum
    for the distribution itself."""
    V = logits.shape[-1]
    scaled = logits / s.temperature
    # top-k: keep everything at least as large as the k-th largest (ties kept, as upstream)
    k = torch.where(s.top_k > 0, s.top_k.clamp(max=V), torch.full_like(s.top_k, V))
    ranked, order = _ranked(scaled, k)
    kth = ranked.gather(-1, k - 1)
    scaled = scaled.masked_fill(scaled < kth, NEG_INF)
    probs = torch.softmax(scaled, dim=-1)
    if scaled.device.type == "cpu" and not bool((s.top_p < 1.0).any()):
        # no row keeps less than all its mass (the default): the mask below would be empty.
        # A host sync is free on the CPU, and the eight ops it saves are ~10% of a small step
        return probs
    # top-p: drop a token when the tokens ranked above it already hold top_p of the mass
    sorted_probs = probs.gather(-1, order)
    above = torch.cumsum(sorted_probs, dim=-1) - sorted_probs
    drop_sorted = (above >= s.top_p) & (s.top_p < 1.0)
    drop = torch.zeros(probs.shape, dtype=torch.bool, device=probs.device)
    return probs.masked_fill(drop.scatter(-1, order, drop_sorted), 0.0)


def _ranked(scaled: torch.Tensor, k: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The values of each row from the largest down, and their ids; equal values by id. Only as
    far as any row can keep: every value past a row's top-k is masked out and has no mass.

    On the CPU, when every row has a top-k and no row has more values tied at its k-th than fit,
    only the largest max(top_k) values are ranked: sorting a batch of whole vocabularies costs
    ~0.7 ms per (8, 2048) there, 15 times a frame, against ~0.05 ms. The order, and so every
    bit after it, is the same either way (tests/engine/test_sampler.py); a row's result does not
    depend on which way its batch took. On a GPU the sort is cheap and must not sync the host."""
    V = scaled.shape[-1]
    if scaled.device.type == "cpu":
        most = int(k.max())
        if most < V:
            _, ids = torch.topk(scaled, most, dim=-1, sorted=False)
            ids, _ = torch.sort(ids, dim=-1)
            values, at = torch.sort(scaled.gather(-1, ids), dim=-1, descending=True, stable=True)
            kth = values.gather(-1, k - 1)
            if bool(((scaled >= kth).sum(-1, keepdim=True) <= most).all()):  # no ties cut off
                return values, ids.gather(-1, at)
    return torch.sort(scaled, dim=-1, descending=True, stable=True)


def sample_no_sync(logits: torch.Tensor, s: SamplerSettings, noise: torch.Tensor) -> torch.Tensor:
    """(B, V) float32 logits, (B, V) Exp(1) noise -> (B,) int64 ids; no device->host sync
    (on the CPU, where a sync is free, a batch of only greedy or only sampled rows skips the
    other's work: the same ids)."""
    greedy = s.greedy[:, 0]
    if logits.device.type == "cpu":
        if bool(greedy.all()):
            return torch.argmax(logits, dim=-1)
        if not bool(greedy.any()):
            return torch.argmax(warp_probs(logits, s) / noise, dim=-1)
    drawn = torch.argmax(warp_probs(logits, s) / noise, dim=-1)
    return torch.where(greedy, torch.argmax(logits, dim=-1), drawn)


def penalize_seen(logits: torch.Tensor, seen: torch.Tensor, penalty: torch.Tensor) -> torch.Tensor:
    """Repetition penalty over the ids marked in `seen` (B, V) bool; penalty (B, 1)."""
    penalized = torch.where(logits < 0, logits * penalty, logits / penalty)
    return torch.where(seen, penalized, logits)
