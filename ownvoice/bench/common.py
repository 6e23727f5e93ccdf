"""What every benchmark side shares: the text, memory peaks, device syncs and a voice per model
type (imported by the worker and the batch benchmark alike)."""

from __future__ import annotations

import os
import resource

import numpy as np
import torch

TEXT = (
    "The quick brown fox jumps over the lazy dog, and then it runs far away into the forest, "
    "where nobody can find it until the next morning."
)


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def voice_for(engine):
    if engine.model_type == "custom_voice":
        return dict(voice=engine.supported_speakers[0])
    if engine.model_type == "voice_design":
        return dict(instruct="A calm, clear voice.")
    from ownvoice.dev.random_speaker_encoder import synthetic_voice

    clip = synthetic_voice(np.random.default_rng(0), 3.0)
    return dict(voice=engine.make_voice((clip, 24000), x_vector_only=True))
