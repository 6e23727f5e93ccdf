"""Shared fixtures: tiny random checkpoints of every model type, built once per test session."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

# two cores are shared by everything here; more threads only thrash
torch.set_num_threads(min(2, os.cpu_count() or 1))


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
