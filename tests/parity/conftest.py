from __future__ import annotations

import logging

import pytest
import torch

from tests.reference import import_reference


@pytest.fixture(scope="session")
def reference_models(tiny_checkpoints):
    """`like` -> the official package's Qwen3TTSModel on that checkpoint (float32, CPU)."""
    qwen_tts = import_reference()
    logging.getLogger("transformers").setLevel(logging.ERROR)
    cache = {}

    def get(like):
        if like not in cache:
            cache[like] = qwen_tts.Qwen3TTSModel.from_pretrained(
                str(tiny_checkpoints[like]), dtype=torch.float32
            )
        return cache[like]

    return get


@pytest.fixture(scope="session")
def our_engines(tiny_engine):
    """`like` -> an ownvoice Engine on the same checkpoint (float32, CPU, eager path)."""
    return lambda like: tiny_engine(like, fast=False)


@pytest.fixture(scope="session")
def reference_outcome(reference_models):
    """(like, scenario) -> the official package's Outcome, run once per session."""
    from tests.parity.harness import run_reference

    cache = {}

    def get(like, scenario):
        key = (like, scenario.name)
        if key not in cache:
            cache[key] = run_reference(reference_models(like), scenario)
        return cache[key]

    return get


@pytest.fixture(scope="session")
def fast_engines(tiny_checkpoints):
    """(like, backend) -> an Engine on the fast path (float32, CPU): backend "cpu-kernels"
    (our C++ kernels) or "torch" (torch's ops, which is what a GPU runs)."""
    from ownvoice import kernels
    from ownvoice.engine.engine import Engine

    cache = {}

    def get(like, backend):
        if (like, backend) not in cache:
            saved = dict(kernels._state)
            if backend == "torch":
                kernels._state.clear()
                kernels._state["module"] = None  # the backend is chosen at load
            try:
                engine = Engine.load(
                    str(tiny_checkpoints[like]), device="cpu", dtype="float32", fast=True
                )
            finally:
                kernels._state.clear()
                kernels._state.update(saved)
            if kernels.cpu_kernels() is None and backend == "cpu-kernels":
                pytest.skip("no CPU kernels on this machine (no AVX2 or no compiler)")
            assert engine.backend == backend
            cache[(like, backend)] = engine
        return cache[(like, backend)]

    return get
