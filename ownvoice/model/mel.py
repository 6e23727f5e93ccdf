"""Log-mel front-end of the speaker encoder: a Slaney mel filterbank and the spectrogram it feeds.

Reproduces the upstream front-end exactly: reflect padding of (n_fft - hop) / 2 on each side,
an STFT without centring (periodic Hann window), magnitude sqrt(re^2 + im^2 + 1e-9), the Slaney
filterbank (equal to librosa.filters.mel with htk=False, norm="slaney"), then log(max(mel, 1e-5)).
No normalisation, trimming or voice-activity detection. Knows nothing about files or resampling:
the caller passes a waveform at the encoder's sample rate.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

SAMPLE_RATE = 24000
N_FFT = 1024
HOP = 256
N_MELS = 128
FMIN = 0.0
FMAX = 12000.0

# Slaney's mel scale: linear below 1 kHz (200/3 Hz per mel), logarithmic above it
# (27 mels per factor 6.4 in frequency).
_LINEAR_HZ_PER_MEL = 200.0 / 3.0
_BREAK_HZ = 1000.0
_BREAK_MEL = _BREAK_HZ / _LINEAR_HZ_PER_MEL  # 15
_MELS_PER_LOG_HZ = 27.0 / np.log(6.4)


def hz_to_mel(hz: np.ndarray) -> np.ndarray:
    hz = np.asarray(hz, dtype=np.float64)
    linear = hz / _LINEAR_HZ_PER_MEL
    # the maximum keeps log() away from 0 Hz; np.where picks the linear part there anyway
    log = _BREAK_MEL + np.log(np.maximum(hz, _BREAK_HZ) / _BREAK_HZ) * _MELS_PER_LOG_HZ
    return np.where(hz >= _BREAK_HZ, log, linear)


def mel_to_hz(mel: np.ndarray) -> np.ndarray:
    mel = np.asarray(mel, dtype=np.float64)
    linear = mel * _LINEAR_HZ_PER_MEL
    log = _BREAK_HZ * np.exp((np.maximum(mel, _BREAK_MEL) - _BREAK_MEL) / _MELS_PER_LOG_HZ)
    return np.where(mel >= _BREAK_MEL, log, linear)


@functools.lru_cache(maxsize=8)
def mel_filterbank(
    sample_rate: int = SAMPLE_RATE,
    n_fft: int = N_FFT,
    n_mels: int = N_MELS,
    fmin: float = FMIN,
    fmax: float | None = FMAX,
) -> np.ndarray:
    """Slaney-normalised triangular filters, (n_mels, n_fft // 2 + 1) float32, read-only.

    Filter i rises from band edge i to its centre i+1 and falls to edge i+2; the edges are
    n_mels + 2 points evenly spaced on the mel scale between fmin and fmax. Each triangle is
    scaled by 2 / (its width in Hz) so every band carries about the same energy.
    Computed in float64, built once per set of arguments.
    """
    if fmax is None:
        fmax = sample_rate / 2
    bin_hz = np.linspace(0.0, sample_rate / 2, n_fft // 2 + 1)  # centre of every FFT bin
    edges_hz = mel_to_hz(np.linspace(hz_to_mel(fmin), hz_to_mel(fmax), n_mels + 2))
    widths = np.diff(edges_hz)  # (n_mels + 1,)
    # distance of every bin from every edge: (n_mels + 2, n_bins)
    offsets = edges_hz[:, None] - bin_hz[None, :]
    rising = -offsets[:-2] / widths[:-1, None]  # 0 at the lower edge, 1 at the centre
    falling = offsets[2:] / widths[1:, None]  # 1 at the centre, 0 at the upper edge
    weights = np.maximum(0.0, np.minimum(rising, falling))  # (n_mels, n_bins)
    weights *= (2.0 / (edges_hz[2:] - edges_hz[:-2]))[:, None]
    out = weights.astype(np.float32)
    out.setflags(write=False)
    return out


@functools.lru_cache(maxsize=8)
def _constants(device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    # built as normal tensors even when first called under inference_mode, so a later call
    # with autograd can still use the cached copies
    with torch.inference_mode(False):
        basis = torch.from_numpy(mel_filterbank().copy()).to(device)  # (n_mels, n_fft // 2 + 1)
        window = torch.hann_window(N_FFT, device=device)
    return basis, window


def num_frames(num_samples: int) -> int:
    """Mel frames produced from `num_samples` samples (N // 256 at the defaults)."""
    return (num_samples + 2 * ((N_FFT - HOP) // 2) - N_FFT) // HOP + 1


def samples_for_frames(frames: int) -> int:
    """Fewest samples that give `frames` mel frames (and are long enough to reflect-pad)."""
    pad = (N_FFT - HOP) // 2
    return max((frames - 1) * HOP + N_FFT - 2 * pad, pad + 1)


def min_samples() -> int:
    """Shortest waveform the front-end accepts: one frame, and longer than the reflect padding."""
    return samples_for_frames(1)


def log_mel_spectrogram(wav: torch.Tensor) -> torch.Tensor:
    """(B, N) or (N,) waveform at 24 kHz -> (B, frames, 128) float32 log-mel features.

    frames = num_frames(N). Runs in float32 on the waveform's device, whatever
    the waveform's dtype.
    """
    if wav.dim() == 1:
        wav = wav.unsqueeze(0)
    assert wav.dim() == 2, f"expected (B, N) or (N,), got {tuple(wav.shape)}"
    wav = wav.float()
    if wav.shape[-1] < min_samples():
        raise ValueError(
            f"waveform too short: need at least {min_samples()} samples, got {wav.shape[-1]}"
        )
    basis, window = _constants(wav.device)
    pad = (N_FFT - HOP) // 2
    # reflect padding replaces the STFT's centring: 384 samples each side -> frames hop-aligned
    padded = torch.nn.functional.pad(wav.unsqueeze(1), (pad, pad), mode="reflect").squeeze(1)
    spec = torch.stft(
        padded,
        N_FFT,
        hop_length=HOP,
        win_length=N_FFT,
        window=window,
        center=False,
        onesided=True,
        return_complex=True,
    )  # (B, n_fft // 2 + 1, frames)
    spec = torch.view_as_real(spec)
    magnitude = torch.sqrt(spec.pow(2).sum(-1) + 1e-9)
    mel = torch.matmul(basis, magnitude)  # (B, n_mels, frames)
    return torch.log(torch.clamp(mel, min=1e-5)).transpose(1, 2)  # (B, frames, n_mels)
