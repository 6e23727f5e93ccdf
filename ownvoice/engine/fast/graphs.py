"""Capture a phase of the frame loop as a CUDA graph once, then replay it.

Each phase is a function that reads and writes only preallocated buffers. The first call for a
key warms the function up on a side stream (lazy library initialisation must not happen during
capture), restores the buffers it changed, captures it, and replays it once; later calls replay.
Disabled (CPU, or `use_cuda_graphs: false`), `run` just calls the function.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import torch

log = logging.getLogger(__name__)


class GraphRunner:
    def __init__(self, enabled: bool, buffers: Callable[[], list[torch.Tensor]] | None = None):
        self.enabled = enabled
        # the tensors a phase may change, saved and restored around the warm-up run
        self.buffers = buffers or (lambda: [])
        self.graphs: dict[str, torch.cuda.CUDAGraph] = {}

    def reset(self) -> None:
        self.graphs.clear()

    def run(self, key: str, fn: Callable[[], None]) -> None:
        if not self.enabled:
            fn()
            return
        graph = self.graphs.get(key)
        if graph is None:
            graph = self._capture(fn)
            self.graphs[key] = graph
            log.debug("captured CUDA graph %s", key)
        graph.replay()

    def _capture(self, fn: Callable[[], None]) -> torch.cuda.CUDAGraph:
        saved = [b.clone() for b in self.buffers()]
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            fn()
        torch.cuda.current_stream().wait_stream(side)
        for b, copy in zip(self.buffers(), saved, strict=True):
            b.copy_(copy)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            fn()
        return graph
