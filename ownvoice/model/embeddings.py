"""Embedding tables that cost less memory than a float32 nn.Embedding.

- `StoredEmbedding` keeps the table in the checkpoint's dtype (bf16) and casts the rows it
  returns, so a float32 model does not double the table; the values are the same (bf16 ->
  float32 is exact).
- `FileEmbedding` leaves the text embedding (151,936 x 2048: 0.6 GB in bf16, 1.2 GB in float32)
  in the checkpoint file and reads the few rows a prompt needs with pread. The file stays open,
  so replacing it on disk (a new download renames over it) does not affect a running engine.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from ownvoice.errors import ModelLoadError
from ownvoice.model.safetensors_io import SafetensorsFile


class StoredEmbedding(nn.Module):
    def __init__(self, weight: torch.Tensor, out_dtype: torch.dtype):
        super().__init__()
        self.register_buffer("weight", weight)
        self.out_dtype = out_dtype
        self.num_embeddings, self.embedding_dim = weight.shape

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return F.embedding(ids, self.weight).to(self.out_dtype)


class FileEmbedding(nn.Module):
    def __init__(self, path: str | Path, key: str, out_dtype: torch.dtype, device: torch.device):
        super().__init__()
        with SafetensorsFile(path) as f:
            self.num_embeddings, self.embedding_dim = f.shape(key)
            self.stored = f.dtype(key)
            self.offset = f.data_offset(key)
        self.row_bytes = self.embedding_dim * torch.empty(0, dtype=self.stored).element_size()
        self.out_dtype, self.device = out_dtype, device
        self.path, self.key = str(path), key
        self._fd = os.open(path, os.O_RDONLY)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        flat = ids.reshape(-1).tolist()
        if not flat:
            return torch.empty(
                *ids.shape, self.embedding_dim, dtype=self.out_dtype, device=self.device
            )
        if not 0 <= min(flat) <= max(flat) < self.num_embeddings:
            raise IndexError(f"token id out of range 0..{self.num_embeddings - 1}")
        unique = sorted(set(flat))
        slot = {token: i for i, token in enumerate(unique)}
        buf = bytearray(len(unique) * self.row_bytes)
        for i, token in enumerate(unique):
            row = os.pread(self._fd, self.row_bytes, self.offset + token * self.row_bytes)
            if len(row) != self.row_bytes:  # the file was truncated or replaced under us
                raise ModelLoadError(
                    f"{self.path}: embedding row {token} of {self.key!r} could not be read "
                    f"({len(row)} of {self.row_bytes} bytes); reload the model"
                )
            buf[i * self.row_bytes : (i + 1) * self.row_bytes] = row
        table = torch.frombuffer(buf, dtype=self.stored).view(len(unique), self.embedding_dim)
        rows = table[torch.tensor([slot[t] for t in flat], dtype=torch.long)]
        return rows.view(*ids.shape, self.embedding_dim).to(self.device, self.out_dtype)

    def __del__(self):
        fd = getattr(self, "_fd", None)
        if fd is not None:
            os.close(fd)
