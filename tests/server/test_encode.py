"""Streaming encoders for the six OpenAI formats, and pitch-preserving speed change."""

from __future__ import annotations

import io

import numpy as np
import pytest
import soundfile as sf

from ownvoice.audio import to_pcm16
from ownvoice.errors import InvalidInput
from ownvoice.service.encode import (
    FORMATS,
    MEDIA_TYPES,
    AudioEncoder,
    TimeStretch,
    encode,
    time_stretch,
    wav_header,
)
from tests.server.helpers import decode

SR = 24000


def tone(seconds: float, freqs=(220.0,), level=0.3) -> np.ndarray:
    t = np.arange(int(seconds * SR)) / SR
    x = sum(np.sin(2 * np.pi * f * t + i) / (i + 1) for i, f in enumerate(freqs))
    return (level * x / np.abs(x).max()).astype(np.float32)


def stream_encode(
    x: np.ndarray, fmt: str, sizes=(1000, 3840, 15360, 777)
) -> tuple[bytes, list[int]]:
    """Encode in uneven chunks; returns the bytes and the byte count after each write."""
    enc = AudioEncoder(fmt)
    out, counts, i, k = b"", [], 0, 0
    while i < x.size:
        n = sizes[k % len(sizes)]
        out += enc.write(x[i : i + n])
        counts.append(len(out))
        i, k = i + n, k + 1
    return out + enc.close(), counts


# codec padding/priming: mp3 and aac decoders return up to ~2 frames more than went in
SLACK = {"mp3": 0.12, "aac": 0.12, "opus": 0.03, "flac": 0.001, "wav": 0.0, "pcm": 0.0}


@pytest.mark.parametrize("fmt", FORMATS)
def test_streamed_file_decodes_to_input_duration(fmt):
    x = tone(1.5)
    data, _ = stream_encode(x, fmt)
    n, rate = decode(data, fmt)
    assert rate == (48000 if fmt == "opus" else SR), f"{fmt}: decoded at {rate} Hz"
    got = n / rate
    assert 1.5 - 0.001 <= got <= 1.5 + SLACK[fmt], f"{fmt}: {got:.4f} s decoded from 1.5 s"


STREAMED = tuple(f for f in FORMATS if f != "flac")


@pytest.mark.parametrize("fmt", STREAMED)
def test_bytes_leave_before_the_end(fmt):
    """Every format but FLAC hands out bytes while audio is still coming (opus: small Ogg
    pages)."""
    x = tone(3.0)
    _, counts = stream_encode(x, fmt, sizes=(12000,))  # 0.5 s per write
    assert counts[1] > 0, f"{fmt}: nothing after 1 s of audio: {counts}"
    assert counts[-2] > counts[1], f"{fmt}: output did not grow while writing: {counts}"


# what libsndfile (Python's soundfile) reads among our formats; aac (ADTS) it does not
SNDFILE = ("wav", "flac", "opus", "mp3")


@pytest.mark.parametrize("fmt", SNDFILE)
def test_soundfile_reads_every_format_it_knows_at_the_length_generated(fmt):
    """A streamed FLAC used to say 0 samples in STREAMINFO: soundfile failed ("array is too
    big"). mp3 carries the codec's priming and padding (no gapless tag can be written at the
    start of a stream), within one frame plus the encoder delay."""
    x = tone(1.5)
    data, _ = stream_encode(x, fmt)
    info = sf.info(io.BytesIO(data))
    y, rate = sf.read(io.BytesIO(data), dtype="float32")
    assert rate == SR
    if fmt == "mp3":  # (info.frames is only an estimate from the bit rate)
        assert x.size <= y.shape[0] <= x.size + 1152 + 1105, y.shape
    else:
        assert y.shape[0] == x.size == info.frames, (fmt, y.shape, info.frames)


def test_flac_is_held_until_the_end_and_is_then_complete():
    x = tone(1.0)
    enc = AudioEncoder("flac")
    assert enc.write(x[:12000]) == b"" and enc.write(x[12000:]) == b""
    data = enc.close()
    assert data[:4] == b"fLaC"
    # STREAMINFO (the first metadata block) holds the total sample count in 36 bits
    total = int.from_bytes(data[8 + 10 : 8 + 18], "big") & ((1 << 36) - 1)
    assert total == x.size
    y, _ = sf.read(io.BytesIO(data), dtype="int16")
    assert np.array_equal(y, np.frombuffer(to_pcm16(x), "<i2"))


def test_pcm_is_s16le_mono_24k_and_wav_carries_it():
    x = tone(0.5)
    pcm, _ = stream_encode(x, "pcm")
    assert pcm == to_pcm16(x)
    wav, _ = stream_encode(x, "wav")
    assert wav[:4] == b"RIFF" and wav[8:12] == b"WAVE"
    assert wav[44:] == pcm
    y, rate = sf.read(io.BytesIO(wav), dtype="int16")  # unknown-length header still reads
    assert rate == SR and np.array_equal(y, np.frombuffer(pcm, "<i2"))


def test_one_shot_wav_has_exact_length_and_flac_is_lossless():
    x = tone(0.7)
    wav = encode(x, "wav")
    info = sf.info(io.BytesIO(wav))
    assert info.frames == x.size and info.samplerate == SR
    import av

    with av.open(io.BytesIO(encode(x, "flac"))) as container:
        y = np.concatenate([f.to_ndarray().reshape(-1) for f in container.decode(audio=0)])
    assert np.array_equal(y, np.frombuffer(to_pcm16(x), "<i2"))


def test_bad_format_names_the_field():
    with pytest.raises(InvalidInput) as e:
        AudioEncoder("ogg")
    assert e.value.param == "response_format"


# -- speed --------------------------------------------------------------------------------------


def harmonic_purity(y: np.ndarray, f0: float, harmonics: int = 6) -> float:
    """Share of the energy below 1 kHz that sits within 4 Hz of f0's harmonics."""
    spectrum = np.abs(np.fft.rfft(y * np.hanning(y.size))) ** 2
    f = np.fft.rfftfreq(y.size, 1 / SR)
    near = np.zeros(f.shape, dtype=bool)
    for k in range(1, harmonics + 1):
        near |= np.abs(f - k * f0) < 4
    return float(spectrum[near].sum() / spectrum[f < 1000].sum())


@pytest.mark.parametrize("speed", [0.25, 0.5, 0.8, 1.5, 2.0, 4.0])
def test_speed_changes_duration_not_pitch(speed):
    f0 = 130.0
    x = tone(2.0, freqs=[f0 * k for k in range(1, 7)])
    y = time_stretch(x, speed)
    assert y.size == round(x.size / speed)
    # a voiced sound keeps its harmonics where they were: the windows are aligned on the
    # waveform (plain overlap-add without the search smears them and fails this)
    assert harmonic_purity(y, f0) > 0.9, f"speed {speed}: harmonics smeared"
    core = y[SR // 10 : -SR // 10]
    assert 0.5 < np.sqrt(np.mean(core**2)) / np.sqrt(np.mean(x**2)) < 1.5, "level changed"


@pytest.mark.parametrize("speed", [0.5, 1.7, 3.0, 4.0])
@pytest.mark.parametrize("sizes", ["random", "tiny"])
def test_speed_streaming_equals_one_shot(speed, sizes):
    """Fed in any pieces -- a few samples at a time places every window at the first moment
    its input exists -- the output is the one-shot output, and never more than it."""
    x = speech_like()
    rng = np.random.default_rng(1)
    stretch, parts, i = TimeStretch(speed), [], 0
    while i < x.size:
        n = int(rng.integers(1, 4000)) if sizes == "random" else 7
        parts.append(stretch.process(x[i : i + n]))
        assert sum(p.size for p in parts) <= round(min(i + n, x.size) / speed)
        i += n
    parts.append(stretch.flush())
    assert stretch.flush().size == 0  # a second flush adds nothing
    got = np.concatenate(parts)
    assert got.dtype == np.float32 and np.array_equal(got, time_stretch(x, speed))


@pytest.mark.parametrize("windows", [20, 21])
def test_the_output_length_is_exact_one_past_a_window(windows):
    """round(length / speed) one sample past a whole number of 20 ms windows still gets its
    last sample (the window loop runs until the output is long enough, not one short)."""
    hop = 480  # 20 ms at 24 kHz
    x = tone(1.0)[: 2 * (windows * hop + 1)]
    assert time_stretch(x, 2.0).size == windows * hop + 1


def test_speed_one_is_identity_and_range_is_checked():
    x = tone(0.3)
    assert np.array_equal(time_stretch(x, 1.0), x)
    for bad in (0.2, 4.5):
        with pytest.raises(InvalidInput) as e:
            TimeStretch(bad)
        assert e.value.param == "speed"


# -- the slow path beside the fast one ------------------------------------------------------------


def wsola_reference(x: np.ndarray, speed: float, sr: int = SR) -> np.ndarray:
    """WSOLA written out plainly for a whole clip (TimeStretch's docstring, step by step): 40 ms
    Hann windows every 20 ms of output, window k read near k * 20 ms * speed, moved by up to
    ±10 ms to where the input best continues the previous window (at the nominal place when
    nothing correlates), the very first window without a fade-in, zeros past the end."""
    frame = 2 * round(0.02 * sr)
    hop, tolerance = frame // 2, round(0.01 * sr)
    window = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(frame) / frame)).astype(np.float32)
    total = round(x.size / speed)
    padded = np.concatenate([x, np.zeros(2 * frame + 2 * tolerance + total, np.float32)])
    out = np.zeros(total + 2 * frame, np.float32)
    previous, k = 0, 0
    while k * hop < total:
        if k == 0:
            position, w = 0, np.concatenate([np.ones(hop, np.float32), window[hop:]])
        else:
            nominal = round(k * hop * speed)
            template = padded[previous + hop : previous + hop + frame]
            candidates = range(max(0, nominal - tolerance), nominal + tolerance + 1)
            scores = [np.dot(padded[p : p + frame], template) for p in candidates]
            best = int(np.argmax(scores))
            position = candidates[best] if scores[best] > 0 else nominal
            w = window
        out[k * hop : k * hop + frame] += w * padded[position : position + frame]
        previous, k = position, k + 1
    return out[:total]


def speech_like(sr: int = SR) -> np.ndarray:
    """Voiced, silent, very quiet and gliding parts: every branch of the window search."""
    rng = np.random.default_rng(5)
    t = np.arange(int(0.3 * sr)) / sr
    voiced = 0.5 * np.sin(2 * np.pi * 150 * t) + 0.05 * rng.standard_normal(t.size)
    quiet = 0.004 * np.sin(2 * np.pi * 220 * t)
    glide = 0.3 * np.sin(2 * np.pi * (120 * t + 300 * t**2))
    silence = np.zeros(int(0.2 * sr))
    return np.concatenate([voiced, silence, quiet, glide, silence[:100]]).astype(np.float32)


@pytest.mark.parametrize("speed", [0.25, 0.5, 0.8, 1.5, 2.0, 4.0])
@pytest.mark.parametrize("sr", [SR, 16000])
def test_time_stretch_equals_plain_wsola(speed, sr):
    x = speech_like(sr)
    want = wsola_reference(x, speed, sr)
    got = time_stretch(x, speed, sample_rate=sr)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, atol=2e-6)
    assert np.array_equal(got[: round(0.02 * sr)], x[: round(0.02 * sr)])  # no fade-in


def test_speed_message_names_the_range():
    with pytest.raises(InvalidInput) as e:
        TimeStretch(5)
    assert str(e.value) == "speed must be between 0.25 and 4.0, got 5"


# -- the encoder's edges -------------------------------------------------------------------------


def test_wav_headers_are_exact():
    import struct

    for n, sr in ((0, SR), (12345, SR), (7, 16000), (None, SR)):
        header = wav_header(sr, n)
        riff, size, wave, fmt_id, fmt_size = struct.unpack("<4sI4s4sI", header[:20])
        fields = struct.unpack("<HHIIHH", header[20:36])
        data_id, data_size = struct.unpack("<4sI", header[36:44])
        assert (riff, wave, fmt_id, fmt_size, data_id) == (b"RIFF", b"WAVE", b"fmt ", 16, b"data")
        assert fields == (1, 1, sr, 2 * sr, 2, 16)  # PCM, mono, rate, bytes/s, block, bits
        want = 0xFFFFFFFF if n is None else 2 * n
        assert data_size == want and size == (want if n is None else 36 + want)
        assert len(header) == 44


@pytest.mark.parametrize("sr", [SR, 16000])
def test_one_shot_encoding_keeps_the_rate_and_the_length(sr):
    x = tone(0.25)
    wav = encode(x[:, None].astype(np.float64), "wav", sr)  # any shape and float type
    assert wav == wav_header(sr, x.size) + to_pcm16(x)
    for fmt in ("mp3", "flac"):
        n, rate = decode(encode(x, fmt, sr), fmt)
        assert rate == sr and abs(n - x.size) < 0.12 * sr, (fmt, n)


@pytest.mark.parametrize("fmt", FORMATS)
def test_encoder_takes_any_shape_and_float_type_and_empty_writes(fmt):
    x = tone(0.4)
    enc = AudioEncoder(fmt)
    assert enc.media_type == MEDIA_TYPES[fmt]
    out = enc.write(np.zeros(0, np.float32))
    out += enc.write(x[:1])  # a single sample
    out += enc.write(x[1:, None].astype(np.float64))
    out += enc.close()
    assert enc.close() == b""  # closing twice adds nothing
    with pytest.raises(RuntimeError) as e:
        enc.write(x)
    assert str(e.value) == "AudioEncoder.write after close()"
    reference, _ = stream_encode(x, fmt)
    if fmt in ("wav", "pcm", "flac"):  # lossless: the same bytes however it was fed
        assert out == reference
    else:
        n, rate = decode(out, fmt)
        assert abs(n / rate - 0.4) < SLACK[fmt] + 0.001


def test_an_unknown_format_is_named_with_the_choices():
    with pytest.raises(InvalidInput) as e:
        AudioEncoder("ogg")
    assert str(e.value) == (
        "response_format must be one of mp3, opus, aac, flac, wav, pcm, got 'ogg'"
    )


def test_opus_pages_leave_every_few_tens_of_milliseconds():
    enc, out = AudioEncoder("opus"), b""
    for _ in range(15):  # 0.3 s in 20 ms pieces
        out += enc.write(np.full(480, 0.1, np.float32))
    assert out.count(b"OggS") > 10  # Ogg's default would hold about a second of pages
