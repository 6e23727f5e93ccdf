"""EPUB 2/3 to a Book, with the standard library only (no AGPL ebooklib).

    META-INF/container.xml -> the OPF package -> metadata, manifest, spine, table of contents
    (EPUB 3 nav document, else EPUB 2 NCX, else one chapter per spine document).

Chapters follow the table of contents, nested entries included (flattened in reading order, the
depth kept in Chapter.level); a TOC entry may point into the middle of a document (`ch.xhtml#s2`).
Images, scripts, styles and <nav> blocks are not read; the cover image is kept for metadata.

Untrusted input: the archive is opened and read within archive.py's limits (zip bombs), XML is
checked by safexml.py (no entity declarations, no external entities), XHTML is parsed with
html.parser (which never fetches anything), and the text counts against the book's budget
(budget.py) document by document. Anything malformed raises InvalidInput naming the file and
what is wrong.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from urllib.parse import unquote, urldefrag
from xml.etree.ElementTree import Element

from ownvoice.audiobook.archive import LIMITS, Archive, ArchiveLimits
from ownvoice.audiobook.blocks import Block, chapters_at, place_notes
from ownvoice.audiobook.budget import TextBudget
from ownvoice.audiobook.document import Book, Chapter, ReadOptions, merge_title_only_chapters
from ownvoice.audiobook.furniture import Skipped
from ownvoice.audiobook.nav import parse_nav
from ownvoice.audiobook.safexml import parse_xml
from ownvoice.audiobook.xhtml import parse_xhtml
from ownvoice.errors import InvalidInput

_TEXT_TYPES = {"application/xhtml+xml", "text/html", "application/x-dtbook+xml"}
MAX_COVER_BYTES = 16 * 2**20  # a larger cover image is left out, the book still read


@dataclass(frozen=True)
class _TocEntry:
    title: str
    path: str
    fragment: str
    level: int


def read_epub(
    path: str,
    limits: ArchiveLimits = LIMITS,
    options: ReadOptions | None = None,
    budget: TextBudget | None = None,
) -> Book:
    with Archive(path, "EPUB", limits) as archive:
        return _Reader(path, archive, options or ReadOptions(), budget or TextBudget(path)).book()


class _Reader:
    def __init__(self, path: str, archive: Archive, options: ReadOptions, budget: TextBudget):
        self.path, self.archive, self.options, self.budget = path, archive, options, budget
        self.names = set(archive.names)

    # -- archive access ------------------------------------------------------------------------

    def read(self, name: str, what: str) -> bytes:
        if name not in self.names:
            raise InvalidInput(f"{self.path}: {what} {name!r} is missing from the archive")
        return self.archive.read(name)

    def xml(self, name: str, what: str) -> Element:
        return parse_xml(self.read(name, what), self.path, name)

    # -- the package ---------------------------------------------------------------------------

    def book(self) -> Book:
        container = self.xml("META-INF/container.xml", "container file")
        rootfiles = [e.get("full-path") for e in _all(container, "rootfile") if e.get("full-path")]
        if not rootfiles:
            raise InvalidInput(f"{self.path}: META-INF/container.xml names no package (rootfile)")
        opf_path = rootfiles[0]
        opf = self.xml(opf_path, "package file")
        base = posixpath.dirname(opf_path)

        manifest = {}  # id -> (path, media type, properties)
        for item in _all(opf, "item"):
            href = item.get("href")
            if item.get("id") and href:
                path = _resolve(base, href)
                manifest[item.get("id")] = (
                    path,
                    item.get("media-type", ""),
                    item.get("properties", ""),
                )
        spine_el = next(iter(_all(opf, "spine")), None)
        if spine_el is None:
            raise InvalidInput(f"{self.path}: {opf_path} has no <spine> (reading order)")
        spine = []
        for ref in _all(spine_el, "itemref"):
            item = manifest.get(ref.get("idref"))
            if item is None:
                raise InvalidInput(
                    f"{self.path}: spine entry {ref.get('idref')!r} is not in the manifest of {opf_path}"
                )
            if ref.get("linear", "yes") != "no" and item[1] in _TEXT_TYPES:
                spine.append(item[0])
        if not spine:
            raise InvalidInput(f"{self.path}: the spine of {opf_path} lists no readable documents")

        blocks, doc_start, anchors, skipped = self._read_spine(spine)
        if not blocks:
            raise InvalidInput(f"{self.path}: no text found in the EPUB's documents")
        toc = self._toc(opf, spine_el, manifest)
        chapters = _chapters(blocks, doc_start, anchors, toc, spine)
        cover, cover_type = self._cover(opf, manifest)
        return Book(
            title=_meta(opf, "title"),
            author=_meta(opf, "creator"),
            chapters=tuple(merge_title_only_chapters(chapters)),
            cover=cover,
            cover_type=cover_type,
            language=_meta(opf, "language"),
            skipped=dict(skipped),
        )

    def _read_spine(self, spine: list[str]):
        """All text blocks in reading order (each note with the block that refers to it), where
        each document starts, and every id's block."""
        blocks: list[Block] = []
        keys: list[str] = []  # per block: "document#note id" for notes
        refs: dict[str, int] = {}  # "document#id" a note reference points at -> its block
        doc_start: dict[str, int] = {}
        anchors: dict[tuple[str, str], int] = {}
        note_targets: set[str] = set()
        skipped = Skipped()
        for path in spine:
            if path in doc_start:
                continue  # listed twice: read once
            doc_start[path] = len(blocks)
            data = self.read(path, "spine document")
            parsed = parse_xhtml(data.decode("utf-8", errors="replace"), self.options, note_targets)
            del data  # a document may be large: its bytes go before the next one is read
            self.budget.spend(sum(len(b.text) for b in parsed.blocks))
            skipped.update(parsed.skipped)
            for anchor, index in parsed.anchors.items():
                anchors[(path, anchor)] = len(blocks) + index
            for index, href in parsed.refs:
                url, fragment = urldefrag(href)
                target = _resolve(posixpath.dirname(path), url) if url else path
                refs.setdefault(f"{target}#{unquote(fragment)}", len(blocks) + index)
            keys += [f"{path}#{b.anchor}" for b in parsed.blocks]
            blocks += parsed.blocks
        return place_notes(blocks, keys, refs), doc_start, anchors, skipped

    def _toc(self, opf: Element, spine_el: Element, manifest) -> list[_TocEntry]:
        nav = [m for m in manifest.values() if "nav" in m[2].split()]
        if nav:
            data = self.read(nav[0][0], "navigation document")
            entries = parse_nav(data.decode("utf-8", errors="replace"))
            base = posixpath.dirname(nav[0][0])
            toc = [_entry(base, title, href, level) for title, href, level in entries]
            if toc:
                return toc
        ncx_id = spine_el.get("toc")
        ncx = manifest.get(ncx_id) if ncx_id else None
        if ncx is None:
            ncx = next((m for m in manifest.values() if m[1] == "application/x-dtbncx+xml"), None)
        if ncx is None:
            return []
        root = self.xml(ncx[0], "NCX table of contents")
        nav_map = next(iter(_all(root, "navMap")), None)
        if nav_map is None:
            return []
        toc: list[_TocEntry] = []
        _walk_ncx(nav_map, posixpath.dirname(ncx[0]), 1, toc)
        return toc

    def _cover(self, opf: Element, manifest) -> tuple[bytes | None, str | None]:
        item = next((m for m in manifest.values() if "cover-image" in m[2].split()), None)
        if item is None:  # EPUB 2: <meta name="cover" content="item-id"/>
            ids = [e.get("content") for e in _all(opf, "meta") if e.get("name") == "cover"]
            item = manifest.get(ids[0]) if ids else None
        if item is None or item[1] not in ("image/jpeg", "image/png") or item[0] not in self.names:
            return None, None
        if self.archive.size(item[0]) > MAX_COVER_BYTES:
            return None, None
        return self.read(item[0], "cover image"), item[1]


def _chapters(blocks, doc_start, anchors, toc: list[_TocEntry], spine: list[str]) -> list[Chapter]:
    """Cut the block list at each TOC entry's position; without a TOC, at each document."""
    marks: list[tuple[int, str | None, int]] = []  # (block index, title, level)
    for entry in toc:
        if entry.path not in doc_start:
            continue  # points outside the reading order
        start = doc_start[entry.path]
        if entry.fragment:
            start = anchors.get((entry.path, entry.fragment), start)
        marks.append((start, entry.title or None, entry.level))
    if not marks:
        marks = [(doc_start[p], None, 1) for p in dict.fromkeys(spine)]
    marks.sort(key=lambda m: m[0])  # stable: entries at one position keep their TOC order
    if marks[0][0] > 0:
        marks.insert(0, (0, None, 1))  # front matter before the first TOC entry
    return chapters_at(blocks, marks)


def _walk_ncx(parent: Element, base: str, level: int, out: list[_TocEntry]) -> None:
    for point in parent:
        if _local(point.tag) != "navPoint":
            continue
        label = next(iter(_all(point, "text")), None)
        content = next((c for c in point if _local(c.tag) == "content"), None)
        if content is not None and content.get("src"):
            title = " ".join("".join(label.itertext()).split()) if label is not None else ""
            out.append(_entry(base, title, content.get("src"), level))
        _walk_ncx(point, base, level + 1, out)


def _entry(base: str, title: str, href: str, level: int) -> _TocEntry:
    url, fragment = urldefrag(href)
    return _TocEntry(title, _resolve(base, url), unquote(fragment), level)


def _resolve(base: str, href: str) -> str:
    return posixpath.normpath(posixpath.join(base, unquote(href))).lstrip("/")


def _local(tag) -> str:
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def _all(root: Element, name: str) -> list[Element]:
    """Descendants with this local name, whatever their namespace."""
    return [e for e in root.iter() if _local(e.tag) == name]


def _meta(opf: Element, name: str) -> str | None:
    for e in _all(opf, "metadata"):
        for child in e.iter():
            if _local(child.tag) == name and child.text and child.text.strip():
                return " ".join(child.text.split())
    return None
