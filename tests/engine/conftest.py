"""Fixtures shared by the engine's tests."""

from __future__ import annotations

import os

import pytest

from ownvoice.kernels import cpu_kernels, cpu_supports_avx2


@pytest.fixture(scope="module")
def kernels():
    k = cpu_kernels()
    if k is None:
        if cpu_supports_avx2() and os.environ.get("OWNVOICE_NO_KERNELS") != "1":
            pytest.fail("this CPU supports the kernels but they did not build (see the log)")
        pytest.skip("CPU kernels unavailable on this machine")
    return k
