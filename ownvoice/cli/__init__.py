"""The `ownvoice` command line: one module per subcommand.

Each module in SUBCOMMANDS defines `register(subparsers)`, which adds its parser and sets
`func(args) -> int` as the default. Modules import heavy libraries (torch, fastapi) inside
`func`, so `ownvoice --help` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import logging
import sys

SUBCOMMANDS = ("say", "serve", "voices", "book", "bench", "doctor", "dev")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ownvoice", description="Local, private text-to-speech with Qwen3-TTS."
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in SUBCOMMANDS:
        module_name = f"ownvoice.cli.{name}"
        if importlib.util.find_spec(module_name) is None:
            continue
        importlib.import_module(module_name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if not args.verbose:  # a line per HTTP request (bench --server, book --server) is noise
        logging.getLogger("httpx").setLevel(logging.WARNING)
    from ownvoice.errors import OwnvoiceError

    try:
        code = args.func(args)
    except OwnvoiceError as e:
        # a mistake in what was asked for: say what, never a traceback
        print(f"ownvoice {args.command}: error: {e.message}", file=sys.stderr)
        code = 2
    except KeyboardInterrupt:
        code = 130
    sys.exit(code or 0)
