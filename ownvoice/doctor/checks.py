"""The doctor's checks for any machine: torch build, NVIDIA, the GPU in use, memory, models.

Pure functions from a Probe (and the server config) to findings: each looks at one thing and
says what it found, how bad it is for a server that should (or should not) use a GPU, and the
fix, in the words a user would type. The AMD-specific checks are in amd.py. Nothing here reads
the machine; `probe.collect_probe()` does that once.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ownvoice.doctor.probe import CachedModel, DeviceNode, Probe
from ownvoice.doctor.report import GIB, Finding, Severity

CUDA_WHEELS = "https://download.pytorch.org/whl/cu129"
ROCM_WHEELS = "https://download.pytorch.org/whl/rocm6.4"
# bytes of weight files when a model is not cached yet (0.6B / 1.7B checkpoints + codec)
_SIZE_BY_NAME = {"0.6b": 2_520_000_000, "1.7b": 4_540_000_000}


@dataclass(frozen=True)
class ConfigFacts:
    """The parts of the server config the checks care about."""

    device: str = "auto"  # auto | cpu | cuda | cuda:N
    require_gpu: bool = False
    use_compile: bool = False
    use_cuda_graphs: bool = True
    decode_window_frames: int | None = None
    gpu_keepalive_interval_s: float = 0.0
    num_threads: int | None = None

    @classmethod
    def from_settings(cls, settings: Any) -> ConfigFacts:
        """From a ServerSettings object or the YAML mapping (missing keys take defaults)."""

        def get(obj: Any, key: str, default: Any) -> Any:
            if obj is None:
                return default
            value = (
                obj.get(key, default) if isinstance(obj, Mapping) else getattr(obj, key, default)
            )
            return default if value is None and default is not None else value

        opt = get(settings, "optimization", None)
        streaming = get(opt, "streaming", None)
        return cls(
            device=str(get(settings, "device", "auto")),
            require_gpu=bool(get(settings, "require_gpu", False)),
            use_compile=bool(get(opt, "use_compile", False)),
            use_cuda_graphs=bool(get(opt, "use_cuda_graphs", True)),
            decode_window_frames=get(streaming, "decode_window_frames", None),
            gpu_keepalive_interval_s=float(get(settings, "gpu_keepalive_interval_s", 0.0)),
            num_threads=get(opt, "num_threads", None),
        )


def gpu_expected(probe: Probe, config: ConfigFacts) -> bool:
    """Whether running on the CPU would be a silent failure here.

    Yes when the config asks for a GPU, or (device auto) when the machine has one: a container
    that misses a device node or a group would otherwise fall back to the CPU without a word.
    """
    if config.device == "cpu":
        return False
    if config.require_gpu or config.device.startswith("cuda"):
        return True
    return probe.amd_hardware or probe.nvidia_hardware


def bad_severity(expect_gpu: bool) -> Severity:
    return Severity.ERROR if expect_gpu else Severity.WARNING


# 1) torch itself -----------------------------------------------------------------------------


def check_torch(p: Probe, expect_gpu: bool, config: ConfigFacts) -> list[Finding]:
    if p.torch_version is None:
        return [
            Finding(
                "torch-missing",
                Severity.ERROR,
                f"torch cannot be imported ({p.torch_error})",
                f"install a torch build for this machine first: {_torch_install_hint(p)}",
            )
        ]
    out = []
    if config.require_gpu and config.device == "cpu":
        out.append(
            Finding(
                "config-contradiction",
                Severity.ERROR,
                "the config says device: cpu and require_gpu: true",
                "set device: auto (or cuda), or require_gpu: false",
            )
        )
    if p.build == "cpu":
        if config.device == "cpu":
            out.append(
                Finding(
                    "torch-cpu-build",
                    Severity.INFO,
                    f"torch {p.torch_version} is a CPU build; device: cpu is configured",
                )
            )
        elif expect_gpu or p.amd_hardware or p.nvidia_hardware:
            hw = _hardware(p)
            out.append(
                Finding(
                    "torch-cpu-build",
                    bad_severity(expect_gpu),
                    f"torch {p.torch_version} is a CPU-only build, so synthesis runs on the CPU"
                    + (f" although this machine has {hw}" if hw else ""),
                    _torch_install_hint(p),
                )
            )
        else:
            out.append(
                Finding(
                    "torch-cpu-build",
                    Severity.INFO,
                    f"torch {p.torch_version} is a CPU build and no GPU was found",
                )
            )
        return out
    if p.build == "cuda" and p.amd_hardware and not p.nvidia_hardware:
        out.append(
            Finding(
                "torch-wrong-build",
                bad_severity(expect_gpu),
                f"torch {p.torch_version} is built for NVIDIA CUDA, but the GPU here is AMD",
                _torch_install_hint(p),
            )
        )
    elif p.build == "rocm" and p.nvidia_hardware and not p.amd_hardware:
        out.append(
            Finding(
                "torch-wrong-build",
                bad_severity(expect_gpu),
                f"torch {p.torch_version} is built for AMD ROCm, but the GPU here is NVIDIA",
                _torch_install_hint(p),
            )
        )
    return out


def _hardware(p: Probe) -> str:
    if p.gfx_targets:
        return f"an AMD GPU ({', '.join(p.gfx_targets)})"
    if p.amd_hardware:
        return "an AMD GPU (/dev/kfd)"
    if p.nvidia_hardware:
        return "an NVIDIA GPU" + (f" (driver {p.nvidia_driver})" if p.nvidia_driver else "")
    return ""


def _torch_install_hint(p: Probe) -> str:
    cuda = (
        f"NVIDIA: `pip install --force-reinstall torch --index-url {CUDA_WHEELS}`, "
        "or run the CUDA container (docker/compose.cuda.yaml)"
    )
    rocm = (
        f"AMD: `pip install --force-reinstall torch --index-url {ROCM_WHEELS}` "
        "(ROCm >= 7 for gfx1150/gfx1151), or run the ROCm container (docker/compose.rocm.yaml)"
    )
    if p.nvidia_hardware and not p.amd_hardware:
        return cuda
    if p.amd_hardware and not p.nvidia_hardware:
        return rocm
    return f"{cuda}; {rocm}"


# 2) NVIDIA -----------------------------------------------------------------------------------


def check_nvidia(p: Probe, expect_gpu: bool, config: ConfigFacts) -> list[Finding]:
    if p.build != "cuda" or p.torch_version is None or p.gpu_available:
        return []
    said = f" (torch: {p.gpu_error})" if p.gpu_error else ""
    nodes = [
        n
        for n in p.nodes
        if n.exists and (n.path.startswith("/dev/nvidia") or n.path == "/dev/dxg")
    ]
    if not nodes:
        fix = (
            "give the container the GPU: docker/compose.cuda.yaml reserves it "
            "(deploy.resources.reservations.devices, driver nvidia); with docker run use --gpus all. "
            "The host needs the NVIDIA driver and the NVIDIA Container Toolkit "
            "(`sudo nvidia-ctk runtime configure --runtime=docker`, then restart docker)."
            if p.in_container
            else "install the NVIDIA driver; `nvidia-smi` must list the GPU"
        )
        return [
            Finding(
                "nvidia-no-device",
                bad_severity(expect_gpu),
                f"no NVIDIA device nodes (/dev/nvidia*) are visible{said}",
                fix,
            )
        ]
    blocked = [n for n in nodes if not n.accessible]
    if blocked:
        return [access_finding("nvidia-access", p, blocked, expect_gpu)]
    return [
        Finding(
            "nvidia-driver",
            bad_severity(expect_gpu),
            f"the NVIDIA device is present but torch (CUDA {p.cuda_version}) cannot use it{said}",
            f"the driver ({p.nvidia_driver or 'version unknown'}) may be too old for CUDA {p.cuda_version}: "
            "update it, or install a torch built for an older CUDA "
            "(`pip install --force-reinstall torch --index-url https://download.pytorch.org/whl/cu126`)",
        )
    ]


# 3) device-node access (NVIDIA and AMD) ----------------------------------------------------


def access_finding(code: str, p: Probe, nodes: list[DeviceNode], expect_gpu: bool) -> Finding:
    """A device node exists but this process may not open it: almost always a missing group."""
    owners = sorted(
        {(n.gid, n.group) for n in nodes if n.gid is not None and n.gid not in p.gids},
        key=lambda x: x[0],
    )
    paths = ", ".join(n.path for n in nodes)
    mine = ", ".join(f"{name or '?'}({gid})" for gid, name in p.groups) or "none"
    if not owners:  # in the owning group already: the mode bits forbid it
        return Finding(
            code,
            bad_severity(expect_gpu),
            f"no read/write access to {paths} although this process is in its group (groups: {mine})",
            f"check the permissions with `ls -l {nodes[0].path}` (they should be crw-rw---- root:render)",
        )
    need = ", ".join(f"{name or 'unnamed'} (gid {gid})" for gid, name in owners)
    gids = ", ".join(f'"{gid}"' for gid, _ in owners)
    if p.in_container:
        fix = (
            f"add the owning group to the container: `group_add: [{gids}]` "
            "(docker/compose.rocm.yaml reads VIDEO_GID and RENDER_GID: put the numbers from "
            "`getent group video render` on the host into docker/.env); "
            f"with docker run: --group-add {owners[0][0]}"
        )
    else:
        names = ",".join(sorted({name for _, name in owners if name})) or "render,video"
        fix = f"`sudo usermod -aG {names} $USER`, then log out and in again (or run `newgrp {names.split(',')[0]}`)"
    return Finding(
        code,
        bad_severity(expect_gpu),
        f"no read/write access to {paths}: it belongs to {need}, and this process is only in {mine}",
        fix,
    )


# 4) the GPU torch will use ----------------------------------------------------------------------


def check_gpu(p: Probe, expect_gpu: bool, config: ConfigFacts) -> list[Finding]:
    if not p.gpu_available or not p.gpus:
        return []
    names = ", ".join(f"cuda:{g.index} {g.name} [{g.arch}]" for g in p.gpus)
    out = [Finding("gpu-visible", Severity.OK, f"torch sees {len(p.gpus)} GPU(s): {names}")]
    if config.device.startswith("cuda:"):
        index = config.device.partition(":")[2]
        if not index.isdigit() or int(index) >= len(p.gpus):
            out.append(
                Finding(
                    "device-index",
                    Severity.ERROR,
                    f"device: {config.device} is configured, but torch sees {len(p.gpus)} GPU(s)",
                    f"use device: cuda:0 .. cuda:{len(p.gpus) - 1}, or device: auto",
                )
            )
    return out


def check_memory(p: Probe, expect_gpu: bool, config: ConfigFacts) -> list[Finding]:
    if not p.gpus or p.gpus[0].free_bytes is None or not p.models:
        return []
    gpu = p.gpus[0]
    need = sum(_model_bytes(m) for m in p.models) * 1.15 + GIB  # + activations, caches, context
    if gpu.free_bytes >= need:
        return []
    igpu = (
        "an iGPU's memory is the BIOS carve-out (UMA frame buffer): raise it in the firmware setup; "
        if p.gfx_targets
        else ""
    )
    return [
        Finding(
            "gpu-memory-low",
            Severity.WARNING,
            f"cuda:{gpu.index} has {gpu.free_bytes / GIB:.1f} GiB free; the configured models need about "
            f"{need / GIB:.1f} GiB",
            f"{igpu}configure fewer or smaller models (0.6B), set lazy_load: true, or free the GPU",
        )
    ]


def check_cpu(p: Probe, expect_gpu: bool, config: ConfigFacts) -> list[Finding]:
    """The engine's CPU thread count and why; other processes keeping the cores busy; threads
    told to spin."""
    from ownvoice.threads import decide_threads

    choice = decide_threads(config.num_threads, p.torch_threads, p.cpu_affinity, p.cpu_quota)
    out = [Finding("cpu-threads", Severity.INFO,
                   f"the engine uses {choice.count} CPU thread(s): {choice.why}")]  # fmt: skip
    usable = min(p.cpu_affinity, math.ceil(p.cpu_quota) if p.cpu_quota else p.cpu_affinity)
    if p.load_average is not None and p.load_average >= 0.75 * usable:
        out.append(
            Finding(
                "cpu-busy",
                Severity.WARNING,
                f"the load average is {p.load_average:.1f} on {usable} usable CPU(s): other "
                "processes are using the cores, so speech on the CPU will be slower",
                "run it when the machine is quieter, or give it its own cores (taskset, "
                "docker --cpuset-cpus) and set optimization.num_threads to their number",
            )
        )
    spinning = _spinning(p.env)
    if spinning:
        out.append(
            Finding(
                "cpu-spin",
                Severity.WARNING,
                f"{spinning}: waiting threads spin and take the cores from any other process "
                "on them (two such processes can each run several times slower)",
                "unset it (ownvoice then waits passively after a short spin)",
            )
        )
    return out


def _spinning(env: dict) -> str | None:
    """The setting that makes OpenMP threads spin long, if one does."""
    from ownvoice.threads import KEEP_ENV

    if env.get(KEEP_ENV, "") not in ("", "0"):
        return f"{KEEP_ENV}={env[KEEP_ENV]} (OpenMP's own spinning)"
    if env.get("OMP_WAIT_POLICY", "").upper() == "ACTIVE" and "GOMP_SPINCOUNT" not in env:
        return "OMP_WAIT_POLICY=ACTIVE"
    spins = env.get("GOMP_SPINCOUNT", "").strip().lower()
    if spins == "infinity" or (spins.isdigit() and int(spins) > 100_000):
        return f"GOMP_SPINCOUNT={env['GOMP_SPINCOUNT']}"
    return None


def _model_bytes(m: CachedModel) -> int:
    if m.weight_bytes:
        return m.weight_bytes
    name = m.source.lower()
    return next((v for k, v in _SIZE_BY_NAME.items() if k in name), _SIZE_BY_NAME["1.7b"])


# 5) models ----------------------------------------------------------------------------------------


def check_models(p: Probe, expect_gpu: bool, config: ConfigFacts) -> list[Finding]:
    out = []
    for m in p.models:
        if m.present:
            out.append(
                Finding("model-cached", Severity.OK, f"{m.source} is available ({m.detail})")
            )
        elif m.local:
            out.append(
                Finding(
                    "model-missing",
                    Severity.ERROR,
                    f"model folder {m.source!r} is not a usable checkpoint: {m.detail}",
                    "point models.<name>.source at a complete checkpoint folder, or use a hub id "
                    "like Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice",
                )
            )
        else:
            size = f"about {_model_bytes(m) / 1e9:.1f} GB"
            fetch = f"`hf download {m.source}` (in the container: `docker compose exec ownvoice hf download {m.source}`)"
            if p.hf_offline or p.hub_reachable is False:
                why = "HF_HUB_OFFLINE is set" if p.hf_offline else "the Hub cannot be reached"
                out.append(
                    Finding(
                        "model-not-cached",
                        Severity.ERROR,
                        f"{m.source} is not in the Hugging Face cache ({p.hf_cache}) and {why}: "
                        "the server cannot load it here",
                        f"download it once with network access: {fetch}; or point the server at "
                        "a checkpoint folder you have (`ownvoice serve --model DIR`, or "
                        "models.<name>.source: DIR in the config)",
                    )
                )
            else:
                out.append(
                    Finding(
                        "model-not-cached",
                        Severity.WARNING,
                        f"{m.source} is not in the Hugging Face cache ({p.hf_cache}); the first start downloads {size}",
                        f"let the first start download it (allow a few minutes), or fetch it now: {fetch}",
                    )
                )
    return out
