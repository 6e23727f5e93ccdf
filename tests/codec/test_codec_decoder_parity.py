"""Our CodecDecoder against the official decoder, same config json and weights (tiny, float32)."""

from __future__ import annotations

import copy

import pytest
import torch

from ownvoice.model.codec.config import CodecConfig
from ownvoice.model.codec.loading import build_codec

SPF = 1920  # samples per frame


def random_codes(batch: int, frames: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    codes = torch.randint(0, 2048, (batch, 16, frames), generator=g)
    codes[0, :, 0] = 0  # the extremes of the code range must decode too
    codes[-1, :, -1] = 2047
    return codes


@pytest.mark.reference
@pytest.mark.parametrize("frames", [1, 5, 80, 300])
def test_decoder_matches_reference(tiny_codec, tiny_reference, frames):
    codes = random_codes(2, frames, seed=frames)
    with torch.no_grad():
        expected = tiny_reference.decoder(codes).squeeze(1)
        got = tiny_codec.decoder(codes)
    assert got.shape == (2, frames * SPF) == expected.shape
    # not blind: the waveform is audio-sized, unclipped and differs between the two items
    std = expected.std().item()
    assert 0.03 < std < 0.3, f"reference waveform std {std}"
    assert expected.abs().max().item() < 1.0
    assert (expected[0] - expected[1]).abs().max().item() > 0.1
    err = (got - expected).abs().max().item()
    rel = ((got - expected).norm() / expected.norm()).item()
    assert err <= 1e-5 and rel <= 1e-5, f"max abs {err:.3g}, relative {rel:.3g}"


@pytest.mark.reference
def test_reference_chunked_decode_is_exact_only_up_to_300_frames(tiny_codec, tiny_reference):
    """Upstream decodes in 300-frame chunks with 25 frames of left context: identical to ours for
    the first chunk, then an approximation (its attention sees 25 frames, not 71)."""
    codes = random_codes(1, 400, seed=7)
    with torch.no_grad():
        chunked = tiny_reference.decoder.chunked_decode(codes).squeeze(1)
        exact = tiny_codec.decoder(codes)
    assert chunked.shape == exact.shape == (1, 400 * SPF)
    head = (chunked[:, : 300 * SPF] - exact[:, : 300 * SPF]).abs().max().item()
    tail = (chunked[:, 300 * SPF :] - exact[:, 300 * SPF :]).abs().max().item()
    print(f"reference chunked_decode vs exact: first 300 frames {head:.3g}, after {tail:.3g}")
    assert head <= 1e-5
    assert tail > 1e-4, "the 25-frame context after frame 300 should change the audio"


@pytest.mark.parametrize("dtype", [torch.bfloat16])
def test_decoder_runs_in_lower_precision(tiny_codec, dtype):
    codes = random_codes(1, 40, seed=3)
    low = copy.deepcopy(tiny_codec.decoder).to(dtype)
    with torch.no_grad():
        ref = tiny_codec.decoder(codes)
        got = low(codes)
    assert got.dtype == dtype and torch.isfinite(got).all()
    rel = ((got.float() - ref).norm() / ref.norm()).item()
    print(f"{dtype} vs float32: relative error {rel:.3g}")
    assert rel < 0.1


@pytest.mark.reference
def test_loud_output_is_clamped_like_the_reference(tiny_checkpoint, build_reference):
    """Scale the last conv up so the waveform clips: both clamp to [-1, 1] the same way."""
    cj, weights = tiny_checkpoint
    loud = dict(weights)
    for name in ("decoder.decoder.6.conv.weight", "decoder.decoder.6.conv.bias"):
        loud[name] = weights[name] * 30
    codes = random_codes(1, 5, seed=11)
    with torch.no_grad():
        expected = build_reference(cj, loud).decoder(codes).squeeze(1)
        got = build_codec(CodecConfig.from_hf(cj), loud, with_encoder=False).decoder(codes)
    assert (expected.abs() == 1).float().mean() > 0.05, "the test signal should clip"
    assert (got - expected).abs().max().item() <= 30e-5  # rounding errors grow x30 too
