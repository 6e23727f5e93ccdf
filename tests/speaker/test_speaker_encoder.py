"""Our SpeakerEncoder equals upstream's Qwen3TTSSpeakerEncoder given the same weights."""

from __future__ import annotations

import dataclasses
import functools

import pytest
import torch

from ownvoice.dev.random_speaker_encoder import (
    PREFIX,
    random_speaker_encoder_weights,
    synthetic_voice,
)
from ownvoice.errors import AudioError
from ownvoice.model.config import SpeakerEncoderConfig
from ownvoice.model.mel import samples_for_frames
from ownvoice.model.speaker_encoder import SpeakerEncoder
from tests.reference import import_reference

TINY = SpeakerEncoderConfig(enc_dim=64, enc_channels=(32, 32, 32, 32, 96))
REAL = SpeakerEncoderConfig(enc_dim=1024)


@pytest.fixture(scope="module")
def reference():
    import_reference()
    from qwen_tts.core.models.configuration_qwen3_tts import Qwen3TTSSpeakerEncoderConfig
    from qwen_tts.core.models.modeling_qwen3_tts import Qwen3TTSSpeakerEncoder, mel_spectrogram

    def build(cfg: SpeakerEncoderConfig, state: dict[str, torch.Tensor]) -> torch.nn.Module:
        ref_cfg = Qwen3TTSSpeakerEncoderConfig(
            mel_dim=cfg.mel_dim,
            enc_dim=cfg.enc_dim,
            enc_channels=list(cfg.enc_channels),
            enc_kernel_sizes=list(cfg.kernel_sizes),
            enc_dilations=list(cfg.dilations),
            enc_attention_channels=cfg.attention_channels,
            enc_res2net_scale=cfg.res2net_scale,
            enc_se_channels=cfg.se_channels,
            sample_rate=cfg.sample_rate,
        )
        model = Qwen3TTSSpeakerEncoder(ref_cfg).eval()
        model.load_state_dict(state)
        return model

    def mels(wav: torch.Tensor) -> torch.Tensor:  # upstream extract_speaker_embedding's front-end
        return mel_spectrogram(wav.unsqueeze(0), 1024, 128, 24000, 256, 1024, 0, 12000).transpose(
            1, 2
        )

    return build, mels


def _ours(cfg: SpeakerEncoderConfig, state: dict[str, torch.Tensor]) -> SpeakerEncoder:
    model = SpeakerEncoder(cfg).eval()
    model.load_state_dict(state)  # strict: names and shapes must match the checkpoint's
    return model


@functools.lru_cache(maxsize=4)  # the real-size weights take seconds; build each set once
def _weights(cfg: SpeakerEncoderConfig, seed: int = 0) -> dict[str, torch.Tensor]:
    return {k.removeprefix(PREFIX): v for k, v in random_speaker_encoder_weights(cfg, seed).items()}


def _voices(n: int, seconds: float, seed: int = 7) -> list[torch.Tensor]:
    import numpy as np

    rng = np.random.default_rng(seed)
    return [torch.from_numpy(synthetic_voice(rng, seconds)) for _ in range(n)]


@pytest.mark.parametrize("cfg", [TINY, REAL], ids=["tiny", "real"])
def test_parameter_names_and_shapes_equal_reference(reference, cfg):
    build, _ = reference
    ours = SpeakerEncoder(cfg).state_dict()
    theirs = build(cfg, _weights(cfg)).state_dict()
    assert {k: tuple(v.shape) for k, v in ours.items()} == {
        k: tuple(v.shape) for k, v in theirs.items()
    }


@pytest.mark.parametrize(("enc_dim", "count"), [(1024, 8_854_336), (2048, 12_001_088)])
def test_parameter_count_equals_real_checkpoint(enc_dim, count):
    model = SpeakerEncoder(SpeakerEncoderConfig(enc_dim=enc_dim))
    assert sum(p.numel() for p in model.parameters()) == count


def test_tiny_forward_equals_reference(reference):
    build, mels = reference
    state = _weights(TINY)
    ours, theirs = _ours(TINY, state), build(TINY, state)
    # a batch of different voices and lengths (odd frame counts included), plus random mels
    x = torch.cat([mels(w) for w in _voices(3, 0.5)])
    x = torch.cat([x, torch.randn(1, x.shape[1], 128, generator=torch.Generator().manual_seed(1))])
    with torch.no_grad():
        a, b = ours(x), theirs(x)
        a7, b7 = ours(x[:, :7]), theirs(x[:, :7])
    assert a.shape == b.shape == (4, TINY.enc_dim)
    for got, want in ((a, b), (a7, b7)):
        err = (got - want).abs().max().item()
        assert err <= 1e-5, f"max abs error {err:.3g} (embedding std {want.std():.3g})"


def test_real_size_forward_equals_reference(reference):
    build, mels = reference
    state = _weights(REAL)
    ours, theirs = _ours(REAL, state), build(REAL, state)
    x = mels(_voices(1, 0.4)[0])
    with torch.no_grad():
        a, b = ours(x), theirs(x)
    err = (a - b).abs().max().item()
    assert err <= 1e-5, f"max abs error {err:.3g} (embedding std {b.std():.3g})"


def test_embed_equals_reference_pipeline(reference):
    build, mels = reference
    state = _weights(TINY, seed=3)
    ours, theirs = _ours(TINY, state), build(TINY, state)
    wav = _voices(1, 0.7, seed=11)[0]
    got = ours.embed(wav)
    with torch.no_grad():
        want = theirs(mels(wav))[0]
    assert got.shape == (TINY.enc_dim,)
    assert (got - want).abs().max().item() <= 1e-5


def test_embed_runs_in_the_module_dtype():
    model = _ours(TINY, _weights(TINY)).to(torch.bfloat16)
    wav = _voices(1, 0.5)[0]
    out = model.embed(wav)
    assert out.dtype == torch.bfloat16 and out.shape == (TINY.enc_dim,)
    ref = _ours(TINY, _weights(TINY)).embed(wav)
    rel = ((out.float() - ref).norm() / ref.norm()).item()
    assert rel < 0.2, f"bf16 embedding differs from float32 by {rel:.3f} (relative)"


def test_embed_refuses_too_short_or_non_mono_audio():
    model = SpeakerEncoder(TINY)
    shortest = samples_for_frames(model.min_frames())
    assert model.embed(torch.zeros(shortest)).shape == (TINY.enc_dim,)
    with pytest.raises(AudioError, match="too short"):
        model.embed(torch.zeros(shortest - 1))
    with pytest.raises(AudioError, match="mono"):
        model.embed(torch.zeros(2, 24000))


def test_mismatched_config_lengths_are_refused():
    bad = dataclasses.replace(TINY, kernel_sizes=(5, 3, 3, 1))
    with pytest.raises(ValueError, match="same length"):
        SpeakerEncoder(bad)
