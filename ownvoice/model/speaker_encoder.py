"""SpeakerEncoder: log-mel frames -> one x-vector (ECAPA-TDNN), as in the Qwen3-TTS Base models.

The x-vector is used as-is as one row of the talker's codec track, so it must match upstream
numerically. Layout: a TDNN, three SE-Res2Net blocks, multi-layer feature aggregation (MFA),
attentive statistics pooling and a 1x1 projection. Every convolution pads "same" by reflection;
there is no BatchNorm. Parameter names equal the checkpoint's `speaker_encoder.*` keys without
that prefix, so `load_state_dict` takes them directly. Knows nothing about files or sample rates;
`embed()` expects a waveform already at 24 kHz.
"""

from __future__ import annotations

import torch
from torch import nn

from ownvoice.errors import AudioError
from ownvoice.model.config import SpeakerEncoderConfig
from ownvoice.model.mel import SAMPLE_RATE, log_mel_spectrogram, samples_for_frames


def _conv(c_in: int, c_out: int, kernel: int = 1, dilation: int = 1) -> nn.Conv1d:
    return nn.Conv1d(c_in, c_out, kernel, dilation=dilation, padding="same", padding_mode="reflect")


class TDNN(nn.Module):
    """Dilated 1-D convolution + ReLU."""

    def __init__(self, c_in: int, c_out: int, kernel: int, dilation: int):
        super().__init__()
        self.conv = _conv(c_in, c_out, kernel, dilation)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x))


class Res2Net(nn.Module):
    """Split channels into `scale` groups; each group after the first sees its own TDNN applied
    to itself plus the previous group's output, so later groups have ever wider receptive fields."""

    def __init__(self, channels: int, scale: int, kernel: int, dilation: int):
        super().__init__()
        assert channels % scale == 0, (channels, scale)
        width = channels // scale
        self.scale = scale
        self.blocks = nn.ModuleList(TDNN(width, width, kernel, dilation) for _ in range(scale - 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        groups = torch.chunk(x, self.scale, dim=1)
        outs = [groups[0]]  # the first group passes through untouched
        prev = None
        for block, group in zip(self.blocks, groups[1:], strict=True):
            prev = block(group if prev is None else group + prev)
            outs.append(prev)
        return torch.cat(outs, dim=1)


class SqueezeExcite(nn.Module):
    """Channel gates in (0, 1) computed from the time-averaged features."""

    def __init__(self, channels: int, bottleneck: int):
        super().__init__()
        self.conv1 = _conv(channels, bottleneck)
        self.conv2 = _conv(bottleneck, channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = x.mean(dim=2, keepdim=True)  # (B, C, 1)
        gate = torch.sigmoid(self.conv2(torch.relu(self.conv1(s))))
        return x * gate


class SERes2NetBlock(nn.Module):
    """1x1 TDNN -> Res2Net -> 1x1 TDNN -> squeeze-excitation, plus the residual."""

    def __init__(self, c_in: int, c_out: int, scale: int, se: int, kernel: int, dilation: int):
        super().__init__()
        assert c_in == c_out, "the residual needs equal widths"
        self.tdnn1 = TDNN(c_in, c_out, 1, 1)
        self.res2net_block = Res2Net(c_out, scale, kernel, dilation)
        self.tdnn2 = TDNN(c_out, c_out, 1, 1)
        self.se_block = SqueezeExcite(c_out, se)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.se_block(self.tdnn2(self.res2net_block(self.tdnn1(x))))
        return h + x


def _weighted_stats(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """Mean and standard deviation over time under weights w that sum to 1: (B, C, T) -> (B, 2C)."""
    mean = (w * x).sum(dim=2)
    var = (w * (x - mean.unsqueeze(2)).pow(2)).sum(dim=2)
    return torch.cat([mean, var.clamp(min=eps).sqrt()], dim=1)


class AttentiveStatsPool(nn.Module):
    """Attention over time (conditioned on the utterance's global mean and std), then the
    attention-weighted mean and std of every channel."""

    eps = 1e-12

    def __init__(self, channels: int, attention_channels: int):
        super().__init__()
        self.tdnn = TDNN(3 * channels, attention_channels, 1, 1)
        self.conv = _conv(attention_channels, channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, C, T = x.shape
        uniform = torch.full((B, 1, T), 1.0 / T, dtype=x.dtype, device=x.device)
        stats = _weighted_stats(x, uniform, self.eps)  # (B, 2C)
        context = torch.cat([x, stats.unsqueeze(2).expand(B, 2 * C, T)], dim=1)  # (B, 3C, T)
        attn = torch.softmax(self.conv(torch.tanh(self.tdnn(context))), dim=2)  # (B, C, T)
        return _weighted_stats(x, attn, self.eps).unsqueeze(2)  # (B, 2C, 1)


class SpeakerEncoder(nn.Module):
    """ECAPA-TDNN: (B, frames, mel_dim) log-mels -> (B, enc_dim) x-vectors."""

    def __init__(self, cfg: SpeakerEncoderConfig):
        super().__init__()
        n = len(cfg.enc_channels)
        if not (n == len(cfg.kernel_sizes) == len(cfg.dilations)) or n < 3:
            raise ValueError(
                "speaker encoder: enc_channels, kernel_sizes and dilations must have the same "
                f"length (>= 3), got {cfg.enc_channels}, {cfg.kernel_sizes}, {cfg.dilations}"
            )
        self.cfg = cfg
        ch, ks, dil = cfg.enc_channels, cfg.kernel_sizes, cfg.dilations
        self.blocks = nn.ModuleList([TDNN(cfg.mel_dim, ch[0], ks[0], dil[0])])
        for i in range(1, n - 1):
            self.blocks.append(
                SERes2NetBlock(ch[i - 1], ch[i], cfg.res2net_scale, cfg.se_channels, ks[i], dil[i])
            )
        assert sum(ch[1:-1]) == ch[-1], "MFA concatenates the SE-Res2Net outputs"
        self.mfa = TDNN(ch[-1], ch[-1], ks[-1], dil[-1])
        self.asp = AttentiveStatsPool(ch[-1], cfg.attention_channels)
        self.fc = _conv(2 * ch[-1], cfg.enc_dim)

    def forward(self, mels: torch.Tensor) -> torch.Tensor:
        """(B, frames, mel_dim) -> (B, enc_dim)."""
        x = mels.transpose(1, 2)  # (B, mel_dim, frames)
        outs = []
        for block in self.blocks:
            x = block(x)
            outs.append(x)
        x = self.mfa(torch.cat(outs[1:], dim=1))  # (B, ch[-1], frames)
        x = self.asp(x)  # (B, 2 * ch[-1], 1)
        return self.fc(x).squeeze(2)

    def min_frames(self) -> int:
        """Fewest mel frames the network accepts: reflect padding must be shorter than the input."""
        sizes = zip(self.cfg.kernel_sizes, self.cfg.dilations, strict=True)
        widest = max(d * (k - 1) - d * (k - 1) // 2 for k, d in sizes)  # right side of "same"
        return widest + 1

    @torch.inference_mode()
    def embed(self, wav_24k: torch.Tensor) -> torch.Tensor:
        """A mono 24 kHz waveform (N,) -> its x-vector (enc_dim,), in the module's dtype and device.

        The log-mel features are computed in float32 and then cast, as upstream does; they are
        computed on the module's device (upstream: on the CPU; the difference is float rounding).
        """
        if wav_24k.dim() != 1:
            raise AudioError(f"expected a mono waveform (N,), got shape {tuple(wav_24k.shape)}")
        param = next(self.parameters())
        need = samples_for_frames(self.min_frames())
        if wav_24k.shape[0] < need:
            raise AudioError(
                f"reference audio too short: {wav_24k.shape[0]} samples at {SAMPLE_RATE} Hz; "
                f"need at least {need} ({need / SAMPLE_RATE * 1000:.0f} ms)"
            )
        mels = log_mel_spectrogram(wav_24k.to(param.device))  # (1, frames, mel_dim)
        return self(mels.to(param.dtype))[0]
