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
def our_engines(tiny_checkpoints):
    """`like` -> an ownvoice Engine on the same checkpoint (float32, CPU, eager path)."""
    from ownvoice.engine.engine import Engine

    cache = {}

    def get(like):
        if like not in cache:
            cache[like] = Engine.load(
                str(tiny_checkpoints[like]), device="cpu", dtype="float32", fast=False
            )
        return cache[like]

    return get
