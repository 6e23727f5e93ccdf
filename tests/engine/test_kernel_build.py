"""The CPU kernels' build cache: it survives a build that was killed half-way (Ctrl-C during the
first start: torch leaves its `lock` file behind, and the next start must not wait for it); each
environment keeps its own build; a first build says so in the log."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ownvoice.kernels import cpu_kernels


def test_a_lock_left_by_a_killed_build_does_not_hang_the_next_start():
    module = cpu_kernels()
    if module is None:
        pytest.skip("no CPU kernels on this machine (no AVX2 or no compiler)")
    built = Path(module.__file__).parent
    (built / "lock").touch()  # a finished build, then a killed rebuild: torch's lock, left
    code = "from ownvoice.kernels import cpu_kernels; print(cpu_kernels().__file__)"
    try:
        out = subprocess.run(
            [sys.executable, "-c", code], env=os.environ, capture_output=True, text=True,
            timeout=120,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail("the kernels waited for a lock nobody holds")
    assert out.returncode == 0, out.stderr
    assert Path(out.stdout.strip()) == Path(module.__file__)
    assert not (built / "lock").exists()


def test_each_environment_keeps_its_own_build():
    """Two environments on one machine (a .venv and a pipx install, two torch versions) must not
    share a build folder: torch's build file names torch's headers and flags, so each would
    rebuild over the other's at every model load (minutes). The folder's name changes with each
    input that makes builds differ, and only with them."""
    from ownvoice.kernels import build_inputs, build_name

    inputs = build_inputs()
    assert set(inputs) == {"sources", "torch", "python", "compiler", "flags"}
    assert build_name() == build_name(inputs) == build_name(build_inputs())  # stable
    names = {build_name({**inputs, key: inputs[key] + b"-other"}) for key in inputs}
    assert len(names) == len(inputs) and build_name(inputs) not in names


def test_a_first_build_says_so_in_the_log(tmp_path, monkeypatch, caplog):
    """A first start compiles for minutes: the log says so when it begins and ends, instead of
    staying silent between "Uvicorn running" and "ready"; a start that finds its build says
    nothing. (torch's compiler call is replaced: what is tested is what we log around it.)"""
    import logging

    import torch.utils.cpp_extension

    from ownvoice import kernels

    def load(name, build_directory, **_):
        (Path(build_directory) / f"{name}.so").touch()  # what a build leaves
        return "module"

    monkeypatch.setattr(torch.utils.cpp_extension, "load", load)
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    with caplog.at_level(logging.INFO, logger="ownvoice.kernels"):
        assert kernels._build() == "module"
        first = list(caplog.messages)
        caplog.clear()
        copies = sorted((tmp_path / kernels.build_name() / "src").iterdir())
        stamps = [f.stat().st_mtime_ns for f in copies]
        assert kernels._build() == "module"
    # the sources are copied once: a rewrite would make ninja rebuild everything
    assert [f.stat().st_mtime_ns for f in copies] == stamps and len(copies) >= len(kernels.SOURCES)
    assert len(first) == 2 and first[0].startswith("building the CPU kernels in "), first
    assert "first start" in first[0] and first[1].startswith("CPU kernels built in "), first
    assert not caplog.messages  # found built: nothing to say


def prepare(**env) -> subprocess.CompletedProcess:
    """`ownvoice doctor --prepare`, as `make serve` runs it before the server starts."""
    return subprocess.run(
        [sys.executable, "-m", "ownvoice", "doctor", "--prepare"], env={**os.environ, **env},
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def test_doctor_prepare_builds_the_kernels_before_a_start():
    from ownvoice.kernels import build_dir, cpu_supports_avx2

    if not cpu_supports_avx2():
        pytest.skip("no CPU kernels on this CPU")
    out = prepare()
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.startswith("CPU kernels: ready ("), out.stdout
    assert str(build_dir()) in out.stdout
    assert (build_dir() / f"{build_dir().name}.so").is_file()  # what the first load then finds
    again = prepare()
    assert again.returncode == 0 and "(already built)" in again.stdout


def test_doctor_prepare_fails_with_the_fix_when_nothing_can_build(tmp_path):
    from ownvoice.kernels import cpu_supports_avx2

    if not cpu_supports_avx2():
        pytest.skip("no CPU kernels on this CPU")
    out = prepare(CXX=str(tmp_path / "no-compiler"), TORCH_EXTENSIONS_DIR=str(tmp_path))
    assert out.returncode == 1, out.stdout + out.stderr
    assert "could not be built" in out.stdout and "g++" in out.stdout
    skipped = prepare(OWNVOICE_NO_KERNELS="1")
    assert skipped.returncode == 0 and "not used" in skipped.stdout
