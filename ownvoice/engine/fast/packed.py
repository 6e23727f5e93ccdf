"""Linear layers stored compactly for the CPU decode loop: bf16 (lossless for bf16 checkpoints),
float32, or int8 with one scale per output channel. Activations stay float32.

The weights are kept in the kernels' panel layout (cpu_ops.cpp): (panels, K, 16), 16 rows
side by side for each k, rows past the matrix zero. `to_panels` / `from_panels` convert.

`pack_talker(talker, mode)` swaps the decode-time linears of the talker and code predictor in
place. The text projection and embeddings (prefill only) keep their torch form.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ownvoice.model.talker import Talker

MODES = ("bf16", "float32", "int8")
PANEL = 16
# bf16 panels interleave rows j and j + 8 in each 32-bit lane (the kernel splits them with a
# shift and a mask): the 16 weights of one k are stored in this row order
_BF16_ORDER = [i // 2 + (i % 2) * 8 for i in range(PANEL)]


def to_panels(w: torch.Tensor) -> torch.Tensor:
    """(N, K) -> (ceil(N / 16), K, 16) in the kernels' layout (same dtype)."""
    n, k = w.shape
    panels = -(-n // PANEL)
    padded = torch.zeros(panels * PANEL, k, dtype=w.dtype)
    padded[:n] = w
    out = padded.view(panels, PANEL, k).transpose(1, 2)  # (P, K, 16)
    if w.dtype == torch.bfloat16:
        out = out[:, :, _BF16_ORDER]
    return out.contiguous()


def from_panels(panels: torch.Tensor, rows: int) -> torch.Tensor:
    """The inverse of `to_panels`: (P, K, 16) -> (rows, K)."""
    if panels.dtype == torch.bfloat16:
        order = torch.argsort(torch.tensor(_BF16_ORDER))
        panels = panels[:, :, order]
    p, k, _ = panels.shape
    return panels.transpose(1, 2).reshape(p * PANEL, k)[:rows]


class PackedLinear(nn.Module):
    def __init__(self, linear: nn.Linear, mode: str, kernels):
        super().__init__()
        self.mode, self.kernels = mode, kernels
        w = linear.weight.detach()
        if mode == "int8":
            # symmetric per-output-channel: w ~= q * scale, q in [-127, 127]
            wf = w.float()
            scale = wf.abs().amax(dim=1).clamp(min=1e-12) / 127
            q = (wf / scale[:, None]).round().to(torch.int8)
            self.register_buffer("weight", to_panels(q.cpu()))
            self.register_buffer("scale", scale.contiguous())
        else:
            dtype = torch.bfloat16 if mode == "bf16" else torch.float32
            self.register_buffer("weight", to_panels(w.to(dtype).cpu()))
            self.register_buffer("scale", None)
        bias = linear.bias
        self.register_buffer("bias", None if bias is None else bias.detach().float().contiguous())
        self.out_features, self.in_features = w.shape

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        x2 = x.reshape(-1, shape[-1]).float().contiguous()
        y = self.kernels.linear(x2, self.weight, self.scale, self.bias, self.out_features)
        return y.reshape(*shape[:-1], self.out_features).to(x.dtype)

    def reference_forward(self, x: torch.Tensor) -> torch.Tensor:
        """The same product with torch ops (tests compare the kernels against it)."""
        w = from_panels(self.weight, self.out_features).float()
        if self.scale is not None:
            w = w * self.scale[:, None]
        return F.linear(x.float(), w, self.bias).to(x.dtype)


def pack_talker(talker: Talker, mode: str, kernels) -> int:
    """Replace the decode-loop linears by PackedLinear; returns how many were packed."""
    if mode not in MODES:
        raise ValueError(f"pack mode must be one of {MODES}, got {mode!r}")
    # (parent, name) pairs only: holding the old linears themselves would keep every original
    # weight alive until the end, next to its packed copy (twice the model at the peak)
    slots = [
        (parent, name)
        for root in (talker.model.layers, talker.code_predictor)
        for parent in root.modules()
        for name, child in parent.named_children()
        if isinstance(child, nn.Linear)
    ]
    for parent, name in slots:
        setattr(parent, name, PackedLinear(getattr(parent, name), mode, kernels))
    talker.codec_head = PackedLinear(talker.codec_head, mode, kernels)
    return len(slots) + 1
