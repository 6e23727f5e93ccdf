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

# fixed prompts: plain prose, numbers and punctuation, a question
PROMPTS = (
    "The quick brown fox jumps over the lazy dog, and then it runs into the forest.",
    "On 12 March 2024, at 7:45 pm, the train left platform 3 with 241 passengers.",
    "Would you like to hear the weather forecast for tomorrow morning?",
)


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
        ref, q = (
            e.forced_logits(text, codes, voice=voice, options=options)
            for e in (reference, quantized)
        )
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
