"""Write small PDFs for tests by hand: pages of text lines (Helvetica), and an outline."""

from __future__ import annotations

from pathlib import Path


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def write_pdf(path: Path, pages: list[list[str]], outline: list[tuple[str, int]] = ()) -> Path:
    """`pages`: each a list of lines, top to bottom ("" = a blank line; a (text, points) pair
    sets a line in a size of its own, e.g. a heading); `outline`: (title, 0-based page)
    entries. Lines are 14 pt apart (or their size + 6) from the top margin down."""
    objects: list[bytes] = []

    def add(body: str | bytes) -> int:
        objects.append(body.encode("latin-1") if isinstance(body, str) else body)
        return len(objects)

    catalog = add("")  # 1, filled in below
    pages_obj = add("")  # 2
    font = add("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    page_ids = []
    for lines in pages:
        ops = ["BT", "/F1 11 Tf", "72 770 Td", "14 TL"]
        for line in lines:
            if isinstance(line, tuple):
                text, size = line
                ops.append(f"/F1 {size} Tf {size + 6} TL ({_escape(text)}) Tj T* /F1 11 Tf 14 TL")
            else:
                ops.append(f"({_escape(line)}) Tj T*" if line else "T*")
        ops.append("ET")
        stream = "\n".join(ops).encode("latin-1")
        content = add(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
        page_ids.append(
            add(f"<< /Type /Page /Parent {pages_obj} 0 R /MediaBox [0 0 595 842] "
                f"/Resources << /Font << /F1 {font} 0 R >> >> /Contents {content} 0 R >>")
        )  # fmt: skip
    kids = " ".join(f"{p} 0 R" for p in page_ids)
    objects[pages_obj - 1] = f"<< /Type /Pages /Kids [{kids}] /Count {len(page_ids)} >>".encode()
    outlines = ""
    if outline:
        root = add("")
        items = [len(objects) + 1 + i for i in range(len(outline))]
        for i, (title, page) in enumerate(outline):
            links = f"/Parent {root} 0 R"
            if i:
                links += f" /Prev {items[i - 1]} 0 R"
            if i < len(outline) - 1:
                links += f" /Next {items[i + 1]} 0 R"
            add(f"<< /Title ({_escape(title)}) {links} /Dest [{page_ids[page]} 0 R /Fit] >>")
        objects[root - 1] = (
            f"<< /Type /Outlines /First {items[0]} 0 R /Last {items[-1]} 0 R /Count {len(items)} >>"
        ).encode()
        outlines = f" /Outlines {root} 0 R"
    objects[catalog - 1] = f"<< /Type /Catalog /Pages {pages_obj} 0 R{outlines} >>".encode()

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
    path.write_bytes(bytes(out))
    return path
