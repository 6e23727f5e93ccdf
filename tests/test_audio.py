"""Reading reference audio, resampling like upstream, and writing 16-bit PCM."""

from __future__ import annotations

import io

import numpy as np
import pytest
import soundfile as sf

from ownvoice.audio import (
    float_to_int16,
    int16_to_float,
    load_audio,
    resample,
    to_pcm16,
    write_wav,
)
from ownvoice.errors import AudioError

SR = 24000


def _tone(n: int = SR, sr: int = SR, freq: float = 440.0, amp: float = 0.5) -> np.ndarray:
    return (amp * np.sin(2 * np.pi * freq * np.arange(n) / sr)).astype(np.float32)


@pytest.mark.parametrize(
    ("fmt", "subtype", "ext", "lossless"),
    [
        ("WAV", "PCM_16", "wav", True),
        ("WAV", "FLOAT", "wav", True),
        ("FLAC", "PCM_16", "flac", True),
        ("OGG", "VORBIS", "ogg", False),
        ("MP3", "MPEG_LAYER_III", "mp3", False),
    ],
)
def test_load_accepted_formats(tmp_path, fmt, subtype, ext, lossless):
    x = _tone()
    path = tmp_path / f"ref.{ext}"
    sf.write(path, x, SR, format=fmt, subtype=subtype)
    y, sr = load_audio(path)
    assert sr == SR and y.dtype == np.float32 and y.ndim == 1
    if lossless:
        assert y.shape == x.shape and np.abs(y - x).max() <= 1 / 32768 + 1e-7
    else:
        # lossy codecs add delay and padding; the tone must survive at the same loudness
        assert abs(len(y) - len(x)) < 0.1 * SR, len(y)
        rms_in, rms_out = np.sqrt(np.mean(x**2)), np.sqrt(np.mean(y**2))
        assert abs(rms_out / rms_in - 1) < 0.2, (rms_in, rms_out)


def test_str_path_bytes_and_path_agree(tmp_path):
    path = tmp_path / "ref.flac"
    sf.write(path, _tone(), SR, format="FLAC")
    a, _ = load_audio(path)
    b, _ = load_audio(str(path))
    c, sr = load_audio(path.read_bytes())
    d, _ = load_audio(bytearray(path.read_bytes()))
    assert sr == SR
    for other in (b, c, d):
        np.testing.assert_array_equal(a, other)


def test_stereo_is_downmixed_by_the_mean(tmp_path):
    left, right = _tone(freq=300), _tone(freq=500, amp=0.25)
    path = tmp_path / "stereo.wav"
    sf.write(path, np.stack([left, right], axis=1), SR, subtype="FLOAT")
    y, _ = load_audio(path)
    np.testing.assert_allclose(y, (left + right) / 2, atol=1e-7)
    y2, _ = load_audio((np.stack([left, right], axis=1), SR))
    np.testing.assert_allclose(y2, (left + right) / 2, atol=1e-7)


def test_array_tuple_input():
    x = _tone(1000).astype(np.float64)
    y, sr = load_audio((x, 16000))
    assert sr == 16000 and y.dtype == np.float32
    np.testing.assert_allclose(y, x, atol=1e-7)
    pcm = np.array([0, 16384, -32768], dtype=np.int16)
    y, _ = load_audio((pcm, 8000))
    np.testing.assert_allclose(y, [0.0, 0.5, -1.0])


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda p: p.write_text("this is not audio\n"), "could not be decoded.*accepted formats"),
        (lambda p: p.write_bytes(b""), "could not be decoded.*accepted formats"),
        (lambda p: sf.write(p, np.zeros(0, np.float32), SR, format="WAV"), "no samples"),
        (lambda p: sf.write(p, _tone(), SR, format="AIFF"), "AIFF.*accepted formats"),
    ],
    ids=["text", "empty-file", "zero-length-wav", "aiff"],
)
def test_rejected_files(tmp_path, make, match):
    path = tmp_path / "upload.bin"
    make(path)
    with pytest.raises(AudioError, match=match) as err:
        load_audio(path)
    assert "wav, flac, ogg" in str(err.value) or "no samples" in str(err.value)
    if path.stat().st_size:
        with pytest.raises(AudioError):
            load_audio(path.read_bytes())


def test_missing_file(tmp_path):
    with pytest.raises(AudioError, match="does not exist"):
        load_audio(tmp_path / "nope.wav")


@pytest.mark.parametrize(
    ("source", "match"),
    [
        ((np.array([0.1, np.nan], np.float32), SR), "NaN or infinite"),
        ((np.array([0.1, np.inf], np.float32), SR), "NaN or infinite"),
        ((np.zeros(0, np.float32), SR), "no samples"),
        ((np.zeros(10, np.float32), 0), "sample_rate"),
        ((np.zeros(10, np.float32), 24000.0), "sample_rate"),
        ((np.zeros(10, np.float32),), r"\(samples: np.ndarray, sample_rate: int\)"),
        (([0.1, 0.2], SR), r"\(samples: np.ndarray, sample_rate: int\)"),
        ((np.zeros((2, 1000), np.float32), SR), r"\(channels, N\)"),
        ((np.zeros((2, 2, 2), np.float32), SR), "shape"),
        (12345, "not supported"),
    ],
)
def test_rejected_arrays_and_types(source, match):
    with pytest.raises(AudioError, match=match):
        load_audio(source)


@pytest.mark.parametrize("sr_in", [16000, 22050, 44100, 48000])
@pytest.mark.parametrize("n", [1, 999, 12345, 44101])
def test_resample_equals_librosa(sr_in, n):
    librosa = pytest.importorskip("librosa")
    rng = np.random.default_rng(n + sr_in)
    x = (0.3 * rng.standard_normal(n)).astype(np.float32)
    ours = resample(x, sr_in, SR)
    theirs = librosa.resample(x, orig_sr=sr_in, target_sr=SR)  # upstream's call (soxr_hq)
    assert ours.shape == theirs.shape and ours.dtype == np.float32
    assert np.abs(ours - theirs).max() <= 1e-6


def test_resample_same_rate_is_identity():
    x = _tone(100)
    np.testing.assert_array_equal(resample(x, SR, SR), x)


def test_pcm16_clips_and_is_little_endian():
    x = np.array([0.0, 0.5, -0.5, 1.0, -1.0, 2.0, -3.0], np.float32)
    raw = to_pcm16(x)
    assert len(raw) == 2 * len(x)
    ints = np.frombuffer(raw, dtype="<i2")
    np.testing.assert_array_equal(ints, [0, 16384, -16384, 32767, -32767, 32767, -32767])
    np.testing.assert_array_equal(float_to_int16(x), ints)


def test_write_wav_round_trip(tmp_path):
    x = _tone(2400)
    buf = io.BytesIO()
    write_wav(buf, x)
    buf.seek(0)
    info = sf.info(buf)
    assert (info.format, info.subtype, info.channels, info.samplerate) == ("WAV", "PCM_16", 1, SR)
    buf.seek(0)
    y, _ = sf.read(buf, dtype="int16")
    np.testing.assert_array_equal(y, float_to_int16(x))
    write_wav(tmp_path / "out.wav", x, sample_rate=16000)
    z, sr = load_audio(tmp_path / "out.wav")
    assert sr == 16000 and np.abs(z - x).max() < 1 / 16384


def _encoded(n: int, sr: int = SR, channels: int = 1, fmt: str = "WAV") -> bytes:
    buf = io.BytesIO()
    sf.write(buf, np.full((n, channels), 0.25, np.float32), sr, format=fmt, subtype="PCM_16")
    return buf.getvalue()


def _unknown_length_flac(n: int) -> bytes:
    """A FLAC whose header does not say how long it is (total samples 0: "unknown", which an
    encoder writing to a pipe leaves)."""
    data = bytearray(_encoded(n, fmt="FLAC"))
    assert data[:4] == b"fLaC"
    data[21] &= 0xF0  # the 36-bit total-samples field of STREAMINFO: bytes 21 (low half) .. 25
    data[22:26] = bytes(4)
    assert sf.info(io.BytesIO(bytes(data))).frames == 2**63 - 1
    return bytes(data)


@pytest.mark.parametrize("kind", ["bytes", "path", "array"])
def test_the_length_limit_is_exact(tmp_path, kind):
    """max_seconds=0.5 at 24 kHz: 12000 samples pass, 12001 are refused with the limit named."""

    def load(n: int):
        if kind == "array":
            return load_audio((np.full(n, 0.25, np.float32), SR), max_seconds=0.5)
        if kind == "path":
            (tmp_path / "clip.wav").write_bytes(_encoded(n))
            return load_audio(tmp_path / "clip.wav", max_seconds=0.5)
        return load_audio(_encoded(n), max_seconds=0.5)

    samples, rate = load(12000)
    assert rate == SR and len(samples) == 12000 and samples.dtype == np.float32
    np.testing.assert_allclose(samples, 0.25, atol=1 / 32768)
    with pytest.raises(AudioError, match=r"at most 0\.5 s is accepted"):
        load(12001)
    with pytest.raises(AudioError) as caught:
        load(36000)
    assert str(caught.value) == "audio is 1.5 s long; at most 0.5 s is accepted"


def test_a_header_that_understates_the_length_is_not_read_past_the_limit(monkeypatch):
    """Decoding stops one frame past the limit whatever the header claims (an MP3's length is
    an estimate): a long file that says it is short costs no more than the limit."""
    asked = []
    real_info, real_read = sf.info, sf.read

    def info(f):
        found = real_info(f)
        found.frames = 100  # the header's claim
        return found

    def read(*args, **kwargs):
        asked.append(kwargs.get("frames"))
        return real_read(*args, **kwargs)

    monkeypatch.setattr(sf, "info", info)
    monkeypatch.setattr(sf, "read", read)
    with pytest.raises(AudioError) as caught:
        load_audio(_encoded(SR * 4), max_seconds=1.0)
    assert str(caught.value) == "audio is too long; at most 1 s is accepted"
    samples, _ = load_audio(_encoded(SR), max_seconds=1.0)
    assert len(samples) == SR
    load_audio(_encoded(SR))  # no limit: everything
    assert asked == [SR + 1, SR + 1, -1]


def test_a_file_that_does_not_say_its_length_is_refused_clearly():
    with pytest.raises(AudioError) as caught:
        load_audio(_unknown_length_flac(SR), max_seconds=10)
    assert str(caught.value) == (
        "uploaded audio does not say how long it is (a FLAC written to a pipe?); convert it "
        "first, e.g. ffmpeg -i clip.flac clip.wav"
    )
    with pytest.raises(AudioError) as caught:  # longer than the limit: that is what is said
        load_audio(_unknown_length_flac(SR * 3), max_seconds=2)
    assert str(caught.value) == "audio is too long; at most 2 s is accepted"


@pytest.mark.parametrize(
    ("channels", "rate", "accepted"),
    [(8, SR, True), (9, SR, False), (1, 384_000, True), (1, 384_001, False), (1, 1, True)],
)
def test_channel_and_rate_limits(channels, rate, accepted):
    data = _encoded(10, sr=rate, channels=channels)
    if accepted:
        samples, got = load_audio(data)
        assert got == rate and samples.shape == (10,)
        return
    with pytest.raises(AudioError) as caught:
        load_audio(data)
    assert str(caught.value) == (
        f"uploaded audio has {channels} channel(s) at {rate} Hz; at most 8 channels and "
        "384000 Hz are accepted"
    )


def test_undecodable_bytes_are_described_without_memory_addresses():
    with pytest.raises(AudioError) as caught:
        load_audio(b"RIFF....WAVEfmt garbage that is not audio")
    message = str(caught.value)
    assert message.startswith("uploaded audio could not be decoded as audio (")
    assert message.endswith("); accepted formats: wav, flac, ogg (vorbis/opus) or mp3")
    assert " at 0x" not in message and "the file" in message


def test_a_refused_format_is_named():
    with pytest.raises(AudioError) as caught:
        load_audio(_encoded(100, fmt="AIFF"))
    assert str(caught.value) == (
        "uploaded audio is AIFF (Apple/SGI); accepted formats: wav, flac, ogg (vorbis/opus) or mp3"
    )


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ((np.zeros(10, np.float32), 1), None),
        ((np.zeros((3, 3), np.float32), SR), None),  # square: taken as (N, channels)
        (
            (np.zeros(10, np.complex64), SR),
            "samples must be float or integer PCM, got dtype complex64",
        ),
        (
            (np.zeros(10, np.float32),),
            "an audio tuple must be (samples: np.ndarray, sample_rate: int)",
        ),
        ((np.zeros(10, np.float32), -1), "sample_rate must be a positive integer, got -1"),
    ],
)
def test_array_edges(source, message):
    if message is None:
        samples, rate = load_audio(source)
        assert rate == source[1] and samples.ndim == 1 and len(samples) == len(source[0])
        return
    with pytest.raises(AudioError) as caught:
        load_audio(source)
    assert str(caught.value) == message


def test_int16_pcm_maps_full_scale_to_one():
    np.testing.assert_array_equal(
        int16_to_float(np.array([-32768, -16384, 0, 16384, 32767], np.int16)),
        np.array([-1.0, -0.5, 0.0, 0.5, 32767 / 32768], np.float32),
    )
    assert int16_to_float(np.array([1], np.int16)).dtype == np.float32
    samples, _ = load_audio((np.array([16384, -32768], np.int32), SR))
    np.testing.assert_array_equal(samples, np.array([16384 / 2**31, -(2**15) / 2**31], np.float32))
    assert samples.dtype == np.float32


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (b"", "uploaded audio is empty (0 bytes)"),
        (b"x", "uploaded audio could not be decoded as audio (Error opening the file: Format not "
               "recognised.); accepted formats: wav, flac, ogg (vorbis/opus) or mp3"),
        ((np.array([0.1, np.nan], np.float32), SR), "audio array contains NaN or infinite samples"),
        (_encoded(0), "uploaded audio is empty: it contains no samples"),
        (3.5, "audio source of type float is not supported; pass a file path, the file's bytes, "
              "or a (samples, sample_rate) tuple"),
    ],
)  # fmt: skip
def test_each_source_is_named_in_its_error(source, message):
    with pytest.raises(AudioError) as caught:
        load_audio(source)
    assert str(caught.value) == message


def test_a_file_is_named_by_its_path_in_errors(tmp_path):
    empty, broken = tmp_path / "empty.wav", tmp_path / "broken.wav"
    empty.write_bytes(_encoded(0))
    broken.write_bytes(b"not audio at all")
    for path, rest in ((empty, " is empty: it contains no samples"),
                       (broken, " could not be decoded as audio (Error opening the file: Format "
                                "not recognised.); accepted formats: wav, flac, ogg (vorbis/opus) "
                                "or mp3")):  # fmt: skip
        with pytest.raises(AudioError) as caught:
            load_audio(path)
        assert str(caught.value) == f"audio file {str(path)!r}{rest}"


def test_a_limit_below_one_sample_refuses_everything():
    for data in (_encoded(10), _unknown_length_flac(10)):
        with pytest.raises(AudioError) as caught:
            load_audio(data, max_seconds=0)
        assert str(caught.value).endswith("; at most 0 s is accepted")


def test_decoder_messages_lose_python_objects_and_keep_a_name():
    from ownvoice.audio import _plain

    said = "Error opening <_io.BytesIO object at 0x7f88a7af9800>: Format not recognised."
    assert _plain(RuntimeError(said)) == "Error opening the file: Format not recognised."
    named = "Error opening <_io.BufferedReader name='/srv/voices/a.wav'>: Unsupported."
    assert _plain(RuntimeError(named)) == "Error opening the file: Unsupported."
    assert _plain(RuntimeError("  ")) == "RuntimeError"
