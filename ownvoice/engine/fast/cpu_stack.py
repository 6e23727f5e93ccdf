"""A decoder stack stepped one token at a time by our C++ layer kernel (CPU fast path).

Each layer becomes one call of `decode_rows` (norms, fused q/k/v, q/k norm, RoPE, cache write,
attention, fused gate/up MLP), instead of ~40 small torch ops. The fused q/k/v and gate/up
matrices are built once; the layer's PackedLinear modules are re-pointed at views of them, so
the weights are held once, and prefill (many tokens) keeps using the modules.
"""

from __future__ import annotations

import torch

from ownvoice.engine.fast.arena import Arena
from ownvoice.engine.fast.packed import PANEL, PackedLinear
from ownvoice.model.layers import DecoderStack


def _fuse(linears: list[PackedLinear], arena: Arena):
    """Concatenate the rows (whole panels of 16) of several packed linears into the arena;
    re-point each at its panels."""
    if len({lin.mode for lin in linears}) != 1:
        raise ValueError("fused linears must share one storage mode")
    weight = arena.take(torch.cat([lin.weight for lin in linears], dim=0))
    scale = None
    if linears[0].scale is not None:
        scale = torch.cat([lin.scale for lin in linears], dim=0).contiguous()
    start = 0
    for lin in linears:
        n = lin.out_features
        panels = slice(start // PANEL, (start + n) // PANEL)
        lin.weight = weight[panels]
        if scale is not None:  # int8: a scale per row; int4: (panels, groups, 16)
            lin.scale = scale[start : start + n] if scale.dim() == 1 else scale[panels]
        start += n
    return weight, scale


def _projections(stack: DecoderStack) -> list:
    out = []
    for layer in stack.layers:
        a, m = layer.self_attn, layer.mlp
        out += [a.q_proj, a.k_proj, a.v_proj, a.o_proj, m.gate_proj, m.up_proj, m.down_proj]
    return out


class CpuStack:
    def __init__(self, stack: DecoderStack, kernels):
        self.stack, self.kernels = stack, kernels
        cfg = stack.cfg
        self.heads, self.kv_heads, self.head_dim = cfg.num_heads, cfg.num_kv_heads, cfg.head_dim
        self.eps = cfg.rms_norm_eps
        self.layers = []
        arena = Arena([lin.weight for lin in _projections(stack)])
        for layer in stack.layers:
            attn, mlp = layer.self_attn, layer.mlp
            qkv, qkv_scale = _fuse([attn.q_proj, attn.k_proj, attn.v_proj], arena)
            gate_up, gate_up_scale = _fuse([mlp.gate_proj, mlp.up_proj], arena)
            attn.o_proj.weight = arena.take(attn.o_proj.weight)
            mlp.down_proj.weight = arena.take(mlp.down_proj.weight)
            self.layers.append(
                (
                    layer.input_layernorm.weight.detach().float().contiguous(),
                    qkv,
                    qkv_scale,
                    attn.q_norm.weight.detach().float().contiguous(),
                    attn.k_norm.weight.detach().float().contiguous(),
                    attn.o_proj.weight,
                    attn.o_proj.scale,
                    layer.post_attention_layernorm.weight.detach().float().contiguous(),
                    gate_up,
                    gate_up_scale,
                    mlp.down_proj.weight,
                    mlp.down_proj.scale,
                )
            )

    @staticmethod
    def supported(stack: DecoderStack) -> bool:
        """Every projection packed, no biases, whole panels (fused by rows), float32
        activations."""
        if stack.norm.weight.dtype != torch.float32:
            return False
        return all(
            isinstance(lin, PackedLinear) and lin.bias is None and lin.out_features % PANEL == 0
            for lin in _projections(stack)
        )

    def forward_rows(
        self,
        x: torch.Tensor,
        k_caches: list[torch.Tensor],
        v_caches: list[torch.Tensor],
        positions: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
    ) -> torch.Tensor:
        """M new tokens (M, H), token m at positions[m] of its own cache -> normed output (M, H).

        k_caches[m], v_caches[m]: (layers, kv_heads, capacity, head_dim) float32; tokens of one
        sequence (a prefill) share a cache. positions: (M,) int64; cos, sin: (M, head_dim)
        float32 rows of the RoPE table at those positions.
        """
        h = x.reshape(-1, x.shape[-1]).float().contiguous().clone()  # updated in place
        for i, weights in enumerate(self.layers):
            self.kernels.decode_rows(
                h, i, *weights, k_caches, v_caches, positions, cos, sin,
                self.heads, self.kv_heads, self.head_dim, self.eps,
            )  # fmt: skip
        return self.stack.norm(h)
