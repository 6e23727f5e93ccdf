"""Zip archives from untrusted files (EPUB, .docx), read within one set of limits.

A zip bomb is small on disk and huge unpacked: many entries, a huge declared size, or a
compression ratio no text reaches. The whole archive is checked when it is opened, before any
entry is inflated (entry count, total declared size, ratio of each large entry); an entry is
checked again when it is read (its declared size against the most one entry may hold), and the
read itself is bounded. Nothing trusts the declared sizes alone: asked for a whole entry, zipfile
inflates all of its compressed data before cutting it to the declared size, so a header that
understates a bomb would cost the whole bomb; read a piece at a time, it never inflates more
than a piece past what it has returned, and the reading stops at the bound.

Anything that is not a readable zip, or an entry that is damaged, encrypted or compressed in a
way zipfile lacks, raises InvalidInput naming the file and what is wrong.
"""

from __future__ import annotations

import contextlib
import zipfile
import zlib
from dataclasses import dataclass

from ownvoice.errors import InvalidInput

MiB = 2**20
_PIECE = MiB  # read and inflated at a time


@dataclass(frozen=True)
class ArchiveLimits:
    # a long EPUB has a few hundred files, a .docx a few dozen
    max_entries: int = 10_000
    # every entry declared, images included: a heavily illustrated EPUB stays well below
    max_total_bytes: int = 512 * MiB
    # one entry read: an EPUB's chapter file is rarely past 1 MiB, a whole book in one file a
    # few MiB; a 10 MiB document.xml as Word writes it holds some 5 million characters, more
    # than War and Peace. It also bounds an XML tree: python-docx's lxml tree takes 10 to 23
    # times the bytes of its document.xml (most for dense markup), so up to ~230 MB
    max_entry_bytes: int = 10 * MiB
    # unpacked / packed, for entries over 1 MiB: text and markup deflate 3-10:1, a bomb 1000:1
    max_ratio: float = 200.0


LIMITS = ArchiveLimits()  # the ones every reader uses

# the errors of a damaged entry, an encrypted one (RuntimeError), or an unknown compression method
_UNREADABLE = (zipfile.BadZipFile, OSError, EOFError, zlib.error, NotImplementedError, RuntimeError)


class Archive:
    """A zip file opened for reading within `limits`. `kind` says what the file should be
    ("EPUB"), for the message when it is not a zip at all (an EPUB renamed from a PNG, a
    truncated download)."""

    def __init__(self, path: str, kind: str, limits: ArchiveLimits = LIMITS):
        self.path, self.limits = path, limits
        try:
            self._zip = zipfile.ZipFile(path)
        except (zipfile.BadZipFile, OSError, EOFError, ValueError) as e:
            raise InvalidInput(f"{path}: not a readable {kind}: {e}") from e
        try:
            self._check()
        except InvalidInput:
            self._zip.close()
            raise
        self.names = list(dict.fromkeys(self._zip.namelist()))  # a name listed twice: once

    def __enter__(self) -> Archive:
        return self

    def __exit__(self, *exc) -> None:
        self._zip.close()

    def _check(self) -> None:
        infos, limits = self._zip.infolist(), self.limits
        if len(infos) > limits.max_entries:
            raise InvalidInput(
                f"{self.path}: {len(infos)} files in the archive, at most {limits.max_entries}"
            )
        total = sum(i.file_size for i in infos)
        if total > limits.max_total_bytes:
            raise InvalidInput(
                f"{self.path}: unpacks to {_size(total)}, more than the "
                f"{_size(limits.max_total_bytes)} allowed (zip bomb?)"
            )
        for info in infos:
            ratio = info.file_size / max(info.compress_size, 1)
            if info.file_size > MiB and ratio > limits.max_ratio:
                raise InvalidInput(
                    f"{self.path}: {info.filename} is compressed {ratio:.0f}:1, more than "
                    f"{limits.max_ratio:.0f}:1 allowed (zip bomb?)"
                )

    def size(self, name: str) -> int:
        """What `name` declares it unpacks to."""
        return self._zip.getinfo(name).file_size

    def read(self, name: str) -> bytes:
        """The bytes of entry `name`, never more than limits.max_entry_bytes of them."""
        bound = self.limits.max_entry_bytes
        if self.size(name) > bound:
            raise self._too_big(name)
        pieces, unpacked = [], 0
        with self._unpacking(name) as entry:
            # a piece at a time: zipfile inflates at most the piece asked for, then cuts it to
            # what the header declared (and a header that lies fails the CRC check right after)
            while piece := entry.read(_PIECE):
                unpacked += len(piece)
                if unpacked > bound:
                    raise self._too_big(name)
                pieces.append(piece)
        return b"".join(pieces)

    def _too_big(self, name: str) -> InvalidInput:
        return InvalidInput(
            f"{self.path}: {name} unpacks to more than {_size(self.limits.max_entry_bytes)}, the "
            "most one file in the archive may hold"
        )

    @contextlib.contextmanager
    def _unpacking(self, name: str):
        try:
            with self._zip.open(name) as entry:
                yield entry
        except _UNREADABLE as e:
            raise InvalidInput(f"{self.path}: cannot unpack {name}: {e}") from e


def _size(n: int) -> str:
    return f"{n / MiB:.1f} MiB" if n >= MiB else f"{n / 1024:.1f} KiB"
