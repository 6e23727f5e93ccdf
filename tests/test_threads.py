"""Thread count from what the process may use (affinity, cgroup quota), and passive waiting."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ownvoice.threads import cgroup_cpu_quota, choose_threads


def fake_v2(tmp_path, cpu_max: str, nested: str | None = None):
    """A cgroup v2 tree: /sys/fs/cgroup[/<nested>]/cpu.max and /proc/self/cgroup."""
    root = tmp_path / "cgroup"
    folder = root / nested if nested else root
    folder.mkdir(parents=True)
    (folder / "cpu.max").write_text(cpu_max + "\n")
    proc = tmp_path / "proc-cgroup"
    proc.write_text(f"0::/{nested or ''}\n")
    return root, proc


def test_a_two_cpu_quota_on_a_bigger_machine_gives_two_threads(tmp_path):
    root, proc = fake_v2(tmp_path, "200000 100000", nested="docker/abc123")
    choice = choose_threads(None, default=32, cgroup_root=root, proc_cgroup=proc,
                            affinity=set(range(64)))  # fmt: skip
    assert choice.count == 2 and "quota of 2 CPU" in choice.why
    # a fractional quota rounds up: 1.5 CPUs of time are best used by two threads
    root, proc = fake_v2(tmp_path / "b", "150000 100000")
    assert choose_threads(None, 32, root, proc, set(range(64))).count == 2


def test_the_tightest_limit_on_the_way_up_counts(tmp_path):
    root, proc = fake_v2(tmp_path, "max 100000", nested="machine/slice/app")
    (root / "machine" / "cpu.max").write_text("300000 100000\n")  # the parent limits
    assert cgroup_cpu_quota(root, proc) == 3.0
    assert choose_threads(None, 16, root, proc, set(range(16))).count == 3


def test_cgroup_v1_quota(tmp_path):
    root = tmp_path / "cgroup"
    cpu = root / "cpu,cpuacct"
    cpu.mkdir(parents=True)
    (cpu / "cpu.cfs_quota_us").write_text("250000\n")
    (cpu / "cpu.cfs_period_us").write_text("100000\n")
    proc = tmp_path / "proc-cgroup"
    proc.write_text("5:cpu,cpuacct:/docker/abc\n4:memory:/docker/abc\n")
    assert cgroup_cpu_quota(root, proc) == 2.5
    assert choose_threads(None, 8, root, proc, set(range(8))).count == 3
    (cpu / "cpu.cfs_quota_us").write_text("-1\n")  # no limit
    assert cgroup_cpu_quota(root, proc) is None


def test_affinity_and_the_users_choice(tmp_path):
    root, proc = fake_v2(tmp_path, "max 100000")
    assert choose_threads(None, 8, root, proc, {0, 1, 2}).count == 3  # taskset -c 0-2
    assert choose_threads(None, 2, root, proc, set(range(8))).count == 2  # torch's default
    mine = choose_threads(6, 2, root, proc, {0})
    assert mine.count == 6 and "num_threads" in mine.why  # the config or --threads wins
    assert choose_threads(None, None, tmp_path / "none", tmp_path / "none", {0, 1}).count == 2


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ({}, "PASSIVE 10000"),  # ownvoice's default: sleep after a short spin
        ({"OMP_WAIT_POLICY": "ACTIVE"}, "ACTIVE -"),  # the user's choice is kept
        ({"GOMP_SPINCOUNT": "5"}, "- 5"),
        ({"OWNVOICE_KEEP_OMP_WAITING": "1"}, "- -"),  # the runtime's own waiting
    ],
)
def test_threads_wait_passively_unless_the_user_says_otherwise(given, expected):
    names = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "OWNVOICE_KEEP_OMP_WAITING")
    env = {k: v for k, v in os.environ.items() if k not in names} | given
    code = (
        "import os, ownvoice, torch; "
        "print(os.environ.get('OMP_WAIT_POLICY', '-'), os.environ.get('GOMP_SPINCOUNT', '-'))"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, check=True)  # fmt: skip
    assert out.stdout.strip() == expected
