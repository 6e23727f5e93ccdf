#!/usr/bin/env python3
"""All GPU checks in one run, for a CUDA machine without internet (a few minutes).

    python scripts/gpu_check.py --out OUT_DIR [--quick]
    python scripts/gpu_check.py --out OUT_DIR --device cpu --tiny   # rehearsal, no GPU needed

1. builds full-size random 0.6B and 1.7B CustomVoice checkpoints (and a 0.6B Base) locally;
2. fast path (static caches + CUDA graphs) vs the eager path: greedy codes identical for 64
   frames in every mode (float32), and the agreement in bfloat16;
3. batched (CUDA graphs per batch bucket) vs eager solo runs: greedy codes of every row, per
   bucket 1, 2, 4, 8, 16 (float32; torch's GPU kernels promise no batch invariance, so the
   agreement is reported and must stay high);
4. streaming decoder vs one-shot decode on the GPU (max abs difference, float32);
5. `ownvoice bench` at batch 1, streaming (1-frame first chunk, then 8), 0.6B and 1.7B, bf16;
6. `ownvoice bench --batch 1,4,16`: aggregate throughput, per-stream RTF and a late arrival's
   time to first audio, 0.6B and 1.7B, bf16 (goal: 16 streams >= 100x real time together,
   each >= 3x, first audio < 100 ms).

Writes OUT_DIR/gpu_report.json and OUT_DIR/gpu_report.md. Every step is guarded: a failure is
recorded in the report and the next step still runs; the exit code is 1 if any step failed.
GPU time is scarce, so the script is rehearsed on the CPU with tiny checkpoints in the tests.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TEXT = "The quick brown fox jumps over the lazy dog, then runs far into the forest."


def step(report: dict, name: str):
    def wrap(fn):
        t0 = time.perf_counter()
        try:
            report[name] = {"ok": True, **(fn() or {})}
        except Exception as e:  # keep going: one broken check must not hide the others
            report[name] = {
                "ok": False,
                "error": f"{type(e).__name__}: {e}",
                "trace": traceback.format_exc()[-2000:],
            }
        report[name]["seconds"] = round(time.perf_counter() - t0, 1)
        print(
            f"[{name}] {'ok' if report[name]['ok'] else 'FAILED'} ({report[name]['seconds']} s)",
            flush=True,
        )
        return fn

    return wrap


def equality(folder: Path, device: str, dtype: str, frames: int, use_compile: bool = False) -> dict:
    from ownvoice.dev.random_speaker_encoder import synthetic_voice
    from ownvoice.engine.engine import Engine
    from ownvoice.engine.options import SamplingOptions, SynthesisOptions

    fast = Engine.load(
        str(folder), device=device, dtype=dtype, fast=True, use_cuda_graphs=True,
        use_compile=use_compile,
    )  # fmt: skip
    eager = Engine.load(str(folder), device=device, dtype=dtype, fast=False)
    out = {}
    for text_mode in ("non-streaming", "streaming"):
        opts = SynthesisOptions(
            sampling=SamplingOptions.greedy(), max_frames=frames, text_mode=text_mode
        )
        kw = {}
        if fast.model_type == "custom_voice":
            kw["voice"] = fast.supported_speakers[0]
        elif fast.model_type == "base":
            clip = (synthetic_voice(np.random.default_rng(0), 3.0), 24000)
            kw["voice"] = fast.make_voice(clip, ref_text="A reference recording for the check.")
        a = eager.synthesize(TEXT, options=opts, **kw)
        b = fast.synthesize(TEXT, options=opts, **kw)
        same = a.codes.shape == b.codes.shape and bool(np.array_equal(a.codes, b.codes))
        agree = (
            float((a.codes[: len(b.codes)] == b.codes[: len(a.codes)]).mean())
            if len(a.codes)
            else 0.0
        )
        out[text_mode] = {
            "frames": int(len(b.codes)),
            "codes_identical": same,
            "code_agreement": agree,
        }
    del fast, eager
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    # plain float32 must be identical; bfloat16 and compiled runs report their agreement
    # (other kernels, other fusions: rounding may differ, then the sequences drift apart)
    strict = dtype == "float32" and not use_compile
    out["ok"] = not strict or all(r["codes_identical"] for r in out.values())
    return out


def batched_vs_eager(folder: Path, device: str, frames: int, buckets=(1, 2, 4, 8, 16)) -> dict:
    """Greedy codes of rows run together (graphs per bucket) against each row run alone on the
    eager path."""
    from ownvoice.engine.engine import Engine
    from ownvoice.engine.options import SamplingOptions, SynthesisOptions

    fast = Engine.load(str(folder), device=device, dtype="float32", max_batch=max(buckets))
    eager = Engine.load(str(folder), device=device, dtype="float32", fast=False)
    speakers = fast.supported_speakers
    opts = SynthesisOptions(sampling=SamplingOptions.greedy(), max_frames=frames)
    texts = [f"{TEXT} Number {i}." for i in range(max(buckets))]
    alone = [
        eager.synthesize(t, voice=speakers[i % len(speakers)], options=opts).codes
        for i, t in enumerate(texts)
    ]
    out = {}
    for b in buckets:
        seqs = [fast.start(texts[i], speakers[i % len(speakers)], options=opts) for i in range(b)]
        codes = {id(s): [] for s in seqs}
        for s in seqs:
            fast.join(s)
        while fast.running:
            for s, chunk in fast.step():
                codes[id(s)].append(chunk.codes)
        for s, chunk in fast.ready_chunks():  # anything a step left pending
            codes[id(s)].append(chunk.codes)
        rows = [np.concatenate(codes[id(s)]) for s in seqs]
        agree = [
            float((r[: len(a)] == a[: len(r)]).all(axis=1).mean())
            for r, a in zip(rows, alone[:b], strict=True)
        ]
        out[f"bucket {b}"] = {
            "rows_identical": sum(a == 1.0 for a in agree),
            "mean_frame_agreement": float(np.mean(agree)),
        }
    del fast, eager
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    out["ok"] = all(r["mean_frame_agreement"] >= 0.9 for r in out.values())
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true", help="0.6B only, fewer frames")
    ap.add_argument("--device", default="cuda", help="cpu to rehearse without a GPU")
    ap.add_argument("--tiny", action="store_true", help="tiny checkpoints (rehearsal)")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    device = args.device
    name = torch.cuda.get_device_name(0) if device.startswith("cuda") else device
    report: dict = {"device": name, "torch": torch.__version__}
    work = Path(tempfile.mkdtemp(prefix="ownvoice-gpu-"))
    sizes = ["0.6B"] if args.quick else ["0.6B", "1.7B"]
    ckpt = {}

    @step(report, "build_checkpoints")
    def _():
        from ownvoice.dev.random_checkpoint import write_random_checkpoint

        for like in [f"{s}-CustomVoice" for s in sizes] + ["0.6B-Base"]:
            ckpt[like] = write_random_checkpoint(work / like, like, tiny=args.tiny, no_eos=True)
        return {"checkpoints": list(ckpt)}

    for like in list(ckpt):

        @step(report, f"graphs_vs_eager/{like}/float32")
        def _(like=like):
            return equality(ckpt[like], device, "float32", 64)

        @step(report, f"graphs_vs_eager/{like}/bfloat16")
        def _(like=like):
            return equality(ckpt[like], device, "bfloat16", 64)

    @step(report, f"compiled_graphs_vs_eager/{sizes[0]}-CustomVoice/float32")
    def _():
        return equality(ckpt[f"{sizes[0]}-CustomVoice"], device, "float32", 32, use_compile=True)

    @step(report, f"batched_vs_eager/{sizes[0]}-CustomVoice/float32")
    def _():
        return batched_vs_eager(ckpt[f"{sizes[0]}-CustomVoice"], device, 24 if args.tiny else 48)

    @step(report, "streaming_vs_oneshot")
    def _():
        from ownvoice.model.codec.loading import load_codec
        from ownvoice.model.codec.streaming import StreamingDecoder

        codec = load_codec(
            ckpt[f"{sizes[0]}-CustomVoice"] / "speech_tokenizer",
            device,
            torch.float32,
            with_encoder=False,
        )
        codes = torch.randint(0, 2048, (1, 16, 340), device=device)
        with torch.inference_mode():
            whole = codec.decoder(codes)
            results = {}
            for first, rest in [(1, 8), (2, 8), (5, 13)]:
                dec = StreamingDecoder(codec.decoder)
                pieces, i, n = [], 0, first
                while i < codes.shape[-1]:
                    pieces.append(dec.push(codes[..., i : i + n]))
                    i, n = i + n, rest
                diff = (torch.cat(pieces, -1) - whole).abs().max().item()
                results[f"{first}+{rest}"] = diff
        return {"max_abs_diff": results, "ok": all(v <= 1e-5 for v in results.values())}

    for size in sizes:

        @step(report, f"bench/{size}")
        def _(size=size):
            path = out / f"bench-{size}.json"
            cmd = [sys.executable, "-m", "ownvoice", "bench", "--model", str(ckpt[f"{size}-CustomVoice"]),
                   "--device", device, "--dtype", "bfloat16", "--frames", "200" if not args.quick else "64",
                   "--first-chunk", "1", "--json", str(path)]  # fmt: skip
            proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
            if proc.returncode != 0:
                raise RuntimeError(proc.stderr[-2000:])
            return {
                "table": proc.stdout.strip().splitlines()[-6:],
                "result": json.loads(path.read_text()),
            }

    for size in sizes:

        @step(report, f"batch_bench/{size}")
        def _(size=size):
            path = out / f"batch-bench-{size}.json"
            cmd = [sys.executable, "-m", "ownvoice", "bench", "--model", str(ckpt[f"{size}-CustomVoice"]),
                   "--device", device, "--dtype", "bfloat16", "--batch", "1,2" if args.tiny else "1,4,16",
                   "--frames", "16" if args.tiny else "200", "--probes", "2" if args.tiny else "5",
                   "--json", str(path)]  # fmt: skip
            proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
            if proc.returncode != 0:
                raise RuntimeError(proc.stderr[-2000:])
            return {
                "table": proc.stdout.strip().splitlines()[-6:],
                "result": json.loads(path.read_text()),
            }

    (out / "gpu_report.json").write_text(json.dumps(report, indent=2, default=str))
    lines = [f"# GPU check: {report['device']} (torch {report['torch']})", ""]
    for name, r in report.items():
        if isinstance(r, dict):
            lines.append(f"## {name}: {'ok' if r.get('ok') else 'FAILED'} ({r.get('seconds')} s)")
            body = {k: v for k, v in r.items() if k not in ("ok", "seconds", "trace", "result")}
            lines.append("```\n" + json.dumps(body, indent=1, default=str)[:3000] + "\n```")
    (out / "gpu_report.md").write_text("\n".join(lines))
    print((out / "gpu_report.md").read_text())
    failed = [n for n, r in report.items() if isinstance(r, dict) and not r.get("ok")]
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
