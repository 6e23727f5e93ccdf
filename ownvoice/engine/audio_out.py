"""From frames to audio chunks, in the order listeners need them.

The frame loop hands every sequence its frames (`keep`); `ready()` decodes the chunks now due,
first those of sequences that have no audio yet, so a request that just joined hears its first
chunk without waiting for the others' decoding. A caller may stop reading early: what it did
not read stays and comes out of a later `ready()`.

With a decode worker (decode_worker.py), a playing sequence's later chunks are handed to the
worker when due and decoded while the next steps generate; `ready()` gives what the worker has
finished. With `overlap_from` = 2 that happens only while two or more sequences play: a stream
alone is decoded in line, on every thread. A sequence that ended still has all of its audio out
by the end of the `ready()` that follows its last frame, as without the worker: callers that
step while rows run lose nothing.

A decoder that fails ends its own sequence (`Sequence.fail`: an empty last chunk with
stop_reason "error"); the other sequences' audio goes on as if nothing happened.
"""

from __future__ import annotations

from collections.abc import Iterator

from ownvoice.engine.decode_worker import DecodeWorker
from ownvoice.engine.results import AudioChunk
from ownvoice.engine.sequence import Sequence


class AudioOut:
    def __init__(self, worker: DecodeWorker | None = None, overlap_from: int = 1):
        self.worker = worker
        self.overlap_from = overlap_from  # playing sequences from which the worker decodes
        self._audio: list[Sequence] = []  # sequences with frames (or an end) not yet decoded

    def keep(self, seq: Sequence, frame, stop_reason: str | None) -> None:
        """A sequence's new frame and/or its end."""
        seq.add(frame, stop_reason)
        if seq not in self._audio and not seq.finished:
            self._audio.append(seq)

    @property
    def first_chunks_due(self) -> bool:
        """Whether a sequence that has no audio yet has its first chunk due."""
        return any(seq.due() and not seq.started_audio for seq in self._audio)

    @property
    def pending(self) -> bool:
        """Frames or chunks wait to come out."""
        return bool(self._audio) or (self.worker is not None and self.worker.pending)

    def ready(self, generating: bool) -> Iterator[tuple[Sequence, AudioChunk]]:
        """The chunks due now, decoded as read, sequences without audio first. `generating`:
        some row will step again (otherwise the worker's chunks are waited for)."""
        if self._overlapping():
            yield from self._ready_overlapped(generating)
            return
        if self.worker is not None:  # what it was handed while more sequences played, first
            yield from self.worker.results(wait=True)
        for seq in sorted(self._audio, key=lambda s: s.started_audio):  # stable: newcomers first
            while seq.due():
                chunk = _next_chunk(seq)
                if seq.finished:
                    self._audio.remove(seq)
                yield seq, chunk

    def _overlapping(self) -> bool:
        if self.worker is None:
            return False
        playing = sum(1 for seq in self._audio if seq.started_audio)
        return playing >= self.overlap_from

    def _ready_overlapped(self, generating: bool) -> Iterator[tuple[Sequence, AudioChunk]]:
        worker = self.worker
        # the newcomers' first chunks, decoded here at once
        for seq in [s for s in self._audio if not s.started_audio and s.due()]:
            with worker.leftover():
                chunk = _next_chunk(seq)
            if seq.finished:
                self._audio.remove(seq)
            yield seq, chunk
        # what the worker decoded meanwhile
        yield from worker.results(wait=not generating)
        for seq in list(self._audio):
            while seq.started_audio and seq.due():
                if seq.done:  # what the worker has first, then the rest, here
                    yield from worker.results(wait=True)
                    with worker.leftover():
                        chunk = _next_chunk(seq)
                    if seq.finished:
                        self._audio.remove(seq)
                    yield seq, chunk
                else:  # decoded while the next step generates
                    worker.submit(seq, seq.take_chunk())

    def cancel_all(self) -> list[tuple[Sequence, AudioChunk]]:
        """Every chunk not read yet, down to each sequence's last (the sequences have ended)."""
        out = self.worker.drain() if self.worker is not None else []
        for seq in self._audio:
            while not seq.finished:
                out.append((seq, _next_chunk(seq)))
        self._audio = []
        return out


def _next_chunk(seq: Sequence) -> AudioChunk:
    """The sequence's next chunk; if its decoder fails, its end with that error instead."""
    try:
        return seq.chunk()
    except Exception as e:
        seq.fail(e)
        return seq.chunk()  # empty: decodes nothing
