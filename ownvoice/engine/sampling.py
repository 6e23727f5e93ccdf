"""Turning logits into codes, in the reference's order (the eager parity path).

Talker (codebook 0): repetition penalty over the codes generated so far -> EOS forbidden before
the minimum length -> control ids suppressed -> temperature -> top-k -> top-p -> softmax ->
multinomial (or argmax when greedy). Code predictor: temperature -> top-k -> top-p only.
This is transformers' logits-processor order, so with the same seed the same codes come out.
"""

from __future__ import annotations

import torch

NEG_INF = float("-inf")


def repetition_penalty(logits: torch.Tensor, history: torch.Tensor, penalty: float) -> torch.Tensor:
    """Divide positive / multiply negative logits of already generated ids. logits (B, V)."""
    if penalty == 1.0 or history.shape[-1] == 0:
        return logits
    score = torch.gather(logits, 1, history)
    score = torch.where(score < 0, score * penalty, score / penalty)
    return logits.scatter(1, history, score)


def warp(logits: torch.Tensor, temperature: float, top_k: int, top_p: float) -> torch.Tensor:
    """Temperature, top-k and top-p, each skipped at its neutral value. logits (B, V) float."""
    if temperature != 1.0:
        logits = logits / temperature
    if top_k > 0:
        k = min(top_k, logits.shape[-1])
        kth = torch.topk(logits, k)[0][..., -1, None]
        logits = logits.masked_fill(logits < kth, NEG_INF)
    if top_p < 1.0:
        sorted_logits, sorted_idx = torch.sort(logits, descending=False)
        cumulative = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
        remove_sorted = cumulative <= (1 - top_p)
        remove_sorted[..., -1:] = False  # always keep the most likely token
        remove = remove_sorted.scatter(1, sorted_idx, remove_sorted)
        logits = logits.masked_fill(remove, NEG_INF)
    return logits


def pick(
    logits: torch.Tensor,
    do_sample: bool,
    temperature: float,
    top_k: int,
    top_p: float,
    generator: torch.Generator | None,
) -> torch.Tensor:
    """One id per row. logits (B, V) float32 -> (B,) int64."""
    if not do_sample:
        return logits.argmax(dim=-1)
    probs = torch.softmax(warp(logits, temperature, top_k, top_p), dim=-1)
    return torch.multinomial(probs, 1, generator=generator).squeeze(1)


def talker_logit_mask(vocab_size: int, eos_id: int, device) -> torch.Tensor:
    """True for ids the talker may never produce: the upper 1024 ids (control, language,
    speaker) except EOS; codes 0..2047 and EOS stay."""
    mask = torch.zeros(vocab_size, dtype=torch.bool, device=device)
    mask[vocab_size - 1024 :] = True
    mask[eos_id] = False
    return mask
