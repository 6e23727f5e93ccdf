"""Bounded admission in front of a scheduler: refuse at once what could not start soon.

    slot = admission.admit()       # instant; QueueFull (with a retry estimate) when full
    slot.start()                   # its generation joined the batch
    slot.release()                 # it ended, or never started; exactly once

A request counts from the moment it is accepted until its generation ends: `rows` may generate
at once (the engine's batch) and `queue_size` more may wait; anything beyond is refused before
any expensive work.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from ownvoice.errors import QueueFull


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
            listeners = list(self._admission.listeners)
        for listener in listeners:  # outside the lock: a listener may admit
            listener()


class Admission:
    """At most `rows + queue_size` requests admitted at once; the rest get QueueFull."""

    def __init__(self, rows: int, queue_size: int, metrics=None, name: str = ""):
        self.rows = rows
        self.capacity = rows + queue_size
        self.metrics = metrics
        self.name = name
        self.lock = threading.Lock()
        self.admitted = 0
        self.running = 0
        self._avg_seconds = 2.0  # moving average of generation time, for Retry-After
        self.listeners: list[Callable[[], None]] = []  # called when a place frees (any thread)

    @property
    def queue_size(self) -> int:
        return self.capacity - self.rows

    def try_admit(self, spare: int = 0) -> Slot | None:
        """A place if one is free now with `spare` places left over, else None (not counted as
        a refusal): for work that waits for a place instead of being refused."""
        with self.lock:
            if self.admitted + spare >= self.capacity:
                return None
            self.admitted += 1
            self.update_gauges()
            return Slot(self)

    def admit(self) -> Slot:
        with self.lock:
            if self.admitted >= self.capacity:
                waiting = self.admitted - self.running
                # the time until a place is likely free: the queue ahead, run `rows` wide
                retry_after = self._avg_seconds * (waiting + 1) / self.rows
                if self.metrics:
                    self.metrics.rejected.labels("queue_full").inc()
                raise QueueFull(
                    f"server busy: {self.running} generating and {waiting} waiting "
                    f"(limits.max_batch={self.rows}, "
                    f"limits.queue_size={self.capacity - self.rows}); retry later",
                    retry_after=retry_after,
                )
            self.admitted += 1
            self.update_gauges()
        return Slot(self)

    def resize(self, rows: int) -> None:
        """The engine's real batch size, once it is known (the queue stays as configured)."""
        with self.lock:
            self.capacity += rows - self.rows
            self.rows = rows

    def record_duration(self, seconds: float) -> None:
        self._avg_seconds = 0.8 * self._avg_seconds + 0.2 * seconds

    def update_gauges(self) -> None:
        if self.metrics:
            self.metrics.inflight.labels(self.name).set(self.running)
            self.metrics.queue_depth.labels(self.name).set(self.admitted - self.running)

    @property
    def waiting(self) -> int:
        return self.admitted - self.running
