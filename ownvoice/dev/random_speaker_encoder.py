"""Random speaker-encoder weights that still carry signal, for tiny test checkpoints.

With the usual small-normal init an ECAPA x-vector is nearly the same vector for every input
(pooled ReLU statistics share a large positive common part) and its scale is arbitrary. Here
convolutions get variance-preserving weights, and the final projection is calibrated on a few
seeded, speech-like synthetic signals: its bias removes their average embedding, then weights
and bias are scaled so the embedding std is TARGET_STD, about that of a codec-embedding row (it
is added into the talker input as one). Knows nothing about files or the rest of the checkpoint.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from ownvoice.model.config import SpeakerEncoderConfig
from ownvoice.model.mel import SAMPLE_RATE
from ownvoice.model.speaker_encoder import TDNN, SpeakerEncoder, SqueezeExcite

PREFIX = "speaker_encoder."
TARGET_STD = 0.05
CALIBRATION_SIGNALS = 6
CALIBRATION_SECONDS = 0.5


def synthetic_voice(rng: np.random.Generator, seconds: float = 1.0) -> np.ndarray:
    """A crude voiced sound: harmonics of a random f0 under random formant peaks, a syllable-like
    amplitude envelope and a little noise. float32 in [-1, 1] at 24 kHz."""
    t = np.arange(int(seconds * SAMPLE_RATE)) / SAMPLE_RATE
    f0 = rng.uniform(80, 300) * (1 + 0.05 * np.sin(2 * np.pi * rng.uniform(2, 6) * t))
    phase = 2 * np.pi * np.cumsum(f0) / SAMPLE_RATE
    formants = rng.uniform([300, 900, 2000], [900, 2200, 3500])
    wav = np.zeros_like(t)
    for h in range(1, int(8000 / f0.max())):
        # each harmonic is weighted by how close it lies to a formant
        freq = h * f0.mean()
        gain = sum(np.exp(-(((freq - f) / 200.0) ** 2)) for f in formants) + 0.02
        wav += gain / h * np.sin(h * phase + rng.uniform(0, 2 * np.pi))
    wav *= 0.5 + 0.5 * np.sin(2 * np.pi * rng.uniform(2, 5) * t) ** 2
    wav += rng.normal(0, 0.01, t.shape)
    wav *= rng.uniform(0.2, 0.8) / np.abs(wav).max()
    return wav.astype(np.float32)


def random_speaker_encoder_weights(cfg: SpeakerEncoderConfig, seed: int) -> dict[str, torch.Tensor]:
    """State dict of a SpeakerEncoder for `cfg`, keys with the `speaker_encoder.` prefix, float32.

    Deterministic for a given (cfg, seed). Shapes equal the real checkpoint's for that config.
    """
    gen = torch.Generator().manual_seed(seed)
    model = SpeakerEncoder(cfg)
    # 1) variance-preserving convolutions (He init before a ReLU, Xavier-like otherwise);
    #    small random biases so they are exercised
    before_relu = {id(m.conv) for m in model.modules() if isinstance(m, TDNN)}
    before_relu |= {id(m.conv1) for m in model.modules() if isinstance(m, SqueezeExcite)}
    with torch.no_grad():
        for module in model.modules():
            if not isinstance(module, torch.nn.Conv1d):
                continue
            fan_in = module.in_channels * module.kernel_size[0]
            gain = math.sqrt(2.0) if id(module) in before_relu else 1.0
            w = torch.randn(module.weight.shape, generator=gen) * gain / math.sqrt(fan_in)
            module.weight.copy_(w)
            module.bias.copy_(torch.randn(module.bias.shape, generator=gen) * 0.02)

    # 2) calibrate the projection on seeded synthetic voices
    rng = np.random.default_rng(seed)
    wavs = [synthetic_voice(rng, CALIBRATION_SECONDS) for _ in range(CALIBRATION_SIGNALS)]
    emb = torch.stack([model.embed(torch.from_numpy(w)) for w in wavs])  # (K, enc_dim)
    with torch.no_grad():
        model.fc.bias.sub_(emb.mean(0))
        scale = TARGET_STD / (emb - emb.mean(0)).std().item()
        model.fc.weight.mul_(scale)
        model.fc.bias.mul_(scale)

    return {PREFIX + k: v.detach().float().contiguous() for k, v in model.state_dict().items()}
