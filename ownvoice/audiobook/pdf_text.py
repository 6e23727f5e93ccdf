"""The text layer of a PDF as lines, with PDFium (pypdfium2).

Why PDFium: measured on Debian's own manuals (maint-guide, debmake-doc, developers-reference
and libtasn1 as PDF), pypdf's text (plain and layout mode) glued the words of whole files
together (1,113 words of 25+ letters in the New Maintainers' Guide, "Thisdocumentmaybeused…"),
while PDFium and pdfminer.six placed every space from the glyph positions (none); PDFium read
the four in 0.05-0.2 s against pdfminer's 0.9-8.4 s (and pypdf's 0.5-3.6 s). PyMuPDF was not a
candidate: AGPL. PDFium is Chrome's PDF engine, fuzzed as such, and gives per glyph what the
reader needs: font size, fixed pitch, position.

Each line carries what the book reader decides by: its text (small superscript digits at a
word's end, note references, left out and remembered), its largest font size, whether its
glyphs are fixed-pitch (code), and where it sits on the page (running heads, footnotes).
"""

from __future__ import annotations

import ctypes
import logging
import re
from dataclasses import dataclass

from ownvoice.errors import InvalidInput

HYPHENATED = "\ufffe"
SUPERSCRIPT = 0.8  # a digit this much smaller than its line's text is a note mark
_FIXED_PITCH = 1  # PDF font descriptor flag 1
_MONO_NAME = re.compile(
    rb"mono|courier|cmtt|typewriter|consol|menlo|inconsolata|sourcecode|fixed", re.I
)
_MARKS = set("0123456789*†‡")
_SUPERSCRIPT_DIGITS = set("⁰¹²³⁴⁵⁶⁷⁸⁹")


@dataclass(frozen=True)
class Line:
    text: str
    size: float  # the largest font size in it, in points as set on the page
    top: float  # from the top of the page, as a share of its height (0 = top)
    mono: bool  # most of its glyphs are fixed-pitch: code, a shell session
    note: bool = False  # it began with a note mark ("3See the Developer's Reference …")


@dataclass(frozen=True)
class Outline:
    title: str
    page: int  # 0-based
    level: int  # 0 = top


class PdfText:
    """An open PDF: its pages' lines, outline and metadata. Use as a context manager."""

    def __init__(self, path: str):
        import pypdfium2 as pdfium

        _preflight(path)
        try:
            self.doc = pdfium.PdfDocument(path)
        except pdfium.PdfiumError as e:
            raise InvalidInput(_open_error(path, e)) from e
        except (OSError, ValueError) as e:
            raise InvalidInput(f"{path}: not a readable PDF: {one_line(e)}") from e

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.doc.close()

    def __len__(self) -> int:
        return len(self.doc)

    def lines(self, index: int) -> list[Line]:
        page = self.doc[index]
        try:
            textpage = page.get_textpage()
            try:
                return _page_lines(textpage, page.get_height() or 1.0)
            finally:
                textpage.close()
        finally:
            page.close()

    def outline(self) -> list[Outline]:
        out = []
        for item in self.doc.get_toc(max_depth=8):
            dest = item.get_dest()
            page = dest.get_index() if dest is not None else None
            title = " ".join((item.get_title() or "").split())
            if title and page is not None and page >= 0:
                out.append(Outline(title, page, item.level))
        return out

    def metadata(self) -> dict[str, str]:
        return {k: " ".join(str(v).split()) for k, v in self.doc.get_metadata_dict().items() if v}


def _page_lines(textpage, height: float) -> list[Line]:
    import pypdfium2.raw as raw

    count = textpage.count_chars()
    if count <= 0:
        return []
    text = textpage.get_text_range(0, count)
    if len(text) != count:  # characters past the basic plane: no per-glyph mapping, plain lines
        return [Line(" ".join(t.split()), 0.0, 0.5, False) for t in text.splitlines() if t.strip()]
    flags, name = ctypes.c_int(), ctypes.create_string_buffer(128)
    mono_fonts: set[bytes] = set()  # fixed-pitch fonts by name (TeX's cmtt has no such flag)
    other_fonts: set[bytes] = set()
    left, right, bottom, top = (ctypes.c_double() for _ in range(4))
    glyphs: list[tuple[str, float, float, bool]] = []  # char, size, top, fixed pitch
    lines: list[Line] = []

    def end_line():
        if glyphs:
            line = _line(glyphs, height)
            if line is not None:
                lines.append(line)
            glyphs.clear()

    x, y, baseline = ctypes.c_double(), ctypes.c_double(), None
    for i, ch in enumerate(text):
        if ch in "\r\n":
            end_line()
            baseline = None
            continue
        size = raw.FPDFText_GetFontSize(textpage.raw, i)
        raw.FPDFText_GetCharOrigin(textpage.raw, i, x, y)
        if not ch.isspace():
            # PDFium joins some lines (after a hyphen, or lines of other sizes close together):
            # a baseline that moves by more than 0.6 of the smaller size starts a new line (a
            # superscript is raised by about a third of its line's size)
            if baseline is not None and abs(y.value - baseline[0]) > 0.6 * min(size, baseline[1]):
                end_line()
            baseline = (y.value, size)
        raw.FPDFText_GetCharBox(textpage.raw, i, left, right, bottom, top)
        raw.FPDFText_GetFontInfo(textpage.raw, i, name, len(name), flags)
        fixed = bool(flags.value & _FIXED_PITCH) or name.value in mono_fonts
        if not fixed and name.value not in other_fonts:
            (mono_fonts if _MONO_NAME.search(name.value) else other_fonts).add(name.value)
            fixed = name.value in mono_fonts
        glyphs.append((ch, size, top.value, fixed))
    end_line()
    return lines


def _line(glyphs: list[tuple[str, float, float, bool]], height: float) -> Line | None:
    size = max(g[1] for g in glyphs)
    kept, note = [], False
    for i, (ch, s, _, _) in enumerate(glyphs):
        after = glyphs[i + 1][0] if i + 1 < len(glyphs) else " "
        if ch in _SUPERSCRIPT_DIGITS and (after.isspace() or after in _SUPERSCRIPT_DIGITS):
            continue  # "developers ⁴": a note mark set in superscript digits
        if ch in _MARKS and 0 < s < SUPERSCRIPT * size:
            before = glyphs[i - 1][0] if i else " "
            at_start = all(k.isspace() for k in kept)
            # a mark after a word ("wizard.2") or opening a footnote ("3See"): not read
            if at_start or (not before.isspace() and (after.isspace() or after in _MARKS)):
                note = note or at_start
                continue
        kept.append(ch)
    said = " ".join("".join(kept).split())
    if not said:
        return None
    # a hyphen at a line's end comes as U+FFFE (the line after it starts a new Line here,
    # by its baseline): the book reader decides whether the word's halves join
    said = said.replace(HYPHENATED, "-")
    inked = [g for g in glyphs if not g[0].isspace()] or glyphs
    mono = sum(g[3] for g in inked) >= 0.9 * len(inked)
    return Line(said, size, 1.0 - max(g[2] for g in inked) / height, mono, note)


def _preflight(path: str) -> None:
    """Every page's content stream unpacked by pypdf first, within its limits: PDFium parses a
    content stream whole, and one that inflates to 128 MiB takes it past 2 GB. pypdf stops a
    decompression bomb, a page tree built to exhaust a reader and a stream whose length refers
    to itself with an error that says so; reading the streams of a 150-page manual takes it
    ~0.1 s. An encrypted file is told apart here too."""
    from pypdf import PdfReader
    from pypdf.errors import LimitReachedError

    logger = logging.getLogger("pypdf")
    level = logger.level
    logger.setLevel(logging.ERROR)  # each flaw it works around is a warning: not the user's
    try:
        reader = PdfReader(path)
        if reader.is_encrypted and not reader.decrypt(""):
            raise InvalidInput(f"{path}: the PDF is encrypted; save an unprotected copy first")
        for page in reader.pages:
            contents = page.get_contents()
            if contents is not None:
                contents.get_data()
    except InvalidInput:
        raise
    except LimitReachedError as e:
        raise InvalidInput(
            f"{path}: not a readable PDF: past a limit that guards against hostile files "
            f"({one_line(e)})"
        ) from e
    except Exception as e:
        # pypdf on a damaged file fails in many ways besides its own PdfReadError (IndexError,
        # AttributeError, RecursionError, zlib.error, ... from deep in its parser): all of them
        # mean the same to the user
        raise InvalidInput(f"{path}: not a readable PDF: {one_line(e)}") from e
    finally:
        logger.setLevel(level)


def _open_error(path: str, e) -> str:
    message = str(e)
    if "password" in message.lower():
        return f"{path}: the PDF is encrypted; save an unprotected copy first"
    return f"{path}: not a readable PDF: {one_line(e)}"


def one_line(e: Exception) -> str:
    return " ".join(str(e).split()) or type(e).__name__
