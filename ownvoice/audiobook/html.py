"""An HTML file (a saved web page, a Gutenberg HTML book) to a Book.

Read as an EPUB's documents are (xhtml.py: notes, tables, figures, page numbers), then cut into
chapters at the top-level headings present: <h1> if the document has more than one, else <h2>,
else one chapter. The title comes from <title>, else the first heading. Knows nothing about
audio.
"""

from __future__ import annotations

import re
from html import unescape

from ownvoice.audiobook.blocks import chapters_at, place_notes
from ownvoice.audiobook.document import (
    Book,
    ReadOptions,
    chapter_level,
    merge_title_only_chapters,
)
from ownvoice.audiobook.xhtml import parse_xhtml

_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.I | re.S)
_LANG = re.compile(r"<html[^>]*\slang=[\"']?([A-Za-z0-9_-]+)", re.I)


def parse_html(
    markup: str, default_title: str | None = None, options: ReadOptions | None = None
) -> Book:
    parsed = parse_xhtml(markup, options or ReadOptions())
    refs = {}
    for index, href in parsed.refs:
        refs.setdefault(href.partition("#")[2], index)
    blocks = place_notes(parsed.blocks, [b.anchor for b in parsed.blocks], refs)
    level = chapter_level([b.level for b in blocks if not b.note])
    cuts = [0] + [
        i for i, b in enumerate(blocks) if i and level and b.level == level and not b.note
    ]
    chapters = chapters_at(blocks, [(cut, None, 1) for cut in cuts])
    found = _TITLE.search(markup)
    title = " ".join(unescape(found.group(1)).split()) if found else None
    lang = _LANG.search(markup)
    return Book(
        title=title or default_title,
        author=None,
        chapters=tuple(merge_title_only_chapters(chapters)),
        language=lang.group(1) if lang else None,
        skipped=dict(parsed.skipped),
    )
