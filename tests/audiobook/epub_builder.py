"""Build small EPUB files for tests: a good one with nested chapters and images, and broken ones."""

from __future__ import annotations

import struct
import zipfile
import zlib
from pathlib import Path

CONTAINER = """<?xml version="1.0" encoding="UTF-8"?>
<container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">
  <rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/></rootfiles>
</container>"""

OPF = """<?xml version="1.0" encoding="UTF-8"?>
<package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="id">
  <metadata xmlns:dc="http://purl.org/dc/elements/1.1/">
    <dc:identifier id="id">urn:uuid:1234</dc:identifier>
    <dc:title>The Nested Book</dc:title>
    <dc:creator>Bea Writer</dc:creator>
    <dc:language>en-GB</dc:language>
  </metadata>
  <manifest>
    <item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>
    <item id="ncx" href="toc.ncx" media-type="application/x-dtbncx+xml"/>
    <item id="cover" href="images/cover.png" media-type="image/png" properties="cover-image"/>
    <item id="fig" href="images/fig%201.png" media-type="image/png"/>
    <item id="title" href="text/title.xhtml" media-type="application/xhtml+xml"/>
    <item id="part1" href="text/part1.xhtml" media-type="application/xhtml+xml"/>
    <item id="ch1" href="text/ch1.xhtml" media-type="application/xhtml+xml"/>
    <item id="ch2" href="text/ch%202.xhtml" media-type="application/xhtml+xml"/>
    <item id="notes" href="text/notes.xhtml" media-type="application/xhtml+xml"/>
  </manifest>
  <spine toc="ncx">
    <itemref idref="title"/>
    <itemref idref="part1"/>
    <itemref idref="ch1"/>
    <itemref idref="ch2"/>
    <itemref idref="notes" linear="no"/>
  </spine>
</package>"""

NAV = """<?xml version="1.0" encoding="UTF-8"?>
<html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops">
<head><title>Contents</title></head>
<body>
  <nav epub:type="toc"><h1>Contents</h1>
    <ol>
      <li><a href="text/part1.xhtml">Part One</a>
        <ol>
          <li><a href="text/ch1.xhtml">Chapter 1: Arrival</a></li>
          <li><a href="text/ch%202.xhtml#c2">Chapter 2: Departure</a>
            <ol><li><a href="text/ch%202.xhtml#c2s2">The Long Road</a></li></ol>
          </li>
        </ol>
      </li>
    </ol>
  </nav>
  <nav epub:type="landmarks"><ol><li><a href="text/ch1.xhtml">Start</a></li></ol></nav>
</body></html>"""

NCX = """<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE ncx PUBLIC "-//NISO//DTD ncx 2005-1//EN" "http://www.daisy.org/z3986/2005/ncx-2005-1.dtd">
<ncx xmlns="http://www.daisy.org/z3986/2005/ncx/" version="2005-1">
  <navMap>
    <navPoint id="p1"><navLabel><text>Part One (ncx)</text></navLabel><content src="text/part1.xhtml"/>
      <navPoint id="c1"><navLabel><text>Chapter 1 (ncx)</text></navLabel><content src="text/ch1.xhtml"/></navPoint>
      <navPoint id="c2"><navLabel><text>Chapter 2 (ncx)</text></navLabel><content src="text/ch%202.xhtml#c2"/>
        <navPoint id="c2s2"><navLabel><text>The Long Road (ncx)</text></navLabel><content src="text/ch%202.xhtml#c2s2"/></navPoint>
      </navPoint>
    </navPoint>
  </navMap>
</ncx>"""


def _xhtml(body: str) -> str:
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE html>\n'
        '<html xmlns="http://www.w3.org/1999/xhtml"><head><title>t</title>'
        "<style>p { color: red }</style></head>"
        f"<body>{body}</body></html>"
    )


TITLE = _xhtml("<h1>The Nested Book</h1><p>by Bea Writer</p>")
PART1 = _xhtml('<h1 class="part">Part One</h1>')
CH1 = _xhtml(
    "<h2>Chapter 1: Arrival</h2>"
    "<p>The train came in at dawn&nbsp;&mdash; late, as always.</p>"
    '<div class="figure"><img src="../images/fig%201.png" alt="A SPOKEN ALT TEXT"/>'
    "<svg xmlns='http://www.w3.org/2000/svg'><text>SVG TEXT</text></svg></div>"
    "<p>She stepped onto the<br/>platform and looked around.</p>"
    "<script>var x = 'SCRIPT TEXT';</script>"
)
CH2 = _xhtml(
    '<section id="c2"><h2>Chapter 2: Departure</h2><p>Nobody saw her leave.</p></section>'
    '<section><h3 id="c2s2">The Long Road</h3><p>The road went on for miles.</p>'
    "<p>At last she reached the sea.</p></section>"
)
NOTES = _xhtml("<p>NOTES THAT ARE NOT LINEAR</p>")


def png(width: int = 4, height: int = 3) -> bytes:
    """A valid tiny RGB PNG."""
    raw = b"".join(b"\x00" + bytes([200, 40, 40]) * width for _ in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


def good_files() -> dict[str, str | bytes]:
    return {
        "META-INF/container.xml": CONTAINER,
        "OEBPS/content.opf": OPF,
        "OEBPS/nav.xhtml": NAV,
        "OEBPS/toc.ncx": NCX,
        "OEBPS/images/cover.png": png(),
        "OEBPS/images/fig 1.png": png(2, 2),
        "OEBPS/text/title.xhtml": TITLE,
        "OEBPS/text/part1.xhtml": PART1,
        "OEBPS/text/ch1.xhtml": CH1,
        "OEBPS/text/ch 2.xhtml": CH2,
        "OEBPS/text/notes.xhtml": NOTES,
    }


def write_epub(path: Path, files: dict[str, str | bytes] | None = None) -> Path:
    files = good_files() if files is None else files
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("mimetype", "application/epub+zip", compress_type=zipfile.ZIP_STORED)
        for name, data in files.items():
            z.writestr(name, data, compress_type=zipfile.ZIP_DEFLATED)
    return path
