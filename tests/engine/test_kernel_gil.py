"""Our kernels let go of the GIL while they run, as torch's ops do: a long product (a prefill, a
decoder chunk) must not stall the other Python threads of the process (the server's event loop,
a second engine, a decoder running beside the generation)."""

from __future__ import annotations

import threading
import time
from itertools import pairwise

import pytest
import torch

from ownvoice.engine.fast.packed import to_panels

pytestmark = pytest.mark.alone  # it times other threads while a kernel runs


def _longest_stall(call) -> tuple[float, float]:
    """Run `call` while another Python thread notes the time in a loop: the longest stretch of
    the call in which that thread could not run, and how long the call took."""
    notes: list[float] = []
    stop = threading.Event()

    def note():
        while not stop.is_set():
            notes.append(time.perf_counter())

    thread = threading.Thread(target=note)
    thread.start()
    time.sleep(0.05)
    t0 = time.perf_counter()
    call()
    t1 = time.perf_counter()
    stop.set()
    thread.join()
    inside = [t0, *(t for t in notes if t0 < t < t1), t1]
    return max(b - a for a, b in pairwise(inside)), t1 - t0


def _products(k):
    g = torch.Generator().manual_seed(0)
    weight = to_panels(torch.randn(512, 7 * 256, generator=g).bfloat16())
    x_conv = torch.randn(1, 12000 + 6, 256, generator=g)
    x_lin = torch.randn(6000, 7 * 256, generator=g)
    return {
        "conv_rows": lambda: k.conv_rows(x_conv, weight, None, 512, 7, 1),
        "linear": lambda: k.linear(x_lin, weight, None, None, 512),
    }


@pytest.mark.parametrize("name", ["conv_rows", "linear"])
def test_kernels_let_other_threads_run(kernels, name):
    call = _products(kernels)[name]
    call()  # a first call may set things up (allocations, thread pools)
    stall, took = _longest_stall(call)
    # holding the GIL, the other thread stalls for about the whole call; released, for at most
    # the operating system's time slices (both cores are busy with the product)
    assert stall < 0.5 * took, (
        f"{name} held the GIL: no other thread ran for {1e3 * stall:.0f} of {1e3 * took:.0f} ms"
    )
