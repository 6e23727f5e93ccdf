"""Our CPU kernels of the decode loop (cpu_ops.cpp), compiled on first use and cached.

torch.utils.cpp_extension builds them with the system C++ compiler into torch's extension cache
(~/.cache/torch_extensions), once per environment and source version (`build_name`), and says so
in the log (a first build takes minutes). torch guards a build with a `lock` file that a killed
build (Ctrl-C during the first start) leaves behind, and every later start would then wait for
it forever; so builds take an flock of our own first (the system drops it when its process
dies), under which any `lock` file left is stale and removed. Without a compiler, on a CPU
without AVX2/FMA, or with OWNVOICE_NO_KERNELS=1, `cpu_kernels()` returns None and callers keep
torch's own ops. The products use the widest instruction set the CPU has (avx512vnni, with
512-bit float tiles; avxvnni; avx2); OWNVOICE_KERNEL_ISA=avx2 (or another the CPU has) forces
one, to measure what an older CPU gets (README, "Speed").
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import platform
import threading
from pathlib import Path

log = logging.getLogger(__name__)

# cpu_ops.cpp holds the Python module; the integer products have one unit per instruction set
SOURCES = (
    "cpu_ops.cpp",
    "intdot.cpp",
    "intdot_avx2.cpp",
    "intdot_avx512vnni.cpp",
    "intdot_avxvnni.cpp",
    "float_avx512.cpp",
    "bf16_ops.cpp",
    "bf16dot_avx512.cpp",
)

_lock = threading.Lock()
_state: dict = {}


def cpu_supports_avx2() -> bool:
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return " avx2 " in flags.replace("\n", " ") and " fma " in flags.replace("\n", " ")


def cpu_kernels():
    """The compiled extension module, or None where it cannot be had (see module docstring)."""
    with _lock:
        if "module" in _state:
            return _state["module"]
        _state["module"] = None
        if os.environ.get("OWNVOICE_NO_KERNELS") == "1":
            log.info("CPU kernels disabled by OWNVOICE_NO_KERNELS=1")
        elif not cpu_supports_avx2():
            log.info("CPU kernels need x86-64 with AVX2 and FMA; using torch's ops")
        else:
            module = _build()
            try:
                _force_isa(module)
            except Exception:
                del _state["module"]  # asked again, it says so again (never a silent fallback)
                raise
            _state["module"] = module
        return _state["module"]


def _force_isa(module) -> None:
    """OWNVOICE_KERNEL_ISA, when set: the products run with that instruction set (a name the
    CPU cannot run is refused at once, with the ones it can)."""
    forced = os.environ.get("OWNVOICE_KERNEL_ISA", "").strip().lower()
    if not forced or module is None:
        return
    supported = list(module.supported_isas())
    if forced not in supported:
        from ownvoice.errors import InvalidInput

        raise InvalidInput(
            f"OWNVOICE_KERNEL_ISA={forced} is not an instruction set the kernels can use on "
            f"this CPU; use one of: {', '.join(supported)}",
            param="OWNVOICE_KERNEL_ISA",
        )
    module.set_isa(forced)
    log.info("CPU kernels: products forced to %s (OWNVOICE_KERNEL_ISA)", forced)


CFLAGS = ("-O3", "-mavx2", "-mfma", "-fopenmp")
LDFLAGS = ("-fopenmp",)


def build_inputs() -> dict[str, bytes]:
    """Everything that makes two builds differ: the sources' contents, torch (its version, and
    where it is installed: its headers and ABI), Python, the compiler and the flags. (Not where
    the sources are: they are built from a copy in the build folder, so two checkouts of one
    version in one environment share a build.)"""
    import sys

    import torch

    here = Path(__file__).parent
    return {
        "sources": b"".join(
            f.read_bytes() for f in sorted(here.glob("*.[ch]*")) if f.suffix in (".cpp", ".h")
        ),
        "torch": f"{torch.__version__} {Path(torch.__file__).resolve().parent}".encode(),
        "python": f"{sys.version} {sys.abiflags}".encode(),
        "compiler": os.environ.get("CXX", "c++").encode(),
        "flags": " ".join((*CFLAGS, *LDFLAGS)).encode(),
    }


def build_name(inputs: dict[str, bytes] | None = None) -> str:
    """The build's folder in the cache, named by a hash of its inputs: two environments on one
    machine (a checkout's .venv and another checkout, a pipx install) each keep their own build
    instead of rebuilding over each other's (minutes per model load), and an edited kernel never
    reuses a stale build."""
    inputs = inputs or build_inputs()
    digest = hashlib.sha256(b"\0".join(inputs[k] for k in sorted(inputs))).hexdigest()[:12]
    return f"ownvoice_cpu_ops_{digest}"


def build_dir(name: str | None = None) -> Path:
    """Where the build of these inputs lives (torch's extension cache, as torch chooses it)."""
    from torch.utils.cpp_extension import get_default_build_root

    root = os.environ.get("TORCH_EXTENSIONS_DIR") or get_default_build_root()
    return Path(root) / (name or build_name())


def prepare() -> tuple[bool, str]:
    """Build the kernels now rather than at the first model load (`ownvoice doctor --prepare`,
    run by `make serve` before the server listens, and by image builds): (fine, what was done).
    Not fine only when they should build here and could not."""
    import time

    if os.environ.get("OWNVOICE_NO_KERNELS") == "1":
        return True, "CPU kernels: not used (OWNVOICE_NO_KERNELS=1; torch's ops)"
    if not cpu_supports_avx2():
        return True, "CPU kernels: not used on this CPU (they need x86-64 with AVX2 and FMA)"
    folder = build_dir()
    name = folder.name
    already = (folder / f"{name}.so").exists()
    t0 = time.monotonic()
    if cpu_kernels() is None:
        return False, (
            "CPU kernels: could not be built (the reason is above); speech on the CPU uses "
            "torch's slower ops. Install a C++ compiler (Debian/Ubuntu: g++) and run again"
        )
    how = "already built" if already else f"built in {time.monotonic() - t0:.0f} s"
    return True, f"CPU kernels: ready ({how}) in {folder}"


def _build():
    import time

    from torch.utils.cpp_extension import load

    try:
        name = build_name()
        folder = build_dir(name)
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / "ownvoice.lock", "w") as held:
            fcntl.flock(held, fcntl.LOCK_EX)  # another process building it: wait for it
            (folder / "lock").unlink(missing_ok=True)  # torch's, left by a killed build
            sources = _copy_sources(folder / "src")
            built = (folder / f"{name}.so").exists()
            if not built:  # minutes of silence otherwise, on a first start
                log.info(
                    "building the CPU kernels in %s (first start of this environment only; "
                    "about 2 minutes on 2 cores)", folder,
                )  # fmt: skip
            t0 = time.monotonic()
            module = load(
                name=name,
                sources=[str(f) for f in sources],
                build_directory=str(folder),
                # copies: torch appends its own flags to the lists it is given
                extra_cflags=list(CFLAGS),
                extra_ldflags=list(LDFLAGS),
                verbose=False,
            )
            if not built:
                log.info("CPU kernels built in %.0f s", time.monotonic() - t0)
    except Exception as e:  # no compiler, no headers, no ninja: the torch ops still work
        log.warning("could not build the CPU kernels (%s); decoding uses torch's slower ops", e)
        return None
    return module


def _copy_sources(to: Path) -> list[Path]:
    """The sources, copied once into the build folder (whose name carries their hash), so that
    ninja's build file names the same paths whichever checkout asks: a path that changed would
    rebuild everything."""
    here = Path(__file__).parent
    to.mkdir(exist_ok=True)
    for f in here.iterdir():
        if f.suffix in (".cpp", ".h") and not (to / f.name).exists():
            (to / f.name).write_bytes(f.read_bytes())
    return [to / name for name in SOURCES]
