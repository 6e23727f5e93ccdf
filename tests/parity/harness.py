"""Run one scenario through the reference package and through ownvoice, and compare.

A scenario is a mode (custom_voice, voice_design, clone) plus its arguments. Both sides load the
same random checkpoint folder unchanged, in float32 on the CPU. The reference's codes are taken
from what it hands to its codec decoder (for ICL that includes the reference codes, which we
strip), its waveform from what its public API returns.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from ownvoice.engine.options import SamplingOptions, SynthesisOptions

WAVE_ATOL = 1e-5
WAVE_RTOL = 1e-5


@dataclass(frozen=True)
class Scenario:
    name: str
    mode: str  # custom_voice | voice_design | clone
    text: str
    language: str = "english"
    speaker: str | None = None
    instruct: str | None = None
    ref_audio: tuple | None = None  # (np.ndarray, sr)
    ref_text: str | None = None
    x_vector_only: bool = False
    non_streaming: bool | None = None  # None = each side's default
    frames: int = 12
    seed: int | None = None  # None = greedy


@dataclass
class Outcome:
    codes: np.ndarray  # (frames, 16)
    wav: np.ndarray
    extra: dict = field(default_factory=dict)


def run_reference(ref, s: Scenario) -> Outcome:
    captured = []
    tokenizer = ref.model.speech_tokenizer
    original = tokenizer.decode

    def spy(encoded):
        captured.append([np.asarray(e["audio_codes"]) for e in encoded])
        return original(encoded)

    tokenizer.decode = spy
    gen = dict(max_new_tokens=s.frames + 1)
    if s.seed is None:
        gen.update(do_sample=False, subtalker_dosample=False)
    else:
        torch.manual_seed(s.seed)
    kwargs = dict(language=s.language)
    if s.non_streaming is not None:
        kwargs["non_streaming_mode"] = s.non_streaming
    try:
        if s.mode == "custom_voice":
            wavs, _ = ref.generate_custom_voice(
                s.text, speaker=s.speaker, instruct=s.instruct, **kwargs, **gen
            )
        elif s.mode == "voice_design":
            wavs, _ = ref.generate_voice_design(s.text, instruct=s.instruct, **kwargs, **gen)
        else:
            wavs, _ = ref.generate_voice_clone(
                s.text,
                ref_audio=s.ref_audio,
                ref_text=s.ref_text,
                x_vector_only_mode=s.x_vector_only,
                **kwargs,
                **gen,
            )
    finally:
        tokenizer.decode = original
    codes = captured[0][0]
    if s.mode == "clone" and not s.x_vector_only:
        prompt = ref.create_voice_clone_prompt(s.ref_audio, ref_text=s.ref_text)[0]
        codes = codes[prompt.ref_code.shape[0] :]
    return Outcome(codes=codes, wav=np.asarray(wavs[0]))


def run_ours(engine, s: Scenario) -> Outcome:
    voice = s.speaker
    if s.mode == "clone":
        voice = engine.make_voice(s.ref_audio, ref_text=s.ref_text, x_vector_only=s.x_vector_only)
    elif s.mode == "voice_design":
        voice = None
    text_mode = None
    if s.non_streaming is not None:
        text_mode = "non-streaming" if s.non_streaming else "streaming"
    sampling = SamplingOptions.greedy() if s.seed is None else None
    options = SynthesisOptions(
        language=s.language,
        sampling=sampling,
        seed=s.seed,
        max_frames=s.frames,
        text_mode=text_mode,
    )
    result = engine.synthesize(s.text, voice=voice, instruct=s.instruct, options=options)
    return Outcome(codes=result.codes, wav=result.audio, extra={"stop": result.stop_reason})


def mismatches(ref: Outcome, ours: Outcome) -> list[str]:
    """Everything that differs, as readable lines; empty when the two agree."""
    problems = []
    if ref.codes.shape != ours.codes.shape:
        problems.append(f"codes shape {ours.codes.shape} != reference {ref.codes.shape}")
    elif not np.array_equal(ref.codes, ours.codes):
        frame = int(np.argwhere(ref.codes != ours.codes)[0][0])
        problems.append(
            f"codes differ from frame {frame}: ours {ours.codes[frame].tolist()} "
            f"reference {ref.codes[frame].tolist()}"
        )
    if ref.wav.shape != ours.wav.shape:
        problems.append(f"waveform length {ours.wav.shape} != reference {ref.wav.shape}")
    else:
        diff = np.abs(ref.wav.astype(np.float64) - ours.wav)
        rel = np.linalg.norm(diff) / max(np.linalg.norm(ref.wav), 1e-12)
        if diff.max() > WAVE_ATOL or rel > WAVE_RTOL:
            problems.append(f"waveform max abs diff {diff.max():.3g}, relative {rel:.3g}")
    return problems
