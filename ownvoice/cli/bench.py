"""`ownvoice bench`: ms per frame (talker, code predictor, decoder), RTF, time to first audio,
peak memory, memory growth after the first chunk (flat = nothing but the preallocated caches;
try --frames 6000) and the share of the memory-bandwidth floor; optionally beside the official
package, and with --quantize int8,int4 their speed and quality cost.

Use a full-size random checkpoint (`ownvoice dev random-checkpoint --like 0.6B-CustomVoice
--no-eos --out DIR`) so every run generates exactly --frames frames."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="measure speed and memory", description=__doc__)
    p.add_argument("--model", help="checkpoint folder or hub id")
    p.add_argument("--server", help="instead: drive a running server at this URL as clients")
    p.add_argument("--concurrency", default="1,4,8", help="--server: clients at once, e.g. 1,4,8")
    p.add_argument("--requests", type=int, default=2, help="--server: requests per client")
    p.add_argument("--voice", default="alloy", help="--server: the voice to ask for")
    p.add_argument("--api-key", help="--server: bearer key")
    p.add_argument("--clone", metavar="CLIP",
                   help="--server: also measure this clip cloned (ICL with --clone-text, and "
                   "x-vector only), uploaded as two voices for the run")  # fmt: skip
    p.add_argument("--clone-text", help="--server --clone: the clip's transcript (ICL rows)")
    p.add_argument("--frames", type=int, default=48, help="frames to generate (12.5 per second)")
    p.add_argument("--device", default="auto")
    p.add_argument("--dtype", default="auto", choices=("auto", "float32", "bfloat16", "float16"))
    p.add_argument("--threads", type=int, default=None, help="CPU threads (default: all cores)")
    p.add_argument("--stream", action="store_true", help="report time to first audio (always on)")
    p.add_argument("--first-chunk", type=int, default=2, help="frames in the first streamed chunk")
    p.add_argument("--compare-reference", action="store_true", help="also run qwen-tts 0.1.1")
    p.add_argument("--int8", action="store_true", help="the same as --quantize int8")
    p.add_argument("--no-cuda-graphs", action="store_true")
    p.add_argument("--repeat", type=int, default=1, help="interleaved rounds; best of each kept")
    p.add_argument(
        "--batch",
        help="batch sizes to compare, e.g. 1,2,4,8: aggregate frames/s, per-stream RTF and the "
        "time to first audio of a request arriving while the others run",
    )
    p.add_argument(
        "--quantize",
        help="integer weights (CPU), e.g. int8 or int8,int4: rows beside the unquantized one, "
        "each with its quality (code agreement, logit error, log-mel distance); with --batch "
        "the one weight format to batch with",
    )
    p.add_argument("--probes", type=int, default=5, help="late arrivals timed per batch size")
    p.add_argument(
        "--decoder-dtype",
        choices=("float32", "bfloat16", "float16"),
        help="the speech decoder's precision in our rows (default: --dtype); with --quantize "
        "the quality figures include it",
    )
    p.add_argument(
        "--overlap",
        default="auto",
        help="decoding beside generation: auto, on, off, or several (e.g. on,off) to compare "
        "them as rows of one run (see EngineConfig.overlap_decoder)",
    )
    p.add_argument(
        "--shared",
        action="store_true",
        help="two processes on the same cores: each one's time against a fair share "
        "(see ownvoice/bench/shared.py)",
    )
    p.add_argument("--tries", type=int, default=5, help="--shared: tries per wait policy")
    p.add_argument(
        "--policies",
        default="torch,ownvoice",
        help="--shared: ways of waiting: torch (OpenMP's own), ownvoice (its default), or "
        "OMP_WAIT_POLICY values",
    )
    p.add_argument("--cpus", type=float, help="--shared: also one process under this CPU quota")
    p.add_argument(
        "--text-rate",
        help="LLM writing speeds in tokens per second, e.g. 20,60: time to first audio from the "
        "first word when words are spoken as they arrive, against whole sentences",
    )
    p.add_argument(
        "--text",
        help="what to speak (default: a sentence of the bench's own; with --text-rate a weather "
        "reply); with --quantize also the one prompt of the quality figures",
    )
    p.add_argument("--json", help="write the results to this file")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import json
    import os

    import torch

    from ownvoice.errors import InvalidInput

    if args.server:
        from ownvoice.bench.client import format_client_table, run_client

        levels = [int(c) for c in args.concurrency.split(",")]
        clone = None
        if args.clone:
            with open(args.clone, "rb") as f:
                clone = (f.read(), args.clone_text)
        result = run_client(
            args.server, levels, args.frames, args.requests, args.voice, args.api_key, clone
        )
        print(format_client_table(result))
        if args.json:
            with open(args.json, "w") as f:
                json.dump(result, f, indent=2)
        return 0
    if not args.model:
        raise InvalidInput("--model (or --server) is required", param="model")
    if args.shared:
        from dataclasses import asdict

        from ownvoice.bench.shared import (
            format_quota_table,
            format_shared_table,
            run_quota,
            run_shared,
        )

        policies = [p.strip().upper() for p in args.policies.split(",") if p.strip()]
        shared = run_shared(args.model, args.frames, args.tries, policies, args.threads)
        print(format_shared_table(shared))
        quota = run_quota(args.model, args.frames, args.tries, args.cpus) if args.cpus else None
        if args.cpus:
            print(format_quota_table(quota, args.cpus))
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"shared": [asdict(r) for r in shared], "quota": quota}, f, indent=2)
        return 0
    if args.text_rate:
        return _text_stream(args)
    from ownvoice.bench.batch import format_batch_table
    from ownvoice.bench.run import BenchSpec, format_table, run_batch_bench, run_bench

    modes = _quantize_modes(args)
    if args.batch and len(modes) > 1:
        raise InvalidInput("--batch takes one --quantize format", param="quantize")
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
        quantize_modes=modes,
        cuda_graphs=not args.no_cuda_graphs,
        repeat=args.repeat,
        batch=tuple(int(b) for b in args.batch.split(",")) if args.batch else (),
        quantize=modes[0] if modes and args.batch else None,
        probes=args.probes,
        text=args.text,
        decoder_dtype=args.decoder_dtype,
        overlap=_overlap_modes(args.overlap),
    )
    log = lambda msg: print(msg, flush=True)  # noqa: E731
    if spec.batch:
        result = run_batch_bench(spec, log=log)
        print(format_batch_table(result))
    else:
        result = run_bench(spec, log=log)
        print(format_table(result))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return 0


def _text_stream(args: argparse.Namespace) -> int:
    import json

    from ownvoice.bench.common import voice_for
    from ownvoice.bench.textstream import ANSWER, format_text_stream_table, run_text_stream
    from ownvoice.engine.engine import Engine

    engine = Engine.load(args.model, device=args.device, dtype=args.dtype, max_batch=1,
                         num_threads=args.threads)  # fmt: skip
    engine.warmup()
    rates = [float(r) for r in args.text_rate.split(",")]
    rows = run_text_stream(engine, voice_for(engine), rates, args.frames, args.text or ANSWER)
    print(format_text_stream_table(rows))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)
    return 0


def _quantize_modes(args) -> tuple[str, ...]:
    from ownvoice.engine.options import QUANTIZE
    from ownvoice.errors import InvalidInput

    modes = [m.strip() for m in (args.quantize or "").split(",") if m.strip()]
    if args.int8 and "int8" not in modes:
        modes.insert(0, "int8")
    for mode in modes:
        if mode not in QUANTIZE:
            raise InvalidInput(f"--quantize takes int8 and int4, got {mode!r}", param="quantize")
    return tuple(dict.fromkeys(modes))


def _overlap_modes(value: str) -> tuple[str, ...]:
    from ownvoice.bench.run import OVERLAP
    from ownvoice.errors import InvalidInput

    modes = tuple(m.strip() for m in value.split(",") if m.strip())
    bad = [m for m in modes if m not in OVERLAP]
    if bad or not modes:
        raise InvalidInput(
            f"--overlap takes {', '.join(OVERLAP)} (or several, comma-separated); got {value!r}",
            param="overlap",
        )
    return modes
