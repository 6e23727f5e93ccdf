"""The work folder that makes a render resumable: keys, records, locks and atomic writes."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from ownvoice.audiobook.workdir import ChunkRecord, WorkDir, chunk_key
from ownvoice.errors import InvalidInput

IDENTITY = {"voice": "ryan", "language": "english", "seed": 7, "model": "m1"}


def test_a_key_changes_with_the_text_and_every_part_of_the_identity():
    key = chunk_key("Hello.", IDENTITY)
    assert len(key) == 32 and int(key, 16) >= 0
    assert chunk_key("Hello.", dict(reversed(IDENTITY.items()))) == key  # order does not matter
    assert chunk_key("Hello!", IDENTITY) != key
    for field in IDENTITY:
        assert chunk_key("Hello.", {**IDENTITY, field: "other"}) != key, field
    # the format is what finished chunks on disk are found by: a change re-renders every book
    # (bump KEY_VERSION on purpose, never by accident)
    assert key == "5f76dc0f8a8550afdcf0bb414d594386"


def record(key: str = "k1", **changes) -> ChunkRecord:
    fields = {"key": key, "text": "Grüße.", "seconds": 1.5, "seed": 3, "attempts": 2,
              "synth_seconds": 0.7, "stop_reason": "eos"}  # fmt: skip
    return ChunkRecord(**{**fields, **changes})


def test_a_saved_chunk_reads_back_whole(tmp_path):
    work = WorkDir(tmp_path / "w")
    audio = (0.5 * np.sin(np.arange(2400) / 9)).astype(np.float32)
    work.save(record(), audio, 24000)
    assert work.record("k1") == record()
    back = work.load("k1")
    assert back.dtype == np.float32 and back.shape == audio.shape
    assert np.abs(back - audio).max() < 2**-22  # 24-bit
    info = sf.info(work.chunks / "k1.flac")
    assert (info.samplerate, info.subtype) == (24000, "PCM_24")
    assert "Grüße" in (work.chunks / "k1.json").read_text(encoding="utf-8")  # readable text
    assert sorted(p.name for p in work.chunks.iterdir()) == ["k1.flac", "k1.json"]
    work.forget("k1")
    assert work.record("k1") is None and not list(work.chunks.iterdir())


@pytest.mark.parametrize("damage", ["no-audio", "no-record", "not-json", "wrong-fields"])
def test_an_incomplete_or_damaged_chunk_is_redone(tmp_path, damage):
    work = WorkDir(tmp_path)
    work.save(record(), np.zeros(10, np.float32), 24000)
    meta = work.chunks / "k1.json"
    if damage == "no-audio":
        (work.chunks / "k1.flac").unlink()
    elif damage == "no-record":
        meta.unlink()
    elif damage == "not-json":
        meta.write_text("{half")
    else:
        meta.write_text(json.dumps({"key": "k1", "text": "x"}))
    assert work.record("k1") is None


def test_one_render_per_folder_and_stale_temporaries_go(tmp_path):
    first = WorkDir(tmp_path)
    (first.chunks / ".k9.flac.abc.tmp").write_bytes(b"half a chunk")
    (first.chunks / "k9.flac").write_bytes(b"kept")
    first.lock()
    assert [p.name for p in first.chunks.iterdir()] == ["k9.flac"]
    second = WorkDir(tmp_path)
    with pytest.raises(InvalidInput) as caught:
        second.lock()
    assert caught.value.param == "work_dir" and "in use" in str(caught.value)
    first.unlock()
    second.lock()  # free again
    second.unlock()
    second.unlock()  # twice is harmless


def test_redo_counts_and_reports_survive_damage(tmp_path):
    work = WorkDir(tmp_path)
    assert work.redo_count("a") == 0
    assert (work.bump_redo("a"), work.bump_redo("a"), work.bump_redo("b")) == (1, 2, 1)
    assert (work.redo_count("a"), WorkDir(tmp_path).redo_count("b")) == (2, 1)
    (tmp_path / "redo.json").write_text("[broken")
    assert work.redo_count("a") == 0
    assert work.read_json("report.json") is None
    work.write_json("report.json", {"title": "Éa", "chunks": [1, 2]})
    assert work.read_json("report.json") == {"title": "Éa", "chunks": [1, 2]}
    assert "Éa" in (tmp_path / "report.json").read_text(encoding="utf-8")
    (tmp_path / "report.json").write_text("{")
    assert work.read_json("report.json") is None


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    work = WorkDir(tmp_path)
    work.save(record(), np.zeros(10, np.float32), 24000)
    before = (work.chunks / "k1.flac").read_bytes()

    def broken_write(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(sf, "write", broken_write)
    with pytest.raises(OSError, match="disk full"):
        work.save(record(seconds=9.0), np.ones(10, np.float32), 24000)
    assert (work.chunks / "k1.flac").read_bytes() == before
    assert work.record("k1") == record()
    assert sorted(p.name for p in work.chunks.iterdir()) == ["k1.flac", "k1.json"]


def test_the_folder_layout_and_where_temporaries_are_written(tmp_path, monkeypatch):
    import os

    work = WorkDir(tmp_path / "w")
    assert (tmp_path / "w" / "chunks").is_dir()
    work.unlock()  # never locked: nothing to release
    work.forget("never-saved")  # nothing to forget
    moves = []
    real_replace = os.replace

    def replace(src, dst):
        moves.append((src, dst))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    work.save(record(), np.zeros(10, np.float32), 24000)
    work.write_json("report.json", {"a": 1})
    for src, dst in moves:
        src, dst = Path(src), Path(dst)
        # beside its target (a rename, never a copy across disks), hidden, and cleaned by lock()
        assert src.parent == dst.parent and src.name.startswith(f".{dst.name}.")
        assert src.suffix == ".tmp"
    work.lock()
    assert (tmp_path / "w" / "lock").is_file()
    with pytest.raises(InvalidInput) as caught:
        WorkDir(tmp_path / "w").lock()
    assert str(caught.value) == (
        f"work folder {tmp_path / 'w'} is in use by another `ownvoice book`; wait for it or pass "
        "another --work-dir"
    )
    work.unlock()
