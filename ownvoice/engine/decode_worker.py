"""Decoding audio on a worker thread while the next frame generates (CPU).

On a CPU, generating a frame is bound by reading the weights and gains little from a second
core, while the speech decoder is arithmetic and gains almost all of it. Measured on 2 cores
(int4 weights): generation on one thread took 56 ms per frame and the decoder on the other 56,
both at once; one after the other on both cores they took 75. So with
`EngineConfig.overlap_decoder` the chunks of rows that already play are decoded here, on
`threads` of the engine's threads, while the engine's thread generates the next frame on the
rest (`leftover()`). A newcomer's first chunk is decoded at once on the engine's thread, so
its first audio never waits for the worker.

One thread, first in first out: a sequence's decoder carries state from chunk to chunk, so its
chunks are decoded in the order they were taken. The kernels let go of the GIL while they run
(tests/engine/test_kernel_gil.py), which is what lets the two threads run at once.
"""

from __future__ import annotations

import collections
import concurrent.futures
import logging
from collections.abc import Iterator
from contextlib import contextmanager

import torch

from ownvoice.engine.results import AudioChunk
from ownvoice.engine.sequence import DueChunk, Sequence

log = logging.getLogger(__name__)


def decode_worker(
    config, device: str, threads: int, kernels: bool
) -> tuple[DecodeWorker | None, int]:
    """An engine's decode worker as its EngineConfig asks (None: decode in line), and from how
    many playing sequences on it is used. `kernels`: the engine runs on our CPU kernels."""
    want = config.overlap_decoder
    possible = device == "cpu" and threads >= 2
    if want and not possible:
        log.warning(
            "overlap_decoder needs the CPU and at least 2 threads (%s, %d threads): off",
            device, threads,
        )  # fmt: skip
    from_rows = 1
    if want is None:  # where it was measured to pay (README, "Speed")
        want = kernels
        # float32 weights: a stream alone lost ~5 % on an Intel VM (gained 8 % on an AMD one);
        # a batch of 8 gained 10 % and 4 % per step, its late arrival's first audio ~15 % later
        from_rows = 1 if config.quantize is not None else 2
    if not (want and possible):
        return None, from_rows
    return DecodeWorker(threads // 2, threads), from_rows


class DecodeWorker:
    def __init__(self, threads: int, total: int):
        """Decode on `threads` of the engine's `total` threads."""
        self.threads, self.total = threads, total
        self._pool = concurrent.futures.ThreadPoolExecutor(
            1, thread_name_prefix="ownvoice-decode", initializer=set_threads, initargs=(threads,)
        )
        self._jobs: collections.deque[tuple[Sequence, concurrent.futures.Future]] = (
            collections.deque()
        )

    @contextmanager
    def leftover(self):
        """Computing on the engine's thread: on the threads the worker leaves while it decodes,
        on all of them otherwise."""
        set_threads(self.total - self.threads * self.busy)
        try:
            yield
        finally:
            set_threads(self.total)

    @property
    def busy(self) -> bool:
        """A chunk is being decoded, or waits to be."""
        return any(not future.done() for _, future in self._jobs)

    @property
    def pending(self) -> bool:
        """Chunks were handed in whose audio was not read yet."""
        return bool(self._jobs)

    def submit(self, seq: Sequence, due: DueChunk) -> None:
        """Hand in a sequence's next chunk. Waits first while that sequence has a chunk still
        being decoded, so a decoder slower than generation holds the loop back instead of
        letting the audio fall further and further behind."""
        for other, future in self._jobs:
            if other is seq:
                concurrent.futures.wait([future])
        self._jobs.append((seq, self._pool.submit(seq.decode, due)))

    def results(self, wait: bool = False) -> Iterator[tuple[Sequence, AudioChunk]]:
        """The decoded chunks in the order they were handed in; those done now, or with `wait`
        all of them. A caller may stop reading early: the rest stays for the next call.
        A chunk whose decoding failed ends its sequence with that error (`Sequence.fail`; its
        chunks handed in after it are dropped), and its last chunk comes from the engine's
        thread as usual."""
        while self._jobs and (wait or self._jobs[0][1].done()):
            seq, future = self._jobs.popleft()
            try:
                chunk = future.result()
            except Exception as e:
                if seq.error is None:
                    seq.fail(e)
                continue
            if seq.error is None:
                yield seq, chunk

    def drain(self) -> list[tuple[Sequence, AudioChunk]]:
        """Every chunk handed in, once decoded; a chunk whose decoding failed is left out (for
        cancelling: the rows end anyway)."""
        out = []
        while self._jobs:
            seq, future = self._jobs.popleft()
            try:
                out.append((seq, future.result()))
            except Exception:
                log.exception("decoding a chunk failed while the batch was cancelled")
        return out

    def close(self) -> None:
        self.drain()
        self._pool.shutdown(wait=True)


def set_threads(count: int) -> None:
    """Set the calling thread's CPU threads (torch's count is per thread), for torch's ops and
    for our kernels, whose first call on a thread would otherwise reset the count to the one last
    set on any thread (cpu_ops.cpp `set_num_threads`)."""
    from ownvoice.kernels import cpu_kernels

    kernels = cpu_kernels()
    if kernels is not None:
        kernels.set_num_threads(count)
    else:
        torch.get_num_threads()  # (the same reset in torch's own library)
        torch.set_num_threads(count)
