"""Our kernels let go of the GIL while they run, as torch's ops do: a long product (a prefill, a
decoder chunk) must not stall the other Python threads of the process (the server's event loop,
a second engine, a decoder running beside the generation)."""

from __future__ import annotations

import threading
import time

import pytest
import torch

from ownvoice.engine.fast.packed import to_panels
from tests.engine.test_kernels import kernels  # noqa: F401  (the fixture)


def _other_thread_ran_during(call) -> tuple[int, float]:
    """Run `call` while another Python thread notes the time in a loop; how many of its notes
    fall well inside the call (its middle 60 %), and how long the call took."""
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
    lo, hi = t0 + 0.2 * (t1 - t0), t1 - 0.2 * (t1 - t0)
    return sum(lo < t < hi for t in notes), t1 - t0


def _products(k):
    g = torch.Generator().manual_seed(0)
    weight = to_panels(torch.randn(512, 7 * 256, generator=g).bfloat16())
    x_conv = torch.randn(1, 6000 + 6, 256, generator=g)
    x_lin = torch.randn(3000, 7 * 256, generator=g)
    return {
        "conv_rows": lambda: k.conv_rows(x_conv, weight, None, 512, 7, 1),
        "linear": lambda: k.linear(x_lin, weight, None, None, 512),
    }


@pytest.mark.parametrize("name", ["conv_rows", "linear"])
def test_kernels_let_other_threads_run(kernels, name):  # noqa: F811
    call = _products(kernels)[name]
    call()  # a first call may set things up (allocations, thread pools)
    ran, took = _other_thread_ran_during(call)
    assert took > 0.005, "the call is too short to tell"
    assert ran > 0, f"{name} held the GIL for {1e3 * took:.0f} ms: no other thread ran"
