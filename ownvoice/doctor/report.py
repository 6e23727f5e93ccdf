"""Findings and the report the doctor hands back: a verdict, the device in use, every problem with its fix.

Plain data and formatting only; the checks that produce findings live in checks.py.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import StrEnum

from ownvoice.doctor.probe import Probe

GIB = 1024**3


class Severity(StrEnum):
    OK = "ok"
    INFO = "info"
    WARNING = "warning"  # works, but slower or fragile; the server starts
    ERROR = (
        "error"  # the expected setup does not work; with require_gpu the server refuses to start
    )


@dataclass(frozen=True)
class Finding:
    code: str  # stable id, e.g. "rocm-kfd-missing" (tests and scripts match on it)
    severity: Severity
    message: str  # what is wrong (or right), with the values seen
    fix: str | None = None  # what to do about it, as commands or config lines


_TAGS = {
    Severity.OK: "[ OK ]",
    Severity.INFO: "[info]",
    Severity.WARNING: "[WARN]",
    Severity.ERROR: "[FAIL]",
}


@dataclass(frozen=True)
class DoctorReport:
    findings: tuple[Finding, ...]
    probe: Probe
    expect_gpu: bool

    @property
    def ok(self) -> bool:
        """No error: the setup does what it is expected to do."""
        return not self.errors

    @property
    def errors(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity is Severity.ERROR)

    @property
    def warnings(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity is Severity.WARNING)

    @property
    def gpu_usable(self) -> bool:
        """torch sees a GPU and nothing found makes it unusable."""
        blocking = any(f.code in GPU_BLOCKING for f in self.errors)
        return self.probe.gpu_available and bool(self.probe.gpus) and not blocking

    @property
    def device_summary(self) -> str:
        p = self.probe
        torch = f"torch {p.torch_version}" if p.torch_version else "torch not importable"
        if not self.gpu_usable:
            return f"cpu ({torch}, {p.build} build)"
        g = p.gpus[0]
        mem = f"{g.total_bytes / GIB:.1f} GiB"
        if g.free_bytes is not None:
            mem = f"{g.free_bytes / GIB:.1f} GiB free of {mem}"
        runtime = f"ROCm {p.hip_version}" if p.build == "rocm" else f"CUDA {p.cuda_version}"
        more = f" (+{len(p.gpus) - 1} more)" if len(p.gpus) > 1 else ""
        return f"cuda:{g.index} {g.name} [{g.arch}], {mem}{more}; {torch}, {runtime}"

    @property
    def verdict(self) -> str:
        if self.expect_gpu and not self.gpu_usable:
            return (
                "PROBLEM: a GPU is expected, but synthesis would run on the CPU. "
                "Apply the fixes marked FAIL above."
            )
        if self.errors:
            return (
                f"PROBLEM: {len(self.errors)} problem(s) found; apply the fixes marked FAIL above."
            )
        where = (
            f"on the GPU ({self.device_summary})"
            if self.gpu_usable
            else "on the CPU (no GPU expected)"
        )
        note = f" {len(self.warnings)} warning(s) above." if self.warnings else ""
        return f"OK: synthesis will run {where}.{note}"

    def to_dict(self) -> dict:
        return {
            "ok": self.ok,
            "verdict": self.verdict,
            "device_summary": self.device_summary,
            "expect_gpu": self.expect_gpu,
            "gpu_usable": self.gpu_usable,
            "findings": [
                {"code": f.code, "severity": str(f.severity), "message": f.message, "fix": f.fix}
                for f in self.findings
            ],
            "probe": _jsonable(dataclasses.asdict(self.probe)),
        }

    def to_text(self) -> str:
        lines = ["ownvoice doctor", *_facts(self.probe), ""]
        for f in self.findings:
            lines.append(f"{_TAGS[f.severity]} {f.message}")
            if f.fix:
                lines += [
                    f"       fix: {line}" if i == 0 else f"            {line}"
                    for i, line in enumerate(f.fix.splitlines())
                ]
        lines += ["", f"device:  {self.device_summary}", f"verdict: {self.verdict}"]
        return "\n".join(lines)


# error codes after which torch cannot run on the GPU even if it lists one
GPU_BLOCKING = frozenset(
    {"rocm-override-needed", "rocm-override-invalid", "rocm-override-mismatch"}
)


def _facts(p: Probe) -> list[str]:
    """The raw facts, one per line, before the findings."""
    rows = []
    if p.torch_version:
        runtime = {"rocm": f"ROCm/HIP {p.hip_version}", "cuda": f"CUDA {p.cuda_version}"}.get(
            p.build, "CPU only"
        )
        rows.append(("torch", f"{p.torch_version} ({runtime})"))
        if p.arch_list:
            rows.append(("kernels for", " ".join(p.arch_list)))
    else:
        rows.append(("torch", f"not importable: {p.torch_error}"))
    for g in p.gpus:
        free = f"{g.free_bytes / GIB:.1f} GiB free of " if g.free_bytes is not None else ""
        rows.append(
            (f"cuda:{g.index}", f"{g.name} [{g.arch}], {free}{g.total_bytes / GIB:.1f} GiB")
        )
    if not p.gpus:
        rows.append(
            ("devices", "none visible to torch" + (f" ({p.gpu_error})" if p.gpu_error else ""))
        )
    if p.gfx_targets:
        rows.append(("AMD GPUs", " ".join(p.gfx_targets) + " (ISA from /sys/class/kfd)"))
    if p.nvidia_driver:
        rows.append(("NVIDIA driver", p.nvidia_driver))
    for n in p.nodes:
        if n.exists and n.path != "/dev/dri":
            owner = f"group {n.group or '?'} (gid {n.gid})"
            rows.append((n.path, f"{'read/write' if n.accessible else 'NO ACCESS'}, {owner}"))
    if not any(n.exists for n in p.nodes):
        rows.append(("device nodes", "no /dev/kfd, /dev/dri or /dev/nvidia*"))
    groups = ", ".join(f"{name or '?'}({gid})" for gid, name in p.groups)
    rows.append(
        (
            "process",
            f"uid {p.uid}, groups {groups}" + (", in a container" if p.in_container else ""),
        )
    )
    for k, v in p.env.items():
        rows.append((k, v if v else "(set, empty)"))
    for m in p.models:
        rows.append(
            ("model", f"{m.source}: {'cached' if m.present else 'NOT CACHED'} ({m.detail})")
        )
    width = max(len(k) for k, _ in rows)
    return [f"  {k:<{width}}  {v}" for k, v in rows]


def _jsonable(x):
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_jsonable(v) for v in x]
    return x
