"""Simulated machines for the doctor's tests: a healthy CUDA box and a ROCm iGPU in a container.

Tests derive the broken situations from these with dataclasses.replace.
"""

from __future__ import annotations

from dataclasses import replace

from ownvoice.doctor import CachedModel, ConfigFacts, DeviceNode, Gpu, Probe

GIB = 1024**3
CV = "Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice"
ROCM_SAFE = ConfigFacts(use_cuda_graphs=False, use_compile=False, decode_window_frames=72)
# kernels in a typical ROCm 6.x torch build: no RDNA 3.5 (gfx115x)
ROCM_ARCHS = (
    "gfx900",
    "gfx906",
    "gfx908",
    "gfx90a",
    "gfx942",
    "gfx1030",
    "gfx1100",
    "gfx1101",
    "gfx1102",
)


def cached(source: str = CV) -> CachedModel:
    return CachedModel(
        source, local=False, present=True, detail="/cache/hub/x", weight_bytes=2_500_000_000
    )


def node(path: str, ok: bool = True, gid: int = 992, group: str | None = "render") -> DeviceNode:
    return DeviceNode(path, exists=True, accessible=ok, gid=gid, group=group)


def healthy_cuda() -> Probe:
    return Probe(
        torch_version="2.13.0+cu129",
        build="cuda",
        cuda_version="12.9",
        arch_list=("sm_80", "sm_89", "sm_90"),
        gpu_available=True,
        gpus=(Gpu(0, "NVIDIA GeForce RTX 4090", "sm_89", 24 * GIB, 23 * GIB),),
        nodes=(
            node("/dev/nvidiactl", gid=0, group="root"),
            node("/dev/nvidia0", gid=0, group="root"),
        ),
        uid=10001,
        groups=((10001, "ownvoice"),),
        nvidia_driver="575.57.08",
        in_container=True,
        models=(cached(),),
        hf_cache="/cache/huggingface/hub",
    )


def igpu_rocm(**changes) -> Probe:
    """A Ryzen AI 890M (gfx1150) in the ROCm container, set up as documented."""
    probe = Probe(
        torch_version="2.10.0+rocm7.2.2",
        build="rocm",
        hip_version="7.2.2",
        arch_list=ROCM_ARCHS,
        gpu_available=True,
        gpus=(Gpu(0, "AMD Radeon 890M Graphics", "gfx1100", 16 * GIB, 15 * GIB),),
        nodes=(
            node("/dev/kfd"),
            node("/dev/dri", gid=0, group="root"),
            node("/dev/dri/renderD128"),
        ),
        uid=10001,
        groups=((10001, "ownvoice"), (44, "video"), (992, "render")),
        gfx_targets=("gfx1150",),
        in_container=True,
        env={"HSA_OVERRIDE_GFX_VERSION": "11.0.0", "MIOPEN_FIND_MODE": "FAST"},
        models=(cached(),),
        hf_cache="/cache/huggingface/hub",
    )
    return replace(probe, **changes)
