"""Linear layers stored compactly for the CPU decode loop: bf16 (lossless for bf16 checkpoints),
float32, int8 (a scale per output row) or int4 (a scale per row and 32 columns).

bf16 and float32 weights multiply float32 activations. int8 weights multiply 12-bit integer
activations, int4 weights (a scale per 32 columns) 8-bit ones, each activation row quantised with
its own scale when it arrives, in integers: `int8_linear` / `int4_linear` are that
arithmetic in torch ops, bit for bit what the kernels compute (kernels/q8_tile.h, q4_tile.h),
and the portable path where the kernels cannot run.

The weights are kept in the kernels' panel layout (cpu_ops.cpp): (panels, K, 16), 16 rows
side by side for each k, rows past the matrix zero; int8 in (panels, K / 2, 32), 8 rows x 2
consecutive k per 16 bytes; int4 two per byte (kernels/q4_tile.h). `to_panels` / `from_panels`
and `to_int4_panels` / `from_int4_panels` convert.

`pack_talker(talker, mode)` swaps the decode-time linears of the talker and code predictor in
place. The text projection and embeddings (prefill only) keep their torch form.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ownvoice.model.talker import Talker

MODES = ("bf16", "float32", "int8", "int4")
INT4_GROUP = 32  # columns per int4 scale (kernels/intdot.h)
PANEL = 16
# bf16 panels interleave rows j and j + 8 in each 32-bit lane (the kernel splits them with a
# shift and a mask): the 16 weights of one k are stored in this row order
_BF16_ORDER = [i // 2 + (i % 2) * 8 for i in range(PANEL)]


def to_panels(w: torch.Tensor) -> torch.Tensor:
    """(N, K) -> (ceil(N / 16), K, 16) in the kernels' layout (same dtype); int8:
    (ceil(N / 16), ceil(K / 2), 32)."""
    n, k = w.shape
    panels = -(-n // PANEL)
    if w.dtype == torch.int8:
        pairs = -(-k // 2)
        padded = torch.zeros(panels * PANEL, pairs * 2, dtype=w.dtype)
        padded[:n, :k] = w
        # (P, half, row, pair, 2) -> (P, pair, half, row, 2)
        out = padded.view(panels, 2, 8, pairs, 2).permute(0, 3, 1, 2, 4)
        return out.reshape(panels, pairs, 32).contiguous()
    padded = torch.zeros(panels * PANEL, k, dtype=w.dtype)
    padded[:n] = w
    out = padded.view(panels, PANEL, k).transpose(1, 2)  # (P, K, 16)
    if w.dtype == torch.bfloat16:
        out = out[:, :, _BF16_ORDER]
    return out.contiguous()


def from_panels(panels: torch.Tensor, rows: int, cols: int | None = None) -> torch.Tensor:
    """The inverse of `to_panels` -> (rows, cols); cols defaults to every stored column."""
    p = panels.shape[0]
    if panels.dtype == torch.int8:
        pairs = panels.shape[1]
        w = panels.view(p, pairs, 2, 8, 2).permute(0, 2, 3, 1, 4).reshape(p * PANEL, pairs * 2)
        return w[:rows, :cols]
    if panels.dtype == torch.bfloat16:
        order = torch.argsort(torch.tensor(_BF16_ORDER))
        panels = panels[:, :, order]
    k = panels.shape[1]
    return panels.transpose(1, 2).reshape(p * PANEL, k)[:rows, :cols]


# activations against int8 weights in [-2047, 2047] (12 bits), against int4 in [-127, 127]
INT8_ACTIVATION_LEVELS, INT4_ACTIVATION_LEVELS = 2047, 127  # (kernels/intdot.h)


def quantize_rows(x: torch.Tensor, levels: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(M, K) float32 -> integers in [-levels, levels] (round half to even, as int16) and a
    scale per row, as the kernels quantise activations: x ~= q * scale."""
    amax = x.abs().amax(dim=1, keepdim=True)
    levels = torch.tensor(float(levels))
    inv = levels / amax  # a true division, as in C++ (a number / t would multiply)
    q = torch.where(amax > 0, (x * inv).round().clamp(-levels, levels), 0.0).to(torch.int16)
    scale = torch.where(amax > 0, amax / levels, 0.0)
    return q, scale[:, 0]


def int8_linear(
    x: torch.Tensor, weight: torch.Tensor, scale: torch.Tensor, rows: int
) -> torch.Tensor:
    """x (M, K) float32 against int8 panels with a scale per row: the kernels' arithmetic,
    y = float(sum_k xq wq) * xscale * wscale, exact in torch's float ops."""
    xq, xscale = quantize_rows(x, INT8_ACTIVATION_LEVELS)
    w = from_panels(weight, rows, x.shape[1])
    total = xq.double() @ w.double().T  # sums of integers below 2^53: exact in any order
    return total.float() * xscale[:, None] * scale[None, :rows]


def quantize_int4(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(N, K) float -> values in [-7, 7] (N, K rounded up to 32; int8) and a scale per row and
    group of 32 columns (N, K / 32), each rounded up to 8 significant bits: a group's integer
    sum (< 2^15) times its scale is then exact in float32 (kernels/q4_tile.h)."""
    n, k = w.shape
    cols = -(-k // INT4_GROUP) * INT4_GROUP
    padded = torch.zeros(n, cols, dtype=torch.float32)
    padded[:, :k] = w.float()
    groups = padded.view(n, cols // INT4_GROUP, INT4_GROUP)
    mantissa, exponent = torch.frexp(groups.abs().amax(dim=2) / 7)
    scale = torch.ldexp(torch.ceil(mantissa * 256) / 256, exponent)
    safe = torch.where(scale > 0, scale, 1.0)
    q = (groups / safe[:, :, None]).round().clamp(-7, 7).to(torch.int8)
    return q.view(n, cols), scale


def to_int4_panels(q: torch.Tensor, scale: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Values (N, K) in [-7, 7], K a multiple of 32, and scales (N, K / 32) -> the kernels'
    int4 layout (kernels/q4_tile.h): (P, K / 2, 16) uint8 holding u = q + 8, two per byte, and
    (P, K / 32, 16) scales."""
    n, k = q.shape
    panels = -(-n // PANEL)
    u = torch.full((panels * PANEL, k), 8, dtype=torch.uint8)  # rows past the matrix: value 0
    u[:n] = (q + 8).to(torch.uint8)
    # (P, half, row, octet, nibble, j) -> (P, octet, half, row, j, nibble)
    u = u.view(panels, 2, 8, k // 8, 2, 4).permute(0, 3, 1, 2, 5, 4)
    packed = (u[..., 0] | (u[..., 1] << 4)).reshape(panels, k // 2, 16)
    padded = torch.zeros(panels * PANEL, scale.shape[1])
    padded[:n] = scale
    return packed.contiguous(), padded.view(panels, PANEL, -1).transpose(1, 2).contiguous()


def from_int4_panels(
    packed: torch.Tensor, scale: torch.Tensor, rows: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The inverse of `to_int4_panels`: values (rows, K) int8 and scales (rows, K / 32)."""
    p, half_k, _ = packed.shape
    k = 2 * half_k
    b = packed.view(p, k // 8, 2, 8, 4)  # (P, octet, half, row, j)
    u = torch.stack([b & 15, b >> 4], dim=-1)  # (P, octet, half, row, j, nibble)
    u = u.permute(0, 2, 3, 1, 5, 4).reshape(p * PANEL, k)
    q = u[:rows].to(torch.int8) - 8
    return q, scale.transpose(1, 2).reshape(-1, scale.shape[1])[:rows]


def int4_linear(
    x: torch.Tensor, weight: torch.Tensor, scale: torch.Tensor, rows: int
) -> torch.Tensor:
    """x (M, K) float32 against int4 panels: the kernels' arithmetic in torch's ops. Each
    group's integer sum times its scale (exact), summed over the groups in order, times the
    activation row's scale."""
    m, k = x.shape
    q, s = from_int4_panels(weight, scale, rows)
    xq, xscale = quantize_rows(x, INT4_ACTIVATION_LEVELS)
    cols = q.shape[1]
    xp = torch.zeros(m, cols, dtype=torch.float64)
    xp[:, :k] = xq.double()
    groups = cols // INT4_GROUP
    sums = torch.einsum(
        "mgc,ngc->mng",
        xp.view(m, groups, INT4_GROUP),
        q.double().view(rows, groups, INT4_GROUP),
    )  # exact integers
    parts = sums.float() * s[None]  # exact (8-bit scales)
    y = torch.zeros(m, rows)
    for g in range(groups):
        y = y + parts[:, :, g]
    return y * xscale[:, None]


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
        elif mode == "int4":
            weight, scale = to_int4_panels(*quantize_int4(w.cpu()))
            self.register_buffer("weight", weight)
            self.register_buffer("scale", scale)
        else:
            dtype = torch.bfloat16 if mode == "bf16" else torch.float32
            self.register_buffer("weight", to_panels(w.to(dtype).cpu()))
            self.register_buffer("scale", None)
        bias = linear.bias
        self.register_buffer("bias", None if bias is None else bias.detach().float().contiguous())
        self.out_features, self.in_features = w.shape

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.kernels is None:  # the portable path (int8 on a CPU the kernels cannot run on)
            return self.reference_forward(x)
        shape = x.shape
        x2 = x.reshape(-1, shape[-1]).float().contiguous()
        y = self.kernels.linear(x2, self.weight, self.scale, self.bias, self.out_features)
        return y.reshape(*shape[:-1], self.out_features).to(x.dtype)

    def reference_forward(self, x: torch.Tensor) -> torch.Tensor:
        """The same product with torch ops (tests compare the kernels against it); for int8
        the same integer arithmetic, bit for bit."""
        if self.mode in ("int8", "int4"):
            shape = x.shape
            x2 = x.reshape(-1, shape[-1]).float()
            product = int8_linear if self.mode == "int8" else int4_linear
            y = product(x2, self.weight, self.scale, self.out_features)
            if self.bias is not None:
                y = y + self.bias
            return y.reshape(*shape[:-1], self.out_features).to(x.dtype)
        w = from_panels(self.weight, self.out_features).float()
        return F.linear(x.float(), w, self.bias).to(x.dtype)


def pack_talker(talker: Talker, mode: str, kernels) -> int:
    """Replace the decode-loop linears by PackedLinear; returns how many were packed.

    With mode "int4" only the decoder layers' projections are int4: the heads (the talker's
    codec head, the code predictor's 15 heads) and the code predictor's input projection stay
    int8. They are about 2 % of the bytes a frame reads, and on the random 0.6B checkpoint int4
    heads alone cost 16 points of code agreement (84 % against 100 %; see the bench)."""
    if mode not in MODES:
        raise ValueError(f"pack mode must be one of {MODES}, got {mode!r}")
    edge = "int8" if mode == "int4" else mode
    # (parent, name) pairs only: holding the old linears themselves would keep every original
    # weight alive until the end, next to its packed copy (twice the model at the peak)
    slots = [
        (parent, name)
        for root in (talker.model.layers, talker.code_predictor)
        for parent in root.modules()
        for name, child in parent.named_children()
        if isinstance(child, nn.Linear)
    ]
    layers = {
        id(m)
        for m in (*talker.model.layers.modules(), *talker.code_predictor.model.layers.modules())
    }
    for parent, name in slots:
        chosen = mode if id(parent) in layers else edge
        setattr(parent, name, PackedLinear(getattr(parent, name), chosen, kernels))
    talker.codec_head = PackedLinear(talker.codec_head, edge, kernels)
    return len(slots) + 1
