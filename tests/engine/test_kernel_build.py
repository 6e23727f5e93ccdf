"""The CPU kernels' build cache survives a build that was killed half-way (Ctrl-C during the
first start): torch leaves its `lock` file behind, and the next start must not wait for it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ownvoice.kernels import cpu_kernels


def test_a_lock_left_by_a_killed_build_does_not_hang_the_next_start(tmp_path):
    module = cpu_kernels()
    if module is None:
        pytest.skip("no CPU kernels on this machine (no AVX2 or no compiler)")
    built = Path(module.__file__).parent
    cache = tmp_path / "torch_extensions"
    shutil.copytree(built, cache / built.name)  # a finished build, then a killed rebuild:
    (cache / built.name / "lock").touch()  # torch's lock file, never removed
    code = "from ownvoice.kernels import cpu_kernels; print(cpu_kernels().__file__)"
    env = {**os.environ, "TORCH_EXTENSIONS_DIR": str(cache)}
    try:
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the kernels waited for a lock nobody holds")
    assert out.returncode == 0, out.stderr
    assert Path(out.stdout.strip()).is_relative_to(cache)
    assert not (cache / built.name / "lock").exists()
