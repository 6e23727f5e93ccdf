"""How the two decoder stacks run over a batch of rows: our CPU kernels, or torch's ops.

The frame loop (loop.py) is written once; a backend supplies the three things that touch the
KV caches:

    prefill(slot, embeds)         one new sequence's prompt, alone, at positions 0..L-1
    talker(n, x, pos, span)       one token for each of rows 0..n-1, each at its own position
    code_predictor(rows, x, start)  the code predictor's tokens for a slice of rows (one shared
                                  position: its cache is per frame, so every row is at the same place)

Rows live in slots 0..n-1 of the loop; when a row leaves, the loop moves the last row into its
slot (`move`). `KernelBackend` gives every sequence its own cache tensor and reduces in a fixed
order, so a row's numbers do not depend on its neighbours (batched == solo, exactly).
`TorchBackend` keeps one padded cache for all slots, with fixed shapes that CUDA graphs can
capture per batch bucket; torch's kernels make no batch-invariance promise.
"""

from __future__ import annotations

import torch

from ownvoice.engine.fast.cache import StaticKVCache
from ownvoice.model.layers import rope_cos_sin
from ownvoice.model.talker import Talker


def round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


class RopeTable:
    """cos / sin rows for every position up to `capacity`, looked up by position tensors."""

    def __init__(self, inv_freq: torch.Tensor, dtype: torch.dtype, device):
        self.inv_freq, self.dtype, self.device = inv_freq, dtype, device
        self.capacity = 0
        self.cos = self.sin = None

    def ensure(self, capacity: int) -> bool:
        """Grow to hold `capacity` positions; True if the tables were replaced."""
        if capacity <= self.capacity:
            return False
        positions = torch.arange(capacity, device=self.device)[None]
        cos, sin = rope_cos_sin(positions, self.inv_freq, self.dtype)
        self.cos, self.sin = cos[0].contiguous(), sin[0].contiguous()  # (capacity, head_dim)
        self.capacity = capacity
        return True


class KernelBackend:
    """CPU: both stacks through our C++ layer kernel (cpu_ops.cpp `decode_rows`)."""

    exact_batching = True

    def __init__(self, talker: Talker, kernels, max_batch: int, bucket: int = 64):
        from ownvoice.engine.fast.arena import Arena
        from ownvoice.engine.fast.cpu_stack import CpuStack
        from ownvoice.engine.fast.packed import PackedLinear

        self._talker, self.bucket = talker, bucket
        cp = talker.code_predictor
        self.stack = CpuStack(talker.model, kernels)
        self.cp_stack = CpuStack(cp.model, kernels)
        # the heads are streamed every frame too: into huge pages with the layers
        heads = [talker.codec_head, *cp.lm_head]
        if isinstance(cp.small_to_mtp_projection, PackedLinear):
            heads.append(cp.small_to_mtp_projection)
        arena = Arena([h.weight for h in heads])
        for head in heads:
            head.weight = arena.take(head.weight)
        tc, cc = talker.cfg.transformer, cp.cfg.transformer
        self._talker_shape = (tc.num_layers, tc.num_kv_heads, tc.head_dim)
        self.rope = RopeTable(talker.model.inv_freq, torch.float32, talker.device)
        cp_rope = RopeTable(cp.model.inv_freq, torch.float32, talker.device)
        cp_rope.ensure(cp.num_steps + 1)
        self.cp_rope = cp_rope
        # per slot: the sequence's talker cache (layers, kv, capacity, dim), and a per-frame
        # code-predictor cache
        self.caches: list[tuple[torch.Tensor, torch.Tensor] | None] = [None] * max_batch
        shape = (cc.num_layers, cc.num_kv_heads, cp.num_steps + 1, cc.head_dim)
        self.cp_caches = [(torch.zeros(shape), torch.zeros(shape)) for _ in range(max_batch)]

    # ---- slots -------------------------------------------------------------------------------

    def attach(self, slot: int, capacity: int) -> None:
        layers, kv, dim = self._talker_shape
        capacity = round_up(capacity, self.bucket)
        shape = (layers, kv, capacity, dim)
        self.caches[slot] = (torch.zeros(shape), torch.zeros(shape))
        self.rope.ensure(capacity)

    def detach(self, slot: int) -> None:
        self.caches[slot] = None

    def move(self, src: int, dst: int) -> None:
        self.caches[dst], self.caches[src] = self.caches[src], None

    def swap(self, a: int, b: int) -> None:
        self.caches[a], self.caches[b] = self.caches[b], self.caches[a]

    def ensure(self, slot: int, needed: int) -> None:
        """Grow one sequence's cache (doubling, contents kept) to hold `needed` positions."""
        k, v = self.caches[slot]
        if k.shape[2] >= needed:
            return
        capacity = k.shape[2]
        while capacity < needed:
            capacity *= 2
        new_k = k.new_zeros(k.shape[0], k.shape[1], capacity, k.shape[3])
        new_v = torch.zeros_like(new_k)
        new_k[:, :, : k.shape[2]] = k
        new_v[:, :, : v.shape[2]] = v
        self.caches[slot] = (new_k, new_v)
        self.rope.ensure(capacity)

    # ---- the stacks --------------------------------------------------------------------------

    def prefill(self, slot: int, embeds: torch.Tensor) -> torch.Tensor:
        """(1, L, H) prompt rows at positions 0..L-1 -> (1, L, H) normed hidden states."""
        length = embeds.shape[1]
        k, v = self.caches[slot]
        positions = torch.arange(length)
        h = self.stack.forward_rows(
            embeds[0], [k] * length, [v] * length, positions,
            self.rope.cos[:length], self.rope.sin[:length],
        )  # fmt: skip
        return h[None]

    def talker(self, n: int, x: torch.Tensor, pos: torch.Tensor, span: int) -> torch.Tensor:
        """x (n, 1, H) at positions pos (n,) of each row's own cache -> (n, 1, H)."""
        caches = self.caches[:n]
        h = self.stack.forward_rows(
            x[:, 0], [c[0] for c in caches], [c[1] for c in caches], pos,
            self.rope.cos[pos], self.rope.sin[pos],
        )  # fmt: skip
        return h[:, None]

    def code_predictor(self, rows: slice, x: torch.Tensor, start: int) -> torch.Tensor:
        """x (n, T, Hc) at positions start..start+T-1 of each row's frame cache -> (n, T, Hc)."""
        n, T = x.shape[0], x.shape[1]
        slots = range(rows.start, rows.start + n)
        ks = [self.cp_caches[i][0] for i in slots for _ in range(T)]
        vs = [self.cp_caches[i][1] for i in slots for _ in range(T)]
        positions = torch.arange(start, start + T).repeat(n)
        cos, sin = self.cp_rope.cos[positions], self.cp_rope.sin[positions]
        h = self.cp_stack.forward_rows(x.reshape(n * T, -1), ks, vs, positions, cos, sin)
        return h.view(n, T, -1)


class _RowsCache:
    """Rows 0..n-1 of a padded static cache: writes at per-row positions, reads over a fixed
    span (masked by the caller), so one shape serves a range of lengths."""

    def __init__(self, k: torch.Tensor, v: torch.Tensor, pos: torch.Tensor, span: int):
        self.k, self.v, self.pos, self.span = k, v, pos, span  # k, v: (layers, n, kv, cap, dim)
        self.rows = torch.arange(k.shape[1], device=k.device)

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor):
        # k, v: (n, kv, 1, dim) -> written at (row, :, pos[row])
        self.k[layer][self.rows, :, self.pos] = k[:, :, 0]
        self.v[layer][self.rows, :, self.pos] = v[:, :, 0]
        return self.k[layer, :, :, : self.span], self.v[layer, :, :, : self.span]


class _FrameCache:
    """The code predictor's per-frame cache for rows 0..n-1, all at the same positions."""

    def __init__(self, k: torch.Tensor, v: torch.Tensor, start: int):
        self.k, self.v, self.start = k, v, start

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor):
        end = self.start + k.shape[2]
        self.k[layer, :, :, self.start : end] = k
        self.v[layer, :, :, self.start : end] = v
        return self.k[layer, :, :, :end], self.v[layer, :, :, :end]


class TorchBackend:
    """Torch's ops over padded static caches (GPUs, and CPUs without our kernels).

    Every shape depends only on (batch bucket, span), so each phase can be captured as a CUDA
    graph once per pair. `capacity` is shared by all slots and doubles when a row needs more
    (the loop then drops its captured graphs, which point at the old buffers).
    """

    exact_batching = False

    def __init__(self, talker: Talker, max_batch: int, bucket: int = 64, capacity: int = 64):
        self._talker, self.bucket, self.max_batch = talker, bucket, max_batch
        self.device, self.dtype = talker.device, talker.activation_dtype
        tc = talker.cfg.transformer
        cp = talker.code_predictor
        cc = cp.cfg.transformer
        self.cp_cache = StaticKVCache(
            cc.num_layers, max_batch, cc.num_kv_heads, cp.num_steps + 1, cc.head_dim,
            self.device, self.dtype,
        )  # fmt: skip
        self._shape = (tc.num_layers, max_batch, tc.num_kv_heads, tc.head_dim)
        self.cache: StaticKVCache | None = None
        self.rope = RopeTable(talker.model.inv_freq, self.dtype, self.device)
        self.grown = False  # set when buffers were replaced (graphs must be re-captured)
        self._grow(capacity)

    @property
    def capacity(self) -> int:
        return self.cache.max_len

    def _grow(self, needed: int) -> None:
        capacity = self.bucket if self.cache is None else self.cache.max_len
        while capacity < needed:
            capacity *= 2
        layers, batch, heads, dim = self._shape
        new = StaticKVCache(layers, batch, heads, capacity, dim, self.device, self.dtype)
        if self.cache is not None:
            n = self.cache.max_len
            new.k[:, :, :, :n] = self.cache.k
            new.v[:, :, :, :n] = self.cache.v
            self.grown = True
        self.cache = new
        self.rope.ensure(capacity)

    def attach(self, slot: int, capacity: int) -> None:
        self.ensure(slot, capacity)

    def detach(self, slot: int) -> None:
        pass

    def move(self, src: int, dst: int) -> None:
        self.cache.k[:, dst] = self.cache.k[:, src]
        self.cache.v[:, dst] = self.cache.v[:, src]

    def swap(self, a: int, b: int) -> None:
        for t in (self.cache.k, self.cache.v):
            t[:, [a, b]] = t[:, [b, a]]

    def ensure(self, slot: int, needed: int) -> None:
        if needed > self.cache.max_len:
            self._grow(needed)

    def prefill(self, slot: int, embeds: torch.Tensor) -> torch.Tensor:
        length = embeds.shape[1]
        k, v = self.cache.k[:, slot : slot + 1], self.cache.v[:, slot : slot + 1]
        positions = torch.arange(length, device=self.device)[None]
        return self._talker.model(embeds, positions, _FrameCache(k, v, 0))

    def talker(self, n: int, x: torch.Tensor, pos: torch.Tensor, span: int) -> torch.Tensor:
        cache = _RowsCache(self.cache.k[:, :n], self.cache.v[:, :n], pos, span)
        mask = (torch.arange(span, device=x.device)[None] <= pos[:, None])[:, None, None]
        rope = (self.rope.cos[pos][:, None], self.rope.sin[pos][:, None])  # (n, 1, head_dim)
        return self._talker.model(x, pos[:, None], cache, mask=mask, rope=rope)

    def code_predictor(self, rows: slice, x: torch.Tensor, start: int) -> torch.Tensor:
        n, T = x.shape[0], x.shape[1]
        positions = torch.arange(start, start + T, device=x.device)[None].expand(n, T)
        cache = _FrameCache(self.cp_cache.k[:, rows], self.cp_cache.v[:, rows], start)
        return self._talker.code_predictor.model(x, positions, cache)
