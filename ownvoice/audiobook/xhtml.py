"""Readable text out of (X)HTML: block-level paragraphs, the ids inside them, and TOC links.

Uses html.parser, which tolerates tag soup and undefined entities and never fetches anything.
Images, scripts, styles, SVG, MathML and <nav> blocks are skipped; a <br> is a space.
"""

from __future__ import annotations

from dataclasses import dataclass
from html.parser import HTMLParser

BLOCK_TAGS = {
    "p", "div", "h1", "h2", "h3", "h4", "h5", "h6", "li", "blockquote", "pre", "dt", "dd", "tr",
    "section", "article", "aside", "header", "footer", "figcaption", "caption", "hr", "table",
    "ul", "ol", "dl", "body", "td", "th",
}  # fmt: skip
SKIP_TAGS = {"head", "script", "style", "svg", "math", "nav", "template", "noscript", "object"}
HEADINGS = {"h1", "h2", "h3", "h4", "h5", "h6"}


@dataclass(frozen=True)
class Block:
    text: str
    heading: bool


class _TextParser(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.blocks: list[Block] = []
        self.anchors: dict[str, int] = {}
        self._pending_ids: list[str] = []
        self._parts: list[str] = []
        self._skip_depth = 0
        self._heading_depth = 0
        self._block_is_heading = False

    def handle_starttag(self, tag, attrs):
        tag = tag.lower()
        if self._skip_depth:
            if tag in SKIP_TAGS:
                self._skip_depth += 1
            return
        attrs = dict(attrs)
        for key in ("id", "name"):
            if attrs.get(key):
                self._pending_ids.append(attrs[key])
        if tag in SKIP_TAGS:
            self._skip_depth = 1
        elif tag in BLOCK_TAGS:
            self._flush()
            if tag in HEADINGS:
                self._heading_depth += 1
                self._block_is_heading = True
        elif tag == "br":
            self._parts.append(" ")

    def handle_startendtag(self, tag, attrs):
        self.handle_starttag(tag, attrs)
        if tag.lower() in SKIP_TAGS and self._skip_depth:
            self._skip_depth -= 1  # <svg/> opens and closes at once
        elif tag.lower() in HEADINGS:
            self.handle_endtag(tag)

    def handle_endtag(self, tag):
        tag = tag.lower()
        if self._skip_depth:
            if tag in SKIP_TAGS:
                self._skip_depth -= 1
            return
        if tag in BLOCK_TAGS:
            self._flush()
            if tag in HEADINGS:
                self._heading_depth = max(0, self._heading_depth - 1)

    def handle_data(self, data):
        if not self._skip_depth:
            self._parts.append(data)

    def _flush(self):
        text = " ".join("".join(self._parts).split())
        self._parts.clear()
        if text:
            for anchor in self._pending_ids:
                self.anchors.setdefault(anchor, len(self.blocks))
            self._pending_ids.clear()
            self.blocks.append(Block(text, self._block_is_heading or self._heading_depth > 0))
        self._block_is_heading = False

    def close(self):
        super().close()
        self._flush()
        for anchor in self._pending_ids:  # ids after the last text point at the end
            self.anchors.setdefault(anchor, len(self.blocks))


def parse_xhtml(markup: str) -> tuple[list[Block], dict[str, int]]:
    """Paragraph blocks in order, and for each id the index of the block it is in or before."""
    parser = _TextParser()
    parser.feed(markup)
    parser.close()
    return parser.blocks, parser.anchors


class _NavParser(HTMLParser):
    """The links of an EPUB 3 `<nav epub:type="toc">`, with their list depth."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.entries: list[tuple[str, str, int]] = []  # (title, href, level)
        self._in_toc = 0  # depth of <nav> elements since the toc nav opened
        self._ol_depth = 0
        self._href: str | None = None
        self._title: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "nav":
            if self._in_toc:
                self._in_toc += 1
            elif "toc" in (attrs.get("epub:type") or attrs.get("role") or "").replace("doc-", ""):
                self._in_toc = 1
        elif self._in_toc and tag in ("ol", "ul"):
            self._ol_depth += 1
        elif self._in_toc and tag == "a":
            self._href = attrs.get("href")
            self._title = []

    def handle_endtag(self, tag):
        if tag == "nav" and self._in_toc:
            self._in_toc -= 1
        elif self._in_toc and tag in ("ol", "ul"):
            self._ol_depth -= 1
        elif self._in_toc and tag == "a" and self._href is not None:
            title = " ".join("".join(self._title).split())
            self.entries.append((title, self._href, max(self._ol_depth, 1)))
            self._href = None

    def handle_data(self, data):
        if self._href is not None:
            self._title.append(data)


def parse_nav(markup: str) -> list[tuple[str, str, int]]:
    parser = _NavParser()
    parser.feed(markup)
    parser.close()
    return parser.entries
