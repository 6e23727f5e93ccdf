"""Weights for the CPU decode loop in one block of 2 MiB pages.

Every frame streams the talker's and the code predictor's weights from memory (~16 passes over
GBs). With ordinary 4 KiB pages the TLB misses on every page; on Linux, a block advised with
MADV_HUGEPAGE (transparent huge pages in "madvise" mode, the common default) is served with
2 MiB pages, and the same kernels stream ~30% faster. Elsewhere it is an ordinary allocation.
"""

from __future__ import annotations

import mmap
import os

import torch

ALIGN = 64


class Arena:
    def __init__(self, tensors: list[torch.Tensor]):
        """Room for `tensors` (copied in later with `take`)."""
        size = sum(_padded(t.numel() * t.element_size()) for t in tensors) + ALIGN
        self._map = None
        try:
            self._map = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
            if hasattr(mmap, "MADV_HUGEPAGE") and os.environ.get("OWNVOICE_NO_HUGEPAGES") != "1":
                self._map.madvise(mmap.MADV_HUGEPAGE)
            self.bytes = torch.frombuffer(self._map, dtype=torch.uint8)
        except (OSError, ValueError, AttributeError):
            self.bytes = torch.empty(size, dtype=torch.uint8)
        self.offset = 0

    def take(self, t: torch.Tensor) -> torch.Tensor:
        """A copy of `t` inside the arena (same shape and dtype, contiguous)."""
        n = t.numel() * t.element_size()
        start = _padded(self.offset)
        out = self.bytes[start : start + n].view(t.dtype).view(t.shape)
        out.copy_(t)
        self.offset = start + n
        return out


def _padded(n: int) -> int:
    return -(-n // ALIGN) * ALIGN
