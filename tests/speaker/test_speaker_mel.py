"""The log-mel front-end equals upstream's `mel_spectrogram` and librosa's Slaney filterbank."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ownvoice.model.mel import log_mel_spectrogram, mel_filterbank, min_samples, num_frames
from tests.reference import import_reference


@pytest.fixture(scope="module")
def reference_mel():
    import_reference()
    from qwen_tts.core.models.modeling_qwen3_tts import mel_spectrogram

    def run(wav: torch.Tensor) -> torch.Tensor:
        # the arguments of upstream's extract_speaker_embedding; (B, 128, frames) -> (B, frames, 128)
        return mel_spectrogram(wav, 1024, 128, 24000, 256, 1024, 0, 12000).transpose(1, 2)

    return run


@pytest.mark.parametrize(
    "args",
    [
        (24000, 1024, 128, 0, 12000),  # the speaker encoder's
        (16000, 512, 80, 0, None),
        (22050, 2048, 80, 20, 8000),
    ],
)
def test_filterbank_equals_librosa(args):
    librosa = pytest.importorskip("librosa")
    sr, n_fft, n_mels, fmin, fmax = args
    ours = mel_filterbank(sr, n_fft, n_mels, fmin, fmax)
    theirs = librosa.filters.mel(sr=sr, n_fft=n_fft, n_mels=n_mels, fmin=fmin, fmax=fmax)
    assert ours.shape == theirs.shape == (n_mels, n_fft // 2 + 1)
    assert ours.dtype == np.float32
    err = np.abs(ours - theirs).max()
    assert err <= 1e-6, f"max abs error {err:.3g}"


def test_filterbank_is_built_once_and_read_only():
    a = mel_filterbank()
    assert a is mel_filterbank()
    with pytest.raises(ValueError):
        a[0, 0] = 1.0


def _signals(n: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(n)
    t = torch.arange(n) / 24000
    noise = torch.rand(n, generator=g) * 1.6 - 0.8
    chirp = 0.5 * torch.sin(2 * torch.pi * (100 + 4000 * t) * t)
    quiet = 1e-4 * torch.randn(n, generator=g)  # exercises the 1e-5 floor
    loud = 1.5 * torch.sin(2 * torch.pi * 220 * t)  # beyond [-1, 1]: upstream only warns
    return torch.stack([noise, chirp, quiet, loud, torch.zeros(n)])


@pytest.mark.parametrize("n", [min_samples(), 1000, 4097, 24001])
def test_log_mel_equals_reference(reference_mel, n):
    wav = _signals(n)
    ours = log_mel_spectrogram(wav)
    theirs = reference_mel(wav)
    assert ours.shape == theirs.shape == (5, num_frames(n), 128), (ours.shape, theirs.shape)
    err = (ours - theirs).abs().max().item()
    assert err <= 1e-5, f"n={n}: max abs error {err:.3g}"


def test_log_mel_accepts_1d_and_other_dtypes(reference_mel):
    wav = _signals(3000)[0]
    ours = log_mel_spectrogram(wav.double())
    assert ours.dtype == torch.float32 and ours.shape == (1, num_frames(3000), 128)
    assert (ours - reference_mel(wav.unsqueeze(0))).abs().max().item() <= 1e-5


def test_too_short_waveform_is_refused():
    with pytest.raises(ValueError, match="too short"):
        log_mel_spectrogram(torch.zeros(min_samples() - 1))


def test_constants_cached_under_inference_mode_still_work_with_autograd():
    # the speaker encoder's embed() runs under inference_mode and fills the cache first
    from ownvoice.model import mel

    mel._constants.cache_clear()
    with torch.inference_mode():
        log_mel_spectrogram(torch.randn(4000))
    wav = torch.randn(4000, requires_grad=True)
    log_mel_spectrogram(wav).sum().backward()
    assert wav.grad is not None and torch.isfinite(wav.grad).all()
