"""Teacher forcing: the logits of every codebook position while feeding given codes back.

Both engines of a comparison (e.g. int8 against unquantized weights) read the same prompt and
the same codes, so every position is compared on equal inputs (used by `ownvoice bench`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ownvoice.model.layers import DynamicKVCache
from ownvoice.model.talker import Talker


@dataclass(frozen=True)
class ForcedLogits:
    code0: torch.Tensor  # (F, V) talker head, before penalty and masking
    residual: torch.Tensor  # (F, 15, V_cp) code predictor heads


@torch.inference_mode()
def forced_logits(talker: Talker, prompt, codes: torch.Tensor) -> ForcedLogits:
    """Logits of every codebook position while feeding `codes` (F, 16) back, as decoding would."""
    device = prompt.embeds.device
    cp = talker.code_predictor
    cache = DynamicKVCache()
    length = prompt.embeds.shape[1]
    hidden = talker.model(prompt.embeds, torch.arange(length, device=device)[None], cache)
    code0_rows, residual_rows = [], []
    for k in range(codes.shape[0]):
        frame = codes[k : k + 1]  # (1, 16)
        code0_rows.append(talker.codec_head(hidden[:, -1]).float())
        x = torch.cat([hidden[:, -1:], talker.embed_codec(frame[:, :1])], dim=1)  # (1, 2, H)
        cp_cache, pos, steps = DynamicKVCache(), 0, []
        for step in range(1, cp.num_steps + 1):
            positions = torch.arange(pos, pos + x.shape[1], device=device)[None]
            h = cp.model(cp.small_to_mtp_projection(x), positions, cp_cache)
            pos += x.shape[1]
            steps.append(cp.lm_head[step - 1](h[:, -1]).float())
            x = cp.embed_code(step, frame[:, step : step + 1])
        residual_rows.append(torch.cat(steps, dim=0))  # (15, V_cp)
        text = prompt.trailing[:, k : k + 1] if k < prompt.trailing.shape[1] else prompt.pad
        x = talker.embed_frames(frame[:, None]) + text
        hidden = talker.model(x, torch.tensor([[length + k]], device=device), cache)
    return ForcedLogits(torch.cat(code0_rows), torch.stack(residual_rows))
