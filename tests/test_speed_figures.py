"""The README states one set of CPU speed figures for integer weights: the ratios said in its
prose, in `ownvoice say --help` and in config.example.yaml are those of its measured table."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from ownvoice.cli import say

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def ms_per_frame() -> dict[tuple[str, str], float]:
    """{(weights, overlap): ms per frame} from the README's bench table of ownvoice rows."""
    rows = re.findall(r"^\s*ownvoice(?: (int8|int4))? ov (off|on)\s+\S+(?:\s+[\d.]+){3}\s+([\d.]+)",
                      README, re.M)  # fmt: skip
    table = {(weights or "float32", overlap): float(ms) for weights, overlap, ms in rows}
    assert len(table) == 6, table
    return table


def test_the_int8_and_int4_ratios_said_are_the_tables():
    table = ms_per_frame()
    int8 = round(table["int8", "off"] / table["float32", "off"], 1)
    int4 = round(table["int4", "off"] / table["float32", "off"], 1)
    assert f"about {int8}x (int8) / {int4}x (int4) the time of\n  float32" in README
    config = (ROOT / "config.example.yaml").read_text()
    assert f"about {int8}x / {int4}x the time per frame of float32" in config
    commands = argparse.ArgumentParser().add_subparsers()
    say.register(commands)
    options = commands.choices["say"]._actions
    said = " ".join(next(a for a in options if "--quantize" in a.option_strings).help.split())
    assert f"int8 about {int8}x the time per frame of float32, int4 about {int4}x" in said


def test_the_overlaps_effect_said_is_the_tables():
    table = ms_per_frame()
    int4 = round(100 * (1 - table["int4", "on"] / table["int4", "off"]))
    int8 = round(100 * (table["int8", "on"] / table["int8", "off"] - 1))
    assert f"int4 frames took {int4} % less time with it and int8\n  {int8} % more" in README
