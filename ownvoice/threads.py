"""How many CPU threads the engine uses, and how they wait.

Two things go wrong on shared CPUs without this:

- **Spinning.** OpenMP threads (torch's pool, which our CPU kernels share) spin while they wait
  for each other. Two processes on the same cores then take the cores from each other's work:
  two `ownvoice say` that should take ~20 s each took 25 to 76 s. Passive waiting (threads sleep
  after a short spin, SPIN_COUNT) makes the pair fair; with no spin at all one process alone
  was ~12 % slower (a frame waits at hundreds of small barriers). It must be set before the
  OpenMP runtime loads, which happens when torch is imported, so `ownvoice/__init__.py` calls
  `prefer_passive_waiting()` first; a user's own OMP_WAIT_POLICY or GOMP_SPINCOUNT is kept, and
  OWNVOICE_KEEP_OMP_WAITING=1 keeps the runtime's own spinning. `ownvoice bench --shared`
  measures both.
- **Counting the host, not the limit.** In a container limited with `--cpus 2` on a larger
  host, the pool is sized from the host's cores and then throttled by the quota. The count here
  is the smallest of the CPUs this process may run on (affinity) and the cgroup CPU quota (v2
  `cpu.max`, v1 `cpu.cfs_quota_us`/`cpu.cfs_period_us`, on the process's own cgroup and its
  parents), rounded up. `optimization.num_threads` and `--threads` win over it.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

PASSIVE = "PASSIVE"
# GNU OpenMP (torch's on Linux) spins this many times (~0.1 ms) before it sleeps: a short wait
# at a barrier stays cheap for one process alone (pure PASSIVE, spin 0, was ~12 % slower per
# frame here), while a thread whose partner was preempted gives the core back almost at once.
# libgomp's own default spins 300000 times, OMP_WAIT_POLICY=ACTIVE 3e10.
SPIN_COUNT = "10000"
# set to 1 to keep the OpenMP runtime's own waiting (a machine that runs nothing else)
KEEP_ENV = "OWNVOICE_KEEP_OMP_WAITING"


def prefer_passive_waiting(environ=os.environ) -> None:
    """OMP_WAIT_POLICY=PASSIVE with a short spin (GOMP_SPINCOUNT), unless the user chose
    either or set OWNVOICE_KEEP_OMP_WAITING=1 (call before importing torch)."""
    if environ.get(KEEP_ENV, "") not in ("", "0"):
        return
    if "OMP_WAIT_POLICY" in environ or "GOMP_SPINCOUNT" in environ:
        return  # the user's own tuning: kept as it is
    environ["OMP_WAIT_POLICY"] = PASSIVE
    environ["GOMP_SPINCOUNT"] = SPIN_COUNT


@dataclass(frozen=True)
class ThreadChoice:
    count: int
    why: str  # for the log and `ownvoice doctor`


def choose_threads(
    requested: int | None = None,
    default: int | None = None,
    cgroup_root: Path = Path("/sys/fs/cgroup"),
    proc_cgroup: Path = Path("/proc/self/cgroup"),
    affinity: set[int] | None = None,
) -> ThreadChoice:
    """The engine's thread count and why, read from this machine (see decide_threads)."""
    cpus = affinity if affinity is not None else _affinity()
    return decide_threads(requested, default, len(cpus), cgroup_cpu_quota(cgroup_root, proc_cgroup))


def decide_threads(
    requested: int | None, default: int | None, affinity: int, quota: float | None
) -> ThreadChoice:
    """`requested` if given; else the least of torch's own default (physical cores, or
    OMP_NUM_THREADS), the CPUs this process may run on, and the cgroup quota rounded up."""
    if requested:
        return ThreadChoice(requested, "set by optimization.num_threads / --threads")
    count, why = affinity, f"the {affinity} CPU(s) this process may run on"
    if default is not None and default < count:
        count, why = default, f"torch's default ({default}: physical cores or OMP_NUM_THREADS)"
    if quota is not None and math.ceil(quota) < count:
        count = max(1, math.ceil(quota))
        why = f"the cgroup CPU quota of {quota:g} CPU(s) (a container limit), not {why}"
    return ThreadChoice(max(1, count), why)


def _affinity() -> set[int]:
    try:
        return os.sched_getaffinity(0)
    except (AttributeError, OSError):  # not Linux
        return set(range(os.cpu_count() or 1))


def cgroup_cpu_quota(
    root: Path = Path("/sys/fs/cgroup"), proc_cgroup: Path = Path("/proc/self/cgroup")
) -> float | None:
    """CPUs' worth of time the cgroup allows (quota / period), the tightest along the path to
    the root; None = no limit (or no cgroup file to read)."""
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        lines = []
    limits = []
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":  # v2: the unified hierarchy
            limits += [_v2(d / "cpu.max") for d in _up_from(root, path)]
        elif "cpu" in controllers.split(","):  # v1: the cpu controller's own hierarchy
            for mount in (root / "cpu", root / "cpu,cpuacct", root / "cpuacct,cpu"):
                if mount.is_dir():
                    limits += [_v1(d) for d in _up_from(mount, path)]
                    break
    found = [q for q in limits if q is not None]
    return min(found) if found else None


def _up_from(mount: Path, path: str) -> list[Path]:
    """The cgroup folder for `path` under `mount` and its parents up to the mount (inside a
    container the path may not exist under the mount: the mount itself is the cgroup)."""
    parts = [p for p in path.strip("/").split("/") if p]
    folders = [mount.joinpath(*parts[:i]) for i in range(len(parts), -1, -1)]
    return [f for f in folders if f.is_dir()]


def _v2(cpu_max: Path) -> float | None:
    try:
        quota, period = cpu_max.read_text().split()[:2]
    except (OSError, ValueError):
        return None
    if quota == "max":
        return None
    return int(quota) / int(period) if int(period) > 0 else None


def _v1(folder: Path) -> float | None:
    try:
        quota = int((folder / "cpu.cfs_quota_us").read_text())
        period = int((folder / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return quota / period if quota > 0 and period > 0 else None
