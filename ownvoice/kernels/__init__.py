"""Our CPU kernels of the decode loop (cpu_ops.cpp), compiled on first use and cached.

torch.utils.cpp_extension builds them with the system C++ compiler into torch's extension cache
(~/.cache/torch_extensions), once per machine and source version. torch guards a build with a
`lock` file that a killed build (Ctrl-C during the first start) leaves behind, and every later
start would then wait for it forever; so builds take an flock of our own first (the system
drops it when its process dies), under which any `lock` file left is stale and removed. Without a compiler, on a CPU
without AVX2/FMA, or with OWNVOICE_NO_KERNELS=1, `cpu_kernels()` returns None and callers keep
torch's own ops.
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
            _state["module"] = _build()
        return _state["module"]


def _build():
    from torch.utils.cpp_extension import get_default_build_root, load

    here = Path(__file__).parent
    sources = [here / name for name in SOURCES]
    # the name carries the sources' hash: an edited kernel never reuses a stale build
    digest = hashlib.sha256(
        b"".join(f.read_bytes() for f in sorted(here.glob("*.[ch]*")) if f.suffix in (".cpp", ".h"))
    ).hexdigest()[:12]
    name = f"ownvoice_cpu_ops_{digest}"
    try:
        root = os.environ.get("TORCH_EXTENSIONS_DIR") or get_default_build_root()  # as torch
        build_dir = Path(root) / name
        build_dir.mkdir(parents=True, exist_ok=True)
        with open(build_dir / "ownvoice.lock", "w") as held:
            fcntl.flock(held, fcntl.LOCK_EX)  # another process building it: wait for it
            (build_dir / "lock").unlink(missing_ok=True)  # torch's, left by a killed build
            module = load(
                name=name,
                sources=[str(f) for f in sources],
                build_directory=str(build_dir),
                extra_cflags=["-O3", "-mavx2", "-mfma", "-fopenmp"],
                extra_ldflags=["-fopenmp"],
                verbose=False,
            )
    except Exception as e:  # no compiler, no headers, no ninja: the torch ops still work
        log.warning("could not build the CPU kernels (%s); decoding uses torch's slower ops", e)
        return None
    return module
