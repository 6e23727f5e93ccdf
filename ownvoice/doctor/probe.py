"""What the doctor knows about this machine: one frozen Probe, collected by `collect_probe()`.

Everything the checks look at is in the Probe, so a test can describe any machine (a CPU-only
torch, a container without /dev/kfd, an iGPU without HSA_OVERRIDE_GFX_VERSION) without having
one. `collect_probe` is the only function here that touches the real system; it never raises:
what it cannot read is left empty and the reason noted.
"""

from __future__ import annotations

import glob
import grp
import os
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ownvoice.doctor import gfx

# environment variables that decide which GPU is used and how (values are shown by the doctor)
ENV_VARS = (
    "HSA_OVERRIDE_GFX_VERSION",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "CUDA_VISIBLE_DEVICES",
    "NVIDIA_VISIBLE_DEVICES",
    "MIOPEN_FIND_MODE",
    "HF_HOME",
    "HF_HUB_CACHE",
    "HF_HUB_OFFLINE",
    "OMP_WAIT_POLICY",
    "OMP_NUM_THREADS",
    "GOMP_SPINCOUNT",
    "OWNVOICE_KEEP_OMP_WAITING",
)
KFD_TOPOLOGY = "/sys/class/kfd/kfd/topology/nodes"


@dataclass(frozen=True)
class Gpu:
    """A device torch can use (`cuda:<index>`, also on ROCm)."""

    index: int
    name: str
    arch: str  # ROCm: ISA as torch sees it ("gfx1100", after any override); CUDA: "sm_89"
    total_bytes: int
    free_bytes: int | None = None  # None: could not be read


@dataclass(frozen=True)
class DeviceNode:
    """A device file the GPU runtime opens (/dev/kfd, /dev/dri/renderD128, /dev/nvidia0 ...)."""

    path: str
    exists: bool
    accessible: bool = False  # readable and writable by this process
    gid: int | None = None  # owning group
    group: str | None = None  # its name here (None: no such group in this system/container)


@dataclass(frozen=True)
class CachedModel:
    """Whether a configured model can be loaded without a download."""

    source: str  # hub id or folder, as configured
    local: bool  # a folder (True) or a hub id (False)
    present: bool  # every file the loader needs is there
    detail: str = ""  # where it is, or what is missing
    weight_bytes: int | None = None  # size of its weight files, when present


@dataclass(frozen=True)
class Probe:
    # torch
    torch_version: str | None = None  # None: torch cannot be imported
    torch_error: str | None = None  # why not
    build: str = "cpu"  # "cuda" | "rocm" | "cpu" (the torch wheel, not the hardware)
    cuda_version: str | None = None  # torch.version.cuda
    hip_version: str | None = None  # torch.version.hip
    arch_list: tuple[str, ...] = ()  # ISAs this torch build has kernels for
    gpu_available: bool = False  # torch.cuda.is_available()
    gpu_error: str | None = None  # what torch said when the GPU could not be initialised
    gpus: tuple[Gpu, ...] = ()
    # the system
    nodes: tuple[DeviceNode, ...] = ()
    uid: int = 0
    groups: tuple[tuple[int, str | None], ...] = ()  # (gid, name) of this process
    gfx_targets: tuple[str, ...] = ()  # AMD GPU ISAs from the KFD topology in /sys (real ISA)
    nvidia_driver: str | None = None  # kernel module version from /proc/driver/nvidia/version
    in_container: bool = False
    env: Mapping[str, str] = field(default_factory=dict)  # the ENV_VARS that are set
    # the CPU: what the engine's threads may use, and how busy the machine is
    cpu_affinity: int = 1  # CPUs this process may run on
    cpu_quota: float | None = None  # cgroup quota in CPUs; None = no limit
    torch_threads: int | None = None  # torch's default thread count
    load_average: float | None = None  # 1-minute load average
    # models
    models: tuple[CachedModel, ...] = ()
    hf_cache: str = ""
    hf_offline: bool = False
    # whether the Hub answers, asked only when a hub model is not cached (None: not asked)
    hub_reachable: bool | None = None

    def node(self, path: str) -> DeviceNode | None:
        return next((n for n in self.nodes if n.path == path), None)

    def nodes_under(self, prefix: str) -> tuple[DeviceNode, ...]:
        return tuple(n for n in self.nodes if n.path.startswith(prefix))

    @property
    def gids(self) -> frozenset[int]:
        return frozenset(g for g, _ in self.groups)

    @property
    def amd_hardware(self) -> bool:
        """An AMD GPU is in this machine (even if this process cannot open it)."""
        kfd = self.node("/dev/kfd")
        return bool(self.gfx_targets) or (kfd is not None and kfd.exists)

    @property
    def nvidia_hardware(self) -> bool:
        """An NVIDIA driver or device node is visible (even if this process cannot use it)."""
        return self.nvidia_driver is not None or any(
            n.exists for n in self.nodes if n.path.startswith("/dev/nvidia") or n.path == "/dev/dxg"
        )


def collect_probe(models: Sequence[str] = ()) -> Probe:
    """Read this machine: torch build and devices, device nodes, groups, environment, models."""
    env = {k: os.environ[k] for k in ENV_VARS if k in os.environ}
    hf_cache, hf_offline = _hf_settings()
    cached = tuple(_model_cache(m) for m in models)
    to_download = any(not m.present and not m.local for m in cached)
    return Probe(
        **_torch_facts(),
        nodes=_device_nodes(),
        uid=os.geteuid(),
        groups=_process_groups(),
        gfx_targets=_kfd_targets(),
        nvidia_driver=_nvidia_driver(),
        in_container=_in_container(),
        env=env,
        **_cpu_facts(),
        models=cached,
        hf_cache=hf_cache,
        hf_offline=hf_offline,
        hub_reachable=hub_reachable() if to_download and not hf_offline else None,
    )


def hub_reachable(timeout_s: float = 3.0) -> bool:
    """Whether a TCP connection to the Hub (HF_ENDPOINT, default huggingface.co) opens: a
    machine without it cannot download a model at its first start, whatever HF_HUB_OFFLINE says."""
    import socket
    from urllib.parse import urlsplit

    url = urlsplit(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((url.hostname, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def _cpu_facts() -> dict:
    from ownvoice.threads import _affinity, cgroup_cpu_quota

    try:
        import torch

        threads = torch.get_num_threads()
    except Exception:
        threads = None
    try:
        load = os.getloadavg()[0]
    except OSError:
        load = None
    return {
        "cpu_affinity": len(_affinity()),
        "cpu_quota": cgroup_cpu_quota(),
        "torch_threads": threads,
        "load_average": load,
    }


def _torch_facts() -> dict:
    try:
        import torch
    except Exception as e:  # ImportError, or a broken install raising anything
        return {"torch_version": None, "torch_error": f"{type(e).__name__}: {e}"}
    facts: dict = {
        "torch_version": torch.__version__,
        "cuda_version": torch.version.cuda,
        "hip_version": getattr(torch.version, "hip", None),
    }
    facts["build"] = "rocm" if facts["hip_version"] else "cuda" if facts["cuda_version"] else "cpu"
    if facts["build"] == "cpu":
        return facts
    # torch reports why a GPU is unusable only as a warning from is_available()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            facts["arch_list"] = tuple(torch.cuda.get_arch_list())
            available = torch.cuda.is_available()
        except Exception as e:
            available = False
            facts["gpu_error"] = f"{type(e).__name__}: {e}"
    facts["gpu_available"] = available
    if not available:
        if "gpu_error" not in facts and caught:
            facts["gpu_error"] = str(caught[-1].message)
        return facts
    gpus = []
    try:
        for i in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(i)
            arch = getattr(props, "gcnArchName", "") if facts["build"] == "rocm" else ""
            arch = gfx.base_isa(arch) if arch else f"sm_{props.major}{props.minor}"
            try:
                free, _ = torch.cuda.mem_get_info(i)
            except Exception:
                free = None
            gpus.append(Gpu(i, props.name, arch, int(props.total_memory), free))
    except Exception as e:  # a device that enumerates but cannot be initialised
        facts["gpu_error"] = f"{type(e).__name__}: {e}"
    facts["gpus"] = tuple(gpus)
    return facts


def _device_nodes() -> tuple[DeviceNode, ...]:
    paths = ["/dev/kfd", "/dev/dri", *sorted(glob.glob("/dev/dri/renderD*"))]
    paths += ["/dev/nvidiactl", "/dev/nvidia-uvm", *sorted(glob.glob("/dev/nvidia[0-9]*"))]
    paths += ["/dev/dxg"]  # WSL2's GPU paravirtualisation (CUDA and ROCm on WSL)
    return tuple(_node(p) for p in paths)


def _node(path: str) -> DeviceNode:
    try:
        st = os.stat(path)
    except OSError:
        return DeviceNode(path, exists=False)
    return DeviceNode(
        path,
        exists=True,
        accessible=os.access(path, os.R_OK | os.W_OK),
        gid=st.st_gid,
        group=_group_name(st.st_gid),
    )


def _group_name(gid: int) -> str | None:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return None


def _process_groups() -> tuple[tuple[int, str | None], ...]:
    gids = sorted({os.getegid(), *os.getgroups()})
    return tuple((g, _group_name(g)) for g in gids)


def _kfd_targets() -> tuple[str, ...]:
    targets = []
    for props in sorted(glob.glob(f"{KFD_TOPOLOGY}/*/properties")):
        try:
            text = Path(props).read_text()
        except OSError:
            continue
        m = re.search(r"^gfx_target_version\s+(\d+)", text, re.M)
        isa = gfx.from_target_version(int(m.group(1))) if m else None
        if isa:  # CPU nodes have version 0
            targets.append(isa)
    return tuple(targets)


def _nvidia_driver() -> str | None:
    try:
        text = Path("/proc/driver/nvidia/version").read_text()
    except OSError:
        return None
    m = re.search(r"Kernel Module\s+(?:for \S+\s+)?([\d.]+)", text)
    return m.group(1) if m else text.splitlines()[0].strip()


def _in_container() -> bool:
    if os.path.exists("/.dockerenv") or os.path.exists("/run/.containerenv"):
        return True
    return bool(os.environ.get("container"))


def _hf_settings() -> tuple[str, bool]:
    try:
        from huggingface_hub import constants
    except ImportError:
        return "", False
    return str(constants.HF_HUB_CACHE), bool(constants.HF_HUB_OFFLINE)


def _model_cache(source: str) -> CachedModel:
    try:
        from ownvoice.model.weights import MODEL_FILES
    except Exception:  # the loader could not be imported (torch missing): check the weights only
        MODEL_FILES = ("config.json", "model.safetensors", "speech_tokenizer/model.safetensors")
    folder = Path(source).expanduser()
    if folder.is_dir():
        missing = [f for f in MODEL_FILES if not (folder / f).is_file()]
        return CachedModel(
            source,
            local=True,
            present=not missing,
            detail=f"missing {', '.join(missing)}" if missing else str(folder),
            weight_bytes=None if missing else _weight_bytes(folder),
        )
    if source.startswith((".", "/", "~")) or source.count("/") != 1:
        return CachedModel(source, local=True, present=False, detail="no such folder")
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return CachedModel(source, local=False, present=False, detail="huggingface_hub missing")
    found = {f: try_to_load_from_cache(source, f) for f in MODEL_FILES}
    missing = [f for f, p in found.items() if not isinstance(p, str)]
    if missing:
        return CachedModel(
            source, local=False, present=False, detail=f"missing {len(missing)} files"
        )
    snapshot = Path(found["config.json"]).parent
    return CachedModel(
        source,
        local=False,
        present=True,
        detail=str(snapshot),
        weight_bytes=_weight_bytes(snapshot),
    )


def _weight_bytes(folder: Path) -> int:
    files = [folder / "model.safetensors", folder / "speech_tokenizer" / "model.safetensors"]
    return sum(f.stat().st_size for f in files if f.is_file())
