"""A Word document (.docx) to a Book, with python-docx.

Paragraphs in document order, tables among them (read row by row with the first row as the
header, as xhtml.py reads HTML tables, or a notice: ReadOptions); chapters start at the
"Heading 1" paragraphs when there is more than one, else at "Heading 2" ones, else the document
is one chapter. A run of paragraphs in a code style (pandoc's "Source Code", "HTML
Preformatted") is one code block (ReadOptions.code). Footnote references are runs without
text, so they are never read. Title,
author and language come from the document's properties. Knows nothing about audio.

Untrusted input: a .docx is a zip archive of XML parts. Its parts are read within archive.py's
limits and checked by safexml.py before python-docx sees them, the text counts against the
book's budget (budget.py), and a file that is not a readable .docx gets a one-line error.
"""

from __future__ import annotations

import io
import re
import zipfile
from collections import Counter

from ownvoice.audiobook.archive import LIMITS, Archive, ArchiveLimits
from ownvoice.audiobook.budget import TextBudget
from ownvoice.audiobook.document import (
    Book,
    Chapter,
    ReadOptions,
    chapter_level,
    merge_title_only_chapters,
    read_table,
)
from ownvoice.audiobook.furniture import code_said
from ownvoice.audiobook.safexml import check_xml
from ownvoice.errors import InvalidInput

_HEADING = re.compile(r"^heading (\d)$", re.I)
# paragraph styles of code: pandoc's "Source Code", Word's "HTML Preformatted", "Macro Text"
_CODE_STYLE = re.compile(r"\bcode\b|preformatted|^macro text$", re.I)
KIND = "Word document (.docx)"


def read_docx(
    path: str,
    options: ReadOptions | None = None,
    budget: TextBudget | None = None,
    limits: ArchiveLimits = LIMITS,
) -> Book:
    import docx
    from docx.opc.exceptions import PackageNotFoundError
    from docx.table import Table
    from lxml.etree import LxmlError

    options, budget = options or ReadOptions(), budget or TextBudget(path)
    parts = _checked_parts(path, limits)
    try:
        document = docx.Document(parts)
    except (PackageNotFoundError, zipfile.BadZipFile, KeyError, ValueError, LxmlError) as e:
        raise InvalidInput(f"{path}: not a readable {KIND}: {e}") from e
    blocks: list[tuple[str, int]] = []  # (text, heading level; 0 = not a heading)
    code: list[str] = []  # the paragraphs of a code block being read
    skipped: Counter = Counter()

    def end_code():
        if code:
            skipped["code blocks"] += 1
            blocks.extend((text, 0) for text in code_said(code, options.code))
            code.clear()

    style_names: dict[str | None, str] = {}  # style id -> name (see below)
    for item in document.iter_inner_content():
        if isinstance(item, Table):
            end_code()
            rows = [[" ".join(cell.text.split()) for cell in row.cells] for row in item.rows]
            header, rows = (rows[0], rows[1:]) if len(rows) > 1 else ([], rows)
            said = read_table(header, rows, options)
            budget.spend(sum(map(len, said)))
            blocks += [(text, 0) for text in said]
            continue
        text = " ".join(item.text.split())
        if not text:
            continue
        budget.spend(len(text))
        # python-docx finds a paragraph's style by an XPath search of the styles part, every
        # time: minutes for a long document, so each style id is looked up once
        style_id = item._p.style
        if style_id not in style_names:
            style_names[style_id] = item.style.name if item.style is not None else ""
        style = style_names[style_id]
        if _CODE_STYLE.search(style):  # pandoc's "Source Code", Word's "HTML Preformatted"
            code.append(text)
            continue
        end_code()
        m = _HEADING.match(style)
        blocks.append((text, int(m.group(1)) if m else (1 if style == "Title" else 0)))
    end_code()
    level = chapter_level([lv for _, lv in blocks])
    chapters: list[tuple[str | None, list[str]]] = []  # lists: a tuple grown by one is a copy
    for text, lv in blocks:
        if not chapters or (level is not None and lv == level):
            chapters.append((text if lv else None, []))
        chapters[-1][1].append(text)
    props = document.core_properties
    return Book(
        title=props.title or next((t for t, lv in blocks if lv == 1), None),
        author=props.author or None,
        chapters=tuple(merge_title_only_chapters([Chapter(t, tuple(p)) for t, p in chapters])),
        language=props.language or None,
        skipped=dict(skipped),
    )


def _checked_parts(path: str, limits: ArchiveLimits) -> io.BytesIO:
    """The .docx for python-docx: its XML parts read within `limits` and checked (safexml),
    the others (images, fonts, embedded files) empty -- nothing of them is read aloud, and
    python-docx would hold every one in memory. It reads only what was checked here."""
    parts = io.BytesIO()
    with Archive(path, KIND, limits) as archive, zipfile.ZipFile(parts, "w") as out:
        for name in archive.names:
            data = b""
            if name.lower().endswith((".xml", ".rels")):
                data = archive.read(name)
                check_xml(data, path, name)
            out.writestr(name, data)
    parts.seek(0)
    return parts
