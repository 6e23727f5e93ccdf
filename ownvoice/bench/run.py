"""`ownvoice bench`: speed and memory of ownvoice, optionally beside the official package.

Each configuration runs in its own process (one after the other, in this one command), so each
memory peak is its own and the ratios compare runs made under the same conditions.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass

import torch

from ownvoice.bench.common import PHASES_LEGEND, busy_warning, machine_load


@dataclass(frozen=True)
class BenchSpec:
    model: str
    device: str = "cpu"
    dtype: str = "float32"
    frames: int = 48
    threads: int = 2
    first_chunk: int = 2
    compare_reference: bool = False
    quantize_modes: tuple[str, ...] = ()  # single-stream table: also these weights, and quality
    cuda_graphs: bool = True
    repeat: int = 1  # rounds; each round runs every side once, the best round of each is kept
    batch: tuple[int, ...] = ()  # batch sizes to compare (--batch); empty = the single-stream table
    quantize: str | None = None  # --batch: the weights
    probes: int = 5  # late arrivals timed per batch size
    text: str | None = None  # what to speak (default: the bench's own sentence)
    decoder_dtype: str | None = None  # the speech decoder's precision in our rows (None = dtype)
    # decoding beside generation (EngineConfig.overlap_decoder): "auto", "on", "off"; each one
    # given is a row of its own
    overlap: tuple[str, ...] = ("auto",)


OVERLAP = {"auto": None, "on": True, "off": False}


def _overlap_sides(spec: BenchSpec, name: str, extra: dict) -> list[tuple[str, dict]]:
    """One side per --overlap mode, named by it when there are several."""
    if len(spec.overlap) == 1:
        return [(name, {**extra, "overlap_decoder": OVERLAP[spec.overlap[0]]})]
    return [
        (f"{name} ov {mode}", {**extra, "overlap_decoder": OVERLAP[mode]}) for mode in spec.overlap
    ]


def run_side(side: str, spec: BenchSpec, **extra) -> dict:
    payload = {"side": side, **spec.__dict__, **extra}
    env = dict(os.environ, OMP_NUM_THREADS=str(spec.threads), TOKENIZERS_PARALLELISM="false")
    proc = subprocess.run(
        [sys.executable, "-m", "ownvoice.bench.worker", json.dumps(payload)],
        capture_output=True,
        text=True,
        env=env,
    )
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-15:]
    raise RuntimeError(f"benchmark side {side!r} failed:\n" + "\n".join(tail))


def memory_bandwidth(device: str, threads: int) -> float:
    """Bytes per second one pass over a large buffer reaches on this device."""
    torch.set_num_threads(threads)
    if device.startswith("cuda"):
        x = torch.empty(512 * 2**20, dtype=torch.uint8, device=device)
        y = torch.empty_like(x)
        for _ in range(3):
            y.copy_(x)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(10):
            y.copy_(x)
        torch.cuda.synchronize()
        return 2 * x.numel() * 10 / (time.perf_counter() - t0)  # read + write
    x = torch.ones(256 * 2**20 // 4)  # 256 MiB, far beyond any cache
    best = float("inf")
    for _ in range(6):  # the best pass: a shared machine only ever slows a pass down
        t0 = time.perf_counter()
        x.sum()
        best = min(best, time.perf_counter() - t0)
    return x.numel() * 4 / best


# instruction sets that decide which kernels run (kernels/intdot.h)
CPU_FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "amx_int8")


def cpu_report() -> dict:
    """The CPU's model, which of CPU_FLAGS it has, and what our kernels use on it."""
    from ownvoice.kernels import cpu_kernels

    model, flags = "", set()
    try:
        for line in open("/proc/cpuinfo"):
            key, _, value = line.partition(":")
            if key.strip() == "model name" and not model:
                model = value.strip()
            elif key.strip() == "flags" and not flags:
                flags = set(value.split())
    except OSError:
        pass
    kernels = cpu_kernels()
    return dict(
        model=model,
        flags=[f for f in CPU_FLAGS if f in flags],
        kernels=kernels.isa() if kernels is not None else None,
        # decoder_dtype: bfloat16 runs on our bf16 dot products (else torch's bf16 ops)
        bf16_products=kernels is not None and kernels.has_bf16dot(),
    )


def format_cpu(cpu: dict) -> str:
    used = cpu["kernels"] or "none (torch's ops)"
    flags = " ".join(cpu["flags"]) or "-"
    bf16 = "our bf16 products" if cpu.get("bf16_products") else "torch's bf16 ops"
    return f"CPU {cpu['model'] or '?'}: {flags}; integer kernels: {used}; bf16 decoder: {bf16}"


def run_batch_bench(spec: BenchSpec, log=print) -> dict:
    """One process per batch size, in this command; the best of `repeat` rounds per size."""
    machine = machine_load()
    rows: dict[tuple, dict] = {}
    keys = [(mode, b) for mode in spec.overlap for b in spec.batch]
    for round_ in range(spec.repeat):
        for mode, b in keys:
            log(f"batch {b}, overlap {mode}, round {round_ + 1}/{spec.repeat} ...")
            r = run_side("batch", spec, batch_size=b, overlap_decoder=OVERLAP[mode])
            if (mode, b) not in rows or r["frames_per_s"] > rows[mode, b]["frames_per_s"]:
                rows[mode, b] = r
    bandwidth = memory_bandwidth(spec.device, spec.threads)
    return dict(
        spec=spec.__dict__,
        bandwidth_gbs=bandwidth / 1e9,
        batch_rows=[rows[k] for k in keys],
        machine=machine,
    )


def run_bench(spec: BenchSpec, log=print) -> dict:
    machine = machine_load()
    sides = []
    for name, extra in _overlap_sides(spec, "ownvoice", {}):
        sides.append((name, "ownvoice", extra))
    for mode in spec.quantize_modes:
        for name, extra in _overlap_sides(spec, f"ownvoice {mode}", {"quantize": mode}):
            sides.append((name, "ownvoice", extra))
    if spec.compare_reference:
        sides.append(("qwen-tts 0.1.1", "reference", {}))
    # Rounds interleave the sides, so a slow minute on a shared machine hits all of them; each
    # side keeps its best round.
    rows: dict = {}
    for round_ in range(spec.repeat):
        for name, side, extra in sides:
            log(f"{name} ({spec.dtype}), round {round_ + 1}/{spec.repeat} ...")
            r = run_side(side, spec, **extra)
            if name not in rows or r["total_ms"] < rows[name]["total_ms"]:
                rows[name] = r
    bandwidth = memory_bandwidth(spec.device, spec.threads)
    for r in rows.values():
        if "bytes_per_frame" in r:
            gen_s = (r.get("talker_ms", 0) + r.get("code_predictor_ms", 0)) / 1e3
            r["floor_ms"] = 1e3 * r["bytes_per_frame"] / bandwidth
            r["floor_fraction"] = r["floor_ms"] / 1e3 / gen_s if gen_s else None
    out = dict(spec=spec.__dict__, cpu=cpu_report(), bandwidth_gbs=bandwidth / 1e9, rows=rows,
               machine=machine)  # fmt: skip
    out["quality"] = {}
    for mode in spec.quantize_modes:
        log(f"{mode} quality (against the unquantized weights: logits, codes, audio) ...")
        out["quality"][mode] = run_side("quality", spec, quantize=mode)
    if "qwen-tts 0.1.1" in rows:
        ref = rows["qwen-tts 0.1.1"]["total_ms"]
        out["speedup"] = {
            name: ref / r["total_ms"] for name, r in rows.items() if name != "qwen-tts 0.1.1"
        }
    return out


def format_table(result: dict) -> str:
    spec = result["spec"]
    head = (
        f"ownvoice bench: {spec['model']} on {spec['device']} ({spec['threads']} threads), "
        f"{spec['frames']} frames, memory bandwidth {result['bandwidth_gbs']:.1f} GB/s"
    )
    if result.get("cpu"):
        head += "\n" + format_cpu(result["cpu"])
    if spec.get("decoder_dtype"):
        head += f"\nownvoice's speech decoder in {spec['decoder_dtype']}"
    cols = [
        ("engine", 16), ("dtype", 9), ("talker", 7), ("code pred", 9), ("decoder", 8),
        ("ms/frame", 9), ("RTF", 6), ("frames/s", 8), ("TTFA ms", 8), ("peak RSS", 9),
        ("growth", 7), ("floor", 6),
    ]  # fmt: skip
    lines = [head, " ".join(name.rjust(w) for name, w in cols)]
    for name, r in result["rows"].items():
        gen_only = r.get("generation_ms")
        cells = [
            name,
            r["dtype"],
            _ms(r.get("talker_ms", gen_only)),
            _ms(r.get("code_predictor_ms")) if "code_predictor_ms" in r else "(incl.)",
            _ms(r.get("decoder_ms")),
            _ms(r["total_ms"]),
            f"{r['rtf']:.2f}",
            f"{r['frames_per_s']:.1f}",
            _ms(r.get("ttfa_ms")),
            f"{r['peak_rss'] / 2**30:.2f}G",
            f"{r['rss_growth'] / 2**20:.0f}M" if "rss_growth" in r else "-",
            f"{100 * r['floor_fraction']:.0f}%" if r.get("floor_fraction") else "-",
        ]
        lines.append(" ".join(str(c).rjust(w) for c, (_, w) in zip(cells, cols, strict=True)))
    if result.get("quality"):
        from ownvoice.bench.quality import QuantQuality

        for q in result["quality"].values():
            lines.append(QuantQuality(**q).summary())
    for name, x in result.get("speedup", {}).items():
        lines.append(
            f"{name}: {x:.2f}x faster than qwen-tts 0.1.1 end to end (ms/frame incl. decoding)"
        )
    lines.append(PHASES_LEGEND)
    warning = busy_warning(result.get("machine"))
    return "\n".join([*lines, warning] if warning else lines)


def _ms(value) -> str:
    return "-" if value is None else f"{value:.1f}"
