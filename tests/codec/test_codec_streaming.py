"""Chunked decoding equals one-shot decoding (2-layer tiny decoder, float32), for the reference
streaming decoder and for the one on our CPU kernels (engine/fast/speech_decoder.py)."""

from __future__ import annotations

import os

import pytest
import torch

from ownvoice.engine.fast.speech_decoder import KernelCodecDecoder, KernelStreamingDecoder
from ownvoice.kernels import cpu_kernels, cpu_supports_avx2
from ownvoice.model.codec import streaming
from ownvoice.model.codec.streaming import (
    PRIME_MARGIN_FRAMES,
    StreamingDecoder,
    WindowedDecoder,
    decode_chunked,
)

SPF = 1920
TOL = 1e-5


def codes_of(frames: int, seed: int, batch: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 2048, (batch, 16, frames), generator=g)


def run(stream, codes: torch.Tensor, sizes: list[int]) -> torch.Tensor:
    out, i = [], 0
    for n in sizes:
        chunk = stream.push(codes[..., i : i + n])
        assert chunk.shape == (codes.shape[0], n * SPF)
        out.append(chunk)
        i += n
    assert i == codes.shape[-1]
    return torch.cat(out, dim=-1)


def schedule(first: int, rest: int, total: int) -> list[int]:
    sizes = [first]
    while sum(sizes) < total:
        sizes.append(min(rest, total - sum(sizes)))
    return sizes


@pytest.fixture(scope="module", params=["reference", "kernels"])
def new_stream(request, two_layer_decoder):
    """A factory of fresh streams over the 2-layer decoder: the reference StreamingDecoder, or
    the channels-last decoder on our CPU kernels (what the CPU fast path runs)."""
    if request.param == "reference":
        return lambda: StreamingDecoder(two_layer_decoder)
    kernels = cpu_kernels()
    if kernels is None:
        if cpu_supports_avx2() and os.environ.get("OWNVOICE_NO_KERNELS") != "1":
            pytest.fail("this CPU supports the kernels but they did not build (see the log)")
        pytest.skip("CPU kernels unavailable on this machine")
    fast = KernelCodecDecoder(two_layer_decoder, kernels)
    return lambda: KernelStreamingDecoder(fast)


@pytest.fixture(scope="module")
def long_case(two_layer_decoder):
    codes = codes_of(330, seed=1, batch=2)  # > 300 frames and > 4 attention windows
    with torch.no_grad():
        return codes, two_layer_decoder(codes)


@pytest.mark.parametrize(
    "sizes",
    [
        schedule(1, 8, 330),
        schedule(2, 8, 330),
        [int(n) for n in torch.randint(1, 40, (40,), generator=torch.Generator().manual_seed(5))],
    ],
    ids=["1-then-8", "2-then-8", "random"],
)
def test_streaming_equals_one_shot(new_stream, long_case, sizes):
    codes, full = long_case
    total = min(sum(sizes), codes.shape[-1])
    trimmed, acc = [], 0  # trim a random schedule to the available frames
    for n in sizes:
        if acc >= total:
            break
        trimmed.append(min(n, total - acc))
        acc += trimmed[-1]
    got = run(new_stream(), codes[..., :acc], trimmed)
    err = (got - full[..., : acc * SPF]).abs().max().item()
    assert err <= TOL, f"max abs diff {err:.3g} over {acc} frames"


def test_streaming_one_frame_at_a_time(two_layer_decoder, new_stream):
    codes = codes_of(76, seed=2)  # beyond the 72-frame window
    with torch.no_grad():
        full = two_layer_decoder(codes)
    stream = new_stream()
    got = run(stream, codes, [1] * 76)
    assert stream.frames_decoded == 76
    assert (got - full).abs().max().item() <= TOL


@pytest.mark.parametrize("method", ["push", "prime"])
def test_icl_priming_leaves_the_same_state(new_stream, long_case, method):
    """Reference codes decoded first and thrown away act as left context only."""
    codes, full = long_case
    ref, gen = codes[..., :120], codes[..., 120:200]
    stream = new_stream()
    if method == "push":
        stream.push(ref)
    else:
        stream.prime(ref)
    assert stream.frames_decoded == 120
    got = run(stream, gen, [1, 8, 8, 63])
    err = (got - full[..., 120 * SPF : 200 * SPF]).abs().max().item()
    assert err <= TOL, f"max abs diff {err:.3g}"
    # and the context matters: without it the same frames decode differently
    fresh = run(new_stream(), gen, [80])
    assert (fresh - full[..., 120 * SPF : 200 * SPF]).abs().max().item() > 1e-2


def primed_error(new_stream, long_case, margin: int, monkeypatch) -> float:
    """Max error of the 20 frames after 120 primed ones, against decoding all at once."""
    monkeypatch.setattr(streaming, "PRIME_MARGIN_FRAMES", margin)
    codes, full = long_case
    stream = new_stream()
    stream.prime(codes[..., :120])
    got = run(stream, codes[..., 120:140], [20])
    return (got - full[..., 120 * SPF : 140 * SPF]).abs().max().item()


def test_priming_is_exact_at_its_bound_and_the_bound_is_tight(new_stream, long_case, monkeypatch):
    """prime() relies on the upsampler forgetting everything older than
    ceil(waveform_history_frames) frames (9.38 -> 10 here): at the bound itself (margin 0) the
    primed state is the pushed one; one frame short the first audio after the reference
    already drifts, two frames short it is audibly wrong. So a smaller history estimate or a
    negative margin cannot pass, and the margin of PRIME_MARGIN_FRAMES is pure safety."""
    at_margin = primed_error(new_stream, long_case, PRIME_MARGIN_FRAMES, monkeypatch)
    at_bound = primed_error(new_stream, long_case, 0, monkeypatch)
    one_short = primed_error(new_stream, long_case, -1, monkeypatch)
    two_short = primed_error(new_stream, long_case, -2, monkeypatch)
    assert at_margin <= TOL and at_bound <= TOL
    assert one_short > 3 * at_bound, (one_short, at_bound)
    assert two_short > 1e-3, two_short


def test_reset_starts_a_new_utterance(new_stream):
    codes = codes_of(20, seed=3)
    stream = new_stream()
    first = run(stream, codes, [5, 15])
    stream.reset()
    assert stream.frames_decoded == 0
    again = run(stream, codes, [20])
    assert (first - again).abs().max().item() <= TOL


def test_batch_size_cannot_change_within_a_stream(new_stream):
    stream = new_stream()
    stream.push(codes_of(2, seed=4, batch=2))
    with pytest.raises(RuntimeError, match="reset"):
        stream.push(codes_of(2, seed=4, batch=1))
    with pytest.raises(ValueError, match="frames >= 1"):
        new_stream().push(torch.zeros(1, 16, 0, dtype=torch.long))


def test_decode_chunked_equals_one_shot(two_layer_decoder, long_case):
    codes, full = long_case
    got = decode_chunked(two_layer_decoder, codes, chunk_frames=100)
    assert (got - full).abs().max().item() <= TOL


def test_windowed_decoder_is_an_approximation(two_layer_decoder, long_case):
    codes, full = long_case
    codes, full = codes[:1, :, :100], full[:1, : 100 * SPF]
    errors = {}
    for window in (10, 25):
        got = run(WindowedDecoder(two_layer_decoder, window), codes, schedule(8, 8, 100))
        errors[window] = (got - full).abs().max().item()
    print(f"windowed decode vs exact, max abs diff by window: {errors}")
    assert all(e > 1e-3 for e in errors.values()), errors
    # with every frame inside the window it is exact
    stream = WindowedDecoder(two_layer_decoder, 64)
    got = run(stream, codes[..., :64], [30, 34])
    assert stream.frames_decoded == 64
    assert (got - full[..., : 64 * SPF]).abs().max().item() <= TOL
