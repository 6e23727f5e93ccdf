"""A Word document (.docx) to a Book, with python-docx.

Paragraphs in document order, tables among them (read row by row with the first row as the
header, as xhtml.py reads HTML tables, or a notice: ReadOptions); chapters start at the
"Heading 1" paragraphs when there is more than one, else at "Heading 2" ones, else the document
is one chapter. Footnote references are runs without text, so they are never read. Title,
author and language come from the document's properties. A file that is not a readable DOCX
gets a one-line error. Knows nothing about audio.
"""

from __future__ import annotations

import re
import zipfile

from ownvoice.audiobook.document import (
    Book,
    Chapter,
    ReadOptions,
    chapter_level,
    merge_title_only_chapters,
    read_table,
)
from ownvoice.errors import InvalidInput

_HEADING = re.compile(r"^heading (\d)$", re.I)


def read_docx(path: str, options: ReadOptions | None = None) -> Book:
    import docx
    from docx.opc.exceptions import PackageNotFoundError
    from docx.table import Table

    options = options or ReadOptions()
    try:
        document = docx.Document(path)
    except (PackageNotFoundError, zipfile.BadZipFile, KeyError, ValueError, OSError) as e:
        raise InvalidInput(f"{path}: not a readable Word document (.docx): {e}") from e
    blocks: list[tuple[str, int]] = []  # (text, heading level; 0 = not a heading)
    for item in document.iter_inner_content():
        if isinstance(item, Table):
            rows = [[" ".join(cell.text.split()) for cell in row.cells] for row in item.rows]
            header, rows = (rows[0], rows[1:]) if len(rows) > 1 else ([], rows)
            blocks += [(text, 0) for text in read_table(header, rows, options)]
            continue
        text = " ".join(item.text.split())
        if not text:
            continue
        style = item.style.name if item.style is not None else ""
        m = _HEADING.match(style)
        blocks.append((text, int(m.group(1)) if m else (1 if style == "Title" else 0)))
    level = chapter_level([lv for _, lv in blocks])
    chapters: list[Chapter] = []
    for text, lv in blocks:
        if not chapters or (level is not None and lv == level):
            chapters.append(Chapter(text if lv else None, ()))
        last = chapters[-1]
        chapters[-1] = Chapter(last.title, (*last.paragraphs, text))
    props = document.core_properties
    return Book(
        title=props.title or next((t for t, lv in blocks if lv == 1), None),
        author=props.author or None,
        chapters=tuple(merge_title_only_chapters(chapters)),
        language=props.language or None,
    )
