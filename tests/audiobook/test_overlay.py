"""The read-along EPUB: valid for epubcheck, every sentence of the book (as written) has a clip
inside its chapter's audio, at the time the subtitles give it."""

from __future__ import annotations

import io
import re
import subprocess
import zipfile
from xml.etree import ElementTree as ET

import av
import numpy as np
import pytest
import webvtt

from ownvoice.audiobook import BookOptions, ServerBackend, render_book
from ownvoice.audiobook.cast import load_cast
from ownvoice.audiobook.lexicon import parse_lexicon
from tests.audiobook.test_cast import BOOK, CAST
from tests.tools import need

SMIL = "{http://www.w3.org/ns/SMIL}"
XHTML = "{http://www.w3.org/1999/xhtml}"
OPF = "{http://www.idpf.org/2007/opf}"


@pytest.fixture(scope="module")
def read_along(tmp_path_factory):
    """A cast book with a lexicon, rendered with a read-along EPUB and SRT subtitles."""
    from tests.audiobook.fake_server import FakeSpeechServer

    folder = tmp_path_factory.mktemp("overlay")
    (folder / "book.md").write_text("---\ntitle: The Harbour\nauthor: Ann Author\nlang: en\n---\n"
                                    + BOOK)  # fmt: skip
    (folder / "cast.yaml").write_text(CAST)
    options = BookOptions(
        cast=load_cast(folder / "cast.yaml"),
        lexicon=parse_lexicon({"english": {"Bravo": "Brah voh"}}),
        language="english",
        subtitles=(str(folder / "book.srt"),),
        epub_overlay=str(folder / "book.epub"),
        backoff_s=0.01,
    )
    with FakeSpeechServer() as server:
        report = render_book(str(folder / "book.md"), str(folder / "book.wav"),
                             ServerBackend(server.url, voice="ryan"), options,
                             show_progress=False)  # fmt: skip
        sent = [b["input"] for b in server.bodies]
    assert report.complete and report.epub_overlay == str(folder / "book.epub")
    return folder, sent


def test_epubcheck_finds_no_errors(read_along):
    folder, _ = read_along
    epubcheck = need("epubcheck")
    command = [epubcheck]
    if not _runs(epubcheck):  # Debian's epubcheck is a jar that relies on binfmt to run
        command = [need("java"), "-jar", epubcheck]
    result = subprocess.run([*command, str(folder / "book.epub")], capture_output=True, text=True,
                            timeout=300)  # fmt: skip
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert "0 fatals / 0 errors / 0 warnings" in out, out


def _runs(path: str) -> bool:
    try:
        subprocess.run([path, "--version"], capture_output=True, timeout=60)
        return True
    except OSError:
        return False


def test_every_sentence_has_its_clip_inside_its_chapter_audio(read_along):
    folder, sent = read_along
    z = zipfile.ZipFile(folder / "book.epub")
    assert z.namelist()[0] == "mimetype" and z.read("mimetype") == b"application/epub+zip"
    assert z.getinfo("mimetype").compress_type == zipfile.ZIP_STORED
    opf = ET.fromstring(z.read("OEBPS/content.opf"))
    items = {i.get("id"): i for i in opf.iter(f"{OPF}item")}
    spine = [items[r.get("idref")] for r in opf.iter(f"{OPF}itemref")]
    subtitles = [(c.text, _stamp(c.start), _stamp(c.end))
                 for c in webvtt.from_srt(str(folder / "book.srt"))]  # fmt: skip
    chapter_starts = _chapter_starts(folder / "book.wav")

    shown, clips = [], []
    for n, page in enumerate(spine):
        smil = items[page.get("media-overlay")]
        doc = ET.fromstring(z.read(f"OEBPS/{page.get('href')}"))
        spans = {s.get("id"): "".join(s.itertext()) for s in doc.iter(f"{XHTML}span")}
        overlay = ET.fromstring(z.read(f"OEBPS/{smil.get('href')}"))
        audio_files = set()
        for par in overlay.iter(f"{SMIL}par"):
            text, audio = par.find(f"{SMIL}text"), par.find(f"{SMIL}audio")
            page_name, fragment = text.get("src").split("#")
            assert page_name == page.get("href")
            audio_files.add(audio.get("src"))
            begin, end = _clock(audio.get("clipBegin")), _clock(audio.get("clipEnd"))
            shown.append(spans.pop(fragment))
            clips.append((n, begin, end))
        assert not spans  # every sentence on the page is read
        (name,) = audio_files
        seconds = _duration(z.read(f"OEBPS/{name}"))
        assert all(0 <= b < e <= seconds for m, b, e in clips if m == n), (seconds, clips)

    # the pages keep the book's headings and paragraphs
    first = ET.fromstring(z.read(f"OEBPS/{spine[0].get('href')}"))
    blocks = [(e.tag[len(XHTML):], " ".join("".join(e.itertext()).split()))
              for e in first.iter() if e.tag in (f"{XHTML}h1", f"{XHTML}p")]  # fmt: skip
    assert blocks == [
        ("h1", "The Pier"),
        ("p", "Alpha came in at dawn. “Is anyone there?” the keeper called. Nobody answered Qwen."),
        ("p", "“Yes,” said the girl. “I have been waiting here for a very long time.”"),
    ]
    # the text as written, in reading order; the lexicon changed only what was sent
    assert shown == [text for text, _, _ in subtitles]
    assert "Bravo walked up the hill." in shown and "Brah voh walked up the hill." in sent
    assert not any("Chwen" in s or "Brah voh" in s or "<!--" in s for s in shown)
    # at the subtitles' times, relative to where its chapter starts in the book
    for (n, begin, end), (_, cue_start, cue_end) in zip(clips, subtitles, strict=True):
        start = chapter_starts[n]
        assert abs(begin + start - cue_start) <= 0.002
        assert abs(end + start - cue_end) <= 0.002


def _chapter_starts(path) -> list[float]:
    """Where each chapter starts in the book (s): its first chunk's start in timings.json, the
    first chapter at 0 (its audio holds the head silence)."""
    import json

    work = path.with_name(path.name + ".work")
    chunks = json.loads((work / "manifest.json").read_text())["chunks"]
    timings = json.loads((work / "timings.json").read_text())
    firsts: dict[int, float] = {}
    for chunk, t in zip(chunks, timings, strict=True):
        firsts.setdefault(chunk["chapter"], t["start"])
    return [0.0] + [firsts[c] for c in sorted(firsts)][1:]


def _stamp(value: str) -> float:
    h, m, s = value.split(":")
    return int(h) * 3600 + int(m) * 60 + float(s)


def _clock(value: str) -> float:
    h, m, s = re.fullmatch(r"(\d+):(\d\d):(\d\d\.\d{3})", value).groups()
    return int(h) * 3600 + int(m) * 60 + float(s)


def _duration(mp3: bytes) -> float:
    with av.open(io.BytesIO(mp3)) as f:
        samples = [frame.to_ndarray().shape[-1] for frame in f.decode(audio=0)]
        rate = f.streams.audio[0].rate
    assert rate == 24000
    return float(np.sum(samples)) / rate
