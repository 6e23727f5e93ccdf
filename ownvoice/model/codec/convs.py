"""Causal convolutions and SnakeBeta of the codec decoder, and the state that lets them run in chunks.

Every op here is causal: output sample t depends on inputs <= t only. One-shot, a causal conv pads
its input on the left with zeros. Chunk by chunk, it prepends the last input samples of the previous
chunk instead (kept in a `StreamState`); the first chunk sees zeros, so the concatenated chunk
outputs equal the one-shot output. Knows nothing about codes, transformers or files.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class StreamState:
    """What one decoder remembers between chunks.

    `tails[module]`: the last input samples a conv needs from earlier chunks, (B, C, context).
    `kv[module]`: an attention layer's keys and values of up to window-1 past frames.
    `position`: frames decoded so far, i.e. the RoPE position of the next frame.
    Tensors are created on first use with the input's batch size, dtype and device.
    """

    def __init__(self) -> None:
        self.tails: dict[nn.Module, Tensor] = {}
        self.kv: dict[nn.Module, tuple[Tensor, Tensor]] = {}
        self.position = 0

    def copy(self) -> StreamState:
        """An independent copy: a stream that goes on from here without touching this one."""
        out = StreamState()
        out.tails = {m: t.clone() for m, t in self.tails.items()}
        out.kv = {m: (k.clone(), v.clone()) for m, (k, v) in self.kv.items()}
        out.position = self.position
        return out

    def with_tail(self, module: nn.Module, x: Tensor, context: int) -> Tensor:
        """(B, C, n) -> (B, C, context + n): x preceded by the module's previous `context` inputs."""
        prev = self.tails.get(module)
        if prev is None:
            prev = x.new_zeros(x.shape[0], x.shape[1], context)
        full = torch.cat([prev, x], dim=-1)
        # a copy, so the (possibly large) chunk tensor is not kept alive by a view
        self.tails[module] = full[..., full.shape[-1] - context :].clone()
        return full


class CausalConv1d(nn.Module):
    """Conv1d (stride 1) with (kernel_size - 1) * dilation samples of left context."""

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        dilation: int = 1,
        groups: int = 1,
    ) -> None:
        super().__init__()
        self.conv = nn.Conv1d(
            in_channels, out_channels, kernel_size, dilation=dilation, groups=groups
        )
        self.context = (kernel_size - 1) * dilation

    def forward(self, x: Tensor, state: StreamState | None = None) -> Tensor:
        # (B, C_in, n) -> (B, C_out, n)
        if self.context:
            x = (
                F.pad(x, (self.context, 0))
                if state is None
                else state.with_tail(self, x, self.context)
            )
        return self.conv(x)


class CausalConvTranspose1d(nn.Module):
    """ConvTranspose1d that outputs exactly `stride` samples per input sample.

    The transposed conv spreads input sample i over outputs [i*stride, i*stride + kernel); the
    part beyond the current chunk is dropped (as the reference trims kernel - stride samples on
    the right), so output sample t needs inputs floor(t/stride) and, when the kernel overlaps,
    the one before it: that is the left context carried between chunks.
    """

    # Inputs up to this many samples per item use one matrix product instead of torch's
    # transposed convolution, whose fixed cost on CPU dominates streaming chunks (~150 ms for
    # the first decoder block, vs ~30 ms); long inputs keep the convolution, which is faster there.
    MATMUL_MAX_SAMPLES = 64

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int) -> None:
        super().__init__()
        assert kernel_size % stride == 0, (kernel_size, stride)
        self.conv = nn.ConvTranspose1d(in_channels, out_channels, kernel_size, stride=stride)
        self.stride = stride
        self.context = kernel_size // stride - 1  # earlier input samples that reach this output

    def forward(self, x: Tensor, state: StreamState | None = None) -> Tensor:
        # (B, C_in, n) -> (B, C_out, n * stride)
        n = x.shape[-1]
        if state is not None and self.context:
            x = state.with_tail(self, x, self.context)
        if x.shape[-1] <= self.MATMUL_MAX_SAMPLES:
            y = self._by_matmul(x)
        else:
            y = self.conv(x)
        skip = x.shape[-1] - n  # output of the prepended context belongs to the previous chunk
        return y[..., skip * self.stride : (skip + n) * self.stride]

    def _by_matmul(self, x: Tensor) -> Tensor:
        """Same as self.conv(x)[..., :L * stride] for x (B, C_in, L)."""
        B, c_in, L = x.shape
        w = self.conv.weight  # (C_in, C_out, kernel)
        c_out, kernel, s = w.shape[1], w.shape[2], self.stride
        # every input sample times every kernel tap: (B*L, C_in) @ (C_in, C_out*kernel)
        z = torch.mm(x.transpose(1, 2).reshape(B * L, c_in), w.reshape(c_in, c_out * kernel))
        z = z.view(B, L, c_out, kernel // s, s)
        # output block i (stride samples) = tap group 0 of input i + group j of input i - j
        y = z[:, :, :, 0]
        if kernel > s:
            y = y.clone()
            for j in range(1, kernel // s):
                y[:, j:] += z[:, : L - j, :, j]
        y = y.permute(0, 2, 1, 3).reshape(B, c_out, L * s)  # (B, L, C_out, s) -> (B, C_out, L*s)
        return y + self.conv.bias[:, None]


class SnakeBeta(nn.Module):
    """x + 1/exp(beta) * sin^2(x * exp(alpha)), per channel; alpha and beta are stored as logs."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.alpha = nn.Parameter(torch.zeros(channels))
        self.beta = nn.Parameter(torch.zeros(channels))

    def forward(self, x: Tensor) -> Tensor:
        # (B, C, T) -> (B, C, T)
        alpha = self.alpha.exp()[None, :, None]
        inv_beta = 1.0 / (self.beta.exp()[None, :, None] + 1e-9)
        return x + inv_beta * torch.sin(x * alpha).pow(2)
