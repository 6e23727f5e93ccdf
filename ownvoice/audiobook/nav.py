"""The table of contents of an EPUB 3 navigation document: `<nav epub:type="toc">` links."""

from __future__ import annotations

from html.parser import HTMLParser


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
