"""Codec encoder (Mimi): 24 kHz waveform -> 16 codes per 1920 samples, for voice-clone references.

Pipeline (B items of N samples):
  wav (B, 1, N) -> SEANet: conv, 4 x [residual block, ELU, strided conv (x4 x5 x6 x8)], ELU, conv
  -> (B, hidden, ceil(N / 960)) -> causal transformer over all earlier steps
  -> stride-2 conv (replicate padding) -> (B, hidden, ceil(N / 1920))
  -> split RVQ: a semantic and an acoustic quantizer each quantize the same latent, nearest
     codeword by float32 L2 distance -> codes (B, 16, frames) = 1 semantic + 15 acoustic.
Only the codebooks whose codes are kept are computed (the reference computes all 32 and drops 16;
residual quantization makes the first 16 independent of the rest). Module names mirror the
checkpoint keys under `encoder.`; each quantizer's `codebooks` buffer is computed by the loader
from the stored `embed_sum / cluster_usage`. Knows nothing about files, resampling or the talker.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from .config import CodecEncoderConfig
from .transformer import Attention, LayerScale


class EncoderConv(nn.Module):
    """Causal Conv1d with any stride: left padding kernel - stride, right padding up to a whole stride."""

    def __init__(
        self,
        cin: int,
        cout: int,
        kernel: int,
        stride: int = 1,
        dilation: int = 1,
        bias: bool = True,
        pad_mode: str = "constant",
    ) -> None:
        super().__init__()
        self.conv = nn.Conv1d(cin, cout, kernel, stride, dilation=dilation, bias=bias)
        self.stride = stride
        self.left = (kernel - 1) * dilation + 1 - stride
        self.pad_mode = pad_mode

    def forward(self, x: Tensor) -> Tensor:
        # (B, C_in, L) -> (B, C_out, ceil(L / stride))
        length = x.shape[-1]
        right = -(-length // self.stride) * self.stride - length
        x = F.pad(x, (self.left, right), mode=self.pad_mode)
        return self.conv(x)


class ResnetBlock(nn.Module):
    """x + conv1x1(ELU(conv_k(ELU(x)))), narrowing to dim / compress in between."""

    def __init__(self, cfg: CodecEncoderConfig, dim: int, dilation: int) -> None:
        super().__init__()
        hidden = dim // cfg.compress
        self.block = nn.ModuleList(
            [
                nn.ELU(),
                EncoderConv(
                    dim, hidden, cfg.residual_kernel_size, dilation=dilation, pad_mode=cfg.pad_mode
                ),
                nn.ELU(),
                EncoderConv(hidden, dim, 1, pad_mode=cfg.pad_mode),
            ]
        )

    def forward(self, x: Tensor) -> Tensor:
        h = x
        for layer in self.block:
            h = layer(h)
        return x + h


class SEANetEncoder(nn.Module):
    """Strided conv stack, 1 -> hidden channels, N -> ceil(N / hop) steps."""

    def __init__(self, cfg: CodecEncoderConfig) -> None:
        super().__init__()
        layers: list[nn.Module] = [
            EncoderConv(1, cfg.num_filters, cfg.kernel_size, pad_mode=cfg.pad_mode)
        ]
        dim = cfg.num_filters
        for ratio in reversed(cfg.upsampling_ratios):
            for j in range(cfg.num_residual_layers):
                layers.append(ResnetBlock(cfg, dim, cfg.dilation_growth_rate**j))
            layers.append(nn.ELU())
            layers.append(EncoderConv(dim, dim * 2, 2 * ratio, stride=ratio, pad_mode=cfg.pad_mode))
            dim *= 2
        layers.append(nn.ELU())
        layers.append(
            EncoderConv(dim, cfg.hidden_size, cfg.last_kernel_size, pad_mode=cfg.pad_mode)
        )
        # the ELUs sit in the list (as upstream) so the conv indices match the checkpoint keys
        self.layers = nn.ModuleList(layers)

    def forward(self, x: Tensor) -> Tensor:
        for layer in self.layers:
            x = layer(x)
        return x


class MLP(nn.Module):
    def __init__(self, hidden: int, intermediate: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(hidden, intermediate, bias=False)
        self.fc2 = nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(F.gelu(self.fc1(x)))


class EncoderTransformerLayer(nn.Module):
    def __init__(self, cfg: CodecEncoderConfig) -> None:
        super().__init__()
        self.input_layernorm = nn.LayerNorm(cfg.hidden_size, eps=cfg.norm_eps)
        # window None: the reference's single-pass encode builds a plain causal mask
        self.self_attn = Attention(
            cfg.hidden_size,
            cfg.num_heads,
            cfg.num_kv_heads,
            cfg.head_dim,
            False,
            cfg.rope_theta,
            None,
        )
        self.self_attn_layer_scale = LayerScale(cfg.hidden_size)
        self.post_attention_layernorm = nn.LayerNorm(cfg.hidden_size, eps=cfg.norm_eps)
        self.mlp = MLP(cfg.hidden_size, cfg.intermediate_size)
        self.mlp_layer_scale = LayerScale(cfg.hidden_size)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.self_attn_layer_scale(self.self_attn(self.input_layernorm(x), 0))
        return x + self.mlp_layer_scale(self.mlp(self.post_attention_layernorm(x)))


class EncoderTransformer(nn.Module):
    def __init__(self, cfg: CodecEncoderConfig) -> None:
        super().__init__()
        self.layers = nn.ModuleList(EncoderTransformerLayer(cfg) for _ in range(cfg.num_layers))

    def forward(self, x: Tensor) -> Tensor:
        # (B, T, hidden) -> (B, T, hidden); no final norm (as Mimi)
        for layer in self.layers:
            x = layer(x)
        return x


class ResidualQuantizer(nn.Module):
    """1x1 input projection, then residual nearest-codeword search through `codebooks`."""

    def __init__(self, cfg: CodecEncoderConfig, num_codebooks: int) -> None:
        super().__init__()
        dim = cfg.vector_quantization_hidden_dimension
        self.input_proj = nn.Conv1d(cfg.hidden_size, dim, 1, bias=False)
        # (n, K, dim); filled by the loader
        self.register_buffer(
            "codebooks", torch.zeros(num_codebooks, cfg.codebook_size, cfg.codebook_dim)
        )

    def forward(self, latent: Tensor) -> Tensor:
        # latent (B, hidden, T) -> codes (B, n, T)
        B, _, T = latent.shape
        residual = self.input_proj(latent).transpose(1, 2).reshape(B * T, -1)  # (B*T, dim)
        codes = []
        for codebook in self.codebooks:
            # float32 L2 distances with torch.cdist, as the reference: ties resolve identically
            dist = torch.cdist(residual[None].float(), codebook[None].float())[0]  # (B*T, K)
            idx = dist.argmin(dim=-1)
            residual = residual - F.embedding(idx, codebook)
            codes.append(idx.view(B, T))
        return torch.stack(codes, dim=1)


class SplitQuantizer(nn.Module):
    def __init__(self, cfg: CodecEncoderConfig, num_codebooks: int) -> None:
        super().__init__()
        n_sem = cfg.num_semantic_quantizers
        self.semantic_residual_vector_quantizer = ResidualQuantizer(cfg, n_sem)
        self.acoustic_residual_vector_quantizer = ResidualQuantizer(cfg, num_codebooks - n_sem)

    def forward(self, latent: Tensor) -> Tensor:
        # both halves quantize the same latent (Mimi's split RVQ)
        semantic = self.semantic_residual_vector_quantizer(latent)
        acoustic = self.acoustic_residual_vector_quantizer(latent)
        return torch.cat([semantic, acoustic], dim=1)


class CodecEncoder(nn.Module):
    """wav (B, N) at 24 kHz -> codes (B, num_codebooks, ceil(N / 1920)), int64."""

    def __init__(self, cfg: CodecEncoderConfig, num_codebooks: int = 16) -> None:
        super().__init__()
        assert cfg.num_semantic_quantizers < num_codebooks <= cfg.num_quantizers, num_codebooks
        self.config = cfg
        self.num_codebooks = num_codebooks
        self.encoder = SEANetEncoder(cfg)
        self.encoder_transformer = EncoderTransformer(cfg)
        self.downsample = EncoderConv(
            cfg.hidden_size,
            cfg.hidden_size,
            cfg.downsample_kernel,
            stride=2,
            bias=False,
            pad_mode="replicate",
        )
        self.quantizer = SplitQuantizer(cfg, num_codebooks)

    @property
    def samples_per_frame(self) -> int:
        return self.config.hop_length * 2

    def latents(self, wav: Tensor) -> Tensor:
        """wav (B, N) -> the quantizer's input (B, hidden, ceil(N / 1920))."""
        if wav.dim() != 2 or wav.shape[1] == 0:
            raise ValueError(
                f"wav must have shape (batch, samples) with samples > 0, got {tuple(wav.shape)}"
            )
        dtype = self.downsample.conv.weight.dtype
        x = self.encoder(wav.to(dtype)[:, None, :])  # (B, hidden, ceil(N / 960))
        x = self.encoder_transformer(x.transpose(1, 2)).transpose(1, 2)
        return self.downsample(x)

    def forward(self, wav: Tensor) -> Tensor:
        """Encode items of equal length N. (The reference encodes a batch of different lengths
        zero-padded on the right and keeps ceil(length / 1920) frames of each; the strided convs
        read a few samples past an item's end, so its last frame may then differ slightly from
        encoding the item alone.)"""
        return self.quantizer(self.latents(wav))
