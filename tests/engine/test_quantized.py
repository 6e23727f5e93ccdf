"""int8 / int4 weights through the whole engine, with our kernels and without them.

Without the kernels (a CPU without AVX2, or OWNVOICE_NO_KERNELS=1) quantized weights run the
same integer arithmetic in torch's ops (packed.py); only the float parts between the products
(attention, norms) are torch's instead of our C++ ones, so codes are compared by agreement.
"""

from __future__ import annotations

import pytest

from ownvoice.engine.options import SamplingOptions, SynthesisOptions

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
    """Per frame int8 reads about half the bytes of the checkpoint's bf16 weights, int4 about
    half of int8's (scales and norms come on top, a large share in a tiny model)."""
    from ownvoice.engine.engine import Engine

    folder = str(tiny_checkpoints["1.7B-CustomVoice"])
    sizes = {
        mode: Engine.load(folder, dtype="float32", quantize=mode).weight_info()
        for mode in (None, "int8", "int4")
    }
    assert sizes["int8"].label == "w8a12" and sizes["int4"].label == "w4a12"
    assert sizes[None].params_per_frame == sizes["int8"].params_per_frame
    assert sizes["int8"].params_per_frame == sizes["int4"].params_per_frame
    assert 0.45 < sizes["int4"].bytes_per_frame / sizes["int8"].bytes_per_frame < 0.65
    assert sizes[None].label == "bf16>fp32"
    assert 0.45 < sizes["int8"].bytes_per_frame / sizes[None].bytes_per_frame < 0.6
