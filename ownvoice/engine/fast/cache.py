"""Preallocated KV caches: no allocation and no copying of old entries while decoding."""

from __future__ import annotations

import torch


class StaticKVCache:
    """Keys and values of every layer in one buffer: (layers, B, kv_heads, max_len, head_dim).

    Before each forward the caller says where the new entries go with `at(start)`; `update`
    writes them there and returns the filled part only, so attention costs what the context
    costs, not what the buffer holds. The returned tensors are views, valid until the next
    write.
    """

    def __init__(self, layers, batch, kv_heads, max_len, head_dim, device, dtype):
        shape = (layers, batch, kv_heads, max_len, head_dim)
        self.k = torch.zeros(shape, device=device, dtype=dtype)
        self.v = torch.zeros(shape, device=device, dtype=dtype)
        self.max_len = max_len
        self.start = 0

    def at(self, start: int) -> StaticKVCache:
        if start >= self.max_len:
            raise RuntimeError(f"KV cache full: position {start} >= {self.max_len}; raise max_len")
        self.start = start
        return self

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor):
        end = self.start + k.shape[2]
        self.k[layer, :, :, self.start : end] = k
        self.v[layer, :, :, self.start : end] = v
        return self.k[layer, :, :, :end], self.v[layer, :, :, :end]
