"""`ownvoice dev ...`: developer tools (random checkpoints for tests and benchmarks)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("dev", help="developer tools")
    dev = p.add_subparsers(dest="dev_command", required=True, metavar="TOOL")
    from ownvoice.dev.random_checkpoint import LIKES

    rc = dev.add_parser(
        "random-checkpoint",
        help="write a random checkpoint in the exact Hugging Face layout",
        description="Write a random Qwen3-TTS checkpoint (same files, names and dtypes as the "
        "real repos). --tiny for tests; full size for benchmarks.",
    )
    rc.add_argument("--like", required=True, choices=LIKES, help="which real model to imitate")
    rc.add_argument("--tiny", action="store_true", help="small shapes (tests), real ids")
    rc.add_argument("--out", required=True, help="output folder")
    rc.add_argument("--seed", type=int, default=0)
    rc.add_argument(
        "--no-eos", action="store_true", help="EOS never wins: generation runs to the frame cap"
    )
    rc.set_defaults(func=_random_checkpoint)


def _random_checkpoint(args: argparse.Namespace) -> int:
    import time

    from ownvoice.dev.random_checkpoint import write_random_checkpoint

    t0 = time.perf_counter()
    out = write_random_checkpoint(
        args.out, args.like, tiny=args.tiny, seed=args.seed, no_eos=args.no_eos
    )
    print(
        f"wrote {args.like}{' (tiny)' if args.tiny else ''} to {out} in {time.perf_counter() - t0:.1f}s"
    )
    return 0
