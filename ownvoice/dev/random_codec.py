"""Random speech-tokenizer checkpoints for tests and benchmarks (never for listening).

`codec_config_json(tiny)` is the content of `speech_tokenizer/config.json`: the real Qwen3-TTS 12 Hz
values, or a tiny variant (narrow layers, one transformer layer) with the same rates, 1920 samples
per frame and 2048 codes per codebook, so every code 0..2047 decodes.
`random_codec_weights(config_json, seed)` returns float32 tensors with exactly the names and shapes
of the real `model.safetensors`. The usual random init makes the decoder shrink its input ~1e8-fold
(architecture.md 9.1), which lets any absolute tolerance pass silence or a broken layer, so here:
  * conv / linear weights have std 1/sqrt(fan_in); 1x1 convs closing a residual branch x0.25;
    biases small and random; norm weights, layer scales and ConvNeXt gammas near 1;
    SnakeBeta log-parameters near 0;
  * ~1% of codebook entries have a usage below the 1e-5 clamp, so the clamp is exercised;
  * the decoder transformer's input projection is x0.01, so its first RMSNorm sees a mean square
    near its eps (a wrong eps then changes the output);
  * the last decoder conv is scaled and biased from a calibration decode so the waveform has
    std ~0.1 and mean ~0 (no clipping);
  * the encoder codebooks are drawn, quantizer by quantizer, from the mean and spread of the
    residuals the encoder produces on a calibration signal, so varied audio gives varied codes.
Knows nothing about files: the checkpoint builder writes what these return.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from ownvoice.model.codec.checkpoint import checkpoint_layout
from ownvoice.model.codec.config import CodecConfig
from ownvoice.model.codec.loading import build_codec

WAVEFORM_STD = 0.1


def codec_config_json(tiny: bool = False) -> dict[str, Any]:
    """The `speech_tokenizer/config.json` content: real values, or the tiny test variant."""
    decoder = {
        "attention_bias": False,
        "attention_dropout": 0.0,
        "latent_dim": 1024,
        "codebook_dim": 512,
        "codebook_size": 2048,
        "decoder_dim": 1536,
        "hidden_act": "silu",
        "hidden_size": 512,
        "intermediate_size": 1024,
        "layer_scale_initial_scale": 0.01,
        "max_position_embeddings": 8000,
        "head_dim": 64,
        "num_attention_heads": 16,
        "num_hidden_layers": 8,
        "num_key_value_heads": 16,
        "num_quantizers": 16,
        "num_semantic_quantizers": 1,
        "rms_norm_eps": 1e-05,
        "rope_theta": 10000,
        "semantic_codebook_size": 4096,
        "sliding_window": 72,
        "upsample_rates": [8, 5, 4, 3],
        "upsampling_ratios": [2, 2],
        "vector_quantization_hidden_dimension": 512,
    }
    encoder = {
        "_frame_rate": 12.5,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "audio_channels": 1,
        "codebook_dim": 256,
        "codebook_size": 2048,
        "compress": 2,
        "dilation_growth_rate": 2,
        "head_dim": 64,
        "hidden_act": "gelu",
        "hidden_size": 512,
        "initializer_range": 0.02,
        "intermediate_size": 2048,
        "kernel_size": 7,
        "last_kernel_size": 3,
        "layer_scale_initial_scale": 0.01,
        "max_position_embeddings": 8000,
        "model_type": "mimi",
        "norm_eps": 1e-05,
        "num_attention_heads": 8,
        "num_filters": 64,
        "num_hidden_layers": 8,
        "num_key_value_heads": 8,
        "num_quantizers": 32,
        "num_residual_layers": 1,
        "num_semantic_quantizers": 1,
        "pad_mode": "constant",
        "residual_kernel_size": 3,
        "rope_theta": 10000.0,
        "sampling_rate": 24000,
        "sliding_window": 250,
        "trim_right_ratio": 1.0,
        "upsample_groups": 512,
        "upsampling_ratios": [8, 6, 5, 4],
        "use_cache": False,
        "use_causal_conv": True,
        "use_conv_shortcut": False,
        "use_streaming": False,
        "vector_quantization_hidden_dimension": 256,
    }
    if tiny:
        decoder.update(
            latent_dim=32,
            codebook_dim=16,
            decoder_dim=32,
            hidden_size=16,
            intermediate_size=32,
            head_dim=8,
            num_attention_heads=2,
            num_key_value_heads=2,
            num_hidden_layers=1,
            vector_quantization_hidden_dimension=16,
        )
        encoder.update(
            num_filters=4,
            hidden_size=16,
            intermediate_size=32,
            head_dim=8,
            num_attention_heads=2,
            num_key_value_heads=2,
            num_hidden_layers=1,
            codebook_dim=8,
            vector_quantization_hidden_dimension=8,
            upsample_groups=16,  # the reference builds an (unused) grouped conv with it
        )
    return {
        "architectures": ["Qwen3TTSTokenizerV2Model"],
        "model_type": "qwen3_tts_tokenizer_12hz",
        "encoder_valid_num_quantizers": 16,
        "input_sample_rate": 24000,
        "output_sample_rate": 24000,
        "encode_downsample_rate": 1920,
        "decode_upsample_rate": 1920,
        "encoder_config": encoder,
        "decoder_config": decoder,
        "transformers_version": "4.57.3",
    }


def random_codec_weights(config_json: dict[str, Any], seed: int = 0) -> dict[str, Tensor]:
    """float32 tensors named and shaped as the real `speech_tokenizer/model.safetensors`."""
    cfg = CodecConfig.from_hf(config_json)
    gen = torch.Generator().manual_seed(seed)
    tensors = {name: _init(name, shape, cfg, gen) for name, shape in checkpoint_layout(cfg).items()}
    for name in list(tensors):  # codebooks ~ N(0, 1) once divided by their usage
        if name.endswith(("embedding_sum", "embed_sum")):
            usage = tensors[name.rsplit(".", 1)[0] + ".cluster_usage"]
            tensors[name] = _randn(tensors[name].shape, gen) * usage[:, None]
    with torch.no_grad():
        _calibrate_waveform(tensors, cfg, gen)
        _calibrate_encoder_codebooks(tensors, cfg, gen)
    return tensors


def _randn(shape, gen: torch.Generator, std: float = 1.0) -> Tensor:
    return torch.randn(tuple(shape), generator=gen) * std


def _transposed_stride(name: str, cfg: CodecConfig) -> int | None:
    """Stride of the transposed conv a weight belongs to, or None for ordinary layers."""
    parts = name.split(".")
    if name.startswith("decoder.upsample.") and parts[3] == "0":
        return cfg.decoder.upsampling_ratios[int(parts[2])]
    if name.startswith("decoder.decoder.") and parts[3:5] == ["block", "1"]:
        return cfg.decoder.upsample_rates[int(parts[2]) - 1]
    return None


def _init(name: str, shape: tuple[int, ...], cfg: CodecConfig, gen: torch.Generator) -> Tensor:
    leaf = name.rsplit(".", 1)[-1]
    if leaf in ("alpha", "beta"):  # SnakeBeta, stored as logs
        return _randn(shape, gen, 0.1)
    if leaf == "cluster_usage":
        usage = 0.5 + 1.5 * torch.rand(shape, generator=gen)
        # ~1% rarely used entries below the clamp, so the clamp (1e-5) is exercised
        rare = torch.rand(shape, generator=gen) < 0.01
        return torch.where(rare, 1e-5 * torch.rand(shape, generator=gen), usage)
    if leaf in ("embedding_sum", "embed_sum"):
        return torch.empty(shape)  # filled once the usage is known
    if leaf == "initialized":
        return torch.ones(shape)
    if leaf in ("scale", "gamma") or (leaf == "weight" and len(shape) == 1):  # norms, layer scales
        return 1.0 + _randn(shape, gen, 0.1)
    if leaf == "bias":
        return _randn(shape, gen, 0.05)
    # conv / linear weight: std 1/sqrt(number of inputs summed into one output)
    stride = _transposed_stride(name, cfg)
    if stride is not None:  # ConvTranspose1d weight (in, out, k)
        fan_in = shape[0] * shape[2] / stride
    else:
        fan_in = math.prod(shape[1:])
    w = _randn(shape, gen, 1.0 / math.sqrt(fan_in))
    if name.endswith(("conv2.conv.weight", "block.3.conv.weight")):  # 1x1 closing a residual branch
        w *= 0.25
    if name == "decoder.pre_transformer.input_proj.weight":
        w *= 0.01
    return w


def _calibrate_waveform(tensors: dict[str, Tensor], cfg: CodecConfig, gen: torch.Generator) -> None:
    """Scale and bias the last decoder conv so a decode of random codes has std WAVEFORM_STD, mean 0."""
    decoder = build_codec(cfg, tensors, with_encoder=False).decoder
    last = decoder.decoder[-1]
    seen: list[Tensor] = []
    hook = last.register_forward_pre_hook(lambda _m, args: seen.append(args[0]))
    # the full-size decoder costs ~5 GFLOP per frame
    frames = 8 if cfg.decoder.decoder_dim <= 256 else 2
    codes = torch.randint(
        0, cfg.decoder.codebook_size, (1, cfg.decoder.num_quantizers, frames), generator=gen
    )
    decoder(codes)
    hook.remove()
    y = last(seen[0]) - last.conv.bias[None, :, None]  # output without bias, (1, 1, N)
    scale = WAVEFORM_STD / float(y.std())
    prefix = f"decoder.decoder.{len(decoder.decoder) - 1}.conv"
    tensors[f"{prefix}.weight"] = tensors[f"{prefix}.weight"] * scale
    tensors[f"{prefix}.bias"] = torch.full((1,), -scale * float(y.mean()))


def _calibration_audio(cfg: CodecConfig, gen: torch.Generator, seconds: float) -> Tensor:
    """(1, N): a few gliding tones under an envelope, plus noise."""
    sr = cfg.input_sample_rate
    t = torch.arange(int(seconds * sr)) / sr
    wav = 0.02 * torch.randn(t.shape, generator=gen)
    for _ in range(3):
        f0, f1 = (100 + 1900 * torch.rand(2, generator=gen)).tolist()
        phase = 2 * math.pi * (f0 * t + (f1 - f0) * t**2 / (2 * seconds))
        envelope = 0.5 + 0.5 * torch.sin(
            2 * math.pi * 3 * t + 6 * float(torch.rand(1, generator=gen))
        )
        wav += 0.2 * torch.sin(phase) * envelope
    return wav[None]


def _calibrate_encoder_codebooks(
    tensors: dict[str, Tensor], cfg: CodecConfig, gen: torch.Generator
) -> None:
    """Draw each quantizer's codebook from the statistics of the residual it will see."""
    e = cfg.encoder
    encoder = build_codec(cfg, tensors, with_encoder=True).encoder
    assert encoder is not None
    seconds = 1.0 if e.hidden_size >= 256 else 4.0  # the full-size encoder costs ~5 GFLOP/s
    latent = encoder.latents(_calibration_audio(cfg, gen, seconds))  # (1, hidden, F)
    groups = (
        ("semantic_residual_vector_quantizer", e.num_semantic_quantizers),
        ("acoustic_residual_vector_quantizer", e.num_quantizers - e.num_semantic_quantizers),
    )
    for group, n in groups:
        prefix = f"encoder.quantizer.{group}"
        residual = F.conv1d(latent, tensors[f"{prefix}.input_proj.weight"])[0].T  # (F, dim)
        for i in range(n):
            cb = f"{prefix}.layers.{i}.codebook"
            mean, std = residual.mean(0), residual.std(0) + 1e-3
            book = mean + std * _randn((e.codebook_size, e.codebook_dim), gen)
            tensors[f"{cb}.embed_sum"] = book * tensors[f"{cb}.cluster_usage"][:, None]
            residual = residual - book[torch.cdist(residual, book).argmin(dim=1)]
