"""Write the finished track to one file, encoded once: mp3, m4b, opus, flac or wav.

Encoding the whole concatenated PCM in one pass avoids what joining encoded pieces causes: every
lossy piece starts with encoder priming (1152 samples for mp3, 1024 for aac), heard as clicks
and gaps. m4b is an MP4 with the "M4B " brand, AAC audio, chapter marks (read back by players
and by PyAV's `container.chapters()`) and title/author/cover tags; mp3 gets ID3 chapters and
tags too; opus gets Vorbis comments. The file appears under its name only when complete.
Knows nothing about chunks or synthesis (PyAV, with its bundled FFmpeg, does the work).
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np

from ownvoice.audiobook.files import put_in_place, temporary_beside
from ownvoice.errors import InvalidInput

# format -> (container, codec, default bit rate, file extension)
FORMATS = {
    "mp3": ("mp3", "libmp3lame", 96_000),
    "m4b": ("mp4", "aac", 64_000),
    "opus": ("ogg", "libopus", 32_000),
    "flac": ("flac", "flac", None),
    "wav": ("wav", "pcm_s16le", None),
}
_EXTENSIONS = {
    ".mp3": "mp3",
    ".m4b": "m4b",
    ".m4a": "m4b",
    ".opus": "opus",
    ".ogg": "opus",
    ".flac": "flac",
    ".wav": "wav",
}
_CHAPTERS = {"mp3", "m4b", "opus"}  # containers whose chapter marks FFmpeg writes
_COVERS = {"mp3", "m4b", "flac"}
_BLOCK = 24000  # at most this many samples per frame handed to the encoder


@dataclass(frozen=True)
class ChapterMark:
    title: str
    start: int  # sample index
    end: int


@dataclass(frozen=True)
class Tags:
    title: str | None = None
    author: str | None = None
    cover: bytes | None = None  # JPEG or PNG bytes
    chapters: tuple[ChapterMark, ...] = ()


def output_format(path: str, explicit: str | None = None) -> str:
    if explicit is not None:
        if explicit not in FORMATS:
            raise InvalidInput(
                f"format must be one of {tuple(FORMATS)}, got {explicit!r}", param="format"
            )
        return explicit
    fmt = _EXTENSIONS.get(Path(path).suffix.lower())
    if fmt is None:
        raise InvalidInput(
            f"cannot tell the output format from {path!r}; use an extension in "
            f"{sorted(_EXTENSIONS)} or pass --format",
            param="format",
        )
    return fmt


def write_audio(
    path: str,
    blocks: Iterable[np.ndarray],
    sample_rate: int,
    fmt: str,
    tags: Tags = Tags(),
    bitrate: int | None = None,
) -> None:
    """Encode float32 mono audio, given as consecutive blocks (N,), to `path` in one pass.

    Blocks may have any length (a whole track is one block); `path` is replaced only on success.
    """
    import av

    if isinstance(blocks, np.ndarray):
        blocks = [blocks]  # one whole track (iterating an array would yield single samples)
    container_format, codec, default_rate = FORMATS[fmt]
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_beside(target)
    options = {"brand": "M4B ", "movflags": "+faststart"} if fmt == "m4b" else {}
    try:
        with av.open(tmp, "w", format=container_format, options=options) as out:
            stream = out.add_stream(codec, rate=sample_rate, layout="mono")
            if bitrate or default_rate:
                stream.bit_rate = bitrate or default_rate
            _metadata(out, stream, fmt, tags)
            cover = _cover_stream(out, tags.cover) if fmt in _COVERS and tags.cover else None
            if fmt in _CHAPTERS and tags.chapters:
                out.set_chapters(_chapters(tags.chapters, sample_rate))
            if cover is not None:
                packet = av.Packet(tags.cover)
                packet.stream, packet.pts, packet.dts = cover, 0, 0
                out.mux(packet)
            _encode(av, out, stream, blocks, sample_rate)
        put_in_place(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _encode(av, out, stream, blocks: Iterable[np.ndarray], sample_rate: int) -> None:
    pts = 0
    for block in blocks:
        block = np.clip(np.ascontiguousarray(block, dtype=np.float32).reshape(-1), -1.0, 1.0)
        for i in range(0, len(block), _BLOCK):
            piece = block[None, i : i + _BLOCK]
            frame = av.AudioFrame.from_ndarray(piece, format="flt", layout="mono")
            frame.sample_rate, frame.pts = sample_rate, pts
            pts += piece.shape[1]
            out.mux(stream.encode(frame))
    out.mux(stream.encode(None))


def resample_blocks(
    blocks: Iterable[np.ndarray], rate_in: int, rate_out: int
) -> Iterator[np.ndarray]:
    """The same audio at another sample rate, block by block (soxr keeps state between them)."""
    import soxr

    resampler = soxr.ResampleStream(rate_in, rate_out, 1, dtype="float32")
    for block in blocks:
        yield resampler.resample_chunk(np.asarray(block, dtype=np.float32))
    yield resampler.resample_chunk(np.zeros(0, dtype=np.float32), last=True)


def _metadata(out, stream, fmt: str, tags: Tags) -> None:
    meta = {"genre": "Audiobook"}
    if tags.title:
        meta.update(title=tags.title, album=tags.title)
    if tags.author:
        meta.update(artist=tags.author, album_artist=tags.author)
    # Ogg keeps tags per stream (Vorbis comments); the others per file
    (stream if fmt == "opus" else out).metadata.update(meta)


def _chapters(marks: tuple[ChapterMark, ...], sample_rate: int) -> list[dict]:
    return [
        {
            "id": i + 1,
            "start": m.start,
            "end": m.end,
            "time_base": Fraction(1, sample_rate),
            "metadata": {"title": m.title},
        }
        for i, m in enumerate(marks)
    ]


def _cover_stream(out, image: bytes):
    """An attached-picture stream for the cover, or None if the image cannot be read."""
    import av
    from av.stream import Disposition

    try:
        with av.open(io.BytesIO(image)) as probe:
            v = probe.streams.video[0]
            codec, width, height = (
                v.codec_context.name,
                v.codec_context.width,
                v.codec_context.height,
            )
    except (av.FFmpegError, IndexError, ValueError):
        return None
    if codec not in ("mjpeg", "png"):
        return None
    stream = out.add_mux_stream(codec, width=width, height=height)
    stream.disposition = Disposition.attached_pic
    return stream


def read_chapters(path: str) -> list[tuple[str, float, float]]:
    """(title, start s, end s) of each chapter mark in an audio file; for reports and tests."""
    import av

    with av.open(path) as f:
        return [
            (
                c["metadata"].get("title", ""),
                float(c["start"] * c["time_base"]),
                float(c["end"] * c["time_base"]),
            )
            for c in f.chapters()
        ]
