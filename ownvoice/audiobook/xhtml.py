"""Readable text out of (X)HTML: block-level paragraphs, the ids inside them, the note references.

Uses html.parser, which tolerates tag soup and undefined entities and never fetches anything.
Scripts, styles, SVG, MathML and <nav> blocks are skipped; a <br> is a space. What a narrator
would not read aloud never becomes text:

- note references (EPUB 3 `noteref`, ARIA `doc-noteref`, pandoc's `footnote-ref`, and the
  untyped shape: a short mark such as 1, [2], * or † linking into the document inside or around
  a <sup>), back-links (`doc-backlink`, ↩, "return") and a note's own label link;
- page-break markers (`pagebreak`, `doc-pagebreak`, class `pagenum`) and `[Pg 23]` spans;
- printed contents and indexes (EPUB 3 `toc`/`index`, ARIA `doc-toc`/`doc-index`, DocBook's
  `div.toc` and `div.index`, Sphinx's `toctree-wrapper`, texinfo's `section-toc`) and runs of
  blocks that are nothing but links into the book, whatever their markup (blocks.py);
- navigation between pages (DocBook's `navheader`/`navfooter`, Sphinx's `related` and sidebar,
  texinfo's `nav-panel`) and heading anchors (`headerlink`'s ¶);
- code (`<pre>`): one short notice for a run of code blocks, nothing, or the code read out
  (ReadOptions.code). Inline `<code>` is read as words.

What was left out is counted per kind (Parsed.skipped) for the dry run.

Notes themselves (footnote, endnote, rearnote, aside, pandoc's footnotes section, and any block
a note reference points at) come out as blocks marked `note`, so the reader can move them to the
end of their chapter or leave them out. A table becomes one block per row, each cell said with
its column's header ("Boat Mary, crew 4."), or one short notice; a figure is read by its
caption, or its image's alt text when it has none, or skipped (ReadOptions).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html.parser import HTMLParser

from ownvoice.audiobook.blocks import Block, Parsed, without_link_runs
from ownvoice.audiobook.document import ReadOptions, read_table, table_sentences
from ownvoice.audiobook.furniture import CODE_NOTICE, Skipped

BLOCK_TAGS = {
    "p", "div", "h1", "h2", "h3", "h4", "h5", "h6", "li", "blockquote", "pre", "dt", "dd", "tr",
    "section", "article", "aside", "header", "footer", "figcaption", "caption", "hr", "table",
    "ul", "ol", "dl", "body", "td", "th", "figure",
}  # fmt: skip
SKIP_TAGS = {"head", "script", "style", "svg", "math", "nav", "template", "noscript", "object"}
HEADINGS = {"h1", "h2", "h3", "h4", "h5", "h6"}
VOID_TAGS = {
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
    "track", "wbr", "param",
}  # fmt: skip

_NOTE_TYPES = {"footnote", "endnote", "rearnote", "note", "footnotes", "endnotes", "rearnotes"}
_NOTE_ROLES = {"doc-footnote", "doc-endnote", "doc-endnotes", "doc-footnotes"}
_NOTE_CLASSES = {"footnote", "footnotes", "endnote", "endnotes"}
_NOTEREF_CLASSES = {"footnote-ref", "noteref", "fnanchor", "footnote-reference"}
_BACKLINK_CLASSES = {"footnote-back", "footnote-backref", "backlink", "fnref-back"}
_PAGE_CLASSES = {"pagenum", "pagenumber", "page-number", "pageno", "pagebreak", "page-break"}
# what a note reference or a note's label says: 1, [12], (3), a, iv, *, †, ‡, §
_MARK = re.compile(r"^[\[(]?(?:\d{1,4}|[a-z]|[ivxlc]{1,6}|[*†‡§¶#]{1,3})[\])]?\.?$", re.I)
_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)  # http:, mailto:, ... (outside the book)
_BACK = re.compile(r"^(?:[↩↑⤴^↵⇧]\ufe0e?|\^|return|back|back to text)$", re.I)
_PAGE_SPAN = re.compile(r"\[\s*(?:pg|page|p)\.?\s*[0-9ivxlcdm]+\s*\]", re.I)
# furniture by markup: printed contents and indexes (DocBook, Sphinx, texinfo, EPUB 3, ARIA)
# and navigation between pages; never read, counted for the dry run
_CONTENTS_CLASSES = {
    "toc", "toctree-wrapper", "section-toc", "list-of-figures", "list-of-tables",
    "list-of-examples", "lot", "lof", "index", "genindex-jumpbox", "indextable",
}  # fmt: skip
_NAV_CLASSES = {
    "navheader", "navfooter", "related", "sphinxsidebar", "sphinxsidebarwrapper", "nav-panel",
    "breadcrumbs", "headerlink", "copiable-link", "skip-link",
}  # fmt: skip
_CONTENTS_TYPES = {"toc", "index", "landmarks", "loi", "lot", "page-list"}
_CONTENTS_ROLES = {"doc-toc", "doc-index", "directory"}
_PAGE_ROOTS = {"html", "body", "main", "article"}  # a class on these is the page's style


@dataclass
class _Open:
    """An element not yet closed, and what it means for the text inside it."""

    tag: str
    hidden: bool = False  # nothing inside is spoken
    note: bool = False
    start: int = 0  # len(parts) when it opened: where its text begins
    link: str | None = None  # an <a>: "noteref", "backlink", "fragment" or "plain"
    href: str = ""  # an <a>: where it points
    target: str = ""  # ... and the id there
    sup: bool = False  # a <sup>, or an <a> with a <sup> inside
    figure: bool = False  # a <figure> or <div class="figure">
    note_id: str = ""  # a note: its id
    alt: list[str] = field(default_factory=list)  # a <figure>: its images' alt texts
    caption: bool = False  # a figure's caption (<figcaption>, <p class="caption">)
    captioned: bool = False  # a <figure> whose caption said something
    code: bool = False  # a <pre>: code, a shell session, a listing


@dataclass
class _Table:
    rows: list[list[tuple[str, bool]]] = field(default_factory=list)  # cells: (text, header)
    caption: str = ""
    head_rows: int = 0  # rows inside <thead>
    in_head: bool = False
    cell: int | None = None  # where the open cell's (or caption's) text begins in parts


class _TextParser(HTMLParser):
    def __init__(self, options: ReadOptions, note_targets: set[str]):
        super().__init__(convert_charrefs=True)
        self.options = options
        self.blocks: list[Block] = []
        self.anchors: dict[str, int] = {}
        self.refs: list[tuple[int, str]] = []
        self.note_targets = note_targets  # ids that note references point at (any document)
        self._pending_ids: list[str] = []
        self._parts: list[str] = []
        self._stack: list[_Open] = []
        self._tables: list[_Table] = []
        self.skipped = Skipped()
        self._linked = 0  # letters inside links into the book, in the block being collected
        self._links = 0

    # -- the element stack --------------------------------------------------------------------

    @property
    def _hidden(self) -> bool:
        return any(e.hidden for e in self._stack)

    @property
    def _in_note(self) -> bool:
        return any(e.note for e in self._stack)

    def _close_to(self, tag: str) -> _Open | None:
        """Pop elements up to the innermost open `tag` (unclosed ones inside it end with it)."""
        for i in range(len(self._stack) - 1, -1, -1):
            if self._stack[i].tag == tag:
                closed = self._stack[i]
                del self._stack[i:]
                return closed
        return None  # a stray end tag

    # -- events --------------------------------------------------------------------------------

    def handle_starttag(self, tag, attrs):
        tag = tag.lower()
        attrs = {k.lower(): v or "" for k, v in attrs}
        hidden_before = self._hidden
        types = set(attrs.get("epub:type", "").split())
        role, classes = attrs.get("role", ""), set(attrs.get("class", "").lower().split())
        element_id = attrs.get("id") or attrs.get("name")
        if not hidden_before and element_id:
            self._pending_ids.append(element_id)
            # a note without an id of its own is known by the first id inside it (a label)
            note = next((e for e in reversed(self._stack) if e.note), None)
            if note is not None and not note.note_id:
                note.note_id = element_id
        opened = _Open(tag, start=len(self._parts))
        opened.figure = tag == "figure" or "figure" in classes
        if tag in SKIP_TAGS:
            opened.hidden = True
        elif "pagebreak" in types or role == "doc-pagebreak" or classes & _PAGE_CLASSES:
            opened.hidden = True
        elif opened.figure and self.options.figures == "skip":
            opened.hidden = True
        elif furniture := _furniture(tag, types, role, classes):
            opened.hidden = True
            self.skipped[furniture] += 1
        if tag == "pre":
            opened.code = True
        if (
            types & _NOTE_TYPES
            or role in _NOTE_ROLES
            or (classes & _NOTE_CLASSES and tag != "a")
            or (element_id and element_id in self.note_targets)
        ):
            opened.note = True
            opened.note_id = element_id or ""
            if self.options.notes == "skip":
                opened.hidden = True
        if tag == "a":
            if "noteref" in types or role == "doc-noteref" or classes & _NOTEREF_CLASSES:
                opened.link = "noteref"
            elif "backlink" in types or role == "doc-backlink" or classes & _BACKLINK_CLASSES:
                opened.link = "backlink"
            elif "#" in attrs.get("href", ""):
                opened.link = "fragment"
            elif attrs.get("href"):
                opened.link = "plain"  # read; counted when it points into the book
            opened.sup = any(e.tag == "sup" for e in self._stack)
            opened.href = attrs.get("href", "")
            opened.target = opened.href.partition("#")[2]
        if tag in ("figcaption", "p", "div") and (tag == "figcaption" or "caption" in classes):
            opened.caption = any(e.figure for e in self._stack)
        if tag == "sup":
            for e in self._stack:
                if e.tag == "a":
                    e.sup = True
        if tag == "img" and not hidden_before:
            figure = next((e for e in reversed(self._stack) if e.figure), None)
            if figure is not None and attrs.get("alt", "").strip():
                figure.alt.append(attrs["alt"].strip())
        if not hidden_before:
            self._structure_start(tag, opened)
        if tag not in VOID_TAGS:
            self._stack.append(opened)

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag.lower() not in VOID_TAGS:
            self.handle_endtag(tag)  # <span epub:type="pagebreak"/> opens and closes at once

    def handle_endtag(self, tag):
        tag = tag.lower()
        if tag in VOID_TAGS or not any(e.tag == tag for e in self._stack):
            return
        hidden_outside = any(e.hidden for e in self._stack[: self._index_of(tag)])
        closed = self._close_to(tag)
        if hidden_outside:
            return
        if closed.hidden:
            del self._parts[closed.start :]  # anything that slipped in (never, but cheap)
            return
        if tag == "a" and closed.link is not None:
            self._end_link(closed)
        self._structure_end(tag, closed)

    def handle_data(self, data):
        if not self._hidden:
            self._parts.append(data)

    def _index_of(self, tag: str) -> int:
        return max(i for i, e in enumerate(self._stack) if e.tag == tag)

    # -- links that are not read ---------------------------------------------------------------

    def _end_link(self, link: _Open) -> None:
        text = " ".join("".join(self._parts[link.start :]).split())
        in_note = self._in_note or link.note
        drop = link.link in ("noteref", "backlink") or (
            link.link == "fragment"
            and (_BACK.match(text) or (_MARK.match(text) and (link.sup or in_note)))
        )
        if drop:
            del self._parts[link.start :]
            if link.target and not in_note and link.link != "backlink":
                self.note_targets.add(link.target)
                self.refs.append((len(self.blocks), link.href))
        elif link.href and not _SCHEME.match(link.href):  # into the book: "ch2.xhtml#s1"
            self._linked += sum(c.isalnum() for c in text)
            self._links += 1

    # -- blocks, tables and figures ------------------------------------------------------------

    def _structure_start(self, tag: str, opened: _Open) -> None:
        if self._tables:
            table = self._tables[-1]
            if tag == "table":
                self._tables.append(_Table())  # a table in a cell: flattened into the cell
            elif tag == "thead":
                table.in_head = True
            elif tag == "tr":
                table.rows.append([])
                if table.in_head:
                    table.head_rows += 1
            elif tag in ("td", "th", "caption"):
                table.cell = len(self._parts)
            elif tag in BLOCK_TAGS or tag == "br":
                self._parts.append(" ")
            return
        if tag == "table":
            self._flush()
            self._tables.append(_Table())
        elif tag in BLOCK_TAGS:
            self._flush()
        elif tag == "br":
            self._parts.append(" ")

    def _structure_end(self, tag: str, closed: _Open) -> None:
        if self._tables:
            table = self._tables[-1]
            if tag in ("td", "th", "caption") and table.cell is not None:
                text = _said("".join(self._parts[table.cell :]))
                del self._parts[table.cell :]
                table.cell = None
                if tag == "caption":
                    table.caption = text
                elif table.rows:
                    table.rows[-1].append((text, tag == "th"))
            elif tag == "thead":
                table.in_head = False
            elif tag == "table":
                self._tables.pop()
                if self._tables:  # nested: its rows become text of the outer cell
                    said = table_sentences(*_header_and_rows(table))
                    self._parts.append(" " + " ".join(said) + " ")
                else:
                    self._emit_table(table)
            elif tag in BLOCK_TAGS:
                self._parts.append(" ")
            return
        if tag in BLOCK_TAGS:
            if closed.caption and "".join(self._parts).strip():
                figure = next((e for e in reversed(self._stack) if e.figure), None)
                if figure is not None:
                    figure.captioned = True
            if closed.figure and not closed.captioned and closed.alt:
                self._flush()
                self._parts.append(" ".join(closed.alt))
            self._flush(closed)

    def _emit_table(self, table: _Table) -> None:
        header, rows = _header_and_rows(table)
        for text in read_table(header, rows, self.options, table.caption):
            self._add_block(text)

    def _flush(self, closing: _Open | None = None):
        """End the block being collected; `closing`: the element whose end ends it."""
        text = _said("".join(self._parts))
        self._parts.clear()
        linked, links, self._linked, self._links = self._linked, self._links, 0, 0
        if not text:
            return
        if any(e.code for e in [*self._stack, closing] if e is not None):
            if self.options.code != "read":
                self.skipped["code blocks"] += 1
                if self.options.code == "skip" or (
                    self.blocks and self.blocks[-1].text == CODE_NOTICE
                ):
                    return  # one notice for code blocks one after the other
                text = CODE_NOTICE
        letters = sum(c.isalnum() for c in text)
        self._add_block(text, closing, linked / letters if letters else 0.0, links)

    def _add_block(
        self, text: str, closing: _Open | None = None, linked: float = 0.0, links: int = 0
    ) -> None:
        """A block of `text` inside the open elements (and `closing`, the one just ended)."""
        for anchor in self._pending_ids:
            self.anchors.setdefault(anchor, len(self.blocks))
        self._pending_ids.clear()
        around = [e for e in [*self._stack, closing] if e is not None]
        headings = [e for e in around if e.tag in HEADINGS]
        owners = [e for e in around if e.note]
        if owners and headings:
            return  # a notes section's own heading: the notes get an announcement instead
        note_id = next((e.note_id for e in reversed(owners) if e.note_id), "")
        level = int(headings[-1].tag[1]) if headings else 0
        self.blocks.append(
            Block(text, bool(headings), bool(owners), level, note_id, linked=linked, links=links)
        )

    def close(self):
        super().close()
        while self._tables:  # an unclosed table still says its rows
            self._structure_end("table", _Open("table"))
        self._flush()
        for anchor in self._pending_ids:  # ids after the last text point at the end
            self.anchors.setdefault(anchor, len(self.blocks))


def _furniture(tag: str, types: set[str], role: str, classes: set[str]) -> str | None:
    """The kind of furniture an element is ("contents", "navigation"), or None."""
    if types & _CONTENTS_TYPES or role in _CONTENTS_ROLES:
        return "contents pages"
    if tag in _PAGE_ROOTS:
        return None
    if (
        classes & _CONTENTS_CLASSES
        or {"contents", "topic"} <= classes
        or any(c.startswith(("index-", "printindex")) for c in classes)  # texinfo's indexes
    ):
        return "contents pages"
    if classes & _NAV_CLASSES or role == "navigation":
        return "navigation bars"
    return None


def _said(text: str) -> str:
    """Whitespace collapsed, page-number spans ("[Pg 23]") out."""
    return " ".join(_PAGE_SPAN.sub(" ", text).split())


def _header_and_rows(table: _Table) -> tuple[list[str], list[list[str]]]:
    """The header (the <thead> rows, or a first row of <th> cells) and the other rows."""
    rows = [r for r in table.rows if any(text for text, _ in r)]
    head_rows = table.head_rows or (1 if rows and all(h for _, h in rows[0]) else 0)
    header = [text for text, _ in rows[0]] if head_rows else []
    return header, [[text for text, _ in row] for row in rows[head_rows:]]


def parse_xhtml(
    markup: str, options: ReadOptions | None = None, note_targets: set[str] | None = None
) -> Parsed:
    """Paragraph blocks in order, each id's block, and the note references. `note_targets`:
    ids note references pointed at so far (shared by a book's documents: a block with such an
    id in a later document is a note)."""
    parser = _TextParser(options or ReadOptions(), set() if note_targets is None else note_targets)
    parser.feed(markup)
    parser.close()
    return without_link_runs(Parsed(parser.blocks, parser.anchors, parser.refs, parser.skipped))
