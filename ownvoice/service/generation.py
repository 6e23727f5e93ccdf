"""One admitted request on its way through a scheduler: read by the front end as it is made.

    gen = Generation(pieces, slot, deadline)   # pieces(engine) -> an iterator of Sequences
    scheduler.submit(gen)
    async for chunk in gen.chunks(): ...       # AudioChunks, as the engine's steps make them
    gen.cancel()                               # client gone: its row leaves at the next step

The engine side (the scheduler's thread) calls `emit`, `finish` and `fail`; the front end reads
`chunks()` on its event loop, or, made outside one (a thread of the audiobook tool), iterates
`chunks_blocking()`. Knows nothing about any transport.
"""

from __future__ import annotations

import asyncio
import math
import queue
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator

from ownvoice.errors import QueueTimeout
from ownvoice.service.admission import Slot

Pieces = Callable[[object], Iterator[object]]  # engine -> Sequences (engine.start(...)), in order


class _Pending:
    def __repr__(self) -> str:
        return "PENDING"


# what a pieces iterator yields when its next piece's text has not arrived yet (text streamed
# in while it is being spoken): the generation keeps its place and asks again when woken
PENDING = _Pending()


class Generation:
    def __init__(
        self,
        pieces: Pieces,
        slot: Slot,
        deadline: float,
        text=None,  # its StreamedText, when the text arrives while it is spoken
        idle_timeout_s: float = math.inf,  # that text silent this long ends it ("idle")
    ):
        self.pieces = pieces
        self.slot = slot
        self.deadline = deadline
        self.text = text
        self.idle_timeout_s = idle_timeout_s
        self.cancelled = threading.Event()
        self.started = threading.Event()
        # why it stopped early: the cancel reason | "timeout" | "idle"
        self.stop_reason: str | None = None
        self.cancel_reason = "cancelled"  # "cancelled" (client left) | "stalled" | "shutdown"
        self.t_submitted = time.monotonic()
        self.t_started: float | None = None  # when its first row joined the batch
        self.sequence = None  # the Sequence running now (scheduler thread only)
        self._iterator: Iterator | None = None
        try:
            self._loop = asyncio.get_running_loop()
            self._events = asyncio.Queue()
        except RuntimeError:  # no event loop: a plain thread reads chunks_blocking()
            self._loop = None
            self._events = queue.Queue()
        self._ended = False
        self.wake: Callable[[], None] = lambda: None  # set by the scheduler it is submitted to

    def cancel(self, reason: str = "cancelled") -> None:
        """Stop at the next step (or never start); frees the slot now if it had not started.
        The first reason given is kept."""
        if not self.cancelled.is_set():
            self.cancel_reason = reason
        self.cancelled.set()
        if not self.started.is_set():
            self.slot.release()
        self.wake()  # a generation waiting for text notices at once

    def should_stop(self) -> bool:
        if self.cancelled.is_set():
            self.stop_reason = self.cancel_reason
            return True
        if time.monotonic() > self.deadline:
            self.stop_reason = "timeout"
            return True
        if self.text is not None and self.text.idle_seconds > self.idle_timeout_s:
            self.stop_reason = "idle"
            return True
        return False

    # -- scheduler thread side ----------------------------------------------------------------

    def begin(self) -> None:
        self.started.set()
        self.t_started = time.monotonic()
        self.slot.start()

    def next_sequence(self, engine):
        """The next piece's Sequence (the first call resolves the voice), None at the end, or
        PENDING while its text is still being written."""
        if self._iterator is None:
            self._iterator = iter(self.pieces(engine))
        item = next(self._iterator, None)
        self.sequence = None if item is PENDING else item
        if self.sequence is not None:
            self.sequence.tag = self
        return item

    def emit(self, chunk) -> None:
        self._post("chunk", chunk)

    def finish(self) -> None:
        self._end("done", None)

    def fail(self, exc: BaseException) -> None:
        self._end("error", exc)

    def end_unstarted(self) -> None:
        """Cancelled or timed out while waiting for a row."""
        if self.stop_reason == "timeout":
            self.fail(QueueTimeout("timed out waiting in the queue (limits.request_timeout_s)"))
        else:
            self.finish()

    def _end(self, kind: str, payload) -> None:
        if self._ended:
            return
        self._ended = True
        self.sequence = None
        # the place first: a client that hears the end and at once asks again must find it free
        self.slot.release()
        self._post(kind, payload)

    def _post(self, kind: str, payload) -> None:
        if self._loop is None:
            self._events.put((kind, payload))
            return
        try:
            self._loop.call_soon_threadsafe(self._events.put_nowait, (kind, payload))
        except RuntimeError:  # the event loop is closed: the front end is shutting down
            pass

    # -- front end side -----------------------------------------------------------------------

    async def chunks(self) -> AsyncIterator:
        """AudioChunks until the generation ends; re-raises what failed it."""
        while True:
            kind, payload = await self._events.get()
            if kind == "chunk":
                yield payload
            elif kind == "done":
                return
            else:
                raise payload

    def chunks_blocking(self) -> Iterator:
        """`chunks()` for a generation made outside an event loop."""
        while True:
            kind, payload = self._events.get()
            if kind == "chunk":
                yield payload
            elif kind == "done":
                return
            else:
                raise payload
