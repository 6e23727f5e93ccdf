"""Output files: m4b chapters/tags/cover read back with PyAV, and every format decodes."""

from __future__ import annotations

import av
import numpy as np
import pytest
from av.stream import Disposition

from ownvoice.audiobook.encode import ChapterMark, Tags, output_format, read_chapters, write_audio
from ownvoice.audiobook.files import _umask
from ownvoice.cli import main
from ownvoice.errors import InvalidInput
from tests.audiobook import epub_builder as eb

SR = 24000


def _decode(path) -> tuple[np.ndarray, int]:
    with av.open(str(path)) as f:
        stream = f.streams.audio[0]
        frames = [fr.to_ndarray().reshape(-1) for fr in f.decode(stream)]
        audio = np.concatenate(frames)
        if audio.dtype.kind == "i":  # flac and wav decode to integers
            audio = audio / (np.iinfo(audio.dtype).max + 1)
        return audio.astype(np.float32), stream.rate


def _rms(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(x.astype(np.float64) ** 2)))


def test_epub_to_m4b_has_chapters_titles_and_cover(tmp_path, server, capsys):
    epub = eb.write_epub(tmp_path / "nested.epub")
    out = tmp_path / "nested.m4b"
    with pytest.raises(SystemExit) as done:
        main(
            [
                "book",
                str(epub),
                "-o",
                str(out),
                "--server",
                server.url,
                "--voice",
                "ryan",
                "--no-progress",
            ]
        )
    assert done.value.code == 0, capsys.readouterr().err

    chapters = read_chapters(str(out))
    assert [c[0] for c in chapters] == [
        "The Nested Book",
        "Part One — Chapter 1: Arrival",
        "Chapter 2: Departure",
        "The Long Road",
    ]
    starts = [c[1] for c in chapters]
    assert starts[0] == 0 and starts == sorted(starts) and len(set(starts)) == 4
    assert all(
        a[2] == pytest.approx(b[1], abs=0.002) for a, b in zip(chapters, chapters[1:], strict=False)
    )

    with av.open(str(out)) as f:
        assert f.format.name.startswith("mov,mp4")
        assert f.metadata["major_brand"].strip() == "M4B"
        assert (f.metadata["title"], f.metadata["artist"]) == ("The Nested Book", "Bea Writer")
        assert f.streams.audio[0].codec_context.name == "aac"
        covers = [s for s in f.streams if s.disposition & Disposition.attached_pic]
        assert len(covers) == 1
        packet = next(f.demux(covers[0]))
        assert bytes(packet) == eb.png()
        duration = f.duration / 1e6
    assert chapters[-1][2] == pytest.approx(duration, abs=0.1)

    # each later chapter mark sits right after the chapter pause, right where speech starts
    audio, rate = _decode(out)
    for start in starts[1:]:
        i = round(start * rate)
        assert _rms(audio[i - rate : i - rate // 10]) < 1e-3  # the 2 s chapter pause
        assert _rms(audio[i : i + rate // 2]) > 1e-2
    assert "chunks      " in capsys.readouterr().err  # the final report went to stderr
    # the EPUB's dc:language "en-GB" is what the model is asked to speak
    assert {b.get("language") for b in server.bodies} == {"english"}


def test_cli_tag_cover_and_sample_rate_overrides(tmp_path, story, server, capsys):
    cover = tmp_path / "cover.png"
    cover.write_bytes(eb.png(5, 5))
    out = tmp_path / "story.mp3"
    argv = [
        "book", str(story), "-o", str(out), "--server", server.url, "--voice", "ryan",
        "--chunk-chars", "60", "--title", "Other Title", "--author", "Someone",
        "--cover", str(cover), "--sample-rate", "44100", "--no-progress",
    ]  # fmt: skip
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 0, capsys.readouterr().err
    with av.open(str(out)) as f:
        assert f.streams.audio[0].rate == 44100
        assert (f.metadata["title"], f.metadata["artist"]) == ("Other Title", "Someone")
        covers = [s for s in f.streams if s.disposition & Disposition.attached_pic]
        assert bytes(next(f.demux(covers[0]))) == eb.png(5, 5)
    assert [c[0] for c in read_chapters(str(out))] == ["The Lighthouse", "The Storm"]


def _track(seconds: float = 3.0) -> np.ndarray:
    t = np.arange(round(seconds * SR)) / SR
    return (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)


MARKS = (ChapterMark("One", 0, SR), ChapterMark("Two", SR, 3 * SR))


@pytest.mark.parametrize(
    "fmt, suffix", [("mp3", ".mp3"), ("opus", ".opus"), ("flac", ".flac"), ("wav", ".wav")]
)
def test_every_format_decodes_to_the_same_length(tmp_path, fmt, suffix):
    path = tmp_path / f"book{suffix}"
    assert output_format(str(path)) == fmt
    tags = Tags(title="T", author="A", cover=eb.png(), chapters=MARKS)
    write_audio(str(path), _track(), SR, fmt, tags)
    audio, rate = _decode(path)
    # lossy codecs add priming/padding, at most a few frames
    assert len(audio) / rate == pytest.approx(3.0, abs=0.1)
    assert _rms(audio) == pytest.approx(0.3 / np.sqrt(2), rel=0.1)
    with av.open(str(path)) as f:
        meta = {**f.metadata, **f.streams.audio[0].metadata}
        assert {k.lower(): v for k, v in meta.items()}.get("title") == "T"
    if fmt in ("mp3", "opus"):
        assert [c[0] for c in read_chapters(str(path))] == ["One", "Two"]
    # readable by others as a plain open() would make it (a media server runs as another user),
    # not mkstemp's private 0600
    assert path.stat().st_mode & 0o777 == 0o666 & ~_umask()


def test_a_failed_encode_leaves_no_partial_file(tmp_path):
    path = tmp_path / "book.mp3"
    with pytest.raises(Exception):  # noqa: B017 - whatever FFmpeg raises
        write_audio(str(path), _track(), SR, "mp3", bitrate=-5)
    assert list(tmp_path.iterdir()) == []


def test_unknown_output_extension_is_a_clear_error():
    with pytest.raises(InvalidInput, match="cannot tell the output format"):
        output_format("book.xyz")
