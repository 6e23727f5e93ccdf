"""Full-size random checkpoints kept between test runs on the same machine.

Writing one 0.6B checkpoint takes ~12 s of a core and 2.4 GB; the tests that need one get it
from ~/.cache/ownvoice-tests (OWNVOICE_TEST_CACHE) under a key that covers everything its bytes
depend on: the generator's sources (ownvoice/dev/random_checkpoint.py and every ownvoice module
it imports, followed statically), torch's version (its random streams) and the arguments. Any
change to them makes a new key, so a stale checkpoint is never loaded; older keys of the same
checkpoint are removed when a new one is written.
"""

from __future__ import annotations

import ast
import hashlib
import os
import shutil
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
GENERATOR = ROOT / "ownvoice" / "dev" / "random_checkpoint.py"
DONE = ".complete"


def cache_root() -> Path:
    default = Path.home() / ".cache" / "ownvoice-tests"
    return Path(os.environ.get("OWNVOICE_TEST_CACHE", default))


def _module_file(name: str) -> Path | None:
    base = ROOT / Path(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def generator_sources(start: Path = GENERATOR) -> list[Path]:
    """`start` and every ownvoice module it imports, at any depth (inside functions too)."""
    seen: set[Path] = set()
    todo = [start]
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            for name in names:
                if name.split(".")[0] == "ownvoice" and (found := _module_file(name)):
                    todo.append(found)
    return sorted(seen)


def checkpoint_key(like: str, **kwargs) -> str:
    digest = hashlib.sha256(f"{torch.__version__} {like} {sorted(kwargs.items())}".encode())
    for path in generator_sources():
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def cached_random_checkpoint(like: str, **kwargs) -> Path:
    """write_random_checkpoint(folder, like, **kwargs), written once per key and machine."""
    from ownvoice.dev.random_checkpoint import write_random_checkpoint

    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    target = root / f"{like}-{checkpoint_key(like, **kwargs)}"
    if (target / DONE).is_file():
        return target
    # written beside it, then renamed into place whole: a run killed half-way, or two runs at
    # once, never leave a partial checkpoint under the key
    partial = root / f".{target.name}.{os.getpid()}"
    shutil.rmtree(partial, ignore_errors=True)
    write_random_checkpoint(partial, like, **kwargs)
    (partial / DONE).touch()
    try:
        os.rename(partial, target)
    except OSError:  # another run got there first
        shutil.rmtree(partial, ignore_errors=True)
    for old in [*root.glob(f"{like}-*"), *root.glob(f".{like}-*")]:
        if old != target and old.is_dir() and not _being_written(old):
            shutil.rmtree(old, ignore_errors=True)
    return target


def _being_written(folder: Path) -> bool:
    """A partial folder whose writer is still alive (its name ends in the writer's pid)."""
    if not folder.name.startswith("."):
        return False
    try:
        os.kill(int(folder.suffix[1:]), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return True
