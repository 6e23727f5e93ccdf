"""Finished files put in place whole: written to a temporary file beside the target, then
renamed over it, so a crash never leaves half a book where a player or a media server looks.

tempfile.mkstemp makes its file 0600 (private); a finished book gets the mode a plain open()
would give it (0666 less the umask, usually 0644), so a media server running as another user
can read it.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def _umask() -> int:
    mask = os.umask(0o022)  # the only way to read it before Python 3.13 (os.umask sets it)
    os.umask(mask)
    return mask


FILE_MODE = 0o666 & ~_umask()  # read once, at import, on the importing thread


def temporary_beside(target: Path) -> str:
    """A new empty temporary file in `target`'s folder (same file system: the rename is atomic)."""
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(fd)
    return tmp


def put_in_place(tmp: str, target: Path) -> None:
    """Rename the finished temporary file over `target`, with the usual file mode."""
    os.chmod(tmp, FILE_MODE)
    os.replace(tmp, target)
