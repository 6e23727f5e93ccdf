"""One thread per engine: it loads and warms the engine, then runs every admitted generation
through the engine's batch.

Between two steps the thread takes what arrived (generations, calls), drops waiting
generations that were cancelled or timed out, and lets waiting generations join while the batch
has free rows (joining prefills the prompt; a clone's first piece encodes its voice here). Each
step advances every row by one frame; each row's audio goes to its own generation. A row leaves
at the step after its generation was cancelled or timed out (so within one frame), or at its
end, when the generation's next text piece takes its place. A generation whose next piece is
still being written (text streamed in, service/textfeed.py) leaves the batch and waits, keeping
its admission slot, until `wake()` says its text or its cancellation arrived. `call(fn)` runs
fn(engine) on the thread between steps (encoding a voice for the library, listing speakers).
"""

from __future__ import annotations

import collections
import concurrent.futures
import logging
import queue
import threading
import time
from collections.abc import Callable

from ownvoice.errors import (
    ServiceUnavailable,
    ShuttingDown,
    free_device_memory,
    is_out_of_memory,
)
from ownvoice.service.admission import Admission
from ownvoice.service.engine_protocol import SpeechEngine
from ownvoice.service.generation import PENDING, Generation

log = logging.getLogger("ownvoice.service")


class Scheduler:
    def __init__(
        self,
        name: str,
        loader: Callable[[], object] | None,
        engine=None,
        max_batch: int = 1,
        queue_size: int = 8,
        keepalive_s: float = 0.0,
        metrics=None,
        warm: bool = True,  # False: an engine given is used as it is, without a warm-up
    ):
        self.name = name
        self.engine: SpeechEngine | None = engine
        self.state = "not loaded" if engine is None else ("loaded" if warm else "ready")
        self.error: BaseException | None = None
        self.warmup_seconds: float | None = None
        self.metrics = metrics
        self.rows = max_batch if engine is None else min(max_batch, engine.max_batch)
        self.admission = Admission(self.rows, queue_size, metrics, name)
        self._loader = loader
        self._keepalive_s = keepalive_s
        self._inbox: queue.Queue = queue.Queue()
        self._waiting: collections.deque[Generation] = collections.deque()
        self._active: list[Generation] = []  # generations with a row in the batch
        self._parked: list[Generation] = []  # started, waiting for their next piece's text
        self._deferred = False  # the last step left its audio for later (see _step)
        self.steps = 0  # engine steps run, and the rows they advanced (how full the batch was)
        self.row_steps = 0
        self._closing = False
        self._thread = threading.Thread(
            target=self._run, name=f"ownvoice-engine-{name}", daemon=True
        )

    @property
    def ready(self) -> bool:
        return self.state == "ready"

    @property
    def occupancy(self) -> int:
        """Rows in the batch now."""
        return len(self._active)

    # -- what front ends call -----------------------------------------------------------------

    def start(self, load_now: bool) -> concurrent.futures.Future:
        """Start the thread; with `load_now`, the future completes once loaded and warmed."""
        self._thread.start()
        if load_now:
            return self.call(lambda engine: None)
        done: concurrent.futures.Future = concurrent.futures.Future()
        done.set_result(None)
        return done

    def submit(self, gen: Generation) -> None:
        gen.wake = self.wake
        self._inbox.put(gen)

    def wake(self) -> None:
        """Look at parked generations again (text arrived, or one was cancelled)."""
        self._inbox.put(_WAKE)

    def call(self, fn: Callable[[object], object]) -> concurrent.futures.Future:
        """Run fn(engine) on this thread between steps (loading the engine first if needed)."""
        future: concurrent.futures.Future = concurrent.futures.Future()
        self._inbox.put((fn, future))
        return future

    def stop(self, timeout: float = 5.0) -> None:
        """End the thread: running rows stop at the next step, waiting ones never start."""
        self._closing = True
        self._inbox.put(None)
        if self._thread.is_alive():
            self._thread.join(timeout)

    # -- the thread ----------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            try:
                idle = not self._active or self._waiting_for_text()
                if not self._take_inbox(block=idle and not self._waiting):
                    self._shut_down()
                    return
                self._resume_parked()
                self._admit()
                if self._active:
                    self._step()
            except Exception as e:  # a bug here must fail requests, not leave them hanging
                log.exception("engine %s: scheduler error", self.name)
                for gen in [*self._waiting, *self._active, *self._parked]:
                    self._end(gen, error=e)
                self._waiting.clear()

    def _take_inbox(self, block: bool) -> bool:
        """Handle what arrived; wait for something when idle. False once stop() was called."""
        while True:
            try:
                if block:
                    # parked generations are woken by their text, but their deadline is not
                    polled = self._parked or self._active
                    timeout = self._keepalive_s or (_PARKED_POLL_S if polled else None)
                    item = self._inbox.get(timeout=timeout)
                    block = False
                else:
                    item = self._inbox.get_nowait()
            except queue.Empty:
                if block:  # idle for a whole keep-alive interval
                    self._keepalive()
                    if self._parked or self._active:
                        return True
                    continue
                return True
            if item is None:
                return False
            if item is _WAKE:
                continue
            if isinstance(item, Generation):
                if self._closing:
                    item.cancel("shutdown")
                    item.fail(ShuttingDown("the server is shutting down"))
                else:
                    self._waiting.append(item)
                continue
            fn, future = item
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(self._ensure_loaded()))
                except BaseException as e:
                    future.set_exception(e)

    def _waiting_for_text(self) -> bool:
        """Every row of the batch waits for its text (the last step advanced none)."""
        return bool(getattr(self.engine, "waiting_for_text", False))

    def _admit(self) -> None:
        for gen in list(self._waiting):
            if gen.should_stop():
                self._waiting.remove(gen)
                gen.end_unstarted()
        if not self._waiting:
            return
        try:
            engine = self._ensure_loaded()
        except BaseException as e:
            while self._waiting:
                self._waiting.popleft().fail(e)
            return
        while self._waiting and len(engine.running) < self.rows:
            gen = self._waiting.popleft()
            gen.begin()
            if self.metrics:
                self.metrics.queue_wait.observe(gen.t_started - gen.t_submitted)
            self._next_piece(engine, gen)

    def _resume_parked(self) -> None:
        """Parked generations whose text arrived take a row again; cancelled ones end."""
        for gen in list(self._parked):
            if gen.should_stop():
                self._end(gen)
            elif len(self.engine.running) < self.rows:
                self._parked.remove(gen)
                self._next_piece(self.engine, gen)

    def _next_piece(self, engine, gen: Generation) -> None:
        """Join the generation's next piece (its first chunk goes out at once); park it when
        that piece's text is not there yet; end the generation when there is none (or it
        failed)."""
        try:
            seq = gen.next_sequence(engine)
            if seq is not None and seq is not PENDING:
                engine.join(seq)
        except BaseException as e:
            self._end(gen, error=e)
            return
        if seq is None:
            self._end(gen)
            return
        if seq is PENDING:
            if gen in self._active:
                self._active.remove(gen)
            self._parked.append(gen)
            return
        if gen not in self._active:
            self._active.append(gen)
        self._send(engine, engine.ready_chunks(), first_only=True)

    def _step(self) -> None:
        engine = self.engine
        for gen in self._active:
            if gen.should_stop() and gen.sequence is not None:
                gen.sequence.cancel()
        if self.metrics:
            if engine.running:  # (a step with no row only collects audio still being decoded)
                self.metrics.batch_rows.labels(self.name).observe(len(engine.running))
            self.metrics.occupancy.labels(self.name).set(len(engine.running))
        self.steps += 1
        self.row_steps += len(engine.running)
        try:
            chunks = engine.step()
        except BaseException as e:  # a failed step fails every row in it, never the thread
            self._fail_all(engine, e)
            return
        allow_defer = not self._deferred
        self._deferred = False
        self._send(engine, chunks, allow_defer=allow_defer)

    def _send(self, engine, chunks, first_only: bool = False, allow_defer: bool = False) -> None:
        """Hand chunks to their generations as they are decoded (newcomers' first chunks come
        first). With `first_only`, stop when only playing rows' chunks are left (they stay
        pending in the engine). With `allow_defer`, do so as soon as a request arrives that
        could join: the rows that already play get the rest of their audio after the next
        step (never twice in a row), and the newcomer's first audio does not wait for it.
        A finished piece then makes way for its generation's next; a piece that failed on its
        own (its decoder, its cache: stop_reason "error") ends its generation with that error,
        and the other rows go on."""
        ended: list = []  # Sequences whose last chunk went out
        try:
            chunks = iter(chunks)
            while True:
                if not engine.first_chunks_due and (
                    first_only or (allow_defer and self._arrivals(engine))
                ):
                    self._deferred = not first_only
                    break
                item = next(chunks, None)
                if item is None:
                    break
                seq, chunk = item
                seq.tag.emit(chunk)
                if chunk.is_last:
                    ended.append(seq)
        except BaseException as e:
            self._fail_all(engine, e)
            return
        for seq in ended:
            gen = seq.tag
            if seq.error is not None:
                self._end(gen, error=seq.error)
            elif seq.stop_reason in ("eos", "max_frames") and not gen.should_stop():
                self._next_piece(engine, gen)
            else:
                self._end(gen)

    def _fail_all(self, engine, e: BaseException) -> None:
        log.error("engine %s: step failed with %d rows: %s", self.name, len(self._active), e)
        try:
            engine.cancel_all()
        except BaseException:
            pass
        for gen in list(self._active):
            self._end(gen, error=e)

    def _arrivals(self, engine) -> bool:
        """A request waits that could join now."""
        waiting = bool(self._waiting) or not self._inbox.empty()
        return waiting and len(engine.running) < self.rows

    def _end(self, gen: Generation, error: BaseException | None = None) -> None:
        if gen in self._active:
            self._active.remove(gen)
        if gen in self._parked:
            self._parked.remove(gen)
        if gen.sequence is not None and gen.sequence.slot is not None:
            gen.sequence.cancel()  # still in the batch (a failed next piece): leaves next step
        if error is None:
            gen.finish()
        else:
            if is_out_of_memory(error):
                free_device_memory()
            gen.fail(error)
        if self.metrics:
            self.metrics.occupancy.labels(self.name).set(len(self._active))

    def _shut_down(self) -> None:
        for gen in list(self._waiting):
            gen.cancel("shutdown")
            gen.fail(ShuttingDown("the server is shutting down"))
        self._waiting.clear()
        for gen in list(self._parked):
            gen.cancel("shutdown")
            gen.should_stop()
            self._end(gen)
        if self._active and self.engine is not None:
            for gen in self._active:
                gen.cancel("shutdown")
                gen.should_stop()
            try:
                for seq, chunk in self.engine.cancel_all():
                    seq.tag.emit(chunk)
            except BaseException:
                pass
            for gen in list(self._active):
                self._end(gen)

    def _ensure_loaded(self):
        if self.state == "ready":
            return self.engine
        try:
            if self.engine is None:
                self.state = "loading"
                t0 = time.monotonic()
                self.engine = self._loader()
                log.info("model %s loaded in %.1f s", self.name, time.monotonic() - t0)
            rows = min(self.rows, self.engine.max_batch)
            if rows != self.rows:
                self.admission.resize(rows)
                self.rows = rows
            self.state = "warming up"
            self.warmup_seconds = float(self.engine.warmup() or 0.0)
            self.state = "ready"
            self.error = None
            return self.engine
        except BaseException as e:
            self.state, self.error = "failed", e
            raise ServiceUnavailable(f"model {self.name!r} is unavailable: {e}") from e

    def _keepalive(self) -> None:
        """A tiny GPU op when idle, so AMD/NVIDIA power management keeps clocks up."""
        if self.state != "ready" or not str(self.engine.device).startswith("cuda"):
            return
        import torch

        x = torch.ones(64, 64, device=self.engine.device)
        (x @ x).sum().item()


_WAKE = object()  # an inbox item that only wakes the thread
_PARKED_POLL_S = 1.0  # how often parked generations' deadlines are checked when nothing else runs
