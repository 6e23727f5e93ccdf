"""scripts/gpu_check.py rehearsed on the CPU with tiny checkpoints.

A lent GPU comes with minutes, not hours: the script must run first time. This runs every step
(checkpoints, fast vs eager, compiled, batched vs eager, streaming vs one-shot, bench, batch
bench) on the CPU and checks the
report; on a CUDA machine the same code runs with --device cuda and full-size checkpoints.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_gpu_check_rehearsal_on_cpu(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gpu_check.py"), "--out", str(tmp_path),
         "--device", "cpu", "--tiny", "--quick"],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    report = json.loads((tmp_path / "gpu_report.json").read_text())
    steps = {name: r for name, r in report.items() if isinstance(r, dict)}
    failed = {name: r.get("error") for name, r in steps.items() if not r["ok"]}
    assert not failed and proc.returncode == 0, (failed, proc.stdout[-2000:], proc.stderr[-2000:])
    for name in ("graphs_vs_eager/0.6B-CustomVoice/float32", "graphs_vs_eager/0.6B-Base/float32"):
        assert all(steps[name][mode]["codes_identical"] for mode in ("streaming", "non-streaming"))
    assert steps["streaming_vs_oneshot"]["ok"]
    assert steps["bench/0.6B"]["result"]["rows"]["ownvoice"]["total_ms"] > 0
    batched = steps["batched_vs_eager/0.6B-CustomVoice/float32"]
    assert batched["bucket 16"]["rows_identical"] == 16  # the CPU kernels: exactly
    rows = steps["batch_bench/0.6B"]["result"]["batch_rows"]
    assert [r["batch"] for r in rows] == [1, 2] and rows[1]["frames_per_s"] > 0
    assert (tmp_path / "gpu_report.md").read_text().startswith("# GPU check: cpu")
