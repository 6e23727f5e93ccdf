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


# why the phase columns need not add up to the total
PHASES_LEGEND = (
    "talker, code pred and decoder: ms per frame in each phase; ms/frame (or ms/step) is the "
    "wall time, less than their sum when the decoder overlaps generation on another thread "
    "(overlap on), more by the loop's own work"
)


def machine_load() -> dict:
    """The 1-minute load average and the CPUs this process may use, read before a benchmark
    starts: other processes' load (a busy machine made figures 8x worse, unsaid)."""
    from ownvoice.threads import _affinity

    try:
        load = os.getloadavg()[0]
    except OSError:
        load = None
    return dict(load=load, cpus=len(_affinity()))


def busy_warning(machine: dict | None) -> str | None:
    """A line for the table when the machine was busy (the doctor's rule: load >= 3/4 of the
    usable CPUs), else None."""
    if not machine or machine.get("load") is None or machine["load"] < 0.75 * machine["cpus"]:
        return None
    return (
        f"warning: the machine was busy before the benchmark began (load average "
        f"{machine['load']:.1f} on {machine['cpus']} usable CPUs): these figures are slower "
        "than this machine can do; run it again when it is quiet"
    )


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
