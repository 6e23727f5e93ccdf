"""AMD GPU ISA names ("gfx1150") and the HSA_OVERRIDE_GFX_VERSION values ("11.0.0") that map to them.

ROCm builds of PyTorch carry kernels for a fixed list of ISAs. A GPU whose ISA is missing from
that list (most iGPUs: gfx1103, gfx1150, gfx1151) is driven anyway when HSA_OVERRIDE_GFX_VERSION
names a listed ISA of the same family. Pure string logic; knows nothing about torch or /sys.
"""

from __future__ import annotations

import re

# ISA -> the override people use when the torch build lacks that ISA (same family, compatible
# code objects). gfx115x are RDNA 3.5 iGPUs (Strix Point 890M/880M = gfx1150, Strix Halo 8060S =
# gfx1151): the RDNA 3 code of gfx1100 runs on them; ROCm 7 builds may also ship gfx1150/gfx1151.
OVERRIDE_FOR = {
    "gfx1101": "11.0.0",
    "gfx1102": "11.0.0",
    "gfx1103": "11.0.0",  # Radeon 780M/760M (Phoenix, Hawk Point)
    "gfx1150": "11.0.0",
    "gfx1151": "11.0.0",
    "gfx1152": "11.0.0",
    "gfx1153": "11.0.0",
    "gfx1031": "10.3.0",  # RX 6700 XT
    "gfx1032": "10.3.0",  # RX 6600
    "gfx1033": "10.3.0",
    "gfx1034": "10.3.0",  # RX 6500
    "gfx1035": "10.3.0",  # Radeon 680M/660M (Rembrandt)
    "gfx1036": "10.3.0",  # Raphael/Granite Ridge iGPU
}
# other overrides worth trying for a family, when the first does not work
ALTERNATIVES = {"gfx115": ("11.5.0", "11.5.1")}

_VERSION = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")


def from_target_version(value: int) -> str | None:
    """sysfs `gfx_target_version` (major*10000 + minor*100 + stepping) -> "gfx1150"; 0 -> None."""
    if value <= 0:
        return None
    major, rest = divmod(value, 10000)
    minor, step = divmod(rest, 100)
    return f"gfx{major}{minor:x}{step:x}"


def from_override(value: str) -> str | None:
    """HSA_OVERRIDE_GFX_VERSION "11.0.0" -> "gfx1100"; None when malformed."""
    m = _VERSION.match(value.strip())
    if not m:
        return None
    major, minor, step = (int(g) for g in m.groups())
    if minor > 15 or step > 15:
        return None
    return f"gfx{major}{minor:x}{step:x}"


def to_override(isa: str) -> str:
    """ "gfx1100" -> "11.0.0" (the inverse of from_override)."""
    digits = isa.removeprefix("gfx")
    major, minor, step = digits[:-2], digits[-2], digits[-1]
    return f"{int(major)}.{int(minor, 16)}.{int(step, 16)}"


def family(isa: str) -> str:
    """ "gfx1150" -> "gfx11" (the major version: code objects only run within one)."""
    return "gfx" + isa.removeprefix("gfx")[:-2]


def base_isa(arch: str) -> str:
    """ROCm's gcnArchName "gfx90a:sramecc+:xnack-" -> "gfx90a"."""
    return arch.split(":", 1)[0].strip()


def suggested_overrides(isa: str) -> tuple[str, ...]:
    """Overrides to try for `isa`, best first; () when none is known."""
    first = OVERRIDE_FOR.get(isa)
    if first is None:
        return ()
    extra = next((alts for prefix, alts in ALTERNATIVES.items() if isa.startswith(prefix)), ())
    return (first, *extra)
