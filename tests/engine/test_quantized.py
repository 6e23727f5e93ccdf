"""int8 / int4 weights through the whole engine, with our kernels and without them.

Without the kernels (a CPU without AVX2, or OWNVOICE_NO_KERNELS=1) quantized weights run the
same integer arithmetic in torch's ops (packed.py); only the float parts between the products
(attention, norms) are torch's instead of our C++ ones, so codes are compared by agreement.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from ownvoice.engine.options import SamplingOptions, SynthesisOptions
from ownvoice.kernels import cpu_kernels

TEXT = "Integer weights, read by the portable path."
OPTIONS = SynthesisOptions(language="english", sampling=SamplingOptions.greedy(), max_frames=24)


def _codes(engine):
    return engine.synthesize(TEXT, voice="ryan", options=OPTIONS).codes


@pytest.mark.parametrize("mode", ["int8", "int4"])
def test_quantized_weights_run_without_the_kernels(tiny_checkpoints, monkeypatch, mode):
    from ownvoice import kernels
    from ownvoice.engine.engine import Engine
    from ownvoice.engine.fast.packed import PackedLinear

    folder = str(tiny_checkpoints["1.7B-CustomVoice"])
    fast = Engine.load(folder, quantize=mode)
    if fast.backend != "cpu-kernels":
        if kernels.cpu_supports_avx2() and os.environ.get("OWNVOICE_NO_KERNELS") != "1":
            pytest.fail("this CPU supports the kernels but they did not build (see the log)")
        pytest.skip("no CPU kernels on this machine: nothing to compare the portable path with")
    monkeypatch.setattr(kernels, "_state", {"module": None})
    portable = Engine.load(folder, quantize=mode)
    assert portable.backend == "torch"
    q_proj = portable._m.model.talker.model.layers[0].self_attn.q_proj
    assert isinstance(q_proj, PackedLinear) and q_proj.mode == mode and q_proj.kernels is None
    got, want = _codes(portable), _codes(fast)
    n = min(len(got), len(want))
    agreement = float((got[:n] == want[:n]).mean())
    assert agreement >= 0.9, agreement
    assert portable.weight_info().bytes_per_frame == fast.weight_info().bytes_per_frame


def test_integer_weights_keep_their_share_of_the_bytes(tiny_checkpoints):
    """int8 matrices hold half the bytes of the checkpoint's bf16, int4 layer matrices half of
    int8's; with int4 the heads and the input projection stay int8."""
    from ownvoice.engine.engine import Engine
    from ownvoice.engine.fast.packed import PackedLinear

    folder = str(tiny_checkpoints["1.7B-CustomVoice"])
    engines = {m: Engine.load(folder, dtype="float32", quantize=m) for m in (None, "int8", "int4")}
    infos = {m: e.weight_info() for m, e in engines.items()}
    assert (infos[None].label, infos["int8"].label, infos["int4"].label) == (
        "bf16>fp32", "w8a12", "w4a12",
    )  # fmt: skip
    assert infos[None].params_per_frame == infos["int8"].params_per_frame
    assert infos["int8"].params_per_frame == infos["int4"].params_per_frame
    assert (
        infos["int4"].bytes_per_frame < infos["int8"].bytes_per_frame < infos[None].bytes_per_frame
    )

    def packed(engine):
        talker = engine._m.model.talker
        return {name: m for name, m in talker.named_modules() if isinstance(m, PackedLinear)}

    bf16, int8, int4 = (packed(engines[m]) for m in (None, "int8", "int4"))
    assert bf16.keys() == int8.keys() == int4.keys()
    for name, lin in int4.items():
        size = lin.weight.numel() * lin.weight.element_size()
        size8 = int8[name].weight.numel() * int8[name].weight.element_size()
        size16 = bf16[name].weight.numel() * bf16[name].weight.element_size()
        assert size8 * 2 == size16, name
        in_layers = ".layers." in name
        assert lin.mode == ("int4" if in_layers else "int8"), name
        assert size * (2 if in_layers else 1) == size8, name


def test_a_bfloat16_decoder_changes_the_audio_a_little_and_the_codes_not_at_all(tiny_checkpoints):
    from ownvoice.bench.quality import mel_distance
    from ownvoice.engine.engine import Engine

    folder = str(tiny_checkpoints["1.7B-CustomVoice"])
    full = Engine.load(folder, dtype="float32").synthesize(TEXT, voice="ryan", options=OPTIONS)
    engine = Engine.load(folder, dtype="float32", decoder_dtype="bfloat16")
    kernels = cpu_kernels()
    if kernels is not None and kernels.has_bf16dot():  # our bf16 products (test_bf16_products)
        assert engine._m.speech_decoder.products.bf16 and engine._m.codec.decoder is None
    else:  # torch's bf16 ops
        assert engine._m.codec.decoder.pre_conv.conv.weight.dtype == torch.bfloat16
    half = engine.synthesize(TEXT, voice="ryan", options=OPTIONS)
    assert np.array_equal(half.codes, full.codes)
    assert half.audio.dtype == np.float32 and half.audio.shape == full.audio.shape
    assert not np.array_equal(half.audio, full.audio)
    rel = np.linalg.norm(half.audio - full.audio) / np.linalg.norm(full.audio)
    assert rel < 0.1, rel
    assert mel_distance(half.audio, full.audio) < 0.1
