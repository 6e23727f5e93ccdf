"""CodecConfig.from_hf and the random checkpoint generator's layout."""

from __future__ import annotations

import math

import pytest
import torch

from ownvoice.dev.random_codec import codec_config_json, random_codec_weights
from ownvoice.model.codec.checkpoint import checkpoint_layout
from ownvoice.model.codec.config import CodecConfig, CodecDecoderConfig, CodecEncoderConfig
from tests.reference import import_reference


def test_full_size_values():
    cfg = CodecConfig.from_hf(codec_config_json(tiny=False))
    d, e = cfg.decoder, cfg.encoder
    got = (cfg.samples_per_frame, cfg.num_codebooks, cfg.output_sample_rate, d.total_upsample)
    assert got == (1920, 16, 24000, 1920)
    got = (d.codebook_size, d.codebook_vector_dim, d.latent_dim, d.decoder_dim, d.rms_norm_eps)
    assert got == (2048, 256, 1024, 1536, 1e-5)
    got = (d.hidden_size, d.num_layers, d.num_heads, d.head_dim, d.sliding_window)
    assert got == (512, 8, 16, 64, 72)
    got = (e.num_filters, e.hidden_size, e.num_layers, e.num_quantizers, e.downsample_kernel)
    assert got == (64, 512, 8, 32, 4)


def test_full_size_layout_matches_the_published_size():
    """architecture.md section 3: 170,557,441 tensor elements (= file size - header)."""
    layout = checkpoint_layout(CodecConfig.from_hf(codec_config_json(tiny=False)))
    assert sum(math.prod(s) for s in layout.values()) == 170_557_441


@pytest.mark.reference
@pytest.mark.parametrize("tiny", [True, False])
def test_layout_matches_reference_state_dict(tiny):
    import_reference()
    from qwen_tts.core.tokenizer_12hz.configuration_qwen3_tts_tokenizer_v2 import (
        Qwen3TTSTokenizerV2Config,
    )
    from qwen_tts.core.tokenizer_12hz.modeling_qwen3_tts_tokenizer_v2 import (
        Qwen3TTSTokenizerV2Model,
    )

    cj = codec_config_json(tiny=tiny)
    with torch.device("meta"):
        ref = Qwen3TTSTokenizerV2Model(Qwen3TTSTokenizerV2Config.from_dict(dict(cj)))
    expected = {k: tuple(v.shape) for k, v in ref.state_dict().items()}
    assert checkpoint_layout(CodecConfig.from_hf(cj)) == expected


@pytest.mark.reference
def test_absent_keys_take_reference_defaults():
    import_reference()
    from qwen_tts.core.tokenizer_12hz.configuration_qwen3_tts_tokenizer_v2 import (
        Qwen3TTSTokenizerV2DecoderConfig,
    )
    from transformers import MimiConfig

    m, e = MimiConfig(), CodecEncoderConfig.from_hf({})
    pairs = {
        "hidden_size": (e.hidden_size, m.hidden_size),
        "num_filters": (e.num_filters, m.num_filters),
        "upsampling_ratios": (e.upsampling_ratios, tuple(m.upsampling_ratios)),
        "num_hidden_layers": (e.num_layers, m.num_hidden_layers),
        "head_dim": (e.head_dim, m.head_dim),
        "intermediate_size": (e.intermediate_size, m.intermediate_size),
        "codebook_dim": (e.codebook_dim, m.codebook_dim),
        "num_quantizers": (e.num_quantizers, m.num_quantizers),
        "sliding_window": (e.sliding_window, m.sliding_window),
        "norm_eps": (e.norm_eps, m.norm_eps),
        "frame_rate": (e.frame_rate, m.frame_rate),
        "pad_mode": (e.pad_mode, m.pad_mode),
    }
    r, d = Qwen3TTSTokenizerV2DecoderConfig(), CodecDecoderConfig.from_hf({})
    pairs |= {
        "dec.hidden_size": (d.hidden_size, r.hidden_size),
        "dec.intermediate_size": (d.intermediate_size, r.intermediate_size),
        "dec.num_hidden_layers": (d.num_layers, r.num_hidden_layers),
        "dec.num_key_value_heads": (d.num_kv_heads, r.num_key_value_heads),
        "dec.sliding_window": (d.sliding_window, r.sliding_window),
        "dec.upsample_rates": (d.upsample_rates, tuple(r.upsample_rates)),
        "dec.upsampling_ratios": (d.upsampling_ratios, tuple(r.upsampling_ratios)),
        "dec.decoder_dim": (d.decoder_dim, r.decoder_dim),
        "dec.rms_norm_eps": (d.rms_norm_eps, r.rms_norm_eps),
        "dec.latent_dim": (d.latent_dim, r.latent_dim),
    }
    wrong = {k: v for k, v in pairs.items() if v[0] != v[1]}
    assert not wrong, f"(ours, reference) differ: {wrong}"


@pytest.mark.parametrize(
    ("patch", "field"),
    [
        ({"model_type": "qwen3_tts_tokenizer_25hz"}, "model_type"),
        ({"decode_upsample_rate": 960}, "decode_upsample_rate"),
        ({"encoder_valid_num_quantizers": 8}, "encoder_valid_num_quantizers"),
        ({"encoder_config": {"use_causal_conv": False}}, "encoder_config.use_causal_conv"),
        ({"decoder_config": {"hidden_act": "gelu"}}, "decoder_config.hidden_act"),
    ],
)
def test_unsupported_values_are_named(patch, field):
    cj = codec_config_json(tiny=True)
    for key, value in patch.items():
        if isinstance(value, dict):
            cj[key] = {**cj[key], **value}
        else:
            cj[key] = value
    with pytest.raises(ValueError, match=field.replace(".", r"\.")):
        CodecConfig.from_hf(cj)


def test_random_weights_are_seeded_and_finite(tiny_checkpoint):
    cj, weights = tiny_checkpoint
    again = random_codec_weights(cj, 0)
    assert weights.keys() == again.keys()
    assert all(torch.equal(weights[k], again[k]) for k in weights)
    assert not torch.equal(
        weights["decoder.pre_conv.conv.weight"],
        random_codec_weights(cj, 1)["decoder.pre_conv.conv.weight"],
    )
    assert all(v.dtype == torch.float32 and torch.isfinite(v).all() for v in weights.values())
