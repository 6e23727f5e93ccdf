"""`make serve` on a machine already set up starts without the package index: it reinstalls
only when the dependency files changed (the editable install would fetch its build backend,
and fail offline). Checked with `make -n` (what make would run) over a set-up .venv's stamps."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def would_run(folder: Path, target: str) -> list[str]:
    # as a user's shell runs it: not as a sub-make of `make test` (whose MAKEFLAGS and
    # MAKELEVEL would pass on, and add "Entering directory" lines)
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    out = subprocess.run(["make", "--no-print-directory", "-n", target, "VENV=venv"],
                         cwd=folder, env=env, capture_output=True, text=True, timeout=30,
                         check=True)  # fmt: skip
    return out.stdout.splitlines()


def touch(path: Path, at: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()
    os.utime(path, (at, at))


@pytest.fixture
def set_up(tmp_path) -> Path:
    if shutil.which("make") is None:
        pytest.fail("make is not installed (the README's commands need it)")
    for name in ("Makefile", "pyproject.toml"):
        shutil.copy(ROOT / name, tmp_path / name)
    t = time.time() - 100
    for n, name in enumerate(("Makefile", "pyproject.toml")):
        os.utime(tmp_path / name, (t + n, t + n))
    for n, stamp in enumerate(("bin/python", ".torch", ".installed", ".installed-test")):
        touch(tmp_path / "venv" / stamp, t + 10 + n)  # made in that order, after the files
    return tmp_path


def test_a_second_make_serve_installs_nothing(set_up):
    assert would_run(set_up, "serve") == ["venv/bin/ownvoice doctor --prepare",
                                          "venv/bin/ownvoice serve "]  # fmt: skip
    assert not any("pip" in line for line in would_run(set_up, "test"))


def test_a_changed_dependency_file_installs_again(set_up):
    (set_up / "pyproject.toml").touch()
    assert any("pip install" in line for line in would_run(set_up, "serve"))
    assert any("pip install" in line for line in would_run(set_up, "test"))


def test_the_tests_install_covers_the_server(set_up):
    (set_up / "venv" / ".installed").unlink()
    (set_up / "venv" / ".installed-test").unlink()
    lines = would_run(set_up, "test")
    assert any("touch venv/.installed-test venv/.installed" in line for line in lines), lines
