"""Build hostile book files for tests: zip bombs, entity bombs, PDF bombs, truncated and renamed
files. Each builder writes one file and returns its path; all are small on disk and quick to
make (the bombs are repetitive, so deflate writes them at hundreds of MiB a second)."""

from __future__ import annotations

import io
import random
import struct
import zipfile
import zlib
from pathlib import Path

import docx

from tests.audiobook import epub_builder as eb
from tests.audiobook.pdf_builder import write_pdf

MiB = 2**20
W_NS = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"


# -- Word documents ----------------------------------------------------------------------------


def docx_with_document_xml(path: Path, pieces) -> Path:
    """python-docx's blank document with word/document.xml made of `pieces` (bytes), written one
    at a time so a huge part never sits in this process's memory."""
    blank = io.BytesIO()
    docx.Document().save(blank)
    with zipfile.ZipFile(blank) as src, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as out:
        for info in src.infolist():
            if info.filename != "word/document.xml":
                out.writestr(info.filename, src.read(info.filename))
        with out.open("word/document.xml", "w") as part:
            for piece in pieces:
                part.write(piece)
    return path


def _document(body_pieces):
    yield f'<w:document xmlns:w="{W_NS}"><w:body>'.encode()
    yield from body_pieces
    yield b"</w:body></w:document>"


def docx_zip_bomb(path: Path, unpacked: int = 256 * MiB) -> Path:
    """A 1 MiB .docx whose document.xml unpacks to 256 MiB of paragraphs (about 340:1)."""
    block = b"<w:p><w:r><w:t>All work and no play.</w:t></w:r></w:p>" * (MiB // 56)
    return docx_with_document_xml(path, _document(block for _ in range(unpacked // len(block))))


def docx_at_the_limits(path: Path, size: int = 10 * MiB - 64 * 1024) -> Path:
    """A .docx whose document.xml is just under the 10 MiB one entry may unpack to, in dense
    markup (python-docx's tree takes ~17 times its bytes) that deflates far below the bomb
    ratio (random ids): about the most memory a .docx can make the reader take. Little text, so
    the book is quick to plan."""
    rng = random.Random(38)
    run = '<w:r w:rsidR="00{:06X}" w:rsidRPr="00{:06X}"><w:t>x</w:t></w:r>'
    para_size = 20 * len(run.format(0, 0)) + len("<w:p></w:p>")
    body = (
        "<w:p>" + "".join(run.format(rng.randrange(16**6), rng.randrange(16**6)) for _ in range(20))
        + "</w:p>"
        for _ in range(size // para_size)
    )  # fmt: skip
    return docx_with_document_xml(path, _document(p.encode() for p in body))


def docx_billion_laughs(path: Path) -> Path:
    """document.xml declares ten entities, each ten of the one before: 10^9 'lol's if expanded."""
    entities = '<!ENTITY lol0 "lol">' + "".join(
        f'<!ENTITY lol{n} "{f"&lol{n - 1};" * 10}">' for n in range(1, 10)
    )
    xml = (
        f'<?xml version="1.0"?><!DOCTYPE w:document [{entities}]>'
        f'<w:document xmlns:w="{W_NS}"><w:body><w:p><w:r><w:t>&lol9;</w:t></w:r></w:p>'
        "</w:body></w:document>"
    )
    return docx_with_document_xml(path, [xml.encode()])


def small_docx(path: Path) -> Path:
    document = docx.Document()
    document.add_paragraph("A short and perfectly ordinary document. " * 50)
    document.save(str(path))
    return path


# -- EPUBs -------------------------------------------------------------------------------------


def epub_zip_bomb(path: Path) -> Path:
    files = eb.good_files()
    files["OEBPS/text/ch1.xhtml"] = b"\0" * (64 * MiB)  # zeros deflate about 1000:1
    return eb.write_epub(path, files)


def epub_many_entries(path: Path, entries: int = 12_000) -> Path:
    files = eb.good_files()
    files.update({f"OEBPS/junk/{n}.txt": b"" for n in range(entries)})
    return eb.write_epub(path, files)


def epub_text_flood(path: Path, documents: int = 8, size: int = 8 * MiB) -> Path:
    """An EPUB of `documents` spine documents, each `size` bytes of text in paragraphs: 64 MiB of
    text, three times the budget, in a 0.6 MiB file. The text repeats every 20 KiB, so it
    deflates about 100:1, under the 200:1 a zip bomb is refused at."""
    rng = random.Random(38)
    words = [
        "".join(rng.choice("etaoinshrdlucmfwyp") for _ in range(rng.randint(2, 9)))
        for _ in range(4000)
    ]
    para = f"<p>{' '.join(rng.choice(words) for _ in range(3000))}.</p>\n"[: 20 * 1024]
    body = (para * (size // len(para))).encode()
    files = eb.good_files()
    spine = "".join(f'<itemref idref="flood{n}"/>' for n in range(documents))
    items = "".join(
        f'<item id="flood{n}" href="text/flood{n}.xhtml" media-type="application/xhtml+xml"/>'
        for n in range(documents)
    )
    files["OEBPS/content.opf"] = eb.OPF.replace(
        '<spine toc="ncx">', f'<spine toc="ncx">{spine}'
    ).replace("</manifest>", f"{items}</manifest>")
    for n in range(documents):
        files[f"OEBPS/text/flood{n}.xhtml"] = b"<html><body>" + body + b"</body></html>"
    return eb.write_epub(path, files)


# -- PDFs --------------------------------------------------------------------------------------


def _pdf(objects: list[bytes]) -> bytes:
    """A PDF of these objects (1 is the catalog), with a correct cross-reference table."""
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for n, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % n + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


_CATALOG = b"<< /Type /Catalog /Pages 2 0 R >>"
_FONT = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"
_PAGE = b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Contents 4 0 R " \
        b"/Resources << /Font << /F1 3 0 R >> >> >>"  # fmt: skip


def pdf_flate_bomb(path: Path, unpacked: int = 128 * MiB) -> Path:
    """One page whose content stream inflates to 128 MiB of text operators."""
    block = b"BT /F1 11 Tf 72 770 Td (All work and no play.) Tj ET\n" * (MiB // 52)
    packer = zlib.compressobj(9)
    packed = b"".join(packer.compress(block) for _ in range(unpacked // len(block)))
    packed += packer.flush()
    stream = b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(packed)
    objects = [_CATALOG, b"<< /Type /Pages /Kids [5 0 R] /Count 1 >>", _FONT,
               stream + packed + b"\nendstream", _PAGE]  # fmt: skip
    path.write_bytes(_pdf(objects))
    return path


def pdf_many_kids(path: Path, kids: int = 200_000) -> Path:
    """A page tree whose root lists the same page 200,000 times."""
    refs = b" ".join([b"5 0 R"] * kids)
    text = b"BT /F1 11 Tf 72 770 Td (One line of text.) Tj ET"
    objects = [_CATALOG, b"<< /Type /Pages /Kids [%s] /Count %d >>" % (refs, kids), _FONT,
               b"<< /Length %d >>\nstream\n%s\nendstream" % (len(text), text), _PAGE]  # fmt: skip
    path.write_bytes(_pdf(objects))
    return path


def pdf_self_length(path: Path) -> Path:
    """A content stream whose /Length is a reference to the stream itself."""
    text = b"BT /F1 11 Tf 72 770 Td (One line of text.) Tj ET"
    objects = [_CATALOG, b"<< /Type /Pages /Kids [5 0 R] /Count 1 >>", _FONT,
               b"<< /Length 4 0 R >>\nstream\n%s\nendstream" % text, _PAGE]  # fmt: skip
    path.write_bytes(_pdf(objects))
    return path


def small_pdf(path: Path) -> Path:
    return write_pdf(path, [["A short and perfectly ordinary page of text."] * 20] * 3)


# -- truncated and renamed ---------------------------------------------------------------------


def truncated(source: Path, path: Path) -> Path:
    """The first half of `source`."""
    data = source.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return path


def renamed(data: bytes, path: Path) -> Path:
    path.write_bytes(data)
    return path


PNG = eb.png(64, 64)
PLAIN_TEXT = b"Just some text that was saved with the wrong extension.\n" * 20


def understated(source: Path, name: str, path: Path, size: int = 1024) -> Path:
    """`source` with entry `name` declared (in its local header and in the zip directory) to
    unpack to `size` bytes, far fewer than it does: a header that lies. `source` must not be a
    zip64 archive (its sizes would sit in extra fields)."""
    data = bytearray(source.read_bytes())
    with zipfile.ZipFile(source) as z:
        local = z.getinfo(name).header_offset
    # the name's last occurrence is in the directory, which follows every entry's data
    central = data.rfind(b"PK\x01\x02", 0, data.rfind(name.encode()))
    struct.pack_into("<I", data, local + 22, size)
    struct.pack_into("<I", data, central + 24, size)
    path.write_bytes(bytes(data))
    return path
