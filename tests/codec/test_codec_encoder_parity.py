"""Our CodecEncoder against the official `Qwen3TTSTokenizerV2Model.encode` (tiny, float32)."""

from __future__ import annotations

import math

import pytest
import torch

SR = 24000


def signal(seconds: float, kind: str, seed: int) -> torch.Tensor:
    """(1, N) test audio of a few different characters."""
    g = torch.Generator().manual_seed(seed)
    t = torch.arange(int(seconds * SR)) / SR
    if kind == "chirp":
        wav = 0.4 * torch.sin(2 * math.pi * (150 * t + 400 * t**2))
    elif kind == "harmonics":
        f0 = 110 + 40 * torch.sin(2 * math.pi * 0.7 * t)
        phase = 2 * math.pi * torch.cumsum(f0, 0) / SR
        wav = sum(0.3 / k * torch.sin(k * phase) for k in range(1, 6))
        wav = wav * (0.6 + 0.4 * torch.sin(2 * math.pi * 4 * t))  # syllable-like envelope
    else:  # noise bursts
        wav = 0.3 * torch.randn(t.shape, generator=g) * (torch.sin(2 * math.pi * 2.5 * t) > 0)
    return (wav + 0.01 * torch.randn(t.shape, generator=g))[None].float()


def reference_codes(model, wav: torch.Tensor) -> torch.Tensor:
    mask = torch.ones_like(wav, dtype=torch.long)
    with torch.no_grad():
        out = model.encode(wav, padding_mask=mask)
    return torch.stack([c.T for c in out.audio_codes])  # (B, 16, frames)


@pytest.mark.reference
@pytest.mark.parametrize(
    ("seconds", "kind"),
    [(1.3, "chirp"), (3.7, "harmonics"), (3.7, "noise"), (10.7, "harmonics")],  # 10.7 s > 250 steps
)
def test_encoder_matches_reference(tiny_codec, tiny_reference, seconds, kind):
    wav = signal(seconds, kind, seed=int(seconds * 10))
    assert wav.shape[1] % 1920 != 0
    expected = reference_codes(tiny_reference, wav)
    with torch.no_grad():
        got = tiny_codec.encoder(wav)
    frames = math.ceil(wav.shape[1] / 1920)
    assert got.shape == expected.shape == (1, 16, frames)
    assert got.dtype == torch.long
    # not blind: codes vary over time in every codebook
    distinct = [len(set(expected[0, q].tolist())) for q in range(16)]
    assert min(distinct) >= 3, f"distinct codes per codebook {distinct}"
    mismatch = (got != expected).sum().item()
    assert mismatch == 0, f"{mismatch} of {got.numel()} codes differ"


@pytest.mark.reference
def test_encoder_batch_matches_reference(tiny_codec, tiny_reference):
    wav = torch.cat([signal(2.1, "chirp", 1), signal(2.1, "noise", 2)])
    expected = reference_codes(tiny_reference, wav)
    with torch.no_grad():
        got = tiny_codec.encoder(wav)
    assert torch.equal(got, expected)
    assert not torch.equal(got[0], got[1])


def test_encoder_codes_decode_to_audio(tiny_codec):
    with torch.no_grad():
        codes = tiny_codec.encoder(signal(1.0, "harmonics", 3))
        wav = tiny_codec.decoder(codes)
    assert wav.shape == (1, codes.shape[-1] * 1920)
    assert torch.isfinite(wav).all() and wav.std() > 0.01


def test_encoder_rejects_bad_shapes(tiny_codec):
    with pytest.raises(ValueError, match="batch, samples"):
        tiny_codec.encoder(torch.zeros(1, 1, 100))
    with pytest.raises(ValueError, match="samples > 0"):
        tiny_codec.encoder(torch.zeros(1, 0))
