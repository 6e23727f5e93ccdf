"""What int8 weights cost: logits and codes of the quantized model against the unquantized one.

Teacher forcing: both models read the same prompts and the same codes (the unquantized model's
greedy output), so every one of the 16 codebook positions of every frame is compared on equal
inputs. Free-running generation would only tell where the first disagreement happened; after it
the two outputs are about different audio and no longer comparable.

    q = int8_quality(reference_engine, int8_engine, frames=24)
    q.code_agreement      # share of positions whose greedy (argmax) code is the same
    q.logit_rel_error     # mean over positions of |a - b| / |b| (L2 norms of the logit rows)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

from ownvoice.engine.options import SamplingOptions, SynthesisOptions
from ownvoice.engine.prompt import build_prompt
from ownvoice.engine.requests import resolve_request
from ownvoice.model.layers import DynamicKVCache
from ownvoice.model.talker import Talker

# fixed prompts: plain prose, numbers and punctuation, a question
PROMPTS = (
    "The quick brown fox jumps over the lazy dog, and then it runs into the forest.",
    "On 12 March 2024, at 7:45 pm, the train left platform 3 with 241 passengers.",
    "Would you like to hear the weather forecast for tomorrow morning?",
)


@dataclass(frozen=True)
class ForcedLogits:
    code0: torch.Tensor  # (F, V) talker head, before penalty and masking
    residual: torch.Tensor  # (F, 15, V_cp) code predictor heads


@dataclass(frozen=True)
class Int8Quality:
    prompts: int
    frames: int  # frames compared, over all prompts
    code_agreement: float  # all 16 codebooks
    code0_agreement: float  # codebook 0 (the talker's choice)
    logit_rel_error: float  # mean relative L2 error of a logit row
    logit_max_abs_error: float

    def as_dict(self) -> dict:
        return asdict(self)

    def summary(self) -> str:
        return (
            f"int8 quality vs unquantized ({self.prompts} prompts, {self.frames} frames, "
            f"teacher-forced): code agreement {100 * self.code_agreement:.1f}% "
            f"(codebook 0: {100 * self.code0_agreement:.1f}%), logit error "
            f"{100 * self.logit_rel_error:.2f}% relative, {self.logit_max_abs_error:.3g} max abs"
        )


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


def int8_quality(reference, quantized, frames: int = 24, prompts=PROMPTS) -> Int8Quality:
    """Compare two engines loaded from the same checkpoint (the second with quantize='int8')."""
    options = SynthesisOptions(
        language="english", sampling=SamplingOptions.greedy(), max_frames=frames
    )
    voice = reference.supported_speakers[0] if reference.supported_speakers else None
    same = same0 = positions = positions0 = 0
    rel_errors, max_abs = [], 0.0
    for text in prompts:
        codes = torch.from_numpy(reference.synthesize(text, voice=voice, options=options).codes)
        pair = []
        for engine in (reference, quantized):
            m = engine._m
            req = resolve_request(m, text, voice, None, options)
            with torch.inference_mode():
                prompt = build_prompt(m.model.talker, m.cfg, req.ids, req.cond)
            pair.append(forced_logits(m.model.talker, prompt, codes.to(m.device)))
        ref, q = pair
        for a, b in ((q.code0, ref.code0), (q.residual.flatten(0, 1), ref.residual.flatten(0, 1))):
            rel_errors.append(((a - b).norm(dim=-1) / b.norm(dim=-1).clamp_min(1e-12)).cpu())
            max_abs = max(max_abs, float((a - b).abs().max()))
        hits0 = int((q.code0.argmax(-1) == ref.code0.argmax(-1)).sum())
        hits_rest = int((q.residual.argmax(-1) == ref.residual.argmax(-1)).sum())
        same0 += hits0
        positions0 += codes.shape[0]
        same += hits0 + hits_rest
        positions += codes.shape[0] * 16
    return Int8Quality(
        prompts=len(prompts),
        frames=positions0,
        code_agreement=same / positions,
        code0_agreement=same0 / positions0,
        logit_rel_error=float(torch.cat(rel_errors).mean()),
        logit_max_abs_error=max_abs,
    )
