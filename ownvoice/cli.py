"""The `ownvoice` command line."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="ownvoice", description=__doc__)
    parser.add_subparsers(dest="command", required=True)
    parser.parse_args(argv)
    sys.exit(0)
