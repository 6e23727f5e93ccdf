"""Qwen3 decoder building blocks shared by the talker and the code predictor.

RMSNorm, rotary embeddings, grouped-query attention with per-head q/k norm, SwiGLU MLP, the
pre-norm decoder layer and a stack of them. Tensors in, tensors out: the caller owns positions
and the KV cache (any object with `update(layer, k, v) -> (k_all, v_all)`).

The talker's config declares multimodal RoPE (3 position streams, interleaved sections); Qwen3-TTS
always feeds three identical streams, which makes it exactly plain 1-D RoPE, so that is what we
implement (architecture.md 2.2).
"""

from __future__ import annotations

from typing import Protocol

import torch
import torch.nn.functional as F
from torch import nn

from ownvoice.model.config import TransformerConfig


class KVCache(Protocol):
    def update(
        self, layer: int, k: torch.Tensor, v: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Store k, v (B, kv_heads, T_new, D) for `layer`; return all keys and values so far."""
        ...


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # normalise in float32, multiply by the weight in the input dtype (as upstream does)
        dtype = x.dtype
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * h.to(dtype)


def rope_inv_freq(head_dim: int, theta: float) -> torch.Tensor:
    exponents = torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim
    return 1.0 / (theta**exponents)


def rope_cos_sin(
    positions: torch.Tensor, inv_freq: torch.Tensor, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin of shape (B, T, head_dim) for integer positions (B, T); computed in float32."""
    freqs = positions.float()[..., None] * inv_freq.to(positions.device)  # (B, T, D/2)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    # x: (B, H, T, D); cos/sin: (B, T, D)
    cos, sin = cos[:, None], sin[:, None]
    return (x * cos) + (_rotate_half(x) * sin)


class Attention(nn.Module):
    def __init__(self, cfg: TransformerConfig, implementation: str = "sdpa"):
        super().__init__()
        self.num_heads = cfg.num_heads
        self.num_kv_heads = cfg.num_kv_heads
        self.head_dim = cfg.head_dim
        self.implementation = implementation
        h, d = cfg.hidden_size, cfg.head_dim
        self.q_proj = nn.Linear(h, cfg.num_heads * d, bias=False)
        self.k_proj = nn.Linear(h, cfg.num_kv_heads * d, bias=False)
        self.v_proj = nn.Linear(h, cfg.num_kv_heads * d, bias=False)
        self.o_proj = nn.Linear(cfg.num_heads * d, h, bias=False)
        self.q_norm = RMSNorm(d, cfg.rms_norm_eps)
        self.k_norm = RMSNorm(d, cfg.rms_norm_eps)

    def forward(
        self,
        x: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        cache: KVCache | None,
        layer: int,
        mask: torch.Tensor | None,
    ) -> torch.Tensor:
        B, T, _ = x.shape
        q = self.q_norm(self.q_proj(x).view(B, T, self.num_heads, self.head_dim)).transpose(1, 2)
        k = self.k_norm(self.k_proj(x).view(B, T, self.num_kv_heads, self.head_dim)).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.num_kv_heads, self.head_dim).transpose(1, 2)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)  # (B, H, T, D)
        if cache is not None:
            k, v = cache.update(layer, k, v)  # (B, KV, S, D), S = keys so far
        out = attend(q, k, v, mask, self.implementation)
        return self.o_proj(out.transpose(1, 2).reshape(B, T, -1))


def attend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None,
    implementation: str,
) -> torch.Tensor:
    """Scaled dot-product attention with GQA. q: (B, H, T, D); k, v: (B, KV, S, D).

    `mask` is a boolean (B or 1, 1, T, S) tensor, True = may attend; None means causal with the
    queries aligned to the last T keys (a prefill, or one decode step when T == 1).
    """
    T, S = q.shape[2], k.shape[2]
    groups = q.shape[1] // k.shape[1]
    if implementation == "sdpa" and (mask is not None or T not in (1, S)):
        if mask is None:
            mask = torch.ones(T, S, dtype=torch.bool, device=q.device).tril(S - T)[None, None]
        k, v = _repeat_kv(k, groups), _repeat_kv(v, groups)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    if implementation == "sdpa":
        # the common cases (prefill, one decode step) take torch's causal fast path
        return F.scaled_dot_product_attention(q, k, v, is_causal=T > 1, enable_gqa=groups > 1)
    # "eager": the textbook formula in the reference's order (softmax in float32)
    k, v = _repeat_kv(k, groups), _repeat_kv(v, groups)
    scores = torch.matmul(q, k.transpose(2, 3)) * q.shape[-1] ** -0.5
    if mask is None and T > 1:
        mask = torch.ones(T, S, dtype=torch.bool, device=q.device).tril(S - T)[None, None]
    if mask is not None:
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    probs = torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
    return torch.matmul(probs, v)


def _repeat_kv(x: torch.Tensor, groups: int) -> torch.Tensor:
    return x if groups == 1 else x.repeat_interleave(groups, dim=1)


class MLP(nn.Module):
    def __init__(self, hidden: int, intermediate: int):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, intermediate, bias=False)
        self.up_proj = nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, cfg: TransformerConfig, implementation: str = "sdpa"):
        super().__init__()
        self.self_attn = Attention(cfg, implementation)
        self.mlp = MLP(cfg.hidden_size, cfg.intermediate_size)
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)

    def forward(self, x, cos, sin, cache, layer, mask):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, cache, layer, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class DecoderStack(nn.Module):
    """Layers + final norm. `forward(x (B, T, H), positions (B, T)) -> normed hidden (B, T, H)`."""

    def __init__(self, cfg: TransformerConfig, implementation: str = "sdpa"):
        super().__init__()
        self.cfg = cfg
        self.layers = nn.ModuleList(
            DecoderLayer(cfg, implementation) for _ in range(cfg.num_layers)
        )
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.register_buffer(
            "inv_freq", rope_inv_freq(cfg.head_dim, cfg.rope_theta), persistent=False
        )

    def init_rope(self, device: torch.device | str) -> None:
        """Rebuild the (non-persistent) RoPE table, e.g. after construction on the meta device."""
        self.inv_freq = rope_inv_freq(self.cfg.head_dim, self.cfg.rope_theta).to(device)

    def set_attention(self, implementation: str) -> None:
        for layer in self.layers:
            layer.self_attn.implementation = implementation

    def forward(
        self,
        x: torch.Tensor,
        positions: torch.Tensor,
        cache: KVCache | None = None,
        mask: torch.Tensor | None = None,
        rope: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """`rope` = precomputed (cos, sin) for `positions`; computed here when None."""
        cos, sin = rope if rope is not None else rope_cos_sin(positions, self.inv_freq, x.dtype)
        for i, layer in enumerate(self.layers):
            x = layer(x, cos, sin, cache, i, mask)
        return self.norm(x)


class DynamicKVCache:
    """Grows by concatenation; the simple cache of the eager parity path."""

    def __init__(self):
        self.keys: dict[int, torch.Tensor] = {}
        self.values: dict[int, torch.Tensor] = {}

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor):
        if layer in self.keys:
            k = torch.cat([self.keys[layer], k], dim=2)
            v = torch.cat([self.values[layer], v], dim=2)
        self.keys[layer], self.values[layer] = k, v
        return k, v

    @property
    def length(self) -> int:
        return self.keys[0].shape[2] if self.keys else 0
