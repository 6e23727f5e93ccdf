"""Architecture of the 12 Hz speech tokenizer ("codec"), read from `speech_tokenizer/config.json`.

Three frozen dataclasses: `CodecDecoderConfig` (codes -> waveform), `CodecEncoderConfig` (the Mimi
encoder, waveform -> codes) and `CodecConfig` (both plus rates). A key absent from the json takes the
default the reference would use: the decoder config class of qwen-tts 0.1.1 for the decoder,
transformers' `MimiConfig` for the encoder. Knows nothing about files, weights or devices.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

MODEL_TYPE = "qwen3_tts_tokenizer_12hz"


@dataclass(frozen=True)
class CodecDecoderConfig:
    """The decoder: RVQ lookup -> causal conv -> sliding-window transformer -> conv upsampler."""

    codebook_size: int = 2048  # entries per codebook (every quantizer, semantic included)
    codebook_dim: int = 512  # RVQ output width; each codebook vector has codebook_dim // 2 values
    num_quantizers: int = 16  # codebooks per frame: 1 semantic + 15 acoustic
    latent_dim: int = 1024  # width of pre_conv output, transformer in/out and upsampler
    hidden_size: int = 1024  # transformer width
    intermediate_size: int = 3072  # transformer SwiGLU width
    num_layers: int = 8
    num_heads: int = 16
    num_kv_heads: int = 16
    head_dim: int = 64  # upstream: `head_dim`, else hidden_size // num_heads
    rms_norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    sliding_window: int = 72  # a frame attends to itself and the 71 frames before it
    attention_bias: bool = False
    # transposed conv + ConvNeXt stages after the transformer
    upsampling_ratios: tuple[int, ...] = (2, 2)
    upsample_rates: tuple[int, ...] = (8, 5, 4, 3)  # SnakeBeta decoder blocks
    decoder_dim: int = 1536  # channels entering the first decoder block; halved by each block

    @property
    def codebook_vector_dim(self) -> int:
        return self.codebook_dim // 2

    @property
    def total_upsample(self) -> int:
        """Waveform samples per frame produced by the network."""
        return math.prod(self.upsampling_ratios) * math.prod(self.upsample_rates)

    @classmethod
    def from_hf(cls, d: dict[str, Any]) -> CodecDecoderConfig:
        hidden = d.get("hidden_size", 1024)
        heads = d.get("num_attention_heads", 16)
        cfg = cls(
            codebook_size=d.get("codebook_size", 2048),
            codebook_dim=d.get("codebook_dim", 512),
            num_quantizers=d.get("num_quantizers", 16),
            latent_dim=d.get("latent_dim", 1024),
            hidden_size=hidden,
            intermediate_size=d.get("intermediate_size", 3072),
            num_layers=d.get("num_hidden_layers", 8),
            num_heads=heads,
            num_kv_heads=d.get("num_key_value_heads", 16),
            head_dim=d.get("head_dim") or hidden // heads,
            rms_norm_eps=float(d.get("rms_norm_eps", 1e-5)),
            rope_theta=float(d.get("rope_theta", 10000.0)),
            sliding_window=d.get("sliding_window", 72),
            attention_bias=bool(d.get("attention_bias", False)),
            upsampling_ratios=tuple(d.get("upsampling_ratios", (2, 2))),
            upsample_rates=tuple(d.get("upsample_rates", (8, 5, 4, 3))),
            decoder_dim=d.get("decoder_dim", 1536),
        )
        _require(
            d.get("hidden_act", "silu") == "silu",
            "decoder_config.hidden_act",
            d.get("hidden_act"),
            "'silu'",
        )
        _require(
            cfg.num_quantizers >= 2,
            "decoder_config.num_quantizers",
            cfg.num_quantizers,
            "at least 2 (1 semantic + acoustic)",
        )
        _require(
            cfg.num_heads % cfg.num_kv_heads == 0,
            "decoder_config.num_key_value_heads",
            cfg.num_kv_heads,
            f"a divisor of num_attention_heads={cfg.num_heads}",
        )
        _require(
            cfg.decoder_dim % 2 ** len(cfg.upsample_rates) == 0,
            "decoder_config.decoder_dim",
            cfg.decoder_dim,
            f"a multiple of 2**{len(cfg.upsample_rates)}",
        )
        return cfg


@dataclass(frozen=True)
class CodecEncoderConfig:
    """The Mimi encoder: SEANet convs -> causal transformer -> stride-2 conv -> split RVQ."""

    sampling_rate: int = 24000
    num_filters: int = 64  # channels of the first conv; doubled by each downsampling conv
    upsampling_ratios: tuple[int, ...] = (8, 6, 5, 4)  # applied in reverse order as conv strides
    kernel_size: int = 7
    last_kernel_size: int = 3
    residual_kernel_size: int = 3
    num_residual_layers: int = 1
    dilation_growth_rate: int = 2
    compress: int = 2  # residual blocks narrow their channels by this factor
    pad_mode: str = "constant"  # left padding of the SEANet convs ("constant" = zeros)
    hidden_size: int = 512  # transformer width and latent width
    intermediate_size: int = 2048
    num_layers: int = 8
    num_heads: int = 8
    num_kv_heads: int = 8
    head_dim: int = 64
    norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    # Declared 250 upstream, but transformers' single-pass Mimi encode attends causally over the
    # whole input (the mask it builds ignores it); the encoder mirrors that.
    sliding_window: int = 250
    frame_rate: float = 12.5
    codebook_size: int = 2048
    codebook_dim: int = 256
    vector_quantization_hidden_dimension: int = 256  # RVQ input_proj width (= codebook_dim)
    num_quantizers: int = 32  # in the checkpoint; only the first `valid` ones are ever used
    num_semantic_quantizers: int = 1

    @property
    def hop_length(self) -> int:
        """Input samples per latent step before the final stride-2 downsample (960 at 24 kHz)."""
        return math.prod(self.upsampling_ratios)

    @property
    def downsample_kernel(self) -> int:
        encodec_frame_rate = math.ceil(self.sampling_rate / self.hop_length)
        return 2 * int(encodec_frame_rate / self.frame_rate)

    @classmethod
    def from_hf(cls, d: dict[str, Any]) -> CodecEncoderConfig:
        hidden = d.get("hidden_size", 512)
        heads = d.get("num_attention_heads", 8)
        ratios = tuple(d.get("upsampling_ratios") or (8, 6, 5, 4))
        sampling_rate = d.get("sampling_rate", 24000)
        # MimiConfig: `frame_rate`/`_frame_rate` when given, else sampling_rate / (hop * 2)
        frame_rate = (
            d.get("_frame_rate") or d.get("frame_rate") or sampling_rate / (math.prod(ratios) * 2)
        )
        cfg = cls(
            sampling_rate=sampling_rate,
            num_filters=d.get("num_filters", 64),
            upsampling_ratios=ratios,
            kernel_size=d.get("kernel_size", 7),
            last_kernel_size=d.get("last_kernel_size", 3),
            residual_kernel_size=d.get("residual_kernel_size", 3),
            num_residual_layers=d.get("num_residual_layers", 1),
            dilation_growth_rate=d.get("dilation_growth_rate", 2),
            compress=d.get("compress", 2),
            pad_mode=d.get("pad_mode", "constant"),
            hidden_size=hidden,
            intermediate_size=d.get("intermediate_size", 2048),
            num_layers=d.get("num_hidden_layers", 8),
            num_heads=heads,
            num_kv_heads=d.get("num_key_value_heads", 8),
            head_dim=d.get("head_dim") or hidden // heads,
            norm_eps=float(d.get("norm_eps", 1e-5)),
            rope_theta=float(d.get("rope_theta", 10000.0)),
            sliding_window=d.get("sliding_window", 250),
            frame_rate=float(frame_rate),
            codebook_size=d.get("codebook_size", 2048),
            codebook_dim=d.get("codebook_dim", 256) or hidden,
            vector_quantization_hidden_dimension=d.get("vector_quantization_hidden_dimension", 256),
            num_quantizers=d.get("num_quantizers", 32),
            num_semantic_quantizers=d.get("num_semantic_quantizers", 1),
        )
        # Variants MimiConfig allows but no Qwen3-TTS checkpoint uses; refuse rather than guess.
        for key, default in (
            ("audio_channels", 1),
            ("use_causal_conv", True),
            ("use_conv_shortcut", False),
            ("hidden_act", "gelu"),
            ("attention_bias", False),
            ("trim_right_ratio", 1.0),
        ):
            _require(
                d.get(key, default) == default, f"encoder_config.{key}", d.get(key), repr(default)
            )
        _require(
            cfg.pad_mode in ("constant", "replicate", "reflect"),
            "encoder_config.pad_mode",
            cfg.pad_mode,
            "'constant', 'replicate' or 'reflect'",
        )
        _require(
            cfg.codebook_dim == cfg.vector_quantization_hidden_dimension,
            "encoder_config.codebook_dim",
            cfg.codebook_dim,
            f"vector_quantization_hidden_dimension={cfg.vector_quantization_hidden_dimension}",
        )
        _require(
            cfg.num_heads % cfg.num_kv_heads == 0,
            "encoder_config.num_key_value_heads",
            cfg.num_kv_heads,
            f"a divisor of num_attention_heads={cfg.num_heads}",
        )
        return cfg


@dataclass(frozen=True)
class CodecConfig:
    """Everything in `speech_tokenizer/config.json`."""

    decoder: CodecDecoderConfig
    encoder: CodecEncoderConfig
    input_sample_rate: int = 24000  # the encoder's input rate
    output_sample_rate: int = 24000  # the decoder's output rate
    encode_downsample_rate: int = 1920  # input samples per frame
    decode_upsample_rate: int = 1920  # output samples per frame
    encoder_valid_num_quantizers: int = 16  # codes per frame kept from the encoder's 32

    @property
    def samples_per_frame(self) -> int:
        return self.decode_upsample_rate

    @property
    def num_codebooks(self) -> int:
        return self.encoder_valid_num_quantizers

    @classmethod
    def from_hf(cls, d: dict[str, Any]) -> CodecConfig:
        """Read a `speech_tokenizer/config.json` dict; raise ValueError for what we cannot run."""
        model_type = d.get("model_type", MODEL_TYPE)
        _require(model_type == MODEL_TYPE, "model_type", model_type, repr(MODEL_TYPE))
        cfg = cls(
            decoder=CodecDecoderConfig.from_hf(d.get("decoder_config") or {}),
            encoder=CodecEncoderConfig.from_hf(d.get("encoder_config") or {}),
            input_sample_rate=d.get("input_sample_rate", 24000),
            output_sample_rate=d.get("output_sample_rate", 24000),
            encode_downsample_rate=d.get("encode_downsample_rate", 1920),
            decode_upsample_rate=d.get("decode_upsample_rate", 1920),
            encoder_valid_num_quantizers=d.get("encoder_valid_num_quantizers", 16),
        )
        _require(
            cfg.decoder.total_upsample == cfg.decode_upsample_rate,
            "decode_upsample_rate",
            cfg.decode_upsample_rate,
            f"the decoder's upsampling product {cfg.decoder.total_upsample}",
        )
        enc_rate = cfg.encoder.hop_length * 2
        _require(
            enc_rate == cfg.encode_downsample_rate,
            "encode_downsample_rate",
            cfg.encode_downsample_rate,
            f"the encoder's stride product {enc_rate}",
        )
        _require(
            cfg.encoder_valid_num_quantizers == cfg.decoder.num_quantizers,
            "encoder_valid_num_quantizers",
            cfg.encoder_valid_num_quantizers,
            f"decoder_config.num_quantizers={cfg.decoder.num_quantizers}",
        )
        _require(
            cfg.encoder_valid_num_quantizers <= cfg.encoder.num_quantizers,
            "encoder_valid_num_quantizers",
            cfg.encoder_valid_num_quantizers,
            f"at most encoder_config.num_quantizers={cfg.encoder.num_quantizers}",
        )
        return cfg


def _require(ok: bool, field: str, value: Any, accepted: str) -> None:
    if not ok:
        raise ValueError(
            f"speech tokenizer config: {field}={value!r} is not supported; expected {accepted}"
        )
