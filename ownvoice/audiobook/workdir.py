"""The work folder that makes a render resumable.

    WORK/
      manifest.json        the plan: every chunk's number, text, chapter, pause and key
      chunks/KEY.flac      a finished chunk's audio as synthesized (24 kHz mono, 24-bit)
      chunks/KEY.json      its record (seed, attempts, seconds); written last, so its presence
                           means the chunk is done
      redo.json            how often each chunk was redone (`--redo N`, or a run in which it
                           failed every attempt): each time moves it to new seeds
      report.json          the last run's report

A chunk's key hashes its text with everything else that changes its audio (voice, language, seed,
model), so an edited book or a different voice re-renders exactly the chunks it changes. Every
file is written to a temporary name and renamed into place: a killed process loses at most the
chunks in flight. Knows nothing about synthesis, loudness or encoding.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import soundfile as sf

from ownvoice.audiobook.files import put_in_place
from ownvoice.errors import InvalidInput

KEY_VERSION = 1


def chunk_key(text: str, identity: dict) -> str:
    """Content key of one chunk: text + voice + settings + model (32 hex digits)."""
    blob = json.dumps({"key_version": KEY_VERSION, "text": text, **identity}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class ChunkRecord:
    key: str
    text: str
    seconds: float  # audio length as synthesized
    seed: int
    attempts: int  # 1 = first try
    synth_seconds: float  # wall time of the successful attempt
    stop_reason: str


class WorkDir:
    """One render at a time per folder: `lock()` takes an OS lock that dies with the process."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)
        self.chunks = self.root / "chunks"
        self.chunks.mkdir(parents=True, exist_ok=True)
        self._lock_file = None

    def lock(self) -> None:
        try:
            import fcntl
        except ImportError:  # Windows: no advisory locks; run one render per folder by hand
            return
        f = open(self.root / "lock", "w")  # noqa: SIM115 - held until unlock()
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            f.close()
            raise InvalidInput(
                f"work folder {self.root} is in use by another `ownvoice book`; wait for it or "
                "pass another --work-dir",
                param="work_dir",
            ) from e
        self._lock_file = f
        for stale in self.chunks.glob(".*.tmp"):  # left by a killed run; nobody else writes here
            stale.unlink(missing_ok=True)

    def unlock(self) -> None:
        if self._lock_file is not None:
            self._lock_file.close()  # closing releases the lock
            self._lock_file = None

    # -- finished chunks -----------------------------------------------------------------------

    def record(self, key: str) -> ChunkRecord | None:
        """The record of a finished chunk, or None if it is missing or incomplete."""
        meta, audio = self.chunks / f"{key}.json", self.chunks / f"{key}.flac"
        if not (meta.is_file() and audio.is_file()):
            return None
        try:
            return ChunkRecord(**json.loads(meta.read_text()))
        except (ValueError, TypeError):
            return None  # a damaged record is redone, never trusted

    def load(self, key: str) -> np.ndarray:
        audio, _ = sf.read(self.chunks / f"{key}.flac", dtype="float32", always_2d=False)
        return audio

    def save(self, record: ChunkRecord, audio: np.ndarray, sample_rate: int) -> None:
        # audio first, record last: a record always has its audio
        path = self.chunks / f"{record.key}.flac"
        _atomic(path, lambda f: sf.write(f, audio, sample_rate, format="FLAC", subtype="PCM_24"))
        _atomic_text(
            self.chunks / f"{record.key}.json", json.dumps(asdict(record), ensure_ascii=False)
        )

    def forget(self, key: str) -> None:
        for suffix in (".json", ".flac"):
            (self.chunks / f"{key}{suffix}").unlink(missing_ok=True)

    # -- bookkeeping ---------------------------------------------------------------------------

    def redo_count(self, key: str) -> int:
        return int(self._redo().get(key, 0))

    def bump_redo(self, key: str) -> int:
        counts = self._redo()
        counts[key] = int(counts.get(key, 0)) + 1
        _atomic_text(self.root / "redo.json", json.dumps(counts))
        return counts[key]

    def _redo(self) -> dict:
        try:
            return json.loads((self.root / "redo.json").read_text())
        except (OSError, ValueError):
            return {}

    def write_json(self, name: str, data) -> None:
        _atomic_text(self.root / name, json.dumps(data, indent=1, ensure_ascii=False))

    def read_json(self, name: str):
        try:
            return json.loads((self.root / name).read_text())
        except (OSError, ValueError):
            return None


def _atomic(path: Path, write) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        put_in_place(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _atomic_text(path: Path, text: str) -> None:
    _atomic(path, lambda f: f.write(text.encode("utf-8")))
