"""Our CPU matrix-vector kernels equal torch's products (bf16, float32 and int8 weights)."""

from __future__ import annotations

import os

import pytest
import torch
from torch import nn

from ownvoice.engine.fast.packed import PackedLinear, from_panels, to_panels
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


def _weights(mode: str, n: int, k: int, seed: int):
    """Random (n, k) weights in a storage mode; returns (stored, scale, dequantized float32)."""
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(n, k, generator=g)
    if mode == "bf16":
        w = w.bfloat16()
        return w, None, w.float()
    if mode == "int8":
        q = torch.randint(-127, 128, (n, k), generator=g, dtype=torch.int8)
        scale = torch.rand(n, generator=g) + 0.5
        return q, scale, q.float() * scale[:, None]
    return w, None, w


# every K remainder class a kernel might special-case, and real sizes
KS = [1, 7, 8, 9, 15, 16, 17, 31, 33, 1000, 1024]
NS = [1, 5, 16, 17, 33, 67]  # whole panels of 16, and partial ones
MS = [1, 2, 3, 4, 5, 6, 7, 10, 11, 13]  # one row, the 6-row tile, and every remainder (0..5)


@pytest.mark.parametrize("mode", ["bf16", "float32", "int8"])
@pytest.mark.parametrize("k", KS)
def test_matmul_equals_torch_for_every_shape(kernels, mode, k):
    """Every K (no tail may drop or repeat a weight), partial panels, one and many rows."""
    for n in NS:
        stored, scale, dense = _weights(mode, n, k, seed=n * 1000 + k)
        panels = to_panels(stored)
        assert torch.equal(from_panels(panels, n), stored)
        for m in MS:
            x = torch.randn(m, k, generator=torch.Generator().manual_seed(m))
            got = kernels.linear(x, panels, scale, None, n)
            want = (x.double() @ dense.double().T).float()
            tol = 1e-5 * (k**0.5) * float(want.abs().max().clamp(min=1))
            assert got.shape == (m, n)
            torch.testing.assert_close(got, want, atol=tol, rtol=1e-5, msg=f"{mode} n={n} m={m}")


@pytest.mark.parametrize("mode", ["bf16", "float32", "int8"])
def test_matmul_rows_do_not_depend_on_their_neighbours(kernels, mode):
    """Batch invariance: each row of an M-row product is bit-identical to that row alone."""
    stored, scale, _ = _weights(mode, 67, 1000, seed=3)
    panels = to_panels(stored)
    x = torch.randn(13, 1000)
    together = kernels.linear(x, panels, scale, None, 67)
    for i in range(13):
        alone = kernels.linear(x[i : i + 1].contiguous(), panels, scale, None, 67)
        assert torch.equal(together[i], alone[0]), i
