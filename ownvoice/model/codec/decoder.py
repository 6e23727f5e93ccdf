"""Codec decoder: 16 codes per 80 ms frame -> 1920 samples of 24 kHz audio.

Pipeline (shapes for B items, T frames):
  codes (B, 16, T) -> RVQ lookup (B, codebook_dim, T) -> pre_conv (B, latent, T)
  -> pre_transformer, causal window of 72 frames (B, T, latent)
  -> 2 x [transposed conv x2 + ConvNeXt] (B, latent, 4T)
  -> conv -> 4 x [SnakeBeta, transposed conv x8/x5/x4/x3, 3 residual units] -> SnakeBeta -> conv
  -> clamp to [-1, 1] (B, T * 1920)
Every step is causal, so the same modules decode chunk by chunk when given a `StreamState`
(see streaming.py). Module and parameter names mirror the checkpoint keys under `decoder.`; the
one difference is `quantizer.codebooks`, which the loader computes from the stored
`embedding_sum / cluster_usage`. Knows nothing about files, devices or the talker.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .config import CodecDecoderConfig
from .convs import CausalConv1d, CausalConvTranspose1d, SnakeBeta, StreamState
from .transformer import DecoderTransformer


class OutputProjection(nn.Module):
    """One half of the split RVQ; only its 1x1 output projection is used for decoding."""

    def __init__(self, dim: int, out_dim: int) -> None:
        super().__init__()
        self.output_proj = nn.Conv1d(dim, out_dim, 1, bias=False)


class Quantizer(nn.Module):
    """Split RVQ decode: codebook 0 through `rvq_first`, the sum of codebooks 1.. through `rvq_rest`."""

    def __init__(self, cfg: CodecDecoderConfig) -> None:
        super().__init__()
        dim = cfg.codebook_vector_dim
        # (Q, K, dim): codebook q's K vectors; filled by the loader
        self.register_buffer("codebooks", torch.zeros(cfg.num_quantizers, cfg.codebook_size, dim))
        self.rvq_first = OutputProjection(dim, cfg.codebook_dim)
        self.rvq_rest = OutputProjection(dim, cfg.codebook_dim)

    def forward(self, codes: Tensor) -> Tensor:
        # codes (B, Q, T) -> (B, codebook_dim, T)
        Q, K, dim = self.codebooks.shape
        offsets = torch.arange(Q, device=codes.device)[None, :, None] * K
        vectors = F.embedding(codes + offsets, self.codebooks.view(Q * K, dim))  # (B, Q, T, dim)
        first = vectors[:, 0].transpose(1, 2)
        rest = vectors[:, 1:].sum(dim=1).transpose(1, 2)
        return self.rvq_first.output_proj(first) + self.rvq_rest.output_proj(rest)


class ConvNeXtBlock(nn.Module):
    """x + gamma * MLP(LayerNorm(causal depthwise conv k7 (x)))."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dwconv = CausalConv1d(dim, dim, 7, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.pwconv1 = nn.Linear(dim, 4 * dim)
        self.pwconv2 = nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(torch.ones(dim))

    def forward(self, x: Tensor, state: StreamState | None = None) -> Tensor:
        # (B, C, T) -> (B, C, T)
        h = self.dwconv(x, state).transpose(1, 2)
        h = self.pwconv2(F.gelu(self.pwconv1(self.norm(h))))
        return x + (self.gamma * h).transpose(1, 2)


class ResidualUnit(nn.Module):
    """x + conv1x1(snake(dilated conv k7 (snake(x))))."""

    def __init__(self, dim: int, dilation: int) -> None:
        super().__init__()
        self.act1 = SnakeBeta(dim)
        self.conv1 = CausalConv1d(dim, dim, 7, dilation=dilation)
        self.act2 = SnakeBeta(dim)
        self.conv2 = CausalConv1d(dim, dim, 1)

    def forward(self, x: Tensor, state: StreamState | None = None) -> Tensor:
        h = self.conv1(self.act1(x), state)
        return x + self.conv2(self.act2(h), state)


class DecoderBlock(nn.Module):
    """SnakeBeta, transposed conv (x rate, channels halved), residual units with dilation 1, 3, 9."""

    def __init__(self, in_dim: int, rate: int) -> None:
        super().__init__()
        out_dim = in_dim // 2
        self.block = nn.ModuleList(
            [SnakeBeta(in_dim), CausalConvTranspose1d(in_dim, out_dim, 2 * rate, rate)]
            + [ResidualUnit(out_dim, d) for d in (1, 3, 9)]
        )

    def forward(self, x: Tensor, state: StreamState | None = None) -> Tensor:
        # (B, C, n) -> (B, C / 2, n * rate)
        x = self.block[0](x)
        for layer in self.block[1:]:
            x = layer(x, state)
        return x


class CodecDecoder(nn.Module):
    """codes (B, num_quantizers, T) -> waveform (B, T * samples_per_frame) in [-1, 1]."""

    def __init__(self, cfg: CodecDecoderConfig) -> None:
        super().__init__()
        self.config = cfg
        self.quantizer = Quantizer(cfg)
        self.pre_conv = CausalConv1d(cfg.codebook_dim, cfg.latent_dim, 3)
        self.pre_transformer = DecoderTransformer(cfg)
        self.upsample = nn.ModuleList(
            nn.ModuleList(
                [
                    CausalConvTranspose1d(cfg.latent_dim, cfg.latent_dim, r, r),
                    ConvNeXtBlock(cfg.latent_dim),
                ]
            )
            for r in cfg.upsampling_ratios
        )
        out_dim = cfg.decoder_dim // 2 ** len(cfg.upsample_rates)
        self.decoder = nn.ModuleList(
            [CausalConv1d(cfg.latent_dim, cfg.decoder_dim, 7)]
            + [DecoderBlock(cfg.decoder_dim // 2**i, r) for i, r in enumerate(cfg.upsample_rates)]
            + [SnakeBeta(out_dim), CausalConv1d(out_dim, 1, 7)]
        )

    @property
    def samples_per_frame(self) -> int:
        return self.config.total_upsample

    def forward(self, codes: Tensor, state: StreamState | None = None) -> Tensor:
        """Decode T frames. Without `state`: the frames are the whole utterance (exact for any T;
        memory grows linearly with T). With `state`: they continue the frames decoded before
        with that state, and the state is advanced; use `StreamingDecoder` rather than this.

        Codes must lie in [0, codebook_size); they are not range-checked here (that would need
        a device sync).
        """
        return self.waveform(self.latents(codes, state), state)

    def latents(self, codes: Tensor, state: StreamState | None = None) -> Tensor:
        """codes (B, Q, T) -> transformer output (B, latent_dim, T): the cheap first half."""
        cfg = self.config
        if codes.dim() != 3 or codes.shape[1] != cfg.num_quantizers:
            raise ValueError(
                f"codes must have shape (batch, {cfg.num_quantizers}, frames), got {tuple(codes.shape)}"
            )
        x = self.pre_conv(self.quantizer(codes), state)  # (B, latent, T)
        return self.pre_transformer(x.transpose(1, 2), state).transpose(1, 2)

    def waveform(self, x: Tensor, state: StreamState | None = None) -> Tensor:
        """(B, latent_dim, T) -> (B, T * samples_per_frame): the conv upsampler, ~95% of the cost."""
        for transposed, convnext in self.upsample:
            x = convnext(transposed(x, state), state)  # (B, latent, T * 2, then * 4)
        x = self.decoder[0](x, state)
        for block in self.decoder[1:-2]:
            x = block(x, state)
        wav = self.decoder[-1](self.decoder[-2](x), state)  # (B, 1, T * 1920)
        return wav.clamp(-1.0, 1.0).squeeze(1)

    @property
    def waveform_history_frames(self) -> float:
        """How far back (in frames) the upsampler's output depends on its input.

        Its convolutions have finite left context, so after this many frames the output (and
        every conv's carried state) no longer depends on what came before; ~9.4 frames (0.75 s)
        for the real configuration.
        """
        history, rate = 0.0, 1  # rate: samples per frame at the current stage
        for transposed, convnext in self.upsample:
            history += transposed.context / rate
            rate *= transposed.stride
            history += convnext.dwconv.context / rate
        history += self.decoder[0].context / rate
        for block in self.decoder[1:-2]:
            transposed = block.block[1]
            history += transposed.context / rate
            rate *= transposed.stride
            history += sum(u.conv1.context + u.conv2.context for u in block.block[2:]) / rate
        return history + self.decoder[-1].context / rate
