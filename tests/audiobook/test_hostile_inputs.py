"""Hostile book files through the real `ownvoice book --dry-run`: each ends in a one-line error
that names the file and the problem, never a traceback, and no reading peaks past 500 MB.

The files are built here (hostile_files.py) and read by hostile_runner.py: one fresh interpreter
that forks a child per file and measures each child's peak resident memory. A child starts at
about 195 MB (importing ownvoice imports torch; a fresh `ownvoice book` process starts some
50 MB higher, with the shared libraries' pages it has touched). The files that read cleanly
(`ordinary-*`, and a .docx just under the archive limits) fail later, at the server nobody
runs: they measure that floor, and the most a file within the limits costs.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.audiobook import hostile_files as hf

# the runner forks, reads /proc and takes ru_maxrss in KiB: Linux's ways
pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="measures memory as Linux does")
PEAK_LIMIT_BYTES = 500 * 10**6
ROOT = Path(__file__).resolve().parents[2]
READ_CLEANLY = "cannot reach the server"  # the book was read; the dry run needs a server next


def _understated(d: Path) -> Path:
    bomb = hf.docx_zip_bomb(d / "bomb.docx")
    return hf.understated(bomb, "word/document.xml", d / "understated.docx")


# name -> (builder(directory) -> path, what the one-line error says)
CASES = {
    "ordinary-docx": (lambda d: hf.small_docx(d / "ordinary.docx"), READ_CLEANLY),
    "ordinary-pdf": (lambda d: hf.small_pdf(d / "ordinary.pdf"), READ_CLEANLY),
    "docx-at-the-limits": (lambda d: hf.docx_at_the_limits(d / "limits.docx"), READ_CLEANLY),
    "docx-zip-bomb": (lambda d: hf.docx_zip_bomb(d / "bomb.docx"), r"compressed \d+:1.*zip bomb"),
    "docx-understated-size": (_understated, "cannot unpack word/document.xml: Bad CRC"),
    "docx-billion-laughs": (
        lambda d: hf.docx_billion_laughs(d / "laughs.docx"),
        "unsafe XML in word/document.xml: entity declarations",
    ),
    "docx-truncated": (
        lambda d: hf.truncated(hf.small_docx(d / "whole.docx"), d / "truncated.docx"),
        r"not a readable Word document \(.docx\): File is not a zip file",
    ),
    "docx-really-png": (
        lambda d: hf.renamed(hf.PNG, d / "png.docx"),
        r"not a readable Word document \(.docx\): File is not a zip file",
    ),
    "docx-really-text": (
        lambda d: hf.renamed(hf.PLAIN_TEXT, d / "text.docx"),
        r"not a readable Word document \(.docx\): File is not a zip file",
    ),
    "epub-zip-bomb": (lambda d: hf.epub_zip_bomb(d / "bomb.epub"), r"compressed \d+:1.*zip bomb"),
    "epub-many-entries": (
        lambda d: hf.epub_many_entries(d / "many.epub"),
        r"\d+ files in the archive, at most 10000",
    ),
    "epub-text-flood": (
        lambda d: hf.epub_text_flood(d / "flood.epub"),
        "more than 20,000,000 characters of text",
    ),
    "epub-truncated": (
        lambda d: hf.truncated(hf.eb.write_epub(d / "whole.epub"), d / "truncated.epub"),
        "not a readable EPUB: File is not a zip file",
    ),
    "pdf-flate-bomb": (
        lambda d: hf.pdf_flate_bomb(d / "bomb.pdf"),
        "not a readable PDF: past a limit .*decompressing",
    ),
    "pdf-200k-kids": (
        lambda d: hf.pdf_many_kids(d / "kids.pdf"),
        "not a readable PDF: past a limit .*array element count",
    ),
    "pdf-self-referencing-length": (
        lambda d: hf.pdf_self_length(d / "length.pdf"),
        "not a readable PDF: past a limit .*self reference",
    ),
    "pdf-truncated": (
        lambda d: hf.truncated(hf.small_pdf(d / "whole.pdf"), d / "truncated.pdf"),
        "not a readable PDF: ",
    ),
    "pdf-really-text": (
        lambda d: hf.renamed(hf.PLAIN_TEXT, d / "text.pdf"),
        "not a readable PDF: it does not start with %PDF-",
    ),
}


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> dict[str, dict]:
    """Every case read once, each in a child process of its own: name -> exit, stderr, peak."""
    paths = {name: str(build(tmp_path_factory.mktemp(name))) for name, (build, _) in CASES.items()}
    done = subprocess.run(
        [sys.executable, "-m", "tests.audiobook.hostile_runner", *paths.values()],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    by_path = {r["path"]: r for r in map(json.loads, done.stdout.splitlines())}
    return {name: by_path[path] for name, path in paths.items()}


@pytest.mark.parametrize("name", CASES)
def test_a_hostile_file_ends_in_one_line_within_500_mb(outcomes, name):
    outcome, expected = outcomes[name], CASES[name][1]
    err = outcome["stderr"].strip()
    assert "Traceback" not in err and "\n" not in err, err[-3000:]
    assert outcome["exit"] == 2, err
    if expected != READ_CLEANLY:
        assert err.startswith(f"ownvoice book: error: {outcome['path']}: "), err
    assert re.search(expected, err), err
    peak_mb = outcome["peak_bytes"] / 10**6
    print(f"{name}: peak {peak_mb:.0f} MB in {outcome['seconds']} s")
    assert outcome["peak_bytes"] < PEAK_LIMIT_BYTES, f"{name} peaked at {peak_mb:.0f} MB"
