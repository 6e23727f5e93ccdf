"""What int8 / int4 weights cost: the quantized model against the unquantized one.

Two views, over fixed prompts:

- **Teacher-forced logits.** Both models read the same prompts and the same codes (the
  unquantized model's greedy output), so every one of the 16 codebook positions of every frame is
  compared on equal inputs: code agreement (the share of positions whose greedy code is the same)
  and the logits' relative error. Free-running generation would only tell where the first
  disagreement happened.
- **The audio.** Each model generates greedily on its own and the two waveforms are compared as
  log-mel spectrograms (mean absolute difference of natural-log mel energies, 128 bands). Beside
  it, for scale, the same distance between two sampled takes of the unquantized model (seeds 1
  and 2): what "another rendering of the same text" costs.

    q = quantized_quality(reference_engine, int8_engine, "int8", frames=24)
    q.code_agreement, q.logit_rel_error, q.mel_distance, q.mel_distance_takes
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch

from ownvoice.engine.options import SamplingOptions, SynthesisOptions
from ownvoice.model.mel import log_mel_spectrogram

# fixed prompts: plain prose, numbers and punctuation, a question
PROMPTS = (
    "The quick brown fox jumps over the lazy dog, and then it runs into the forest.",
    "On 12 March 2024, at 7:45 pm, the train left platform 3 with 241 passengers.",
    "Would you like to hear the weather forecast for tomorrow morning?",
)


@dataclass(frozen=True)
class QuantQuality:
    mode: str  # "int8" or "int4"
    model_type: str
    prompts: int
    frames: int  # frames compared, over all prompts
    code_agreement: float  # all 16 codebooks
    code0_agreement: float  # codebook 0 (the talker's choice)
    logit_rel_error: float  # mean relative L2 error of a logit row
    logit_max_abs_error: float
    mel_distance: float  # free-running greedy audio, quantized against unquantized
    mel_distance_takes: float  # two sampled takes of the unquantized model, for scale

    def as_dict(self) -> dict:
        return asdict(self)

    def summary(self) -> str:
        return (
            f"{self.mode} quality vs unquantized ({self.model_type}, {self.prompts} prompts, "
            f"{self.frames} frames, teacher-forced): code agreement "
            f"{100 * self.code_agreement:.1f}% (codebook 0: {100 * self.code0_agreement:.1f}%), "
            f"logit error {100 * self.logit_rel_error:.2f}% relative, "
            f"{self.logit_max_abs_error:.3g} max abs; log-mel distance of the greedy audio "
            f"{self.mel_distance:.3f} (two sampled takes: {self.mel_distance_takes:.3f})"
        )


def mel_distance(a: np.ndarray, b: np.ndarray) -> float:
    """Mean absolute difference of the log-mel spectrograms of two 24 kHz waveforms, over the
    frames both have (0 for identical audio)."""
    n = min(len(a), len(b))
    if n == 0:
        return 0.0
    ma, mb = (log_mel_spectrogram(torch.from_numpy(np.asarray(w[:n], np.float32))) for w in (a, b))
    return float((ma - mb).abs().mean())


def quantized_quality(
    reference, quantized, mode: str, frames: int = 24, prompts=PROMPTS, voice: dict | None = None
) -> QuantQuality:
    """Compare two engines loaded from the same checkpoint (the second with quantize=mode).
    `voice`: keyword arguments naming the voice (voice=..., instruct=...); by default the first
    built-in speaker."""
    if voice is None:
        speakers = reference.supported_speakers
        voice = dict(voice=speakers[0] if speakers else None)
    greedy = SynthesisOptions(
        language="english", sampling=SamplingOptions.greedy(), max_frames=frames
    )
    same = same0 = positions = positions0 = 0
    rel_errors, max_abs, mels, takes = [], 0.0, [], []
    for text in prompts:
        want = reference.synthesize(text, **voice, options=greedy)
        codes = torch.from_numpy(want.codes)
        ref, q = (
            e.forced_logits(text, codes, **voice, options=greedy) for e in (reference, quantized)
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
        got = quantized.synthesize(text, **voice, options=greedy)
        mels.append(mel_distance(got.audio, want.audio))
        take1, take2 = (  # the model's own sampling settings
            reference.synthesize(text, **voice, options=greedy.with_(sampling=None, seed=s))
            for s in (1, 2)
        )
        takes.append(mel_distance(take1.audio, take2.audio))
    return QuantQuality(
        mode=mode,
        model_type=reference.model_type,
        prompts=len(prompts),
        frames=positions0,
        code_agreement=same / positions,
        code0_agreement=same0 / positions0,
        logit_rel_error=float(torch.cat(rel_errors).mean()),
        logit_max_abs_error=max_abs,
        mel_distance=float(np.mean(mels)),
        mel_distance_takes=float(np.mean(takes)),
    )
