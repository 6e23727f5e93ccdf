"""Random speaker-encoder weights for tiny checkpoints: right keys and shapes, and signal."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch

from ownvoice.dev.random_speaker_encoder import (
    PREFIX,
    random_speaker_encoder_weights,
    synthetic_voice,
)
from ownvoice.model.config import SpeakerEncoderConfig
from ownvoice.model.speaker_encoder import SpeakerEncoder

TINY = SpeakerEncoderConfig(enc_dim=64, enc_channels=(32, 32, 32, 32, 96))


@functools.lru_cache(maxsize=4)  # the real-size weights take seconds; build each set once
def _weights(cfg: SpeakerEncoderConfig, seed: int = 0) -> dict[str, torch.Tensor]:
    return random_speaker_encoder_weights(cfg, seed)


def _model(cfg, seed=0) -> SpeakerEncoder:
    model = SpeakerEncoder(cfg).eval()
    weights = _weights(cfg, seed)
    model.load_state_dict({k.removeprefix(PREFIX): v for k, v in weights.items()})
    return model


def _embeddings(model: SpeakerEncoder, seed: int = 1234) -> torch.Tensor:
    # voices the calibration never saw, plus white noise
    rng = np.random.default_rng(seed)
    wavs = [synthetic_voice(rng, 1.0) for _ in range(5)]
    wavs.append(rng.normal(0, 0.1, 24000).astype(np.float32))
    return torch.stack([model.embed(torch.from_numpy(w)) for w in wavs])


@pytest.mark.parametrize("enc_dim", [1024, 2048])
def test_real_sizes_have_checkpoint_keys_and_shapes(enc_dim):
    cfg = SpeakerEncoderConfig(enc_dim=enc_dim)
    weights = _weights(cfg, 0)
    expected = {PREFIX + k: tuple(v.shape) for k, v in SpeakerEncoder(cfg).state_dict().items()}
    assert {k: tuple(v.shape) for k, v in weights.items()} == expected
    assert weights[PREFIX + "fc.weight"].shape == (enc_dim, 3072, 1)
    assert weights[PREFIX + "blocks.0.conv.weight"].shape == (512, 128, 5)
    assert all(v.dtype == torch.float32 for v in weights.values())
    assert all(torch.isfinite(v).all() for v in weights.values())


def test_deterministic_per_seed():
    a = random_speaker_encoder_weights(TINY, 5)
    b = random_speaker_encoder_weights(TINY, 5)
    c = random_speaker_encoder_weights(TINY, 6)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert not torch.equal(a[PREFIX + "fc.weight"], c[PREFIX + "fc.weight"])


@pytest.mark.parametrize("cfg", [TINY, SpeakerEncoderConfig(enc_dim=1024)], ids=["tiny", "real"])
def test_embedding_carries_the_voice_at_codec_row_scale(cfg):
    e = _embeddings(_model(cfg))
    assert torch.isfinite(e).all()
    stds = e.std(dim=1)
    assert ((stds > 0.01) & (stds < 0.3)).all(), f"per-voice std {stds.tolist()}"
    # different voices: clearly different directions, not one vector plus noise
    unit = e / e.norm(dim=1, keepdim=True)
    cos = unit @ unit.T
    off_diag = cos[~torch.eye(len(e), dtype=torch.bool)]
    assert off_diag.max() < 0.95, f"cosine similarities {cos}"
    assert off_diag.mean() < 0.6, f"cosine similarities {cos}"
