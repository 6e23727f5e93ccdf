"""Optional per-phase timing of the frame loop, for `ownvoice bench` (off in normal use)."""

from __future__ import annotations

import time
from collections import defaultdict
from contextlib import contextmanager

import torch


class PhaseTimer:
    """Accumulates wall time per phase name. On CUDA it synchronizes around each phase, which
    costs some overlap: use it for the split, not for end-to-end numbers."""

    def __init__(self, device: torch.device):
        self.totals: dict[str, float] = defaultdict(float)
        self.counts: dict[str, int] = defaultdict(int)
        self._sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)

    @contextmanager
    def __call__(self, name: str):
        self._sync()
        t0 = time.perf_counter()
        yield
        self._sync()
        self.totals[name] += time.perf_counter() - t0
        self.counts[name] += 1
