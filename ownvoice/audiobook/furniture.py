"""What a document prints for the eye and a narrator would not read aloud.

Manuals, reports and papers carry furniture a novel does not: printed tables of contents and
indexes, navigation lines between web pages, code, raw URLs and e-mail addresses, anchor marks.
The readers recognise what their format tells them (xhtml.py: classes, roles and runs of links;
markdown.py: fences; pdf.py: fonts and positions) and this module holds what is the same for
every format:

- lines that are contents or navigation by their shape alone: dot leaders (`2.1 Syntax . . . 2`),
  texinfo's `Next: …, Previous: …, Up: …`, `[Contents][Index]`, DocBook's `Prev Up Next`,
  Sphinx's sidebar captions;
- chapters that are a contents page, an index or a list of figures, by their title;
- URLs said by their site ("a link to debian.org") and e-mail addresses with "at" for "@",
  or both left out, or read as written (`ReadOptions.links`); as words, never cut by the chunker;
- pilcrows and other anchor marks, never spoken;
- what was left out, counted per kind, for the dry run (`Skipped`).

Knows nothing about file formats or audio.
"""

from __future__ import annotations

import re
from collections import Counter
from urllib.parse import urlsplit

CODE_NOTICE = "A code example is left out here."

# chapters a listener never wants read: by their whole title
_APPARATUS_TITLE = re.compile(
    r"^(?:(?:table of )?contents|(?:[\w ,&-]{0,40} )?index(?: of [\w ,&-]{1,40})?"
    r"|list of (?:figures|tables|examples|listings|illustrations|abbreviations)"
    r"|(?:figures|tables|examples))$",
    re.I,
)
# a contents or index line: text, then dot leaders (". . . ." or "....." or "…") and a page
_LEADERS = re.compile(r"(?:\.\s?){4,}\s*(?:\d{1,4}|[ivxlcdm]{1,7})$|…{2,}\s*\d{1,4}$", re.I)
_NAVIGATION = [
    # texinfo: "Next: Types, Previous: Simple Example, Up: Using libffi [Contents][Index]"
    re.compile(r"^(?:(?:Next|Previous|Prev|Up):\s.*?)(?:,\s*(?:Next|Previous|Prev|Up):\s.*)+$"),
    re.compile(r"^(?:Next|Previous|Prev|Up):\s.*\[(?:Contents|Index)\]$"),
    re.compile(r"^(?:\[\s*(?:Contents|Index|Top|Home)\s*\]\s*)+$", re.I),
    re.compile(r"^Jump to:"),  # texinfo's index letters
    # DocBook and similar: a bar of the words alone
    re.compile(r"^(?:(?:Prev(?:ious)?|Next|Up|Home|Top|Contents|Index)\s*(?:\||·)?\s*){2,}$", re.I),
    # Sphinx sidebars and footers
    re.compile(
        r"^(?:Previous topic|Next topic|This Page|Show Source|Quick search|Navigation"
        r"|Table of Contents|Related Topics|Search)$",
        re.I,
    ),
]
# anchor marks that mean "a link to this heading" (Sphinx, texinfo 7, many blogs)
_ANCHOR_MARKS = re.compile(r"\s*[¶⁋]\s*")
# a URL starts with a scheme or a bare "www." host and ends at a space, a quote or a bracket;
# punctuation at its end is the sentence's. An e-mail address: name@host.tld.
_URL = r"(?:(?:https?|ftp|sftp|file)://|www\.)[^\s<>\"'\[\]]*[^\s<>\"'\[\].,;:!?)]"
_EMAIL = r"(?:mailto:)?[\w.+-]+@[\w-]+(?:\.[\w-]+)+"
_BRACKETED = re.compile(rf"[\[(<]\s*(?:mailto:)?(?P<link>{_URL}|{_EMAIL})/?\s*[\])>]", re.I)
_BARE = re.compile(rf"(?P<link>{_URL}|{_EMAIL})", re.I)
LINK_MODES = ("name", "skip", "read")
CODE_MODES = ("announce", "skip", "read")


def is_apparatus_title(title: str | None) -> bool:
    """A chapter that is a contents page, an index or a list of figures or tables."""
    return bool(title) and bool(_APPARATUS_TITLE.match(" ".join(title.split()).rstrip(".:")))


def is_contents_line(text: str) -> bool:
    """An entry of a printed contents page or index: its title, dot leaders and a page."""
    return bool(_LEADERS.search(text.strip()))


def is_navigation_line(text: str) -> bool:
    text = " ".join(text.split())
    return any(p.match(text) for p in _NAVIGATION)


def without_anchor_marks(text: str) -> str:
    return " ".join(_ANCHOR_MARKS.sub(" ", text).split())


def host_of(url: str) -> str:
    """ "https://www.debian.org/doc/" -> "debian.org"; "www.gnu.org/x" -> "gnu.org"."""
    parts = urlsplit(url if "://" in url else f"http://{url}")
    host = (parts.hostname or "").removeprefix("www.")
    return host or url


def speak_links(text: str, mode: str = "name") -> str:
    """URLs and e-mail addresses as a narrator says them. `name`: "a link to debian.org",
    "debian-mentors at lists.debian.org"; `skip`: left out; `read`: kept as written."""
    if mode == "read":
        return text

    def said(m: re.Match, bracketed: bool) -> str:
        if mode == "skip":
            return ""
        link = m.group("link").removeprefix("mailto:")
        if "@" in link and "://" not in link:  # short and meaningful: the list's name
            words = " at ".join(link.rsplit("@", 1))
        else:
            words = f"a link to {host_of(link)}"
        return f"({words})" if bracketed else words

    text = _BRACKETED.sub(lambda m: said(m, True), text)
    text = _BARE.sub(lambda m: said(m, False), text)
    if mode == "skip":  # no space before the punctuation a link stood before
        text = re.sub(r"\s+([,.;:!?)])", r"\1", " ".join(text.split()))
    return " ".join(text.split())


def code_said(lines: list[str], mode: str) -> list[str]:
    """What a block of code says: one short notice (`announce`), nothing (`skip`), or its
    lines read out as one paragraph (`read`)."""
    if mode == "read":
        text = " ".join(" ".join(lines).split())
        return [text] if text else []
    return [CODE_NOTICE] if mode == "announce" else []


class Skipped(Counter):
    """What a reader left out, per kind ("contents entries", "navigation lines", ...)."""

    def line(self) -> str:
        """ "161 contents entries, 12 navigation lines, 1 index" (empty when nothing)."""
        return ", ".join(f"{n} {kind}" for kind, n in sorted(self.items()) if n)
