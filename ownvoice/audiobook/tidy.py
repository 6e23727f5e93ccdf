"""The last step of reading any format: what is left of the furniture (furniture.py) goes.

A reader already left out what its markup tells it (xhtml.py: a `div.toc`, a `<pre>`, a run of
links); this pass works on the text every format gives, so it catches what markup does not say:

- chapters that are a contents page, an index or a list of figures (by their title);
- paragraphs that are a contents entry with dot leaders, or a navigation line, or only the
  heading of a contents page or index whose entries the reader left out;
- URLs and e-mail addresses said by their site (ReadOptions.links), anchor marks (¶) dropped;
- chapters left with nothing to say dropped, and the headings of the rest folded as before
  (document.merge_title_only_chapters).

The counts of what was left out are added to the Book's (`Book.skipped`) for the dry run.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

from ownvoice.audiobook.document import Book, Chapter, ReadOptions, merge_title_only_chapters
from ownvoice.audiobook.furniture import (
    is_apparatus_title,
    is_contents_line,
    is_navigation_line,
    speak_links,
    without_anchor_marks,
)


def tidy_book(book: Book, options: ReadOptions) -> Book:
    skipped = Counter(book.skipped)
    chapters = []
    for chapter in book.chapters:
        if is_apparatus_title(chapter.title):
            skipped["contents and index chapters"] += 1
            continue
        said = []
        for text in chapter.paragraphs:
            if is_contents_line(text) or is_apparatus_title(text):
                skipped["contents entries"] += 1  # an entry, or "Contents" left alone
            elif is_navigation_line(text):
                skipped["navigation lines"] += 1
            elif text := speak_links(without_anchor_marks(text), options.links):
                said.append(text)
        title = without_anchor_marks(chapter.title) if chapter.title else chapter.title
        chapters.append(Chapter(title or None, tuple(said), chapter.level))
    return replace(
        book,
        chapters=tuple(merge_title_only_chapters(chapters)),
        skipped={kind: n for kind, n in skipped.items() if n},
    )
