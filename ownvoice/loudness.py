"""Loudness: measure a chunk (ITU-R BS.1770 / EBU R128 via pyloudnorm), bring it to a target,
and keep its true peak under a ceiling with a smooth look-ahead limiter of our own.

pyloudnorm raises for clips shorter than one 400 ms block and returns -inf for silence; both come
back here as None ("unmeasurable"), and the caller applies the book's typical gain instead, so a
one-word chunk is neither left quiet nor blown up. Knows nothing about chunks, files or formats.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

MIN_SECONDS = 0.4  # one BS.1770 gating block
_OVERSAMPLE = 4  # true peak = sample peak of the 4x oversampled signal (BS.1770 annex 2)
_ATTACK_S = 0.005  # the limiter's gain reaches its floor this long before a peak
_RELEASE_S = 0.05  # and recovers over this long after it


@lru_cache(maxsize=4)
def _meter(sample_rate: int):
    import pyloudnorm

    return pyloudnorm.Meter(sample_rate)


def integrated_loudness(audio: np.ndarray, sample_rate: int) -> float | None:
    """Integrated loudness in LUFS, or None for clips under 0.4 s and (near-)silence."""
    if len(audio) < MIN_SECONDS * sample_rate + 1:
        return None
    value = _meter(sample_rate).integrated_loudness(audio.astype(np.float64))
    return float(value) if math.isfinite(value) and value > -70 else None


def true_peak(audio: np.ndarray) -> np.ndarray:
    """Per-sample true-peak magnitude (N,): the largest |x| among the 4 oversampled points
    belonging to each sample."""
    from scipy.signal import resample_poly

    if len(audio) == 0:
        return np.zeros(0, dtype=np.float32)
    up = np.abs(resample_poly(audio.astype(np.float64), _OVERSAMPLE, 1))
    up = up[: len(audio) * _OVERSAMPLE].reshape(len(audio), _OVERSAMPLE)
    return np.maximum(up.max(axis=1), np.abs(audio)).astype(np.float32)


def true_peak_db(audio: np.ndarray) -> float:
    peak = float(true_peak(audio).max()) if len(audio) else 0.0
    return 20 * math.log10(peak) if peak > 0 else -math.inf


def limit(audio: np.ndarray, ceiling_db: float, sample_rate: int) -> tuple[np.ndarray, bool]:
    """Keep the true peak at or under `ceiling_db`, touching only the samples around peaks.

    The gain each sample needs is spread with a running minimum (so it starts falling before a
    peak and recovers after it), then smoothed by a running mean no wider than that minimum, so
    the smoothed gain is never above what any sample needs. Returns (audio, engaged).
    """
    from scipy.ndimage import minimum_filter1d, uniform_filter1d

    ceiling = 10 ** (ceiling_db / 20)
    peaks = true_peak(audio)
    if len(audio) == 0 or peaks.max() <= ceiling:
        return audio, False
    need = np.minimum(1.0, ceiling / np.maximum(peaks, 1e-12))
    half = max(1, int(_ATTACK_S * sample_rate))
    gain = minimum_filter1d(need, size=2 * half + 1, mode="nearest")
    gain = uniform_filter1d(gain, size=2 * half + 1, mode="nearest")
    # release: hold the lower gain a little longer after each peak so it does not pump
    release = max(1, int(_RELEASE_S * sample_rate))
    gain = minimum_filter1d(gain, size=release, origin=(release - 1) // 2)  # min over the past
    out = (audio * gain).astype(np.float32)
    over = float(true_peak(out).max())  # the oversampled peak of the product can still poke out
    if over > ceiling:
        out *= ceiling / over
    return out, True


def gain_db(measured: float, target: float) -> float:
    return target - measured


def apply_gain(audio: np.ndarray, db: float) -> np.ndarray:
    return (audio * 10 ** (db / 20)).astype(np.float32)
