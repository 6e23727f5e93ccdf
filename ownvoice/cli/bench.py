"""`ownvoice bench`: ms per frame (talker, code predictor, decoder), RTF, time to first audio,
peak memory, memory growth after the first chunk (flat = nothing but the preallocated caches;
try --frames 6000) and the share of the memory-bandwidth floor; optionally beside the official
package, and with --int8 the int8 speed and its quality cost.

Use a full-size random checkpoint (`ownvoice dev random-checkpoint --like 0.6B-CustomVoice
--no-eos --out DIR`) so every run generates exactly --frames frames."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="measure speed and memory", description=__doc__)
    p.add_argument("--model", required=True, help="checkpoint folder or hub id")
    p.add_argument("--frames", type=int, default=48, help="frames to generate (12.5 per second)")
    p.add_argument("--device", default="auto")
    p.add_argument("--dtype", default="auto", choices=("auto", "float32", "bfloat16", "float16"))
    p.add_argument("--threads", type=int, default=None, help="CPU threads (default: all cores)")
    p.add_argument("--stream", action="store_true", help="report time to first audio (always on)")
    p.add_argument("--first-chunk", type=int, default=2, help="frames in the first streamed chunk")
    p.add_argument("--compare-reference", action="store_true", help="also run qwen-tts 0.1.1")
    p.add_argument("--int8", action="store_true", help="also run with --quantize int8")
    p.add_argument("--no-cuda-graphs", action="store_true")
    p.add_argument("--repeat", type=int, default=1, help="interleaved rounds; best of each kept")
    p.add_argument("--json", help="write the results to this file")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import json
    import os

    import torch

    from ownvoice.bench.run import BenchSpec, format_table, run_bench

    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = args.dtype
    if dtype == "auto":
        dtype = "bfloat16" if device.startswith("cuda") else "float32"
    spec = BenchSpec(
        model=args.model,
        device=device,
        dtype=dtype,
        frames=args.frames,
        threads=args.threads or os.cpu_count() or 1,
        first_chunk=args.first_chunk,
        compare_reference=args.compare_reference,
        int8=args.int8,
        cuda_graphs=not args.no_cuda_graphs,
        repeat=args.repeat,
    )
    result = run_bench(spec, log=lambda msg: print(msg, flush=True))
    print(format_table(result))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return 0
