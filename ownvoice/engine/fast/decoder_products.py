"""The speech decoder's matrix products on the kernels, in one of two precisions.

float32 (the default): the weights in float32 panels, float32 activations, within 1e-5 of the
reference decoder. bf16 (`decoder_dtype: bfloat16` on a CPU with AVX512-BF16): the weights in
bf16 pair panels (kernels/bf16dot.h) and the activations rounded to bf16 at each product, which
vdpbf16ps multiplies two pairs per lane at a time: twice float32's multiply-adds per instruction
from half the bytes. The rest of the decoder (norms, activations, attention) stays in float32.

Both keep a row's result independent of the rows beside it (each output one fixed-order sum), so
a batch decodes every row as it would alone.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ownvoice.engine.fast.packed import PANEL, to_panels


def to_pair_panels(w: Tensor) -> Tensor:
    """(N, K) -> (ceil(N / 16), ceil(K / 2), 32) bf16: for each pair of columns, the 16 rows of a
    panel side by side, a row's two values in one 32-bit lane (the even column first)."""
    n, k = w.shape
    panels, pairs = -(-n // PANEL), -(-k // 2)
    padded = torch.zeros(panels * PANEL, pairs * 2, dtype=torch.bfloat16)
    padded[:n, :k] = w
    out = padded.view(panels, PANEL, pairs, 2).permute(0, 2, 1, 3)  # (P, pair, row, 2)
    return out.reshape(panels, pairs, 2 * PANEL).contiguous()


def from_pair_panels(panels: Tensor, rows: int, cols: int) -> Tensor:
    """The inverse of `to_pair_panels` -> (rows, cols) bf16."""
    p, pairs, _ = panels.shape
    w = panels.view(p, pairs, PANEL, 2).permute(0, 2, 1, 3).reshape(p * PANEL, pairs * 2)
    return w[:rows, :cols]


class Products:
    """Packs the decoder's matrices and multiplies with them, in float32 or bf16."""

    def __init__(self, kernels, bf16: bool = False):
        if bf16 and not kernels.has_bf16dot():
            raise RuntimeError("the bf16 products need AVX512-BF16 (and the AVX-512 kernels)")
        self.kernels, self.bf16 = kernels, bf16

    def pack(self, matrix: Tensor) -> Tensor:
        matrix = matrix.detach()
        if self.bf16:
            return to_pair_panels(matrix)
        return to_panels(matrix.float().contiguous())

    def linear(self, x: Tensor, w: Tensor, bias: Tensor | None, rows: int) -> Tensor:
        """x (M, K) float32 contiguous -> (M, rows)."""
        if self.bf16:
            return self.kernels.linear_bf16(x, w, bias, rows)
        return self.kernels.linear(x, w, None, bias, rows)

    def conv(self, x: Tensor, w: Tensor, bias: Tensor | None, rows: int, taps: int,
             dilation: int) -> Tensor:  # fmt: skip
        """x (B, T, C) float32 contiguous -> (B, T - (taps - 1) * dilation, rows)."""
        if self.bf16:
            return self.kernels.conv_rows_bf16(x, w, bias, rows, taps, dilation)
        return self.kernels.conv_rows(x, w, bias, rows, taps, dilation)
