"""Our CPU matrix kernels equal torch's products (bf16 and float32 weights) and, bit for bit, the
plain integer arithmetic they implement (int8 and int4 weights), on every instruction set."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
from torch import nn

from ownvoice.engine.fast.packed import (
    PackedLinear,
    from_int4_panels,
    from_panels,
    int4_linear,
    int8_linear,
    quantize_int4,
    to_int4_panels,
    to_panels,
)


@pytest.mark.parametrize("mode", ["bf16", "float32", "int8", "int4"])
@pytest.mark.parametrize("rows", [1, 3, 17])
@pytest.mark.parametrize("bias", [False, True])
def test_packed_linear_equals_torch(kernels, mode, rows, bias):
    torch.manual_seed(rows)
    linear = nn.Linear(1000, 300, bias=bias)  # K not a multiple of 32: the tail path runs too
    packed = PackedLinear(linear, mode, kernels)
    x = torch.randn(2, rows, 1000)
    got = packed(x)
    if mode in INTEGER:  # the same integer arithmetic: the same bits
        assert torch.equal(got, packed.reference_forward(x))
        portable = PackedLinear(linear, mode, None)  # where the kernels cannot run
        assert torch.equal(portable(x), got)
        return
    torch.testing.assert_close(got, packed.reference_forward(x), atol=1e-4, rtol=1e-4)
    # lossless storage for bf16-representable weights: the same as the original
    want = (
        linear(x)
        if mode == "float32"
        else nn.functional.linear(x, linear.weight.bfloat16().float(), linear.bias)
    )
    torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize(("mode", "bound"), [("int8", 0.01), ("int4", 0.12)])
def test_integer_weights_cost_a_bounded_error(kernels, mode, bound):
    """Against float32: int8 weights with 12-bit activations within 1 %, int4 (a scale per 32
    columns, 8-bit activations) within 12 %: 15 levels per group, about 9 % on Gaussian
    weights."""
    torch.manual_seed(0)
    linear = nn.Linear(1024, 1024, bias=False)
    x = torch.randn(4, 1024)
    rel = (PackedLinear(linear, mode, kernels)(x) - linear(x)).norm() / linear(x).norm()
    assert rel < bound, rel


def _weights(mode: str, n: int, k: int, seed: int):
    """Random (n, k) weights in a float storage mode; returns (stored, dequantized float32)."""
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(n, k, generator=g)
    if mode == "bf16":
        w = w.bfloat16()
        return w, w.float()
    return w, w


def _integer_weights(mode: str, n: int, k: int, seed: int):
    """Random (n, k) integer weights in the kernels' layout: (panels, scale, torch reference)."""
    g = torch.Generator().manual_seed(seed)
    if mode == "int8":
        q = torch.randint(-127, 128, (n, k), generator=g, dtype=torch.int8)
        scale = torch.rand(n, generator=g) + 0.5
        panels = to_panels(q)
        assert torch.equal(from_panels(panels, n, k), q)
        return panels, scale, lambda x: int8_linear(x, panels, scale, n)
    q, scale = quantize_int4(torch.randn(n, k, generator=g))
    panels, scales = to_int4_panels(q, scale)
    back, back_scale = from_int4_panels(panels, scales, n)
    assert torch.equal(back, q) and torch.equal(back_scale, scale)
    return panels, scales, lambda x: int4_linear(x, panels, scales, n)


# every K remainder class a kernel might special-case, and real sizes
KS = [1, 7, 8, 9, 15, 16, 17, 31, 33, 1000, 1024]
NS = [1, 5, 16, 17, 33, 67]  # whole panels of 16, and partial ones
MS = [1, 2, 3, 4, 5, 6, 7, 10, 11, 13]  # one row, the 6-row tile, and every remainder (0..5)
# and the 512-bit integer tiles of 8 rows: one, two, and two with a remainder
INTEGER_MS = [*MS, 8, 16, 19]
INTEGER = ("int8", "int4")


@pytest.mark.parametrize("mode", ["bf16", "float32"])
@pytest.mark.parametrize("k", KS)
def test_matmul_equals_torch_for_every_shape(kernels, mode, k):
    """Every K (no tail may drop or repeat a weight), partial panels, one and many rows."""
    for n in NS:
        stored, dense = _weights(mode, n, k, seed=n * 1000 + k)
        panels = to_panels(stored)
        assert torch.equal(from_panels(panels, n), stored)
        for m in MS:
            x = torch.randn(m, k, generator=torch.Generator().manual_seed(m))
            got = kernels.linear(x, panels, None, None, n)
            want = (x.double() @ dense.double().T).float()
            tol = 1e-5 * (k**0.5) * float(want.abs().max().clamp(min=1))
            assert got.shape == (m, n)
            torch.testing.assert_close(got, want, atol=tol, rtol=1e-5, msg=f"{mode} n={n} m={m}")


@pytest.fixture
def every_isa(kernels):
    """Each instruction set this CPU can run the integer products with, forced in turn."""
    chosen = kernels.isa()
    yield kernels.supported_isas()
    kernels.set_isa(chosen)


@pytest.mark.parametrize("mode", INTEGER)
@pytest.mark.parametrize("k", KS + [63, 65])
def test_integer_matmul_is_the_reference_arithmetic_for_every_shape(kernels, every_isa, mode, k):
    """Bit for bit the plain integer arithmetic (packed.py), for every instruction set this CPU
    has, every K remainder, partial panels, one and many rows, and an all-zero row."""
    assert "avx2" in every_isa
    for n in NS:
        panels, scale, reference = _integer_weights(mode, n, k, seed=n * 1000 + k)
        for m in INTEGER_MS:
            x = torch.randn(m, k, generator=torch.Generator().manual_seed(m))
            if m > 2:
                x[1] = 0
            want = reference(x)
            for isa in every_isa:
                kernels.set_isa(isa)
                got = kernels.linear(x, panels, scale, None, n)
                assert torch.equal(got, want), f"{mode} {isa} n={n} k={k} m={m}"


# (N, K) of every decode-loop matrix of the 0.6B and 1.7B models: q/k/v fused, o, gate/up
# fused, down, codec head, code-predictor head, the 1.7B code predictor's input projection
MODEL_SHAPES = [
    (4096, 1024), (1024, 2048), (6144, 1024), (1024, 3072), (3072, 1024), (2048, 1024),
    (4096, 2048), (2048, 2048), (12288, 2048), (2048, 6144), (3072, 2048),
]  # fmt: skip


@pytest.mark.parametrize("mode", INTEGER)
def test_integer_matmul_is_the_reference_arithmetic_at_model_shapes(kernels, mode):
    for n, k in MODEL_SHAPES:
        panels, scale, reference = _integer_weights(mode, n, k, seed=n + k)
        x = torch.randn(3, k, generator=torch.Generator().manual_seed(k)) * 4
        assert torch.equal(kernels.linear(x, panels, scale, None, n), reference(x)), (n, k)
        one = x[:1].contiguous()
        assert torch.equal(kernels.linear(one, panels, scale, None, n), reference(one)), (n, k)


@pytest.mark.parametrize("mode", ["bf16", "float32"])
def test_float_products_are_the_same_bits_on_every_instruction_set(kernels, every_isa, mode):
    """With AVX-512 the float products of two or more rows run in 512-bit tiles; each element is
    still the same sequential sum, so every instruction set gives the same bits: for every row
    count a tile shape may special-case, partial panels, plain rows and a dilated convolution."""
    for n, k in ((67, 1000), (1, 33), (40, 7 * 64)):
        stored, _ = _weights(mode, n, k, seed=n + k)
        panels = to_panels(stored)
        for m in (*range(1, 18), 25, 200):
            x = torch.randn(m, k, generator=torch.Generator().manual_seed(m))
            signal = torch.randn(1, m + 6 * 3, 64, generator=torch.Generator().manual_seed(m))
            results = []
            for isa in every_isa:
                kernels.set_isa(isa)
                conv = kernels.conv_rows(signal, panels, None, n, 7, 3) if k == 7 * 64 else None
                results.append((isa, kernels.linear(x, panels, None, None, n), conv))
            for isa, got, conv in results[1:]:
                assert torch.equal(got, results[0][1]), f"{mode} {isa} n={n} k={k} m={m}"
                assert conv is None or torch.equal(conv, results[0][2]), f"conv {isa} m={m}"


def test_forcing_an_instruction_set_the_cpu_lacks_is_refused(kernels, every_isa):
    for isa in ("avx512vnni", "avxvnni"):
        if isa not in every_isa:
            with pytest.raises(RuntimeError, match="cannot run"):
                kernels.set_isa(isa)
    with pytest.raises(RuntimeError, match="unknown"):
        kernels.set_isa("sse2")


@pytest.mark.parametrize("mode", ["bf16", "float32", "int8", "int4"])
def test_matmul_rows_do_not_depend_on_their_neighbours(kernels, mode):
    """Batch invariance: each row of an M-row product is bit-identical to that row alone."""
    if mode in INTEGER:
        panels, scale, _ = _integer_weights(mode, 67, 1000, seed=3)
    else:
        stored, _ = _weights(mode, 67, 1000, seed=3)
        panels, scale = to_panels(stored), None
    x = torch.randn(13, 1000)
    together = kernels.linear(x, panels, scale, None, 67)
    for i in range(13):
        alone = kernels.linear(x[i : i + 1].contiguous(), panels, scale, None, 67)
        assert torch.equal(together[i], alone[0]), i


@pytest.mark.parametrize("mode", ["bf16", "float32"])
def test_long_products_split_into_row_blocks_give_the_same_rows(kernels, mode):
    """Past 192 rows (a convolution over a long chunk) the rows are computed in blocks of 96 in
    parallel; every row is still the one computed alone, and the product still torch's."""
    stored, dense = _weights(mode, 67, 300, seed=4)
    panels = to_panels(stored)
    x = torch.randn(293, 300, generator=torch.Generator().manual_seed(4))  # 3 blocks and a tail
    together = kernels.linear(x, panels, None, None, 67)
    torch.testing.assert_close(together, x @ dense.T, atol=1e-4, rtol=1e-4)
    for i in (0, 95, 96, 191, 192, 287, 288, 292):
        alone = kernels.linear(x[i : i + 1].contiguous(), panels, None, None, 67)
        assert torch.equal(together[i], alone[0]), i


@pytest.mark.parametrize("mode", ["bf16", "float32"])
@pytest.mark.parametrize(("taps", "dilation"), [(1, 1), (2, 1), (3, 1), (7, 1), (7, 3), (7, 9)])
def test_conv_rows_is_a_causal_convolution(kernels, mode, taps, dilation):
    """conv_rows over channels-last input (B, T, C) with the weight as one (rows, taps * C)
    tap-major matrix equals torch's conv1d, for odd channel counts, short and long inputs."""
    for c_in, rows, length in ((5, 3, 1), (33, 17, 4), (64, 40, 250)):
        g = torch.Generator().manual_seed(taps * 100 + c_in)
        weight = torch.randn(rows, c_in, taps, generator=g) / (taps * c_in) ** 0.5
        if mode == "bf16":
            weight = weight.bfloat16().float()
        bias = torch.randn(rows, generator=g)
        span = (taps - 1) * dilation
        x = torch.randn(2, length + span, c_in, generator=g)  # the context is part of the input
        matrix = weight.permute(0, 2, 1).reshape(rows, taps * c_in).contiguous()
        stored = matrix.bfloat16() if mode == "bf16" else matrix
        got = kernels.conv_rows(x, to_panels(stored), bias, rows, taps, dilation)
        want = torch.nn.functional.conv1d(x.transpose(1, 2), weight, bias, dilation=dilation)
        assert got.shape == (2, length, rows)
        torch.testing.assert_close(got, want.transpose(1, 2), atol=1e-4, rtol=1e-4)
    with pytest.raises(RuntimeError, match="shorter"):
        kernels.conv_rows(x[:, :span].contiguous(), to_panels(stored), None, rows, taps, dilation)


def test_snake_beta_equals_torch(kernels):
    """The fused SnakeBeta equals torch's five ops over activations of every magnitude the
    decoder meets (and far beyond), for channel counts with and without a tail of 8."""
    for channels in (1, 7, 8, 96, 203):
        g = torch.Generator().manual_seed(channels)
        alpha = (torch.randn(channels, generator=g) * 0.5).exp()
        inv_beta = 1.0 / ((torch.randn(channels, generator=g) * 0.5).exp() + 1e-9)
        x = torch.randn(2, 37, channels, generator=g) * torch.logspace(-3, 3, 37)[:, None]
        got = kernels.snake_beta(x, alpha, inv_beta)
        want = x.double() + inv_beta.double() * torch.sin(x.double() * alpha.double()) ** 2
        torch.testing.assert_close(got.double(), want, atol=2e-6, rtol=1e-6)


def kernels_in_a_new_process(isa: str) -> subprocess.CompletedProcess:
    """The kernels as a fresh process (`ownvoice serve`, bench) loads them, with
    OWNVOICE_KERNEL_ISA set."""
    code = "from ownvoice.kernels import cpu_kernels\nprint(cpu_kernels().isa())"
    env = {**os.environ, "OWNVOICE_KERNEL_ISA": isa}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=300)  # fmt: skip


def test_the_instruction_set_can_be_forced_for_a_process_and_a_wrong_one_is_refused(kernels):
    """What an AVX2-only CPU gets, measured on a newer one (README, "Speed")."""
    proc = kernels_in_a_new_process("AVX2")
    assert proc.returncode == 0 and proc.stdout.split()[-1] == "avx2", proc.stderr[-2000:]
    proc = kernels_in_a_new_process("sse2")
    assert proc.returncode != 0
    assert "OWNVOICE_KERNEL_ISA=sse2" in proc.stderr and "avx2" in proc.stderr.splitlines()[-1]
