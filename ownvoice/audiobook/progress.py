"""A one-line progress bar with an ETA on stderr, weighted by characters (a long chunk counts
for more than a short one). On a terminal it redraws in place; elsewhere (a log file, CI) it
prints a plain line at most every `interval` seconds. Knows nothing about what is being rendered.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO

_WIDTH = 24


def _clock(seconds: float) -> str:
    seconds = int(max(0, seconds))
    h, rest = divmod(seconds, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60}:{rest % 60:02d}"


class Progress:
    def __init__(
        self,
        total_chunks: int,
        total_chars: int,
        *,
        stream: TextIO | None = None,
        enabled: bool = True,
        interval: float = 5.0,
    ):
        self.total_chunks, self.total_chars = total_chunks, max(total_chars, 1)
        self.done_chunks = self.done_chars = self.retries = self.failures = 0
        self.stream = stream or sys.stderr
        self.enabled = enabled and total_chunks > 0
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.interval = interval
        self._start = time.monotonic()
        self._last = -float("inf")
        self._lock = threading.Lock()  # retries are counted from worker threads

    def advance(self, chars: int, *, failed: bool = False) -> None:
        with self._lock:
            self.done_chunks += 1
            self.done_chars += chars
            self.failures += failed
            self._draw()

    def retried(self) -> None:
        with self._lock:
            self.retries += 1
            self._draw()

    def line(self) -> str:
        elapsed = time.monotonic() - self._start
        frac = min(1.0, self.done_chars / self.total_chars)
        bar = "#" * round(frac * _WIDTH) + "." * (_WIDTH - round(frac * _WIDTH))
        eta = _clock(elapsed / frac * (1 - frac)) if frac > 0 else "?"
        text = (
            f"[{bar}] {self.done_chunks}/{self.total_chunks} chunks {frac:4.0%}  "
            f"{_clock(elapsed)} elapsed, ETA {eta}"
        )
        if self.retries:
            text += f", {self.retries} retries"
        if self.failures:
            text += f", {self.failures} failed"
        return text

    def _draw(self, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if self.tty:
            self.stream.write("\r" + self.line() + "\x1b[K")
        elif force or now - self._last >= self.interval:
            self.stream.write(self.line() + "\n")
            self._last = now
        else:
            return
        self.stream.flush()

    def close(self) -> None:
        with self._lock:
            self._draw(force=True)
            if self.enabled and self.tty:
                self.stream.write("\n")
                self.stream.flush()
