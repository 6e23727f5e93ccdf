"""A read-along EPUB 3: the book's text with its audio, each sentence highlighted while it is
read (EPUB 3 Media Overlays: a SMIL document per chapter pairs every sentence's <span> with a
clip of that chapter's MP3).

    OEBPS/content.opf     metadata (media:duration of every overlay and of the book), manifest
    OEBPS/nav.xhtml       the table of contents
    OEBPS/cN.xhtml        chapter N: paragraphs of <span id="sK"> sentences (as written, never
                          the lexicon's text)
    OEBPS/cN.smil         chapter N's overlay: a <par> per sentence, its clip in audio/cN.mp3
    OEBPS/audio/cN.mp3    chapter N's audio, cut from the finished track at the chapter marks

Sentence times are the subtitles' (subtitles.cues: real chunk timings, shared inside a chunk by
how long each sentence takes to say), made relative to the chapter's file. Knows nothing about
synthesis.
"""

from __future__ import annotations

import tempfile
import uuid
import zipfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

import numpy as np

from ownvoice.audiobook.document import Book, chapter_names
from ownvoice.audiobook.encode import Tags, write_audio
from ownvoice.audiobook.files import put_in_place, temporary_beside
from ownvoice.audiobook.plan import PlannedChunk
from ownvoice.audiobook.subtitles import Cue

AUDIO_BITRATE = 64_000  # mono speech MP3 (a core media type of EPUB 3)
ACTIVE_CLASS = "-epub-media-overlay-active"
_STYLE = f"""body {{ font-family: serif; line-height: 1.5; margin: 1em; }}
h1 {{ font-size: 1.4em; }}
.{ACTIVE_CLASS} {{ background-color: #ffe58a; color: #000; }}
"""


@dataclass(frozen=True)
class ChapterPart:
    """One chapter of the read-along book."""

    title: str
    paragraphs: list[list[tuple[str, Cue]]]  # paragraphs of (span id, cue) in reading order
    start: int  # first sample of the chapter in the finished track
    end: int


def chapter_parts(
    book: Book,
    plan: Sequence[PlannedChunk],
    cues: Sequence[Cue],
    chapter_ids: Sequence[int],
    chapter_starts: Sequence[int],
    total: int,
) -> list[ChapterPart]:
    """The chapters as marked in the audio, each with its sentences grouped in paragraphs."""
    by_chunk: dict[int, list[Cue]] = {}
    for cue in cues:
        by_chunk.setdefault(cue.chunk, []).append(cue)
    ends = [*chapter_starts[1:], total]
    parts, names = [], chapter_names(book)
    for chapter, start, end in zip(chapter_ids, chapter_starts, ends, strict=True):
        paragraphs: list[list[tuple[str, Cue]]] = [[]]
        for chunk in plan:
            if chunk.chapter != chapter:
                continue
            for cue in by_chunk.get(chunk.index, []):
                paragraphs[-1].append((f"s{sum(map(len, paragraphs)) + 1}", cue))
            if chunk.pause != "sentence" and paragraphs[-1]:
                paragraphs.append([])
        parts.append(ChapterPart(names[chapter], [p for p in paragraphs if p], start, end))
    return parts


def write_overlay(
    path: str,
    book: Book,
    parts: Sequence[ChapterPart],
    blocks: Iterable[np.ndarray],
    sample_rate: int,
    language: str,
) -> None:
    """Write the read-along EPUB to `path` (replaced only when complete); `blocks` is the
    finished track (assemble.stream), cut here at the chapters' starts."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tape = _Tape(iter(blocks))
    with tempfile.TemporaryDirectory(prefix="ownvoice-overlay-") as scratch:
        tmp = temporary_beside(target)
        try:
            with zipfile.ZipFile(tmp, "w") as z:
                # the OCF rule: "mimetype" first, stored, no extra field
                z.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip",
                           compress_type=zipfile.ZIP_STORED)  # fmt: skip
                z.writestr("META-INF/container.xml", _CONTAINER, zipfile.ZIP_DEFLATED)
                durations = []
                for n, part in enumerate(parts, 1):
                    mp3 = Path(scratch) / f"c{n}.mp3"
                    write_audio(str(mp3), tape.take(part.end - part.start), sample_rate, "mp3",
                                Tags(), AUDIO_BITRATE)  # fmt: skip
                    z.write(mp3, f"OEBPS/audio/c{n}.mp3", zipfile.ZIP_STORED)
                    mp3.unlink()
                    smil, ms = _smil(n, part, sample_rate)
                    durations.append(ms)
                    z.writestr(f"OEBPS/c{n}.smil", smil, zipfile.ZIP_DEFLATED)
                    z.writestr(f"OEBPS/c{n}.xhtml", _xhtml(part, language), zipfile.ZIP_DEFLATED)
                z.writestr("OEBPS/style.css", _STYLE, zipfile.ZIP_DEFLATED)
                z.writestr("OEBPS/nav.xhtml", _nav(parts, language), zipfile.ZIP_DEFLATED)
                z.writestr("OEBPS/content.opf", _opf(book, parts, durations, language),
                           zipfile.ZIP_DEFLATED)  # fmt: skip
            put_in_place(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


class _Tape:
    """Hands out a stream of blocks in consecutive lengths."""

    def __init__(self, blocks: Iterator[np.ndarray]):
        self._blocks, self._left = blocks, np.zeros(0, dtype=np.float32)

    def take(self, n: int) -> Iterator[np.ndarray]:
        while n > 0:
            if len(self._left) == 0:
                block = next(self._blocks, None)
                if block is None:
                    return
                self._left = np.asarray(block, dtype=np.float32).reshape(-1)
                continue
            piece, self._left = self._left[:n], self._left[n:]
            n -= len(piece)
            yield piece


def _clock_ms(ms: int) -> str:
    """A SMIL clock value: h:mm:ss.mmm."""
    h, rest = divmod(ms, 3_600_000)
    m, rest = divmod(rest, 60_000)
    return f"{h}:{m:02d}:{rest // 1000:02d}.{rest % 1000:03d}"


def _smil(n: int, part: ChapterPart, sample_rate: int) -> tuple[str, int]:
    """Chapter n's overlay and its duration in ms (the sum of its clips)."""
    offset = part.start / sample_rate
    limit = round((part.end - part.start) / sample_rate * 1000)
    pars, total = [], 0
    for paragraph in part.paragraphs:
        for span, cue in paragraph:
            begin = min(max(0, round((cue.start - offset) * 1000)), limit)
            end = min(max(begin, round((cue.end - offset) * 1000)), limit)
            total += end - begin
            pars.append(
                f'<par id="c{n}{span}"><text src="c{n}.xhtml#{span}"/>'
                f'<audio src="audio/c{n}.mp3" clipBegin="{_clock_ms(begin)}" '
                f'clipEnd="{_clock_ms(end)}"/></par>'
            )
    body = "\n".join(pars)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<smil xmlns="http://www.w3.org/ns/SMIL" xmlns:epub="http://www.idpf.org/2007/ops" '
        'version="3.0">\n<body>\n'
        f'<seq id="c{n}seq" epub:textref="c{n}.xhtml#text" epub:type="bodymatter chapter">\n'
        f"{body}\n</seq>\n</body>\n</smil>\n"
    ), total


def _xhtml(part: ChapterPart, language: str) -> str:
    lines = []
    for i, paragraph in enumerate(part.paragraphs):
        spans = " ".join(f'<span id="{span}">{escape(cue.text)}</span>' for span, cue in paragraph)
        said = " ".join(cue.text for _, cue in paragraph)
        tag = "h1" if i == 0 and said.strip() == part.title.strip() else "p"
        lines.append(f"<{tag}>{spans}</{tag}>")
    if not lines or not lines[0].startswith("<h1>"):
        lines.insert(0, f"<h1>{escape(part.title)}</h1>")  # a chapter mark not read aloud
    return _page(part.title, "\n".join(lines), language, 'id="text" epub:type="chapter"')


def _page(title: str, body: str, language: str, section: str = "") -> str:
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE html>\n'
        '<html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops" '
        f'xml:lang="{language}" lang="{language}">\n'
        f'<head><meta charset="utf-8"/><title>{escape(title)}</title>'
        '<link rel="stylesheet" type="text/css" href="style.css"/></head>\n'
        f"<body><section {section}>\n{body}\n</section></body>\n</html>\n"
    )


def _nav(parts: Sequence[ChapterPart], language: str) -> str:
    items = "\n".join(
        f'<li><a href="c{n}.xhtml">{escape(p.title)}</a></li>' for n, p in enumerate(parts, 1)
    )
    body = f'<nav epub:type="toc" id="toc"><h1>Contents</h1>\n<ol>\n{items}\n</ol></nav>'
    return _page("Contents", body, language)


def _opf(book: Book, parts: Sequence[ChapterPart], durations: list[int], language: str) -> str:
    title = book.title or (parts[0].title if parts else "Audiobook")
    said = "\n".join(cue.text for p in parts for para in p.paragraphs for _, cue in para)
    identifier = uuid.uuid5(uuid.NAMESPACE_URL, f"ownvoice:{title}:{said}")
    modified = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    meta = [
        f'<dc:identifier id="bookid">urn:uuid:{identifier}</dc:identifier>',
        f"<dc:title>{escape(title)}</dc:title>",
        f"<dc:language>{escape(language)}</dc:language>",
        f'<meta property="dcterms:modified">{modified}</meta>',
        f'<meta property="media:duration">{_clock_ms(sum(durations))}</meta>',
        f'<meta property="media:active-class">{ACTIVE_CLASS}</meta>',
    ]
    if book.author:
        meta.insert(2, f"<dc:creator>{escape(book.author)}</dc:creator>")
    meta += [
        f'<meta property="media:duration" refines="#o{n}">{_clock_ms(ms)}</meta>'
        for n, ms in enumerate(durations, 1)
    ]
    items = [
        '<item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>',
        '<item id="css" href="style.css" media-type="text/css"/>',
    ]
    for n in range(1, len(parts) + 1):
        items += [
            f'<item id="c{n}" href="c{n}.xhtml" media-type="application/xhtml+xml" '
            f'media-overlay="o{n}"/>',
            f'<item id="o{n}" href="c{n}.smil" media-type="application/smil+xml"/>',
            f'<item id="a{n}" href="audio/c{n}.mp3" media-type="audio/mpeg"/>',
        ]
    spine = "\n".join(f'<itemref idref="c{n}"/>' for n in range(1, len(parts) + 1))
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<package xmlns="http://www.idpf.org/2007/opf" version="3.0" '
        f'unique-identifier="bookid" xml:lang={quoteattr(language)}>\n'
        '<metadata xmlns:dc="http://purl.org/dc/elements/1.1/">\n'
        + "\n".join(meta)
        + "\n</metadata>\n<manifest>\n"
        + "\n".join(items)
        + f"\n</manifest>\n<spine>\n{spine}\n</spine>\n</package>\n"
    )


_CONTAINER = """<?xml version="1.0" encoding="UTF-8"?>
<container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">
<rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>
</rootfiles>
</container>
"""
