"""Generation off the event loop: one thread owns each engine; bounded admission in front.

    slot = admission.admit()                      # instant; QueueFull (429) when full
    job = Job(work, slot, deadline, gate)         # work(engine, emit, should_stop), on the thread
    worker.submit(job)
    async for chunk in job.chunks(): ...          # AudioChunks, as the thread emits them
    job.cancel()                                  # client gone: stops between frames

Admission counts requests from the moment they are accepted until their generation ends:
`concurrency` may generate at once (a semaphore shared by all engine threads) and `queue_size`
more may wait; anything beyond is refused at once, before any expensive work. Knows nothing
about HTTP, formats or voices.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import queue
import threading
import time
from collections.abc import AsyncIterator, Callable

from ownvoice.server.errors import (
    QueueFull,
    QueueTimeout,
    ServiceUnavailable,
    ShuttingDown,
    is_out_of_memory,
)
from ownvoice.server.metrics import ServerMetrics

log = logging.getLogger("ownvoice.server")

Work = Callable[[object, Callable[[object], None], Callable[[], bool]], None]


class Slot:
    """One admitted request; released exactly once, when its generation ends or never starts."""

    def __init__(self, admission: Admission):
        self._admission = admission
        self._running = False
        self._released = False
        self._t_start = 0.0

    def start(self) -> None:
        with self._admission.lock:
            if not self._released and not self._running:
                self._running = True
                self._t_start = time.monotonic()
                self._admission.running += 1
                self._admission.update_gauges()

    def release(self) -> None:
        with self._admission.lock:
            if self._released:
                return
            self._released = True
            self._admission.admitted -= 1
            if self._running:
                self._admission.running -= 1
                self._admission.record_duration(time.monotonic() - self._t_start)
            self._admission.update_gauges()


class Admission:
    """At most `concurrency + queue_size` requests admitted at once; the rest get 429."""

    def __init__(self, concurrency: int, queue_size: int, metrics: ServerMetrics | None = None):
        self.concurrency = concurrency
        self.capacity = concurrency + queue_size
        self.metrics = metrics
        self.lock = threading.Lock()
        self.admitted = 0
        self.running = 0
        self._avg_seconds = 2.0  # moving average of generation time, for Retry-After

    def admit(self) -> Slot:
        with self.lock:
            if self.admitted >= self.capacity:
                waiting = self.admitted - self.running
                # the time until a place is likely free: the queue ahead, run `concurrency` wide
                retry_after = self._avg_seconds * (waiting + 1) / self.concurrency
                if self.metrics:
                    self.metrics.rejected.labels("queue_full").inc()
                raise QueueFull(
                    f"server busy: {self.running} generating and {waiting} waiting "
                    f"(limits.concurrency={self.concurrency}, "
                    f"limits.queue_size={self.capacity - self.concurrency}); retry later",
                    retry_after=retry_after,
                )
            self.admitted += 1
            self.update_gauges()
        return Slot(self)

    def record_duration(self, seconds: float) -> None:
        self._avg_seconds = 0.8 * self._avg_seconds + 0.2 * seconds

    def update_gauges(self) -> None:
        if self.metrics:
            self.metrics.inflight.set(self.running)
            self.metrics.queue_depth.set(self.admitted - self.running)

    @property
    def waiting(self) -> int:
        return self.admitted - self.running


class Job:
    """One generation, run on an engine thread, read as an async stream of events."""

    def __init__(self, work: Work, slot: Slot, deadline: float, gate: threading.Semaphore):
        self.work = work
        self.slot = slot
        self.deadline = deadline
        self.gate = gate
        self.cancelled = threading.Event()
        self.started = threading.Event()
        self.stop_reason: str | None = None  # why it stopped early: the cancel reason | "timeout"
        self.cancel_reason = "cancelled"  # "cancelled" (client left) | "stalled" | "shutdown"
        self.t_started: float | None = None  # when generation began (after queueing)
        self._loop = asyncio.get_running_loop()
        self._events: asyncio.Queue = asyncio.Queue()

    def cancel(self, reason: str = "cancelled") -> None:
        """Stop between frames (or never start); frees the slot now if it had not started.
        The first reason given is kept."""
        if not self.cancelled.is_set():
            self.cancel_reason = reason
        self.cancelled.set()
        if not self.started.is_set():
            self.slot.release()

    def should_stop(self) -> bool:
        if self.cancelled.is_set():
            self.stop_reason = self.cancel_reason
            return True
        if time.monotonic() > self.deadline:
            self.stop_reason = "timeout"
            return True
        return False

    # -- engine thread side -------------------------------------------------------------------

    def execute(self, engine) -> None:
        try:
            while not self.gate.acquire(timeout=0.05):  # wait for a concurrency slot
                if self.should_stop():
                    return self._end_unstarted()
            try:
                if self.should_stop():
                    return self._end_unstarted()
                self.started.set()
                self.t_started = time.monotonic()
                self.slot.start()
                self.work(engine, lambda chunk: self._post("chunk", chunk), self.should_stop)
                self._post("done", None)
            finally:
                self.gate.release()
        except BaseException as e:  # every failure reaches the request, never the thread
            if is_out_of_memory(e):
                _free_device_memory()
            self._post("error", e)
        finally:
            self.slot.release()

    def fail(self, exc: BaseException) -> None:
        self._post("error", exc)
        self.slot.release()

    def _end_unstarted(self) -> None:
        if self.stop_reason == "timeout":
            self._post(
                "error", QueueTimeout("timed out waiting in the queue (limits.request_timeout_s)")
            )
        else:
            self._post("done", None)

    def _post(self, kind: str, payload) -> None:
        try:
            self._loop.call_soon_threadsafe(self._events.put_nowait, (kind, payload))
        except RuntimeError:  # the event loop is closed: the server is shutting down
            pass

    # -- event loop side ----------------------------------------------------------------------

    async def chunks(self) -> AsyncIterator:
        """AudioChunks until the work ends; re-raises what the work raised."""
        while True:
            kind, payload = await self._events.get()
            if kind == "chunk":
                yield payload
            elif kind == "done":
                return
            else:
                raise payload


class EngineWorker:
    """A thread that loads, warms and runs one engine; everything touching it runs here."""

    def __init__(
        self,
        name: str,
        loader: Callable[[], object] | None,
        engine=None,
        keepalive_s: float = 0.0,
    ):
        self.name = name
        self.engine = engine
        self.state = "not loaded" if engine is None else "loaded"
        self.error: BaseException | None = None
        self.warmup_seconds: float | None = None
        self._loader = loader
        self._keepalive_s = keepalive_s
        self._queue: queue.Queue = queue.Queue()
        self._current: Job | None = None  # the job running now
        self._closing = False
        self._thread = threading.Thread(
            target=self._run, name=f"ownvoice-engine-{name}", daemon=True
        )

    @property
    def ready(self) -> bool:
        return self.state == "ready"

    def start(self, load_now: bool) -> concurrent.futures.Future:
        """Start the thread; with `load_now`, the future completes once loaded and warmed."""
        self._thread.start()
        if load_now:
            return self.call(lambda engine: None)
        done: concurrent.futures.Future = concurrent.futures.Future()
        done.set_result(None)
        return done

    def submit(self, job: Job) -> None:
        self._queue.put(job)

    def call(self, fn: Callable[[object], object]) -> concurrent.futures.Future:
        """Run fn(engine) on this thread (loading the engine first if needed)."""
        future: concurrent.futures.Future = concurrent.futures.Future()
        self._queue.put((fn, future))
        return future

    def stop(self, timeout: float = 5.0) -> None:
        """End the thread: the running job stops between frames, queued ones never start."""
        self._closing = True
        current = self._current
        if current is not None:
            current.cancel("shutdown")
        self._queue.put(None)
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            try:
                item = self._queue.get(timeout=self._keepalive_s or None)
            except queue.Empty:
                self._keepalive()
                continue
            if item is None:
                return
            if isinstance(item, Job):
                if self._closing:
                    item.cancel("shutdown")
                    item.fail(ShuttingDown("the server is shutting down"))
                    continue
                try:
                    engine = self._ensure_loaded()
                except BaseException as e:
                    item.fail(e)
                    continue
                self._current = item
                if self._closing:  # stop() ran between the check above and now
                    item.cancel("shutdown")
                try:
                    item.execute(engine)
                finally:
                    self._current = None
            else:
                fn, future = item
                if not future.set_running_or_notify_cancel():
                    continue
                try:
                    future.set_result(fn(self._ensure_loaded()))
                except BaseException as e:
                    future.set_exception(e)

    def _ensure_loaded(self):
        if self.state == "ready":
            return self.engine
        try:
            if self.engine is None:
                self.state = "loading"
                t0 = time.monotonic()
                self.engine = self._loader()
                log.info("model %s loaded in %.1f s", self.name, time.monotonic() - t0)
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
        if self.state != "ready" or not str(getattr(self.engine, "device", "")).startswith("cuda"):
            return
        import torch

        x = torch.ones(64, 64, device=self.engine.device)
        (x @ x).sum().item()


def _free_device_memory() -> None:
    """After an out-of-memory error, hand the cached blocks back so the next request can fit."""
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except Exception:  # freeing memory must never fail the request a second time
        pass
