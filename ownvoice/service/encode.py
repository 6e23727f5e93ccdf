"""Streaming audio encoders for the six OpenAI speech formats, and pitch-preserving speed change.

    encoder = AudioEncoder("mp3")               # mp3, opus, aac, flac, wav or pcm
    for chunk in chunks:                         # float32 mono at 24 kHz, any chunk size
        send(encoder.write(chunk))               # bytes ready so far (may be b"")
    send(encoder.close())                        # the rest; the concatenation is one valid file

    stretch = TimeStretch(speed=1.5)             # WSOLA: faster speech, same pitch
    y = stretch.process(chunk) ... stretch.flush()

    stream = AudioStream("mp3", speed=1.25)      # both: what every front end sends
    send(stream.write(chunk)) ...; send(stream.close()); stream.seconds  # audio delivered

Formats (what clients expect from OpenAI): mp3; opus in an Ogg container; aac as ADTS; flac;
wav with a streaming header (sizes 0xFFFFFFFF, because the length is unknown when the header
leaves); pcm = raw signed 16-bit little-endian mono at 24 kHz. mp3/opus/aac/flac go through PyAV
(its wheel bundles FFmpeg with lame and libopus). mp3/opus/aac write to a sink that never seeks,
so bytes come out while audio is still being generated. FLAC is held until `close`: its header
(STREAMINFO) must carry the total sample count, which libsndfile (Python's soundfile and the
tools built on it) needs to read the file, and the muxer can only write it by seeking back.
Knows nothing about models, HTTP or voices.
"""

from __future__ import annotations

import io
import struct

import numpy as np

from ownvoice.audio import float_to_int16, to_pcm16
from ownvoice.errors import InvalidInput

SAMPLE_RATE = 24000
FORMATS = ("mp3", "opus", "aac", "flac", "wav", "pcm")
MEDIA_TYPES = {
    "mp3": "audio/mpeg",
    "opus": "audio/ogg",
    "aac": "audio/aac",
    "flac": "audio/flac",
    "wav": "audio/wav",
    "pcm": "audio/pcm",
}
# format -> (PyAV container, codec, bit rate); speech at 24 kHz mono needs no more than this
_AV_FORMATS = {
    "mp3": ("mp3", "libmp3lame", 64_000),
    "opus": ("ogg", "libopus", 32_000),
    "aac": ("adts", "aac", 64_000),
    "flac": ("flac", "flac", None),
}
# Ogg buffers ~1 s of pages by default; 20 ms pages let the first bytes leave at once
_OGG_OPTIONS = {"page_duration": "20000"}
MIN_SPEED, MAX_SPEED = 0.25, 4.0


class _Sink:
    """A write-only file object for PyAV: collects what the muxer writes until taken."""

    def __init__(self) -> None:
        self.buffer = bytearray()

    def write(self, data) -> int:
        self.buffer += data
        return len(data)

    def take(self) -> bytes:
        out = bytes(self.buffer)
        self.buffer.clear()
        return out


class AudioEncoder:
    """Encode float32 mono chunks into one continuous file, handing back bytes as they are ready.

    Not thread-safe; one encoder per response. `write` may return b"" while the codec fills a
    frame. After `close`, the concatenation of everything returned is a complete file.
    """

    def __init__(self, fmt: str, sample_rate: int = SAMPLE_RATE):
        if fmt not in FORMATS:
            raise InvalidInput(
                f"response_format must be one of {', '.join(FORMATS)}, got {fmt!r}",
                param="response_format",
            )
        self.format = fmt
        self.sample_rate = sample_rate
        self.media_type = MEDIA_TYPES[fmt]
        self._closed = False
        self._header_sent = False
        self._container = None
        if fmt in _AV_FORMATS:
            self._open_av()

    def _open_av(self) -> None:
        import av  # heavy (bundled FFmpeg); only when a compressed format is asked for

        container_format, codec, bit_rate = _AV_FORMATS[self.format]
        # a seekable buffer lets the FLAC muxer fill in STREAMINFO's length when it closes
        self._sink = io.BytesIO() if self.format == "flac" else _Sink()
        options = _OGG_OPTIONS if container_format == "ogg" else {}
        self._container = av.open(self._sink, mode="w", format=container_format, options=options)
        self._stream = self._container.add_stream(codec, rate=self.sample_rate, layout="mono")
        if bit_rate:
            self._stream.bit_rate = bit_rate
        self._av = av

    def write(self, samples: np.ndarray) -> bytes:
        """Add samples (N,) float32 in [-1, 1]; returns the bytes that are ready."""
        if self._closed:
            raise RuntimeError("AudioEncoder.write after close()")
        samples = np.ascontiguousarray(samples, dtype=np.float32).reshape(-1)
        if self._container is None:
            return self._header() + to_pcm16(samples)
        if samples.size == 0:
            return self._take()
        # PyAV re-frames to the codec's frame size (1152 mp3, 1024 aac, 20 ms opus) internally
        if self.format == "flac":  # 16-bit, rounded as wav and pcm are
            frame = self._av.AudioFrame.from_ndarray(
                float_to_int16(samples)[None, :], format="s16", layout="mono"
            )
        else:
            frame = self._av.AudioFrame.from_ndarray(samples[None, :], format="flt", layout="mono")
        frame.sample_rate = self.sample_rate
        for packet in self._stream.encode(frame):
            self._container.mux(packet)
        return self._take()

    def close(self) -> bytes:
        """Flush the codec and the container; returns the last bytes."""
        if self._closed:
            return b""
        self._closed = True
        if self._container is None:
            return self._header()  # a file with no samples is still a valid (empty) file
        for packet in self._stream.encode(None):
            self._container.mux(packet)
        self._container.close()
        if isinstance(self._sink, io.BytesIO):
            return self._sink.getvalue()
        return self._sink.take()

    def _take(self) -> bytes:
        return b"" if isinstance(self._sink, io.BytesIO) else self._sink.take()

    def _header(self) -> bytes:
        if self.format != "wav" or self._header_sent:
            return b""
        self._header_sent = True
        return wav_header(self.sample_rate)


def wav_header(sample_rate: int = SAMPLE_RATE, num_samples: int | None = None) -> bytes:
    """A 44-byte RIFF header for 16-bit mono PCM; unknown length = 0xFFFFFFFF (streaming)."""
    if num_samples is None:
        riff_size = data_size = 0xFFFFFFFF
    else:
        data_size = 2 * num_samples
        riff_size = 36 + data_size
    fmt_chunk = struct.pack("<HHIIHH", 1, 1, sample_rate, 2 * sample_rate, 2, 16)
    return (
        b"RIFF" + struct.pack("<I", riff_size) + b"WAVE"
        + b"fmt " + struct.pack("<I", len(fmt_chunk)) + fmt_chunk
        + b"data" + struct.pack("<I", data_size)
    )  # fmt: skip


def encode(samples: np.ndarray, fmt: str, sample_rate: int = SAMPLE_RATE) -> bytes:
    """One-shot encoding of a whole clip (wav gets its exact length in the header)."""
    if fmt == "wav":
        samples = np.asarray(samples, dtype=np.float32).reshape(-1)
        return wav_header(sample_rate, samples.size) + to_pcm16(samples)
    encoder = AudioEncoder(fmt, sample_rate)
    return encoder.write(samples) + encoder.close()


def check_speed(speed: float) -> float:
    if not MIN_SPEED <= speed <= MAX_SPEED:
        raise InvalidInput(
            f"speed must be between {MIN_SPEED} and {MAX_SPEED}, got {speed}", param="speed"
        )
    return float(speed)


class TimeStretch:
    """Change speaking speed without changing pitch (WSOLA), chunk by chunk.

    WSOLA: the output is built from overlapping 40 ms windows placed every 20 ms. Window k is
    read from the input near k * 20 ms * speed, shifted by up to ±10 ms (one pitch period of a
    low voice) to the position whose waveform best continues the previous window, so periods
    line up and no phasing is heard. Positions are absolute, so feeding the input in any chunk
    sizes gives the same output as one call. Output length = round(input length / speed).
    """

    def __init__(self, speed: float, sample_rate: int = SAMPLE_RATE):
        self.speed = check_speed(speed)
        self.frame = 2 * round(0.02 * sample_rate)  # N: window length (40 ms)
        self.hop = self.frame // 2  # Hs: output hop; Hann windows at N/2 sum to 1
        self.tolerance = round(0.01 * sample_rate)  # Δ: search range either side
        n = np.arange(self.frame)
        self.window = (0.5 - 0.5 * np.cos(2 * np.pi * n / self.frame)).astype(np.float32)
        self._first_window = self.window.copy()
        self._first_window[: self.hop] = 1.0  # no fade-in at the very start
        self._buf = np.zeros(0, dtype=np.float32)  # input from absolute index _buf_start
        self._buf_start = 0
        self._in_len = 0  # input samples received
        self._k = 0  # next window index
        self._prev_pos = 0  # input position of the previous window
        self._ola = np.zeros(self.frame, dtype=np.float32)  # output from _k * hop on
        self._emitted = 0  # output samples made by the windows placed so far
        self._pending = np.zeros(0, dtype=np.float32)  # made but not yet handed out
        self._released = 0  # output samples handed out
        self._flushed = False

    def process(self, samples: np.ndarray) -> np.ndarray:
        """Add input; returns the output samples that are final."""
        x = np.asarray(samples, dtype=np.float32).reshape(-1)
        if self.speed == 1.0:
            return x.copy()
        self._buf = np.concatenate([self._buf, x])
        self._in_len += x.size
        out = [self._pending]
        while self._in_len >= self._needed(self._k):
            out.append(self._step())
        self._trim()
        # at high speeds the windows can run ahead of round(input / speed), which is the total
        # if the input ends here: hold back what a flush now might have to take back
        ready = np.concatenate(out)
        n = max(0, min(ready.size, round(self._in_len / self.speed) - self._released))
        self._pending, self._released = ready[n:], self._released + n
        return ready[:n]

    def flush(self) -> np.ndarray:
        """End of input: returns the rest, so the total is round(input length / speed)."""
        if self.speed == 1.0 or self._flushed:
            return np.zeros(0, dtype=np.float32)
        self._flushed = True
        total = round(self._in_len / self.speed)
        out = [self._pending]
        while self._emitted < total:  # the remaining windows read zeros past the end
            out.append(self._step())
        rest = np.concatenate(out)[: max(0, total - self._released)]
        self._pending, self._released = np.zeros(0, dtype=np.float32), total
        return rest

    # -- internals --------------------------------------------------------------------------

    def _nominal(self, k: int) -> int:
        return round(k * self.hop * self.speed)  # Ha = Hs * speed

    def _needed(self, k: int) -> int:
        """Input samples that must exist before window k can be placed."""
        if k == 0:
            return self.frame
        return max(self._nominal(k) + self.tolerance, self._prev_pos + self.hop) + self.frame

    def _read(self, start: int, length: int) -> np.ndarray:
        """Input [start, start + length) by absolute index; zeros outside what was received."""
        out = np.zeros(length, dtype=np.float32)
        lo, hi = max(start, self._buf_start), min(start + length, self._buf_start + self._buf.size)
        if hi > lo:
            out[lo - start : hi - start] = self._buf[lo - self._buf_start : hi - self._buf_start]
        return out

    def _step(self) -> np.ndarray:
        k = self._k
        if k == 0:
            pos, window = 0, self._first_window
        else:
            # the waveform that would naturally follow the previous window
            template = self._read(self._prev_pos + self.hop, self.frame)
            lo = max(0, self._nominal(k) - self.tolerance)
            hi = self._nominal(k) + self.tolerance
            region = self._read(lo, hi - lo + self.frame)
            corr = np.correlate(region, template, mode="valid")  # (hi - lo + 1,)
            pos = lo + int(np.argmax(corr)) if corr.max() > 0 else self._nominal(k)
            window = self.window
        self._ola += window * self._read(pos, self.frame)
        self._prev_pos = pos
        self._k += 1
        # output before the next window's start is final
        done = self._ola[: self.hop].copy()
        self._ola = np.concatenate([self._ola[self.hop :], np.zeros(self.hop, np.float32)])
        self._emitted += done.size
        return done

    def _trim(self) -> None:
        keep_from = min(self._nominal(self._k) - self.tolerance, self._prev_pos + self.hop)
        drop = keep_from - self._buf_start
        if drop > 0:
            self._buf = self._buf[drop:]
            self._buf_start += drop


def time_stretch(samples: np.ndarray, speed: float, sample_rate: int = SAMPLE_RATE) -> np.ndarray:
    """One-shot pitch-preserving speed change of a whole clip."""
    stretch = TimeStretch(speed, sample_rate)
    return np.concatenate([stretch.process(samples), stretch.flush()])


class AudioStream:
    """Audio chunks to one file's bytes on the wire: the speed change, then the encoder.

    Every front end that sends encoded audio (HTTP, a batch item, a WebSocket sentence,
    Wyoming's PCM) writes through one of these, so `speed` means the same everywhere;
    `seconds` is the audio delivered so far (after the speed change)."""

    def __init__(self, fmt: str, speed: float = 1.0, sample_rate: int = SAMPLE_RATE):
        self.encoder = AudioEncoder(fmt, sample_rate)
        self.stretch = TimeStretch(speed, sample_rate) if speed != 1.0 else None
        self.sample_rate = sample_rate
        self.samples = 0  # delivered

    @property
    def seconds(self) -> float:
        return self.samples / self.sample_rate

    def write(self, samples: np.ndarray) -> bytes:
        if self.stretch is not None:
            samples = self.stretch.process(samples)
        self.samples += len(samples)
        return self.encoder.write(samples)

    def close(self) -> bytes:
        """The rest: the stretch's tail and the encoder's last bytes (a complete file)."""
        tail = self.stretch.flush() if self.stretch is not None else None
        data = b""
        if tail is not None and tail.size:
            self.samples += tail.size
            data = self.encoder.write(tail)
        return data + self.encoder.close()
