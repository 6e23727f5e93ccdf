"""Memory stays flat over long outputs: after the first chunk nothing grows per frame but the
talker's KV cache, which doubles when a sequence needs more positions (a batch of rows must not
reserve the longest possible utterance for each of them up front)."""

from __future__ import annotations

import os

import pytest

from ownvoice.engine.options import SynthesisOptions


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc")
def test_long_generation_does_not_grow(tmp_path):
    from ownvoice.dev.random_checkpoint import write_random_checkpoint
    from ownvoice.engine.engine import Engine

    folder = write_random_checkpoint(tmp_path / "cv", "0.6B-CustomVoice", tiny=True, no_eos=True)
    engine = Engine.load(str(folder), device="cpu")
    options = SynthesisOptions(max_frames=6000, seed=1, first_chunk_frames=50, chunk_frames=50)
    frames, samples = 0, []
    for chunk in engine.stream("A long, long story.", voice="ryan", options=options):
        frames += chunk.num_frames
        if frames == 200:
            start = rss()
        if frames > 200:
            samples.append(rss())
    assert frames == 6000, frames  # --no-eos: the cap decides
    growth = max(samples) - start
    t = engine.model_config.talker.transformer
    per_position = 2 * t.num_layers * t.num_kv_heads * t.head_dim * 4  # keys and values, float32
    # 8192 positions at the end; the smaller caches before it may stay in the allocator's heap
    cache = 3 * 8192 * per_position
    # an audio buffer kept by mistake would be 6000 * 1920 * 4 bytes = 44 MiB
    assert growth < 6 * 2**20 + cache, (
        f"RSS grew {growth / 2**20:.1f} MiB over 5800 frames (8 minutes of audio); the KV "
        f"cache accounts for {cache / 2**20:.1f} MiB of it at most"
    )
