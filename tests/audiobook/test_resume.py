"""Killing `ownvoice book` mid-book and running it again re-uses every finished chunk."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import soundfile as sf

from ownvoice.audiobook import BookOptions, ServerBackend, render_book
from ownvoice.audiobook.cast import load_cast
from ownvoice.audiobook.lexicon import load_lexicon
from tests.audiobook.conftest import STORY_CHUNK_CHARS, STORY_CHUNKS, story_texts

KILL_AFTER = 6  # answered requests before the kill


def _finished(work: Path) -> dict[str, str]:
    """key -> text of every chunk the work folder holds as finished."""
    out = {}
    for meta in (work / "chunks").glob("*.json"):
        if (work / "chunks" / f"{meta.stem}.flac").exists():
            out[meta.stem] = json.loads(meta.read_text())["text"]
    return out


CAST = "narrator: aiden\nchapters:\n  2: serena\n"
LEXICON = "all:\n  Alpha: Alfa\n  Storm: Tempest\n"


@pytest.mark.parametrize("cast", [False, True], ids=["plain", "cast-and-lexicon"])
def test_killed_render_resumes_without_requesting_finished_chunks(story, server, tmp_path, cast):
    out, work = tmp_path / "story.mp3", tmp_path / "work"
    extra, said, options = [], story_texts(), BookOptions()
    if cast:
        (tmp_path / "cast.yaml").write_text(CAST)
        (tmp_path / "lexicon.yaml").write_text(LEXICON)
        extra = ["--cast", str(tmp_path / "cast.yaml"), "--lexicon", str(tmp_path / "lexicon.yaml")]
        said = [t.replace("Alpha", "Alfa").replace("Storm", "Tempest") for t in said]
        options = BookOptions(cast=load_cast(tmp_path / "cast.yaml"),
                              lexicon=load_lexicon(tmp_path / "lexicon.yaml"))  # fmt: skip
    server.delay_s = 0.15  # slow enough that the kill lands mid-book
    enough = threading.Event()
    server.on_answer = lambda total: total >= KILL_AFTER and enough.set()
    cmd = [
        sys.executable, "-m", "ownvoice", "book", str(story), "-o", str(out), "--server", server.url,
        "--voice", "ryan", "--chunk-chars", str(STORY_CHUNK_CHARS), "--jobs", "2",
        "--work-dir", str(work), "--no-progress", *extra,
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert enough.wait(timeout=120), (
            proc.stderr.read().decode() if proc.poll() is not None else "no requests"
        )
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert not out.exists()

    finished = _finished(work)
    answered = sum(server.answered.values())
    # at most the chunks in flight (2 jobs) are lost
    assert answered - 2 <= len(finished) < STORY_CHUNKS, (answered, len(finished))

    server.counts.clear()
    server.delay_s = 0.0
    server.on_answer = None
    options = dataclasses.replace(options, chunk_chars=STORY_CHUNK_CHARS, backoff_s=0.01)
    backend = ServerBackend(server.url, voice="ryan", timeout=5.0)
    report = render_book(
        str(story), str(out), backend, options, work_dir=str(work), show_progress=False
    )

    assert report.complete, report.text()
    assert not set(finished.values()) & set(server.counts), "a finished chunk was requested again"
    assert set(server.counts) | set(finished.values()) == set(said)
    assert all(n == 1 for n in server.counts.values())
    assert (report.reused, report.rendered) == (len(finished), STORY_CHUNKS - len(finished))
    assert not list((work / "chunks").glob(".*.tmp"))  # a killed run's temp files are cleaned up
    if cast:  # chapter 2 by its own narrator, the rest by the cast's, never --voice
        voices = {b["input"]: b["voice"] for b in server.bodies}
        assert {voices[t] for t in said[8:] if t in voices} <= {"serena"}
        assert {voices[t] for t in said[:8] if t in voices} <= {"aiden"}
        assert set(voices) == set(said)  # both runs together said every chunk
    info = sf.info(out)
    assert info.duration > 20
