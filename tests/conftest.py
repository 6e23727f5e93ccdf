"""Shared fixtures: tiny random checkpoints of every model type, built once per test session, and
the engines on them, loaded once per session (per pytest-xdist worker)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

# the cores are shared by everything here, pytest-xdist's workers included (make test runs two):
# more threads than a worker's share only thrash, and the tiny test models gain nothing from them
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
_THREADS = max(1, min(2, os.cpu_count() or 1) // _WORKERS)
torch.set_num_threads(_THREADS)
if _WORKERS > 1:
    # and the processes the tests start (the CLI, the bench, a served subprocess, the GPU check's
    # rehearsal) take the same share: two OpenMP threads in each of three busy workers' children
    # spent twice the CPU time for the same work (measured: the rehearsal 147 s against ~45 s)
    os.environ.setdefault("OMP_NUM_THREADS", str(_THREADS))


# The test files that take longest (seconds on one of two busy cores), started first: make test
# hands whole files to its workers in this order (--dist loadfile --no-loadscope-reorder:
# a file's module fixtures, a server or a browser, are made once), so that the workers end
# together instead of one finishing a three-minute file alone. The rest keep their order.
LONGEST_FIRST = (  # seconds per file, measured in one `make test` phase one on three workers
    "tests/server/test_schema_fuzz.py",  # ~190 (mostly waiting: ~40 s of CPU)
    "tests/engine/test_full_size.py",  # ~145 (+ ~50 where tests/checkpoint_cache.py writes)
    "tests/test_bench.py",  # ~125
    "tests/server/test_speech_stream.py",  # ~90
    "tests/web/test_page.py",  # ~80
    "tests/engine/test_memory.py",  # ~75
    "tests/server/test_speech_stream_exact.py",  # ~70 (~100 with its references after)
    "tests/server/test_batching.py",  # ~60
    "tests/test_gpu_check.py",  # ~60
    "tests/test_cli_say.py",  # ~60
    "tests/server/test_vllm_omni.py",  # ~50
    "tests/parity/test_mutations.py",  # ~50
    "tests/test_livetext.py",  # ~45
    "tests/server/test_shutdown.py",  # ~40
    "tests/engine/test_fast_path.py",  # ~35
    "tests/parity/test_sampled_distribution.py",  # ~35
)


def pytest_collection_modifyitems(config, items):
    def rank(item) -> int:
        path = item.nodeid.split("::")[0]
        return LONGEST_FIRST.index(path) if path in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)  # stable


class TinyCheckpoints:
    """`like` -> folder of a tiny random checkpoint (seed 0), written on first use."""

    def __init__(self, root: Path):
        self.root = root
        self._built: dict[str, Path] = {}

    def __getitem__(self, like: str) -> Path:
        if like not in self._built:
            from ownvoice.dev.random_checkpoint import write_random_checkpoint

            self._built[like] = write_random_checkpoint(self.root / like, like, tiny=True, seed=0)
        return self._built[like]


@pytest.fixture(scope="session")
def tiny_checkpoints(tmp_path_factory) -> TinyCheckpoints:
    return TinyCheckpoints(tmp_path_factory.mktemp("tiny-checkpoints"))


@pytest.fixture(scope="session")
def tiny_engine(tiny_checkpoints):
    """(`like`, **Engine.load options) -> an Engine on that tiny checkpoint (CPU, float32 unless
    said), loaded once per session and shared: tests that change an engine's state (fault
    injection, its thread count) load their own."""
    from ownvoice.engine.engine import Engine

    cache = {}

    def get(like: str, **options):
        key = (like, tuple(sorted(options.items())))
        if key not in cache:
            kw = {"device": "cpu", "dtype": "float32", **options}
            cache[key] = Engine.load(str(tiny_checkpoints[like]), **kw)
        return cache[key]

    return get
