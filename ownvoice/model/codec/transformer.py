"""Transformer parts of the codec: RoPE attention over a causal window, and the decoder's
`pre_transformer` (RMSNorm, SwiGLU, layer scale).

Attention works on a run of new frames plus, when streaming, the cached keys and values of earlier
frames; RoPE positions are absolute frame indices, so a chunked run sees exactly the numbers a
one-shot run sees. Long inputs are processed in blocks of queries, so memory stays linear in
length. Knows nothing about codes, convolutions or files.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .config import CodecDecoderConfig
from .convs import StreamState

QUERY_BLOCK = 256  # queries per attention call; bounds the score matrix for long one-shot inputs


def rope_cos_sin(
    start: int, n: int, head_dim: int, theta: float, device: torch.device, dtype: torch.dtype
) -> tuple[Tensor, Tensor]:
    """cos, sin of shape (n, head_dim) for positions start..start+n-1 (rotate-half convention).

    Computed in float32 and cast, like the reference; not a buffer, so casting the module to
    bfloat16 never degrades the frequencies.
    """
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, device=device).float() / head_dim))
    pos = torch.arange(start, start + n, device=device).float()
    freqs = pos[:, None] * inv_freq[None, :]
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    # x: (B, H, n, D); cos, sin: (n, D)
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rotated * sin


def window_attention(q: Tensor, k: Tensor, v: Tensor, past: int, window: int | None) -> Tensor:
    """Causal attention of n new queries over `past` earlier keys plus the n new ones.

    q: (B, H, n, D) at positions p..p+n-1; k, v: (B, H, past + n, D) at positions p-past..p+n-1.
    Query i sees key j iff j <= i and i - j < window (window None: every earlier key).
    Returns (B, H, n, D).
    """
    n = q.shape[2]
    outs = []
    for a in range(0, n, QUERY_BLOCK):
        b = min(a + QUERY_BLOCK, n)
        # key index r (0-based in k) sits at position p - past + r; query a at p + a
        lo = 0 if window is None else max(0, a + past - window + 1)
        hi = b + past
        dist = (
            torch.arange(a + past, hi, device=q.device)[:, None]
            - torch.arange(lo, hi, device=q.device)[None, :]
        )
        mask = dist >= 0
        if window is not None:
            mask &= dist < window
        outs.append(
            F.scaled_dot_product_attention(
                q[:, :, a:b], k[:, :, lo:hi], v[:, :, lo:hi], attn_mask=mask
            )
        )
    return outs[0] if len(outs) == 1 else torch.cat(outs, dim=2)


class Attention(nn.Module):
    """Multi-head self-attention with RoPE and a causal (optionally sliding) window."""

    def __init__(
        self,
        hidden: int,
        num_heads: int,
        num_kv_heads: int,
        head_dim: int,
        bias: bool,
        rope_theta: float,
        window: int | None,
    ) -> None:
        super().__init__()
        self.q_proj = nn.Linear(hidden, num_heads * head_dim, bias=bias)
        self.k_proj = nn.Linear(hidden, num_kv_heads * head_dim, bias=bias)
        self.v_proj = nn.Linear(hidden, num_kv_heads * head_dim, bias=bias)
        self.o_proj = nn.Linear(num_heads * head_dim, hidden, bias=bias)
        self.num_heads, self.num_kv_heads, self.head_dim = num_heads, num_kv_heads, head_dim
        self.rope_theta = rope_theta
        self.window = window

    def forward(self, x: Tensor, position: int, state: StreamState | None = None) -> Tensor:
        B, n, _ = x.shape
        q = self.q_proj(x).view(B, n, self.num_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(B, n, self.num_kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(B, n, self.num_kv_heads, self.head_dim).transpose(1, 2)
        # (B, n, H*D) -> (B, H, n, D)
        cos, sin = rope_cos_sin(position, n, self.head_dim, self.rope_theta, x.device, x.dtype)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        past = 0
        if state is not None:
            assert self.window is not None, "streaming needs a finite attention window"
            cached = state.kv.get(self)
            if cached is not None:
                past = cached[0].shape[2]
                k, v = torch.cat([cached[0], k], dim=2), torch.cat([cached[1], v], dim=2)
            keep = min(self.window - 1, k.shape[2])
            # only window-1 past frames can ever be seen again; copies free the chunk tensors
            state.kv[self] = (
                k[:, :, k.shape[2] - keep :].clone(),
                v[:, :, v.shape[2] - keep :].clone(),
            )
        if self.num_kv_heads != self.num_heads:
            groups = self.num_heads // self.num_kv_heads
            k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
        out = window_attention(q, k, v, past, self.window)
        return self.o_proj(out.transpose(1, 2).reshape(B, n, self.num_heads * self.head_dim))


class LayerScale(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(channels))

    def forward(self, x: Tensor) -> Tensor:
        return self.scale * x


class RMSNorm(nn.Module):
    """Normalises in float32, multiplies by the weight in the input dtype (as the reference)."""

    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * xf.to(x.dtype)


class SwiGLU(nn.Module):
    def __init__(self, hidden: int, intermediate: int) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(hidden, intermediate, bias=False)
        self.up_proj = nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderTransformerLayer(nn.Module):
    def __init__(self, cfg: CodecDecoderConfig) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.self_attn = Attention(
            cfg.hidden_size,
            cfg.num_heads,
            cfg.num_kv_heads,
            cfg.head_dim,
            cfg.attention_bias,
            cfg.rope_theta,
            cfg.sliding_window,
        )
        self.self_attn_layer_scale = LayerScale(cfg.hidden_size)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.mlp = SwiGLU(cfg.hidden_size, cfg.intermediate_size)
        self.mlp_layer_scale = LayerScale(cfg.hidden_size)

    def forward(self, x: Tensor, position: int, state: StreamState | None) -> Tensor:
        x = x + self.self_attn_layer_scale(self.self_attn(self.input_layernorm(x), position, state))
        return x + self.mlp_layer_scale(self.mlp(self.post_attention_layernorm(x)))


class DecoderTransformer(nn.Module):
    """The decoder's `pre_transformer`: latent_dim -> hidden -> layers -> norm -> latent_dim."""

    def __init__(self, cfg: CodecDecoderConfig) -> None:
        super().__init__()
        self.input_proj = nn.Linear(cfg.latent_dim, cfg.hidden_size)
        self.layers = nn.ModuleList(DecoderTransformerLayer(cfg) for _ in range(cfg.num_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.output_proj = nn.Linear(cfg.hidden_size, cfg.latent_dim)

    def forward(self, x: Tensor, state: StreamState | None = None) -> Tensor:
        # (B, n, latent_dim) -> (B, n, latent_dim); frames n continue from state.position
        position = 0 if state is None else state.position
        x = self.input_proj(x)
        for layer in self.layers:
            x = layer(x, position, state)
        if state is not None:
            state.position += x.shape[1]
        return self.output_proj(self.norm(x))
