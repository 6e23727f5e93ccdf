"""Two processes on the same cores: does each get its fair share?

    ownvoice bench --shared --model DIR --frames 24 --tries 5

Each try runs `ownvoice say` alone twice, back to back (the time a pair takes when the cores
are shared fairly is the sum of the two), then two at once, and reports each concurrent run's
time against that fair time. `--policies` names the ways of waiting measured, in one command:
`torch` (the OpenMP runtime's own spinning, what ownvoice did before threads.py: the pair
collapses, each run takes several times longer), `ownvoice` (its default now: passive with a
short spin), or any OMP_WAIT_POLICY value (ACTIVE, PASSIVE).

`--cpus Q` also runs one process alone in a cgroup with a CPU quota of Q CPUs (as `docker run
--cpus Q` does), once with as many threads as the machine has cores (what torch chooses) and
once with the count ownvoice derives from the quota. It needs a writable cgroup hierarchy (v1
`cpu` or v2; root on the host or a privileged container); where none can be made, that part is
skipped and the table says so.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from ownvoice.threads import KEEP_ENV

TEXT = "A short sentence for the shared CPU benchmark."


@dataclass
class SharedResult:
    policy: str
    solo: list[float] = field(default_factory=list)  # seconds, every solo run
    pairs: list[tuple[float, float]] = field(default_factory=list)  # seconds, each pair
    fair: list[float] = field(default_factory=list)  # the two solo runs of the try, summed

    def ratios(self) -> list[float]:
        """Each concurrent run's time over its try's fair time (1.0 = a fair share)."""
        return [t / f for (a, b), f in zip(self.pairs, self.fair, strict=True) for t in (a, b)]


def _say(
    model: str, frames: int, policy: str, out: Path, threads: int | None, cgroup: Path | None = None
) -> subprocess.Popen:
    env = _environment(policy)
    cmd = [sys.executable, "-m", "ownvoice", "say", "--model", model, "--device", "cpu",
           "--max-frames", str(frames), "--seed", "0", "--speaker", "ryan", "-o", str(out),
           TEXT]  # fmt: skip
    if threads:
        cmd += ["--threads", str(threads)]
    join = None
    if cgroup is not None:  # the child enters the cgroup before it starts Python

        def join():
            (cgroup / "cgroup.procs").write_text(str(os.getpid()))

    return subprocess.Popen(
        cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=join
    )


def _environment(policy: str) -> dict[str, str]:
    # this process imported ownvoice, which set its own defaults in os.environ: start clean
    env = {k: v for k, v in os.environ.items() if k not in _WAITING}
    if policy == "TORCH":
        env[KEEP_ENV] = "1"
    elif policy != "OWNVOICE":
        env["OMP_WAIT_POLICY"] = policy
    return env


_WAITING = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", KEEP_ENV)


def _timed(procs: list[subprocess.Popen], t0: float) -> list[float]:
    times = []
    for p in procs:
        _, err = p.communicate()
        if p.returncode != 0:
            raise RuntimeError(f"ownvoice say failed: {err.decode()[-500:]}")
        times.append(time.monotonic() - t0)
    return times


def run_shared(
    model: str, frames: int, tries: int, policies: list[str], threads: int | None = None
) -> list[SharedResult]:
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        for policy in policies:
            r = SharedResult(policy)
            for _ in range(tries):
                solo = []
                for i in range(2):
                    t0 = time.monotonic()
                    solo += _timed([_say(model, frames, policy, out / f"s{i}.wav", threads)], t0)
                t0 = time.monotonic()
                procs = [_say(model, frames, policy, out / f"p{i}.wav", threads) for i in range(2)]
                r.pairs.append(tuple(_timed(procs, t0)))
                r.solo += solo
                r.fair.append(sum(solo))
            results.append(r)
    return results


def make_quota_cgroup(cpus: float, root: Path = Path("/sys/fs/cgroup")) -> Path | None:
    """A new cgroup limited to `cpus` CPUs of time; None where none can be made here."""
    name = f"ownvoice-bench-{os.getpid()}"
    period = 100_000
    try:
        if (root / "cgroup.controllers").exists():  # v2
            folder = root / name
            folder.mkdir()
            (folder / "cpu.max").write_text(f"{round(cpus * period)} {period}")
            return folder
        folder = root / "cpu" / name  # v1
        folder.mkdir()
        (folder / "cpu.cfs_period_us").write_text(str(period))
        (folder / "cpu.cfs_quota_us").write_text(str(round(cpus * period)))
        return folder
    except OSError:
        return None


def run_quota(model: str, frames: int, tries: int, cpus: float) -> dict | None:
    """One process alone under a CPU quota: all cores' threads against the derived count."""
    cgroup = make_quota_cgroup(cpus)
    if cgroup is None:
        return None
    cores = os.cpu_count() or 1
    times: dict[str, list[float]] = {
        f"{cores} threads (the host's cores)": [],
        "ownvoice's choice": [],
    }
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for _ in range(tries):
                for label, threads in zip(times, (cores, None), strict=True):
                    t0 = time.monotonic()
                    proc = _say(model, frames, "OWNVOICE", Path(tmp) / "q.wav", threads, cgroup)
                    times[label] += _timed([proc], t0)
    finally:
        try:
            cgroup.rmdir()
        except OSError:
            pass
    return {"cpus": cpus, "seconds": times}


def format_quota_table(result: dict | None, cpus: float | None) -> str:
    if cpus is None:
        return ""
    if result is None:
        return f"CPU quota {cpus:g}: no cgroup could be made here (needs root), skipped"
    lines = [f"one process under a CPU quota of {cpus:g} CPU(s): seconds per run (median)"]
    for label, times in result["seconds"].items():
        lines.append(
            f"  {label:<34} {statistics.median(times):6.1f}  ({', '.join(f'{t:.1f}' for t in times)})"
        )
    return "\n".join(lines)


def format_shared_table(results: list[SharedResult]) -> str:
    lines = [
        "policy   solo s (median)  pair s (each run, per try)                 x fair (max)  "
        "within 1.3x",
    ]
    solos = [f"  {r.policy} solo runs: {', '.join(f'{t:.1f}' for t in r.solo)}" for r in results]
    for r in results:
        ratios = r.ratios()
        pairs = "  ".join(f"{a:.1f}/{b:.1f}" for a, b in r.pairs)
        ok = sum(1 for (a, b), f in zip(r.pairs, r.fair, strict=True) if max(a, b) <= 1.3 * f)
        lines.append(
            f"{r.policy:<8} {statistics.median(r.solo):>15.1f}  {pairs:<42} "
            f"{max(ratios):>12.2f}  {ok}/{len(r.pairs)} tries"
        )
    return "\n".join(lines + solos)
