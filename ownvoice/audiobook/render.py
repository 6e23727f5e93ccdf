"""Synthesize every missing chunk into the work folder: bounded parallelism, retries with
backoff, runaway detection, and resume.

A chunk already in the work folder is not requested again. Each attempt uses its own seed,
derived from the base seed, the chunk's key, its redo count and the attempt number, so a retry
after a runaway (or a timeout, often the same thing on a server) really draws new audio. A
chunk that failed every attempt has its redo count raised in the work folder, so the next run
draws fresh seeds for it instead of failing on the same ones again; a finished chunk's seed is
kept in its record, so a rerun reproduces every choice that worked. Audio is checked against what its text implies:
    runaway    longer than runaway_factor x expected + runaway_slack_s, or the frame cap was hit
    truncated  shorter than truncated_factor x expected (for texts expected to last > 1.5 s)
Both are retried like errors. Chunks that fail every attempt are listed; the others are kept,
so a rerun only retries the failures. An error every chunk would share (OwnvoiceError) stops
the render at once. Knows nothing about loudness or output formats.
"""

from __future__ import annotations

import hashlib
import queue
import random
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from ownvoice.audiobook.backends import SAMPLE_RATE, Retryable
from ownvoice.audiobook.options import BookOptions
from ownvoice.audiobook.plan import PlannedChunk, expected_seconds
from ownvoice.audiobook.progress import Progress
from ownvoice.audiobook.workdir import ChunkRecord, WorkDir

TRUNCATED_MIN_EXPECTED_S = 1.5


@dataclass(frozen=True)
class Job:
    chunk: PlannedChunk
    key: str
    spoken: str = ""  # what is sent for synthesis (the text after the lexicon); "" = chunk.text

    @property
    def said(self) -> str:
        return self.spoken or self.chunk.text


@dataclass
class RenderStats:
    reused: int = 0
    rendered: int = 0
    retries: Counter = field(default_factory=Counter)  # reason -> count
    failures: list[tuple[int, str, str]] = field(default_factory=list)  # (index, text, last error)
    synth_wall_s: float = 0.0  # wall time of the whole synthesis phase
    new_audio_s: float = 0.0  # audio synthesized in this run


def seed_for(base: int, key: str, redo: int, attempt: int) -> int:
    digest = hashlib.sha256(f"{base}:{key}:{redo}:{attempt}".encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF


def length_limits(text: str, options: BookOptions) -> tuple[float, float]:
    """(shortest, longest) plausible audio for `text`, in seconds."""
    expected = expected_seconds(text)
    longest = options.runaway_slack_s + options.runaway_factor * expected
    shortest = options.truncated_factor * expected if expected > TRUNCATED_MIN_EXPECTED_S else 0.0
    return shortest, longest


def render_chunks(
    jobs: Sequence[Job],
    backend,
    work: WorkDir,
    options: BookOptions,
    progress: Progress,
    language: str = "auto",
    stop: threading.Event | None = None,
) -> RenderStats:
    """Synthesize the jobs missing from `work` in `language` (a model language name or "auto")."""
    stats = RenderStats()
    todo = []
    for job in jobs:
        if work.record(job.key) is not None:
            stats.reused += 1
            progress.advance(len(job.chunk.text))
        else:
            todo.append(job)
    if not todo:
        return stats
    renderer = _ChunkRenderer(backend, language, work, options, progress, stop or threading.Event())
    tasks: queue.Queue[Job] = queue.Queue()
    for job in todo:
        tasks.put(job)
    results: queue.Queue = queue.Queue()

    def worker() -> None:
        while not renderer.stop.is_set():
            try:
                job = tasks.get_nowait()
            except queue.Empty:
                return
            try:
                results.put((job, renderer.render(job)))
            except BaseException as e:  # noqa: BLE001 - handed to the main thread
                results.put((job, e))

    t0 = time.monotonic()
    workers = min(options.jobs or backend.batch_size(), len(todo))
    # daemon threads: Ctrl-C must not wait for a request that may take minutes to time out
    threads = [threading.Thread(target=worker, daemon=True) for _ in range(workers)]
    for t in threads:
        t.start()
    try:
        for _ in range(len(todo)):
            job, outcome = _next_result(results)
            if isinstance(outcome, BaseException):
                raise outcome  # an error every chunk would share: stop everything
            if isinstance(outcome, ChunkRecord):
                stats.rendered += 1
                stats.new_audio_s += outcome.seconds
            else:
                stats.failures.append((job.chunk.index, job.chunk.text, outcome))
            progress.advance(len(job.chunk.text), failed=not isinstance(outcome, ChunkRecord))
    finally:
        renderer.stop.set()
        stats.synth_wall_s = time.monotonic() - t0
        stats.retries.update(renderer.retries)
    stats.failures.sort()
    return stats


def _next_result(results: queue.Queue):
    while True:  # a timed get keeps the main thread responsive to Ctrl-C
        try:
            return results.get(timeout=0.2)
        except queue.Empty:
            continue


class _ChunkRenderer:
    """Renders one chunk with retries; shared by the worker threads."""

    def __init__(self, backend, language, work, options, progress, stop):
        self.backend, self.language, self.work = backend, language, work
        self.options, self.progress, self.stop = options, progress, stop
        self.retries: Counter = Counter()
        self._lock = threading.Lock()

    def render(self, job: Job) -> ChunkRecord | str:
        """The chunk's record once saved, or the last error if every attempt failed."""
        text, key, options = job.said, job.key, self.options
        shortest, longest = length_limits(text, options)
        redo = self.work.redo_count(key)
        error = "not attempted"
        for attempt in range(options.retries + 1):
            if self.stop.is_set():
                return "stopped"
            seed = seed_for(options.seed, key, redo, attempt)
            t0 = time.monotonic()
            try:
                rendered = self.backend.synthesize(
                    text, seed=seed, language=self.language, max_seconds=longest,
                    voice=job.chunk.voice,
                )  # fmt: skip
                seconds = len(rendered.audio) / SAMPLE_RATE
                if rendered.stop_reason == "max_frames" or seconds > longest:
                    raise Retryable(
                        "runaway", f"{seconds:.1f} s of audio, at most {longest:.1f} s expected"
                    )
                if seconds < shortest:
                    raise Retryable(
                        "truncated", f"{seconds:.1f} s of audio, at least {shortest:.1f} s expected"
                    )
            except Retryable as e:
                error = f"{e.reason}: {e}"
                if attempt < options.retries:
                    with self._lock:
                        self.retries[e.reason] += 1
                    self.progress.retried()
                    self.stop.wait(_backoff(attempt, e.retry_after, options))
                continue
            elapsed = time.monotonic() - t0
            record = ChunkRecord(
                key, text, seconds, seed, attempt + 1, elapsed, rendered.stop_reason
            )
            self.work.save(record, rendered.audio, SAMPLE_RATE)
            return record
        if not self.stop.is_set():
            self.work.bump_redo(key)  # these seeds failed: the next run draws others
        return error


def _backoff(attempt: int, retry_after: float | None, options: BookOptions) -> float:
    """Exponential backoff with jitter; a server's Retry-After wins (capped)."""
    if retry_after is not None:
        return min(retry_after, options.max_backoff_s)
    base = min(options.backoff_s * 2**attempt, options.max_backoff_s)
    return base * random.uniform(0.5, 1.0)
