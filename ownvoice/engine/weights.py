"""What the decode loop's weights cost: their stored format and the bytes one frame reads."""

from __future__ import annotations

from dataclasses import dataclass

from ownvoice.model.talker import Talker

_SHORT = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}


@dataclass(frozen=True)
class WeightInfo:
    label: str  # e.g. "float32", or "bf16>fp32" where CPU kernels read bf16 and compute in fp32
    bytes_per_frame: int  # weight bytes one frame reads at batch 1


def weight_info(talker: Talker, activation_dtype: str) -> WeightInfo:
    mode = getattr(talker.model.layers[0].self_attn.q_proj, "mode", None)
    if mode is None or mode == "float32":
        label = activation_dtype
    else:
        label = f"{mode}>{_SHORT.get(activation_dtype, activation_dtype)}"
    return WeightInfo(label=label, bytes_per_frame=_bytes_per_frame(talker))


def _bytes_per_frame(talker: Talker) -> int:
    """The talker's layers and head once, and per code-predictor step its layers, one head and
    the input projection (no caching between steps)."""
    cp = talker.code_predictor

    def nbytes(module) -> int:
        # packed CPU weights are buffers; count both (norm weights are a rounding error)
        tensors = list(module.parameters()) + [b for b in module.buffers() if b is not None]
        return sum(t.numel() * t.element_size() for t in tensors)

    per_cp_step = (
        nbytes(cp.model.layers) + nbytes(cp.lm_head[0]) + nbytes(cp.small_to_mtp_projection)
    )
    return nbytes(talker.model.layers) + nbytes(talker.codec_head) + cp.num_steps * per_cp_step
