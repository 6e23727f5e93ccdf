"""`ownvoice doctor`: will synthesis run on the GPU here, and if not, why not and what to do.

    report = run_checks(expect_gpu=True, models=["Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice"])
    print(report.to_text())           # facts, findings with fixes, device, verdict
    report.ok, report.gpu_usable, report.verdict, report.to_dict()

The server calls `check_at_start(settings)` before loading models: it logs every finding and
refuses to start when `require_gpu: true` and no GPU is usable. Layout: probe.py reads the
machine once into a frozen Probe; checks.py and amd.py hold pure checks Probe -> findings; report.py the
verdict and formatting; gfx.py AMD ISA names.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from ownvoice.doctor import amd, checks
from ownvoice.doctor.checks import ConfigFacts, gpu_expected
from ownvoice.doctor.probe import CachedModel, DeviceNode, Gpu, Probe, collect_probe
from ownvoice.doctor.report import DoctorReport, Finding, Severity
from ownvoice.errors import ModelLoadError

__all__ = [
    "CachedModel",
    "ConfigFacts",
    "DeviceNode",
    "DoctorReport",
    "Finding",
    "Gpu",
    "Probe",
    "Severity",
    "check_at_start",
    "collect_probe",
    "gpu_expected",
    "model_sources",
    "run_checks",
]

log = logging.getLogger("ownvoice.doctor")

# in report order: what torch is, can it reach the device, which GPU, memory, settings, models
CHECKS = (
    checks.check_torch,
    checks.check_nvidia,
    amd.check_rocm_nodes,
    amd.check_gfx_override,
    checks.check_gpu,
    checks.check_memory,
    checks.check_cpu,
    amd.check_rocm_runtime,
    checks.check_models,
)


def run_checks(
    expect_gpu: bool,
    models: Sequence[str],
    probe: Probe | None = None,
    *,
    config: ConfigFacts | None = None,
) -> DoctorReport:
    """Run every check. `probe` None reads this machine; `config` None means the default config."""
    config = config or ConfigFacts()
    probe = probe if probe is not None else collect_probe(models)
    findings = [f for check in CHECKS for f in check(probe, expect_gpu, config)]
    report = DoctorReport(tuple(findings), probe, expect_gpu)
    if expect_gpu and not report.gpu_usable and not report.errors:
        # nothing specific explains it: still never let a CPU fallback pass quietly
        said = f": {probe.gpu_error}" if probe.gpu_error else ""
        findings.append(
            Finding(
                "gpu-not-visible",
                Severity.ERROR,
                f"a GPU is expected but torch sees none{said}",
                "run `ownvoice doctor` in the same environment as the server and fix what it "
                "reports; or set device: cpu if the CPU is intended",
            )
        )
        report = DoctorReport(tuple(findings), probe, expect_gpu)
    return report


def model_sources(settings: Any) -> list[str]:
    """The checkpoint of every configured model (ServerSettings or the YAML mapping)."""
    models = (
        settings.get("models")
        if isinstance(settings, Mapping)
        else getattr(settings, "models", None)
    )
    out = []
    for entry in (models or {}).values():
        source = (
            entry.get("source") if isinstance(entry, Mapping) else getattr(entry, "source", None)
        )
        if source:
            out.append(str(source))
    return out


_LEVELS = {
    Severity.OK: logging.INFO,
    Severity.INFO: logging.INFO,
    Severity.WARNING: logging.WARNING,
    Severity.ERROR: logging.ERROR,
}


def check_at_start(
    settings: Any, probe: Probe | None = None, logger: logging.Logger = log
) -> DoctorReport:
    """The server's start-up check: log every finding; refuse to start when a GPU is required
    (`require_gpu: true`) but none is usable; warn loudly when one is expected but unused.

    Raises ModelLoadError (the message carries the fixes) instead of starting on the CPU.
    """
    config = ConfigFacts.from_settings(settings)
    models = model_sources(settings)
    probe = probe if probe is not None else collect_probe(models)
    expect = gpu_expected(probe, config)
    report = run_checks(expect, models, probe, config=config)
    for f in report.findings:
        fix = (
            f" -- fix: {f.fix}"
            if f.fix and f.severity in (Severity.WARNING, Severity.ERROR)
            else ""
        )
        logger.log(_LEVELS[f.severity], "doctor [%s] %s%s", f.code, f.message, fix)
    logger.info("device: %s", report.device_summary)
    if config.require_gpu and not report.gpu_usable:
        fixes = "; ".join(f"{f.message} (fix: {f.fix})" for f in report.errors if f.fix)
        raise ModelLoadError(
            "require_gpu is true but no usable GPU was found, so the server will not start on the "
            f"CPU. {fixes or report.verdict} Run `ownvoice doctor --config <file>` for details."
        )
    if expect and not report.gpu_usable:
        logger.warning("=" * 72)
        logger.warning("RUNNING ON THE CPU although a GPU was expected: synthesis will be slow.")
        logger.warning("%s", report.verdict)
        logger.warning("Set require_gpu: true to make this a start-up error instead.")
        logger.warning("=" * 72)
    else:
        logger.info("%s", report.verdict)
    return report
