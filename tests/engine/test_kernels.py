"""Our CPU matrix-vector kernels equal torch's products (bf16, float32 and int8 weights)."""

from __future__ import annotations

import os

import pytest
import torch
from torch import nn

from ownvoice.engine.fast.packed import PackedLinear
from ownvoice.kernels import cpu_kernels, cpu_supports_avx2


@pytest.fixture(scope="module")
def kernels():
    k = cpu_kernels()
    if k is None:
        if cpu_supports_avx2() and os.environ.get("OWNVOICE_NO_KERNELS") != "1":
            pytest.fail("this CPU supports the kernels but they did not build (see the log)")
        pytest.skip("CPU kernels unavailable on this machine")
    return k


@pytest.mark.parametrize("mode", ["bf16", "float32", "int8"])
@pytest.mark.parametrize("rows", [1, 3, 17])
@pytest.mark.parametrize("bias", [False, True])
def test_packed_linear_equals_torch(kernels, mode, rows, bias):
    torch.manual_seed(rows)
    linear = nn.Linear(1000, 300, bias=bias)  # K not a multiple of 32: the tail path runs too
    packed = PackedLinear(linear, mode, kernels)
    x = torch.randn(2, rows, 1000)
    got = packed(x)
    torch.testing.assert_close(got, packed.reference_forward(x), atol=1e-4, rtol=1e-4)
    if mode != "int8":  # lossless storage for bf16-representable weights: same as the original
        want = (
            linear(x)
            if mode == "float32"
            else nn.functional.linear(x, linear.weight.bfloat16().float(), linear.bias)
        )
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


def test_int8_error_is_small(kernels):
    torch.manual_seed(0)
    linear = nn.Linear(1024, 1024, bias=False)
    x = torch.randn(1, 1024)
    rel = (PackedLinear(linear, "int8", kernels)(x) - linear(x)).norm() / linear(x).norm()
    assert rel < 0.01, rel


@pytest.mark.parametrize("k", [7, 16, 40, 1000, 1008, 1024])
@pytest.mark.parametrize("n", [1, 5, 64])
def test_single_row_bf16_matches_torch_for_every_tail(kernels, k, n):
    """One row of x takes the decode-step path (even/odd split of x): blocks of 32 and 16 and
    the scalar tail must all line up with the weights."""
    torch.manual_seed(k * n)
    w = torch.randn(n, k).bfloat16()
    x = torch.randn(1, k)
    got = kernels.linear(x, w, None, None)
    torch.testing.assert_close(got, x @ w.float().T, atol=1e-4, rtol=1e-4)
