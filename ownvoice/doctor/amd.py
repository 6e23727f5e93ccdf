"""The doctor's AMD checks: /dev/kfd and /dev/dri, HSA_OVERRIDE_GFX_VERSION against the real ISA,
and ROCm runtime settings (the ROCm-safe profile, MIOpen, keepalive).

Pure functions from a Probe to findings, like checks.py.
"""

from __future__ import annotations

from ownvoice.doctor import gfx
from ownvoice.doctor.checks import ConfigFacts, access_finding, bad_severity
from ownvoice.doctor.probe import Probe
from ownvoice.doctor.report import Finding, Severity

ROCM_SAFE = "attention sdpa, use_compile false, use_cuda_graphs false, decode_window_frames 72"


# 1) device nodes and groups --------------------------------------------------------------


def check_rocm_nodes(p: Probe, expect_gpu: bool, config: ConfigFacts) -> list[Finding]:
    if not (p.build == "rocm" or (p.amd_hardware and expect_gpu and not p.nvidia_hardware)):
        return []
    bad = bad_severity(expect_gpu)
    out = []
    kfd = p.node("/dev/kfd")
    if kfd is None or not kfd.exists:
        fix = (
            "pass the devices to the container: `devices: [/dev/kfd, /dev/dri]` "
            "(docker/compose.rocm.yaml does); with docker run: --device /dev/kfd --device /dev/dri"
            if p.in_container
            else "load the amdgpu kernel driver with KFD support (a recent kernel, or ROCm's "
            "amdgpu-dkms); `ls -l /dev/kfd` must show the device"
        )
        out.append(
            Finding(
                "rocm-kfd-missing",
                bad,
                "/dev/kfd does not exist: the ROCm runtime cannot reach the GPU",
                fix,
            )
        )
    elif not kfd.accessible:
        out.append(access_finding("rocm-kfd-access", p, [kfd], expect_gpu))
    render = [n for n in p.nodes_under("/dev/dri/renderD") if n.exists]
    if not render:
        fix = (
            "pass /dev/dri to the container (`devices: [/dev/kfd, /dev/dri]`)"
            if p.in_container
            else "the amdgpu driver is not loaded (`lsmod | grep amdgpu`)"
        )
        out.append(Finding("rocm-dri-missing", bad, "no /dev/dri/renderD* node exists", fix))
    elif not any(n.accessible for n in render):
        out.append(access_finding("rocm-dri-access", p, render, expect_gpu))
    return out


# 2) ISA and HSA_OVERRIDE_GFX_VERSION -----------------------------------------------------


def check_gfx_override(p: Probe, expect_gpu: bool, config: ConfigFacts) -> list[Finding]:
    if not p.gfx_targets or p.build not in ("rocm", "cpu") or p.torch_version is None:
        return []
    if p.build == "cpu" and not expect_gpu:
        return []
    bad = Severity.ERROR if (expect_gpu or p.gpu_available) else Severity.WARNING
    raw = p.env.get("HSA_OVERRIDE_GFX_VERSION")
    out = []
    if raw is not None and not raw.strip():
        out.append(
            Finding(
                "rocm-override-empty",
                Severity.INFO,
                "HSA_OVERRIDE_GFX_VERSION is set but empty, so ROCm ignores it",
            )
        )
        raw = None
    forced = gfx.from_override(raw) if raw else None
    if raw and forced is None:
        return out + [
            Finding(
                "rocm-override-invalid",
                Severity.ERROR,
                f"HSA_OVERRIDE_GFX_VERSION={raw!r} is not a version like 11.0.0",
                _override_fix(p, p.gfx_targets[0]),
            )
        ]
    for isa in dict.fromkeys(p.gfx_targets):  # each ISA once, in order
        native = isa in p.arch_list if p.arch_list else isa not in gfx.OVERRIDE_FOR
        if forced is None:
            if native:
                out.append(
                    Finding(
                        "rocm-isa",
                        Severity.OK,
                        f"{isa} is supported by this torch build; no override needed",
                    )
                )
            else:
                has = f" (it has {' '.join(p.arch_list)})" if p.arch_list else ""
                out.append(
                    Finding(
                        "rocm-override-needed",
                        bad,
                        f"the GPU is {isa}, which this torch build has no kernels for{has}, "
                        "and HSA_OVERRIDE_GFX_VERSION is not set",
                        _override_fix(p, isa),
                    )
                )
        elif gfx.family(forced) != gfx.family(isa):
            out.append(
                Finding(
                    "rocm-override-mismatch",
                    Severity.ERROR,
                    f"HSA_OVERRIDE_GFX_VERSION={raw} makes the {isa} pretend to be {forced}, "
                    "a different GPU family whose code cannot run on it",
                    _override_fix(p, isa)
                    if not native
                    else "unset HSA_OVERRIDE_GFX_VERSION (this GPU needs none)",
                )
            )
        elif p.arch_list and forced not in p.arch_list:
            out.append(
                Finding(
                    "rocm-override-mismatch",
                    Severity.ERROR,
                    f"HSA_OVERRIDE_GFX_VERSION={raw} selects {forced}, which this torch build has no "
                    f"kernels for either (it has {' '.join(p.arch_list)})",
                    _override_fix(p, isa),
                )
            )
        elif native and forced != isa:
            out.append(
                Finding(
                    "rocm-override-unneeded",
                    Severity.WARNING,
                    f"HSA_OVERRIDE_GFX_VERSION={raw} runs {forced} code on a {isa}, which this torch "
                    "build supports natively",
                    "unset HSA_OVERRIDE_GFX_VERSION (docker: set it to an empty value in docker/.env)",
                )
            )
        else:
            out.append(
                Finding(
                    "rocm-override",
                    Severity.OK,
                    f"HSA_OVERRIDE_GFX_VERSION={raw}: the {isa} runs {forced} kernels",
                )
            )
    return out


def _override_fix(p: Probe, isa: str) -> str:
    known = gfx.suggested_overrides(isa)
    if not known:
        return (
            f"no known override for {isa}: use a torch/ROCm build that supports it (the ROCm "
            "container image), or set HSA_OVERRIDE_GFX_VERSION to a supported ISA of the same family"
        )
    # an override only helps if this torch build has kernels for the ISA it names
    usable = [v for v in known if not p.arch_list or gfx.from_override(v) in p.arch_list]
    others = [v for v in known if v not in usable]
    where = (
        "in docker/.env (the compose file passes it through)"
        if p.in_container
        else "in the server's environment"
    )
    first, *rest = usable or known
    text = f"HSA_OVERRIDE_GFX_VERSION={first} {where}"
    if rest:
        text += f"; if it fails, try {' or '.join(rest)}"
    if usable and others:
        names = "/".join(str(gfx.from_override(v)) for v in others)
        verb = "needs" if len(others) == 1 else "need"
        text += f"; {' or '.join(others)} {verb} a torch build with {names} kernels (ROCm 7 images)"
    return text


# 3) ROCm runtime settings -------------------------------------------------------------------------


def check_rocm_runtime(p: Probe, expect_gpu: bool, config: ConfigFacts) -> list[Finding]:
    if p.build != "rocm":
        return []
    out = []
    risky = [
        n
        for n, on in (
            ("use_cuda_graphs", config.use_cuda_graphs),
            ("use_compile", config.use_compile),
        )
        if on
    ]
    if risky:
        out.append(
            Finding(
                "rocm-profile",
                Severity.WARNING,
                f"on ROCm, {' and '.join(risky)} {'are' if len(risky) > 1 else 'is'} known to fail or "
                "stall at capture/compile time",
                f"use the ROCm-safe profile docker/config.rocm-safe.yaml ({ROCM_SAFE})",
            )
        )
    if "MIOPEN_FIND_MODE" not in p.env:
        out.append(
            Finding(
                "rocm-miopen-find",
                Severity.WARNING,
                "MIOPEN_FIND_MODE is not set: every new input length can cost seconds of MIOpen kernel search",
                "MIOPEN_FIND_MODE=FAST in the server's environment (the ROCm image sets it)",
            )
        )
    if config.gpu_keepalive_interval_s <= 0:
        out.append(
            Finding(
                "rocm-keepalive",
                Severity.INFO,
                "no GPU keepalive: after idle periods AMD GPUs clock down and the first audio comes later",
                "if that matters, set gpu_keepalive_interval_s: 15 (env OWNVOICE_GPU_KEEPALIVE_INTERVAL_S=15)",
            )
        )
    return out
