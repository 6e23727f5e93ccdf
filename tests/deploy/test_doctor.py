"""`ownvoice doctor` on simulated machines: each situation gives the right verdict and fix."""

from __future__ import annotations

import json
import logging
from dataclasses import replace

import pytest

from ownvoice.doctor import (
    CachedModel,
    ConfigFacts,
    DeviceNode,
    Gpu,
    Probe,
    Severity,
    check_at_start,
    collect_probe,
    gfx,
    gpu_expected,
    run_checks,
)
from ownvoice.errors import ModelLoadError
from tests.deploy.machines import (
    CV,
    GIB,
    ROCM_ARCHS,
    ROCM_SAFE,
    cached,
    healthy_cuda,
    igpu_rocm,
    node,
)


def codes(report, severity: Severity | None = None) -> list[str]:
    return [f.code for f in report.findings if severity is None or f.severity is severity]


def finding(report, code: str):
    found = [f for f in report.findings if f.code == code]
    assert found, f"no {code!r} among {codes(report)}"
    return found[0]


# healthy machines ------------------------------------------------------------------------------


def test_healthy_cuda_machine():
    report = run_checks(True, [CV], healthy_cuda())
    assert report.ok and report.gpu_usable, report.to_text()
    assert codes(report, Severity.ERROR) == [] and codes(report, Severity.WARNING) == []
    assert "gpu-visible" in codes(report, Severity.OK)
    assert report.verdict.startswith("OK: synthesis will run on the GPU")
    assert "NVIDIA GeForce RTX 4090" in report.device_summary
    assert "23.0 GiB free of 24.0 GiB" in report.device_summary


def test_healthy_igpu_with_override_and_rocm_safe_profile():
    report = run_checks(True, [CV], igpu_rocm(), config=ROCM_SAFE)
    assert report.ok and report.gpu_usable, report.to_text()
    assert "rocm-override" in codes(report, Severity.OK)
    assert "rocm-profile" not in codes(report)


def test_cpu_machine_without_gpu_expectation_is_fine():
    probe = Probe(torch_version="2.13.0+cpu", build="cpu", models=(cached(),))
    report = run_checks(False, [CV], probe)
    assert report.ok and not report.gpu_usable
    assert report.verdict.startswith("OK: synthesis will run on the CPU")
    assert report.device_summary.startswith("cpu")


# the silent CPU fallbacks ----------------------------------------------------------------------


def test_cpu_only_torch_on_an_nvidia_machine():
    probe = replace(
        healthy_cuda(),
        torch_version="2.13.0+cpu",
        build="cpu",
        cuda_version=None,
        arch_list=(),
        gpu_available=False,
        gpus=(),
    )
    report = run_checks(True, [CV], probe)
    assert not report.ok and not report.gpu_usable
    f = finding(report, "torch-cpu-build")
    assert f.severity is Severity.ERROR
    assert "CPU-only build" in f.message and "NVIDIA" in f.message
    assert "download.pytorch.org/whl/cu" in f.fix and "compose.cuda.yaml" in f.fix
    assert "rocm" not in f.fix.lower()  # only the fix for the hardware at hand
    assert report.verdict.startswith(
        "PROBLEM: a GPU is expected, but synthesis would run on the CPU"
    )


def test_cpu_only_torch_on_an_amd_machine_points_at_rocm():
    probe = igpu_rocm(
        torch_version="2.13.0+cpu",
        build="cpu",
        hip_version=None,
        arch_list=(),
        gpu_available=False,
        gpus=(),
    )
    f = finding(run_checks(True, [CV], probe), "torch-cpu-build")
    assert f.severity is Severity.ERROR and "rocm" in f.fix and "compose.rocm.yaml" in f.fix


def test_cpu_only_torch_is_a_warning_when_no_gpu_is_expected():
    probe = replace(
        healthy_cuda(), build="cpu", torch_version="2.13.0+cpu", gpu_available=False, gpus=()
    )
    report = run_checks(False, [CV], probe)
    assert report.ok
    assert finding(report, "torch-cpu-build").severity is Severity.WARNING


def test_missing_dev_kfd_in_a_container():
    probe = igpu_rocm(
        gpu_available=False,
        gpus=(),
        gpu_error="No HIP GPUs are available",
        nodes=(DeviceNode("/dev/kfd", exists=False), DeviceNode("/dev/dri", exists=False)),
    )
    report = run_checks(True, [CV], probe, config=ROCM_SAFE)
    assert not report.ok and not report.gpu_usable
    f = finding(report, "rocm-kfd-missing")
    assert f.severity is Severity.ERROR
    assert "devices: [/dev/kfd, /dev/dri]" in f.fix and "--device /dev/kfd" in f.fix
    assert "rocm-dri-missing" in codes(report, Severity.ERROR)
    assert report.verdict.startswith("PROBLEM: a GPU is expected")


def test_missing_dev_kfd_on_the_host_points_at_the_driver():
    probe = igpu_rocm(
        in_container=False,
        gpu_available=False,
        gpus=(),
        nodes=(DeviceNode("/dev/kfd", exists=False), node("/dev/dri/renderD128")),
    )
    f = finding(run_checks(True, [CV], probe), "rocm-kfd-missing")
    assert "amdgpu" in f.fix and "devices:" not in f.fix


def test_wrong_groups_in_a_container():
    # the host's render group is 992; the container got neither group_add entry
    probe = igpu_rocm(
        gpu_available=False,
        gpus=(),
        nodes=(
            node("/dev/kfd", ok=False, group=None),
            node("/dev/dri/renderD128", ok=False, group=None),
        ),
        groups=((10001, "ownvoice"),),
    )
    report = run_checks(True, [CV], probe, config=ROCM_SAFE)
    assert not report.ok
    kfd = finding(report, "rocm-kfd-access")
    assert kfd.severity is Severity.ERROR
    assert "gid 992" in kfd.message and "ownvoice(10001)" in kfd.message
    assert 'group_add: ["992"]' in kfd.fix and "getent group video render" in kfd.fix
    assert "--group-add 992" in kfd.fix
    assert "rocm-dri-access" in codes(report, Severity.ERROR)


def test_wrong_groups_on_the_host():
    probe = igpu_rocm(
        in_container=False,
        gpu_available=False,
        gpus=(),
        nodes=(node("/dev/kfd", ok=False), node("/dev/dri/renderD128", ok=False)),
        groups=((1000, "alice"),),
    )
    f = finding(run_checks(True, [CV], probe), "rocm-kfd-access")
    assert "sudo usermod -aG render $USER" in f.fix and "log out" in f.fix


def test_override_unset_on_gfx1150():
    # torch lists the device, but it has no kernels for gfx1150: the first op would fail
    probe = igpu_rocm(
        env={"MIOPEN_FIND_MODE": "FAST"},
        gpus=(Gpu(0, "AMD Radeon 890M Graphics", "gfx1150", 16 * GIB, 15 * GIB),),
    )
    report = run_checks(True, [CV], probe, config=ROCM_SAFE)
    f = finding(report, "rocm-override-needed")
    assert f.severity is Severity.ERROR
    assert "gfx1150" in f.message and "not set" in f.message
    assert f.fix.startswith("HSA_OVERRIDE_GFX_VERSION=11.0.0")
    assert "11.5.0" in f.fix and "11.5.1" in f.fix
    assert "docker/.env" in f.fix
    assert not report.gpu_usable and not report.ok
    assert report.verdict.startswith("PROBLEM: a GPU is expected")


def test_gfx1151_supported_natively_needs_no_override():
    probe = igpu_rocm(
        env={"MIOPEN_FIND_MODE": "FAST"},
        gfx_targets=("gfx1151",),
        arch_list=(*ROCM_ARCHS, "gfx1151"),
    )
    report = run_checks(True, [CV], probe, config=ROCM_SAFE)
    assert report.ok, report.to_text()
    assert "rocm-isa" in codes(report, Severity.OK)


def test_override_from_another_family_is_an_error():
    # the compose default (11.0.0) on an RDNA2 card: gfx1100 code cannot run on a gfx1030
    probe = igpu_rocm(gfx_targets=("gfx1030",))
    f = finding(run_checks(True, [CV], probe, config=ROCM_SAFE), "rocm-override-mismatch")
    assert f.severity is Severity.ERROR and "gfx1030" in f.message and "gfx1100" in f.message
    assert "unset HSA_OVERRIDE_GFX_VERSION" in f.fix


def test_override_to_an_isa_the_build_lacks():
    probe = igpu_rocm(env={"HSA_OVERRIDE_GFX_VERSION": "11.5.1", "MIOPEN_FIND_MODE": "FAST"})
    f = finding(run_checks(True, [CV], probe, config=ROCM_SAFE), "rocm-override-mismatch")
    assert "gfx1151" in f.message and f.fix.startswith("HSA_OVERRIDE_GFX_VERSION=11.0.0")


def test_malformed_override():
    probe = igpu_rocm(env={"HSA_OVERRIDE_GFX_VERSION": "gfx1100", "MIOPEN_FIND_MODE": "FAST"})
    report = run_checks(True, [CV], probe, config=ROCM_SAFE)
    assert finding(report, "rocm-override-invalid").severity is Severity.ERROR
    assert not report.gpu_usable


def test_rocm_runtime_advice():
    report = run_checks(
        True, [CV], igpu_rocm(env={"HSA_OVERRIDE_GFX_VERSION": "11.0.0"}), config=ConfigFacts()
    )
    profile = finding(report, "rocm-profile")
    assert profile.severity is Severity.WARNING and "config.rocm-safe.yaml" in profile.fix
    assert "decode_window_frames 72" in profile.fix
    assert "MIOPEN_FIND_MODE=FAST" in finding(report, "rocm-miopen-find").fix
    assert "gpu_keepalive_interval_s" in finding(report, "rocm-keepalive").fix
    assert report.ok  # advice, not failure


def test_nvidia_container_without_the_gpu():
    probe = replace(
        healthy_cuda(),
        gpu_available=False,
        gpus=(),
        nodes=(),
        nvidia_driver="575.57.08",
        gpu_error="Found no NVIDIA driver on your system",
    )
    report = run_checks(True, [CV], probe)
    f = finding(report, "nvidia-no-device")
    assert f.severity is Severity.ERROR and "--gpus all" in f.fix and "nvidia-ctk" in f.fix
    assert "Found no NVIDIA driver" in f.message


def test_nvidia_driver_too_old():
    probe = replace(
        healthy_cuda(),
        gpu_available=False,
        gpus=(),
        gpu_error="The NVIDIA driver on your system is too old (found version 11040)",
    )
    f = finding(run_checks(True, [CV], probe), "nvidia-driver")
    assert "too old" in f.message and "cu126" in f.fix


def test_configured_device_index_out_of_range():
    report = run_checks(True, [CV], healthy_cuda(), config=ConfigFacts(device="cuda:1"))
    assert finding(report, "device-index").severity is Severity.ERROR


def test_low_gpu_memory_on_an_igpu():
    probe = igpu_rocm(
        gpus=(Gpu(0, "AMD Radeon 780M", "gfx1100", 512 * 1024**2, 400 * 1024**2),),
        gfx_targets=("gfx1103",),
    )
    f = finding(run_checks(True, [CV], probe, config=ROCM_SAFE), "gpu-memory-low")
    assert f.severity is Severity.WARNING and "UMA" in f.fix


# models ----------------------------------------------------------------------------------------


def test_model_not_cached_online_is_a_warning():
    probe = replace(
        healthy_cuda(),
        models=(CachedModel(CV, local=False, present=False, detail="missing 8 files"),),
    )
    report = run_checks(True, [CV], probe)
    f = finding(report, "model-not-cached")
    assert f.severity is Severity.WARNING and "2.5 GB" in f.message
    assert f"hf download {CV}" in f.fix
    assert report.ok


def test_model_not_cached_offline_is_an_error():
    probe = replace(
        healthy_cuda(),
        hf_offline=True,
        models=(CachedModel(CV, local=False, present=False, detail="missing 8 files"),),
    )
    report = run_checks(True, [CV], probe)
    assert finding(report, "model-not-cached").severity is Severity.ERROR
    assert not report.ok and report.gpu_usable  # the GPU is fine; the model is not
    assert report.verdict.startswith("PROBLEM: 1 problem(s)")


def test_model_not_cached_on_a_machine_without_the_hub_is_an_error():
    """Offline without HF_HUB_OFFLINE: the first start could not download it, so not OK."""
    probe = replace(
        healthy_cuda(),
        hub_reachable=False,
        models=(CachedModel(CV, local=False, present=False, detail="missing 8 files"),),
    )
    report = run_checks(True, [CV], probe)
    f = finding(report, "model-not-cached")
    assert f.severity is Severity.ERROR and "cannot be reached" in f.message
    assert "--model DIR" in f.fix and f"hf download {CV}" in f.fix
    assert not report.ok


def test_the_hub_is_asked_only_for_a_model_to_download(monkeypatch, tmp_path):
    """The probe asks whether the Hub answers (HF_ENDPOINT) only when a hub model is missing."""
    import socket

    from ownvoice.doctor import probe as probe_module

    listening = socket.create_server(("127.0.0.1", 0))
    closed = socket.create_server(("127.0.0.1", 0))
    closed_port = closed.getsockname()[1]
    closed.close()
    try:
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{listening.getsockname()[1]}")
        assert probe_module.hub_reachable(1.0) is True
        monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{closed_port}")
        assert probe_module.hub_reachable(1.0) is False
    finally:
        listening.close()
    monkeypatch.setattr(probe_module, "_hf_settings", lambda: (str(tmp_path), False))
    asked = []
    monkeypatch.setattr(probe_module, "hub_reachable", lambda: asked.append(1) or False)
    assert probe_module.collect_probe([str(tmp_path)]).hub_reachable is None  # a folder: no
    assert not asked
    assert probe_module.collect_probe(["Qwen/Not-Cached-Here"]).hub_reachable is False
    assert asked == [1]


def test_local_model_folder_missing_is_an_error():
    probe = replace(
        healthy_cuda(),
        models=(CachedModel("/models/nope", local=True, present=False, detail="no such folder"),),
    )
    assert finding(run_checks(True, [], probe), "model-missing").severity is Severity.ERROR


# expectations, start-up behaviour, output ------------------------------------------------------


def test_gpu_expected():
    cpu_box = Probe(torch_version="2.13.0+cpu")
    assert not gpu_expected(cpu_box, ConfigFacts())
    assert gpu_expected(cpu_box, ConfigFacts(require_gpu=True))
    assert gpu_expected(cpu_box, ConfigFacts(device="cuda"))
    assert gpu_expected(igpu_rocm(), ConfigFacts())  # auto on a machine with a GPU
    assert not gpu_expected(igpu_rocm(), ConfigFacts(device="cpu"))


def test_expected_gpu_not_seen_without_a_specific_cause_still_fails():
    probe = replace(
        healthy_cuda(),
        build="cuda",
        gpu_available=False,
        gpus=(),
        nodes=(node("/dev/nvidia0", gid=0),),
        gpu_error=None,
    )
    probe = replace(
        probe,
        build="rocm",
        hip_version="7.2",
        gfx_targets=(),
        nvidia_driver=None,
        nodes=(node("/dev/kfd"), node("/dev/dri/renderD128")),
        groups=((992, "render"),),
    )
    report = run_checks(True, [CV], probe, config=ROCM_SAFE)
    assert "gpu-not-visible" in codes(report, Severity.ERROR)


def test_config_facts_from_yaml_mapping_and_settings():
    raw = {
        "device": "cuda:0",
        "require_gpu": True,
        "optimization": {"use_cuda_graphs": False, "streaming": {"decode_window_frames": 72}},
        "gpu_keepalive_interval_s": 15,
    }
    facts = ConfigFacts.from_settings(raw)
    assert facts == ConfigFacts(
        device="cuda:0",
        require_gpu=True,
        use_cuda_graphs=False,
        decode_window_frames=72,
        gpu_keepalive_interval_s=15.0,
    )
    assert ConfigFacts.from_settings(None) == ConfigFacts()
    settings_mod = pytest.importorskip("ownvoice.server.settings")
    s = settings_mod.load_settings(None, device="cpu")
    assert ConfigFacts.from_settings(s).device == "cpu"


def test_check_at_start_refuses_a_cpu_fallback_when_gpu_is_required(caplog):
    settings = {"require_gpu": True, "models": {"cv": {"source": CV}}}
    probe = replace(
        healthy_cuda(), torch_version="2.13.0+cpu", build="cpu", gpu_available=False, gpus=()
    )
    with (
        caplog.at_level(logging.INFO, logger="ownvoice.doctor"),
        pytest.raises(ModelLoadError) as err,
    ):
        check_at_start(settings, probe=probe)
    assert "require_gpu is true" in err.value.message
    assert "download.pytorch.org/whl/cu" in err.value.message  # the fix travels with the error
    assert any(
        r.levelno == logging.ERROR and "torch-cpu-build" in r.getMessage() for r in caplog.records
    )


def test_check_at_start_warns_loudly_when_a_gpu_goes_unused(caplog):
    settings = {"require_gpu": False, "models": {"cv": {"source": CV}}}
    probe = igpu_rocm(gpu_available=False, gpus=(), nodes=(DeviceNode("/dev/kfd", exists=False),))
    with caplog.at_level(logging.INFO, logger="ownvoice.doctor"):
        report = check_at_start(settings, probe=probe)
    assert not report.gpu_usable
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("RUNNING ON THE CPU" in m for m in warnings), warnings


def test_check_at_start_on_a_healthy_gpu_logs_the_device(caplog):
    with caplog.at_level(logging.INFO, logger="ownvoice.doctor"):
        report = check_at_start({"require_gpu": True}, probe=healthy_cuda())
    assert report.gpu_usable
    assert any("device: cuda:0 NVIDIA GeForce RTX 4090" in r.getMessage() for r in caplog.records)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_text_and_json_reports_carry_facts_fixes_and_verdict():
    probe = igpu_rocm(
        env={}, gpus=(Gpu(0, "AMD Radeon 890M Graphics", "gfx1150", 16 * GIB, 15 * GIB),)
    )
    report = run_checks(True, [CV], probe, config=ROCM_SAFE)
    text = report.to_text()
    assert "[FAIL]" in text and "fix: HSA_OVERRIDE_GFX_VERSION=11.0.0" in text
    assert "gfx1150 (ISA from /sys/class/kfd)" in text and "render(992)" in text
    assert text.rstrip().splitlines()[-1] == f"verdict: {report.verdict}"
    data = json.loads(json.dumps(report.to_dict()))
    assert data["ok"] is False and data["probe"]["gfx_targets"] == ["gfx1150"]
    assert {"code", "severity", "message", "fix"} <= set(data["findings"][0])


# the real machine and the command line ---------------------------------------------------------


def test_collect_probe_reads_this_machine(tmp_path):
    torch = pytest.importorskip("torch")
    probe = collect_probe([str(tmp_path), CV])
    assert probe.torch_version == torch.__version__
    expected_build = "rocm" if torch.version.hip else "cuda" if torch.version.cuda else "cpu"
    assert probe.build == expected_build
    assert (
        probe.models[0].local
        and not probe.models[0].present
        and "missing" in probe.models[0].detail
    )
    assert not probe.models[1].local
    assert probe.groups and all(isinstance(g, int) for g, _ in probe.groups)
    run_checks(False, [], probe).to_text()  # formats whatever this machine is


@pytest.mark.parametrize(
    ("value", "isa"),
    [(110500, "gfx1150"), (110501, "gfx1151"), (110000, "gfx1100"), (90010, "gfx90a"), (0, None)],
)
def test_gfx_from_sysfs(value, isa):
    assert gfx.from_target_version(value) == isa


def test_gfx_override_names():
    assert gfx.from_override("11.0.0") == "gfx1100"
    assert gfx.from_override(" 11.5.1 ") == "gfx1151"
    assert gfx.from_override("10.3.0") == "gfx1030"
    assert gfx.from_override("11") is None and gfx.from_override("gfx1100") is None
    assert all(gfx.to_override(gfx.from_override(v)) == v for v in ("11.0.0", "11.5.1", "9.0.10"))
    assert gfx.suggested_overrides("gfx1150") == ("11.0.0", "11.5.0", "11.5.1")
    assert gfx.base_isa("gfx90a:sramecc+:xnack-") == "gfx90a"


def test_cli_doctor(tmp_path, capsys):
    from ownvoice.cli import main

    config = tmp_path / "config.yaml"
    config.write_text(
        f"device: cpu\nmodels:\n  cv: {{source: {tmp_path / 'missing'}, type: custom_voice}}\n"
    )
    with pytest.raises(SystemExit) as exit_:
        main(["doctor", "--config", str(config), "--json"])
    data = json.loads(capsys.readouterr().out)
    assert data["expect_gpu"] is False
    assert [f["code"] for f in data["findings"] if f["severity"] == "error"] == ["model-missing"]
    assert exit_.value.code == 1
    with pytest.raises(SystemExit) as exit_:
        main(["doctor", "--model", str(tmp_path), "--no-expect-gpu"])
    assert "verdict:" in capsys.readouterr().out
    assert exit_.value.code == 1  # the folder is not a checkpoint


# the CPU: threads, other processes, spinning ----------------------------------------------------


def test_cpu_threads_follow_the_container_quota_and_busy_cores_are_reported():
    base = Probe(torch_version="2.13.0+cpu", build="cpu", models=(cached(),))
    quiet = replace(base, cpu_affinity=32, torch_threads=16, cpu_quota=2.0, load_average=0.3)
    report = run_checks(False, [CV], quiet)
    threads = finding(report, "cpu-threads")
    assert "uses 2 CPU thread(s)" in threads.message and "quota" in threads.message
    assert "cpu-busy" not in codes(report) and "cpu-spin" not in codes(report)
    # two of two usable CPUs kept busy by others: a warning with a fix
    busy = run_checks(False, [CV], replace(quiet, load_average=1.8))
    assert finding(busy, "cpu-busy").severity == Severity.WARNING
    assert "taskset" in finding(busy, "cpu-busy").fix
    for env in (
        {"OMP_WAIT_POLICY": "active"},
        {"OWNVOICE_KEEP_OMP_WAITING": "1"},
        {"OMP_WAIT_POLICY": "PASSIVE", "GOMP_SPINCOUNT": "infinity"},
    ):
        spin = run_checks(False, [CV], replace(quiet, env=env))
        assert finding(spin, "cpu-spin").severity == Severity.WARNING, env
    short = {"OMP_WAIT_POLICY": "PASSIVE", "GOMP_SPINCOUNT": "10000"}  # ownvoice's default
    assert "cpu-spin" not in codes(run_checks(False, [CV], replace(quiet, env=short)))
    # the config's num_threads wins
    mine = run_checks(False, [CV], quiet, config=ConfigFacts(num_threads=6))
    assert "uses 6 CPU thread(s)" in finding(mine, "cpu-threads").message
