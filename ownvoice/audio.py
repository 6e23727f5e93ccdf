"""Audio in and out: read reference clips, resample, convert float32 to 16-bit PCM, write WAV.

Decoding uses soundfile (libsndfile) only, for WAV, FLAC, Ogg (Vorbis/Opus) and MP3; everything
comes back as mono float32. Resampling uses soxr at the quality librosa uses by default
("soxr_hq"), with librosa's output length, so reference audio is prepared exactly as upstream
prepares it. Knows nothing about models, tensors or HTTP (no torch import here).
"""

from __future__ import annotations

import io
import math
import os
import re
from typing import BinaryIO

import numpy as np
import soundfile as sf
import soxr

from ownvoice.errors import AudioError

# libsndfile container names we accept -> what we call them in messages
ACCEPTED_FORMATS = {
    "WAV": "wav",
    "WAVEX": "wav",
    "RF64": "wav",
    "FLAC": "flac",
    "OGG": "ogg",
    "MP3": "mp3",
}
ACCEPTED = "wav, flac, ogg (vorbis/opus) or mp3"

AudioSource = str | os.PathLike | bytes | bytearray | memoryview | tuple[np.ndarray, int]


def load_audio(source: AudioSource, max_seconds: float | None = None) -> tuple[np.ndarray, int]:
    """Read audio into (mono float32 samples (N,), sample rate).

    `source` is a file path, the raw bytes of an audio file (an upload), or `(samples, rate)`
    where samples is (N,) or (N, channels). Channels are averaged. Raises AudioError when the
    source cannot be read, is not one of the accepted formats, is empty or holds NaN/inf.

    `max_seconds` bounds what an untrusted file may cost: a few hundred KB of FLAC can hold half
    an hour of silence, so the length in the header is checked before decoding, and decoding
    stops one frame past the limit whatever the header claims (a header can lie).
    """
    if isinstance(source, tuple):
        samples, rate = _from_array(source)
        what = "audio array"
        if max_seconds is not None and len(samples) > max_seconds * rate:
            raise _too_long(len(samples) / rate, max_seconds)
    elif isinstance(source, bytes | bytearray | memoryview):
        if len(source) == 0:
            raise AudioError("uploaded audio is empty (0 bytes)")
        samples, rate = _decode(io.BytesIO(bytes(source)), "uploaded audio", max_seconds)
        what = "uploaded audio"
    elif isinstance(source, str | os.PathLike):
        path = os.fspath(source)
        if not os.path.isfile(path):
            raise AudioError(f"audio file {path!r} does not exist or is not a file")
        with open(path, "rb") as f:
            samples, rate = _decode(f, f"audio file {path!r}", max_seconds)
        what = f"audio file {path!r}"
    else:
        raise AudioError(
            f"audio source of type {type(source).__name__} is not supported; pass a file path, "
            "the file's bytes, or a (samples, sample_rate) tuple"
        )
    if samples.ndim == 2:
        samples = samples.mean(axis=1)
    samples = np.ascontiguousarray(samples, dtype=np.float32)
    if samples.size == 0:
        raise AudioError(f"{what} is empty: it contains no samples")
    if not np.isfinite(samples).all():
        raise AudioError(f"{what} contains NaN or infinite samples")
    return samples, rate


MAX_CHANNELS = 8  # 7.1; more is not a recording of a voice (and multiplies the memory)
MAX_SAMPLE_RATE = 384_000
UNKNOWN_LENGTH = 2**62  # libsndfile says 2**63 - 1 frames when a header does not tell


def _decode(f: BinaryIO, what: str, max_seconds: float | None = None) -> tuple[np.ndarray, int]:
    unknown_length = False
    try:
        info = sf.info(f)
        f.seek(0)
        if info.format not in ACCEPTED_FORMATS:
            raise AudioError(
                f"{what} is {info.format_info or info.format}; accepted formats: {ACCEPTED}"
            )
        if not 0 < info.channels <= MAX_CHANNELS or not 0 < info.samplerate <= MAX_SAMPLE_RATE:
            raise AudioError(
                f"{what} has {info.channels} channel(s) at {info.samplerate} Hz; at most "
                f"{MAX_CHANNELS} channels and {MAX_SAMPLE_RATE} Hz are accepted"
            )
        unknown_length = info.frames >= UNKNOWN_LENGTH
        limit = -1  # every frame
        if max_seconds is not None:
            limit = math.floor(max_seconds * info.samplerate)
            if not unknown_length and info.frames > limit:
                raise _too_long(info.frames / info.samplerate, max_seconds)
        # (N,) or (N, channels); reading one frame past the limit tells a file longer than its
        # header says (an MP3's length is an estimate) from one that fits
        samples, rate = sf.read(f, frames=limit + 1 if limit >= 0 else -1, dtype="float32")
    except AudioError:
        raise
    except Exception as e:  # libsndfile reports every decoding problem as a generic error
        if unknown_length:  # libsndfile fails the read that reaches the end of such a file
            raise AudioError(
                f"{what} does not say how long it is (a FLAC written to a pipe?); convert it "
                "first, e.g. ffmpeg -i clip.flac clip.wav"
            ) from e
        raise AudioError(
            f"{what} could not be decoded as audio ({_plain(e)}); accepted formats: {ACCEPTED}"
        ) from e
    if limit >= 0 and len(samples) > limit:
        raise _too_long(None, max_seconds)
    return samples, int(rate)


def _too_long(seconds: float | None, max_seconds: float) -> AudioError:
    length = f"{seconds:.1f} s long" if seconds is not None else "too long"
    return AudioError(f"audio is {length}; at most {max_seconds:g} s is accepted")


def _plain(e: Exception) -> str:
    """libsndfile's message without the Python object it was handed (`<_io.BytesIO object at
    0x7f...>` tells a user nothing and shows the server's memory layout; `<_io.BufferedReader
    name='/srv/...'>` shows where its files are)."""
    text = re.sub(r"<_io\.[^<>]*>|<[^<>]* at 0x[0-9a-fA-F]+>", "the file", str(e)).strip()
    return text or type(e).__name__


def _from_array(source: tuple) -> tuple[np.ndarray, int]:
    if len(source) != 2 or not isinstance(source[0], np.ndarray):
        raise AudioError("an audio tuple must be (samples: np.ndarray, sample_rate: int)")
    samples, rate = source
    if isinstance(rate, bool) or not isinstance(rate, int | np.integer) or rate <= 0:
        raise AudioError(f"sample_rate must be a positive integer, got {rate!r}")
    if samples.ndim not in (1, 2):
        raise AudioError(f"samples must be (N,) or (N, channels), got shape {samples.shape}")
    if samples.ndim == 2 and samples.shape[1] > samples.shape[0]:
        raise AudioError(
            f"samples of shape {samples.shape} look like (channels, N); pass (N, channels)"
        )
    if np.issubdtype(samples.dtype, np.integer):
        # integer PCM: full scale of the type maps to [-1, 1)
        samples = samples.astype(np.float32) / float(-np.iinfo(samples.dtype).min)
    elif not np.issubdtype(samples.dtype, np.floating):
        raise AudioError(f"samples must be float or integer PCM, got dtype {samples.dtype}")
    return samples, int(rate)


def resample(x: np.ndarray, sr_in: int, sr_out: int) -> np.ndarray:
    """Resample mono float32 audio (N,) -> (ceil(N * sr_out / sr_in),), as librosa.resample does.

    soxr "HQ" is librosa's default `res_type="soxr_hq"`; the output is padded with zeros or
    trimmed to librosa's length so the two agree sample for sample.
    """
    x = np.asarray(x, dtype=np.float32)
    if sr_in == sr_out:
        return x
    # librosa's length rule, with its float ratio
    n_out = int(math.ceil(x.shape[0] * (float(sr_out) / sr_in)))
    y = soxr.resample(x, sr_in, sr_out, quality="HQ")
    if y.shape[0] < n_out:
        y = np.pad(y, (0, n_out - y.shape[0]))
    return np.ascontiguousarray(y[:n_out], dtype=np.float32)


def float_to_int16(x: np.ndarray) -> np.ndarray:
    """float samples -> int16, clipped to [-1, 1] and scaled by 32767 (rounded)."""
    x = np.clip(np.asarray(x, dtype=np.float32), -1.0, 1.0)
    return np.round(x * 32767.0).astype(np.int16)


def int16_to_float(x: np.ndarray) -> np.ndarray:
    """int16 samples -> float32 in [-1, 1)."""
    return np.asarray(x, dtype=np.int16).astype(np.float32) / 32768.0


def to_pcm16(x: np.ndarray) -> bytes:
    """Raw signed 16-bit little-endian PCM (s16le) bytes of mono float audio."""
    return float_to_int16(x).astype("<i2").tobytes()


def write_wav(file: str | os.PathLike | BinaryIO, x: np.ndarray, sample_rate: int = 24000) -> None:
    """Write mono float audio as a 16-bit PCM WAV file (a path or a binary file object)."""
    sf.write(file, float_to_int16(x), sample_rate, subtype="PCM_16", format="WAV")
