"""What the decode loop's weights cost: their stored format and the bytes one frame reads."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ownvoice.model.talker import Talker

_SHORT = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}


@dataclass(frozen=True)
class WeightInfo:
    label: str  # e.g. "float32", or "bf16>fp32" where CPU kernels read bf16 and compute in fp32
    bytes_per_frame: int  # weight bytes one frame reads at batch 1
    params_per_frame: int  # weights one frame multiplies with (one multiply-add each, per row)


def weight_info(talker: Talker, activation_dtype: str) -> WeightInfo:
    mode = getattr(talker.model.layers[0].self_attn.q_proj, "mode", None)
    if mode is None or mode == "float32":
        label = activation_dtype
    elif mode in _INTEGER:
        label = _INTEGER[mode]
    else:
        label = f"{mode}>{_SHORT.get(activation_dtype, activation_dtype)}"
    return WeightInfo(
        label=label,
        bytes_per_frame=_per_frame(talker, lambda name, t: t.numel() * t.element_size()),
        params_per_frame=_per_frame(talker, _params),
    )


# integer weights multiply 12-bit integer activations (engine/fast/packed.py)
_INTEGER = {"int8": "w8a12", "int4": "w4a12"}


def _params(name: str, t) -> int:
    if t.dim() < 2 or name.endswith("scale"):
        return 0
    return t.numel() * (2 if t.dtype == torch.uint8 else 1)  # int4: two per byte


def _per_frame(talker: Talker, size) -> int:
    """The talker's layers and head once, and per code-predictor step its layers, one head and
    the input projection (no caching between steps)."""
    cp = talker.code_predictor

    def total(module) -> int:
        # packed CPU weights are buffers; count both (norm weights are a rounding error)
        tensors = list(module.named_parameters()) + list(module.named_buffers())
        return sum(size(name, t) for name, t in tensors if t is not None)

    per_cp_step = total(cp.model.layers) + total(cp.lm_head[0]) + total(cp.small_to_mtp_projection)
    return total(talker.model.layers) + total(talker.codec_head) + cp.num_steps * per_cp_step
