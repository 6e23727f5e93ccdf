"""The bf16 products (kernels/bf16dot.h, engine/fast/decoder_products.py) that run the speech
decoder with `decoder_dtype: bfloat16` on a CPU with AVX512-BF16: the product of the inputs
rounded to bf16 (to float32 rounding), a row's result independent of the rows beside it, a
convolution the same sums as the product over its unfolded input, and the decoder's audio within
the bound the README states, its codes unchanged, batched as alone."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ownvoice.engine.fast.decoder_products import from_pair_panels, to_pair_panels
from ownvoice.kernels import cpu_kernels


@pytest.fixture(scope="module")
def kernels():
    k = cpu_kernels()
    if k is None or not k.has_bf16dot():
        pytest.skip("this CPU has no AVX512-BF16 (the bf16 products are not used here)")
    return k


def bf16(t: torch.Tensor) -> torch.Tensor:
    return t.to(torch.bfloat16).double()


def bound(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Float32 rounding of a K-term sum: a few ulps of the sum of |terms| per term."""
    return (bf16(x).abs() @ bf16(w).abs().T) * x.shape[1] * 2.0**-23 + 1e-30


def test_pair_panels_hold_every_weight_once():
    w = torch.randn(37, 23)  # a partial panel, an odd column count
    panels = to_pair_panels(w)
    assert panels.shape == (3, 12, 32) and panels.dtype == torch.bfloat16
    assert torch.equal(from_pair_panels(panels, 37, 23), w.to(torch.bfloat16))
    assert torch.count_nonzero(panels.float()) == torch.count_nonzero(w.to(torch.bfloat16).float())


@pytest.mark.parametrize("M", [1, 3, 6, 7, 8, 13, 200])
@pytest.mark.parametrize("K", [64, 33])
def test_linear_is_the_product_of_the_rounded_inputs(kernels, M, K):
    g = torch.Generator().manual_seed(M * 100 + K)
    x, w = torch.randn(M, K, generator=g), torch.randn(70, K, generator=g)
    bias = torch.randn(70, generator=g)
    y = kernels.linear_bf16(x, to_pair_panels(w), bias, 70)
    want = bf16(x) @ bf16(w).T + bias.double()
    assert y.shape == (M, 70) and y.dtype == torch.float32
    assert ((y.double() - want).abs() <= bound(x, w) + 1e-6 * bias.abs().double()).all()
    # and not the float32 product: the activations really are rounded
    assert not torch.equal(y, x @ w.T + bias)


def test_a_row_is_the_same_alone_or_among_others(kernels):
    g = torch.Generator().manual_seed(7)
    x, w = torch.randn(203, 96, generator=g), torch.randn(50, 96, generator=g)
    panels = to_pair_panels(w)
    together = kernels.linear_bf16(x, panels, None, 50)
    for m in (0, 5, 7, 8, 95, 96, 191, 202):  # every tile and row block a row can land in
        assert torch.equal(kernels.linear_bf16(x[m : m + 1].contiguous(), panels, None, 50),
                           together[m : m + 1])  # fmt: skip
    assert torch.equal(kernels.linear_bf16(x[3:9].contiguous(), panels, None, 50), together[3:9])


@pytest.mark.parametrize("taps,dilation", [(1, 1), (3, 1), (7, 3), (2, 1)])
def test_a_convolution_is_the_product_over_its_unfolded_input(kernels, taps, dilation):
    g = torch.Generator().manual_seed(taps * 10 + dilation)
    B, T, C, rows = 2, 40, 24, 34
    x = torch.randn(B, T, C, generator=g)
    matrix = torch.randn(rows, taps * C, generator=g)  # tap-major columns (j, c_in)
    bias = torch.randn(rows, generator=g)
    panels = to_pair_panels(matrix)
    y = kernels.conv_rows_bf16(x, panels, bias, rows, taps, dilation)
    span = (taps - 1) * dilation
    assert y.shape == (B, T - span, rows)
    for b in range(B):
        unfolded = torch.cat([x[b, j * dilation : T - span + j * dilation] for j in range(taps)], 1)
        assert torch.equal(y[b], kernels.linear_bf16(unfolded.contiguous(), panels, bias, rows))
    # as torch's convolution computes it, on the rounded inputs
    weight = bf16(matrix).view(rows, taps, C).permute(0, 2, 1)  # (rows, C_in, taps)
    want = torch.nn.functional.conv1d(bf16(x).transpose(1, 2), weight, bias.double(),
                                      dilation=dilation).transpose(1, 2)  # fmt: skip
    assert torch.allclose(y.double(), want, atol=1e-4, rtol=1e-5)


def test_an_odd_channel_count_is_refused(kernels):
    x = torch.randn(1, 8, 5)
    with pytest.raises(RuntimeError, match="even channel count"):
        kernels.conv_rows_bf16(x, to_pair_panels(torch.randn(4, 10)), None, 4, 2, 1)


def test_forcing_avx2_turns_them_off(kernels):
    """OWNVOICE_KERNEL_ISA=avx2 stands for an older CPU: no AVX-512, so no bf16 products."""
    before = kernels.isa()
    try:
        kernels.set_isa("avx2")
        assert not kernels.has_bf16dot()
        with pytest.raises(RuntimeError, match="AVX512-BF16"):
            kernels.linear_bf16(torch.randn(2, 4), to_pair_panels(torch.randn(3, 4)), None, 3)
    finally:
        kernels.set_isa(before)
    assert kernels.has_bf16dot()


TEXT = "Hello there, this is a test of the speech decoder."


def test_the_bf16_decoder_keeps_the_codes_and_stays_within_the_stated_bound(
    kernels, tiny_checkpoints
):
    """README: `decoder_dtype: bfloat16` audio is a log-mel distance of about 0.02 from
    float32's (on real weights); on tiny random ones the bound is the one torch's bf16 decoder
    met, and ours stays as close as it is."""
    from ownvoice.bench.quality import mel_distance
    from ownvoice.engine.engine import Engine
    from ownvoice.engine.fast.speech_decoder import KernelCodecDecoder
    from ownvoice.engine.options import SamplingOptions, SynthesisOptions

    folder = str(tiny_checkpoints["0.6B-CustomVoice"])
    options = SynthesisOptions(language="english", sampling=SamplingOptions.greedy(), max_frames=40)
    full = Engine.load(folder, dtype="float32").synthesize(TEXT, voice="ryan", options=options)
    engine = Engine.load(folder, dtype="float32", decoder_dtype="bfloat16")
    decoder = engine._m.speech_decoder
    assert isinstance(decoder, KernelCodecDecoder) and decoder.products.bf16
    half = engine.synthesize(TEXT, voice="ryan", options=options)
    assert np.array_equal(half.codes, full.codes)
    assert half.audio.shape == full.audio.shape and not np.array_equal(half.audio, full.audio)
    rel = np.linalg.norm(half.audio - full.audio) / np.linalg.norm(full.audio)
    assert rel < 0.1 and mel_distance(half.audio, full.audio) < 0.1, rel


def test_the_bf16_decoder_decodes_a_batch_as_each_row_alone(kernels, tiny_checkpoints):
    from ownvoice.engine.engine import Engine
    from tests.engine.test_batching import MIXES, assert_same, batched, solo

    like = "1.7B-Base"  # clones: the ICL rows' decoders primed with the reference's codes
    engine = Engine.load(str(tiny_checkpoints[like]), dtype="float32", decoder_dtype="bfloat16")
    assert engine._m.speech_decoder.products.bf16
    reqs = MIXES[like]
    alone = [solo(engine, r) for r in reqs]
    together, sizes = batched(engine, reqs)
    assert max(sizes) >= 3, sizes
    for i, (r, got, want) in enumerate(zip(reqs, together, alone, strict=True)):
        assert got[2] == ("cancelled" if r.cancel_at is not None else want[2]), i
        assert_same(got, want, f"request {i}")
