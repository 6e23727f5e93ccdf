"""Random Qwen3-TTS checkpoints in the exact on-disk layout of the Hugging Face repos.

Real weights cannot be downloaded here, so tests and benchmarks load random ones through the same
code as real ones. `--tiny` gives small shapes with every real id (tests); without it the shapes
are the real ones (benchmarks). Weights are scaled so the tiny ones carry signal (architecture.md
9.1): the text path changes the codes and the waveform has a realistic level.

Layout written (as in e.g. Qwen/Qwen3-TTS-12Hz-1.7B-Base):
    config.json  generation_config.json  preprocessor_config.json  model.safetensors (bf16)
    vocab.json  merges.txt  tokenizer_config.json
    speech_tokenizer/{config.json, model.safetensors (fp32), preprocessor_config.json,
                      configuration.json}
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import save_file

from ownvoice.dev.text_vocab import write_text_tokenizer
from ownvoice.model.config import ModelConfig
from ownvoice.model.tts_model import Qwen3TTSModel

LIKES = ("0.6B-CustomVoice", "0.6B-Base", "1.7B-CustomVoice", "1.7B-Base", "1.7B-VoiceDesign")

LANGUAGE_IDS = {
    "chinese": 2055, "english": 2050, "german": 2053, "spanish": 2054, "japanese": 2058,
    "french": 2061, "korean": 2064, "russian": 2069, "italian": 2070, "portuguese": 2071,
}  # fmt: skip
DIALECT_IDS = {"sichuan_dialect": 2062, "beijing_dialect": 2074}
SPEAKER_IDS = {
    "aiden": 2861, "sohee": 2864, "ono_anna": 2873, "eric": 2875, "dylan": 2878,
    "uncle_fu": 3010, "ryan": 3061, "vivian": 3065, "serena": 3066,
}  # fmt: skip
SPEAKER_DIALECTS = {"eric": "sichuan_dialect", "dylan": "beijing_dialect"}

GENERATION_CONFIG = {
    "do_sample": True,
    "repetition_penalty": 1.05,
    "temperature": 0.9,
    "top_p": 1.0,
    "top_k": 50,
    "subtalker_dosample": True,
    "subtalker_temperature": 0.9,
    "subtalker_top_k": 50,
    "subtalker_top_p": 1.0,
    "max_new_tokens": 8192,
}
PREPROCESSOR_CONFIG = {
    "padding_side": "left",
    "padding_value": 0.0,
    "processor_class": "Qwen3TTSProcessor",
    "return_attention_mask": True,
}
CODEC_PREPROCESSOR_CONFIG = {
    "chunk_length_s": None,
    "feature_extractor_type": "EncodecFeatureExtractor",
    "feature_size": 1,
    "overlap": None,
    "padding_side": "right",
    "padding_value": 0.0,
    "return_attention_mask": True,
    "sampling_rate": 24000,
}


@dataclass(frozen=True)
class Shape:
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    text_hidden: int
    cp_hidden: int
    cp_intermediate: int
    cp_layers: int
    mrope_section: tuple[int, int, int]
    spk_channels: tuple[int, ...]


FULL = {
    "0.6B": Shape(1024, 3072, 28, 16, 8, 128, 2048, 1024, 3072, 5, (24, 20, 20), (512, 512, 512, 512, 1536)),
    "1.7B": Shape(2048, 6144, 28, 16, 8, 128, 2048, 1024, 3072, 5, (24, 20, 20), (512, 512, 512, 512, 1536)),
}  # fmt: skip
TINY = {
    # 0.6B-style: code predictor as wide as the talker (no projection)
    "0.6B": Shape(64, 128, 2, 4, 2, 16, 32, 64, 96, 2, (4, 2, 2), (32, 32, 32, 32, 96)),
    # 1.7B-style: a narrower code predictor behind small_to_mtp_projection
    "1.7B": Shape(64, 128, 2, 4, 2, 16, 32, 32, 64, 2, (4, 2, 2), (32, 32, 32, 32, 96)),
}  # fmt: skip


def model_config_json(like: str, tiny: bool, transformers_version: str = "4.57.1") -> dict:
    """config.json of a checkpoint shaped like `like` (e.g. "1.7B-Base").

    `transformers_version` only matters to the reference package: from 4.57.3 on, transformers
    replaces the tokenizer's regex when loading a local folder (see ownvoice.engine.tokenizer);
    tests that compare tokenization with the reference keep it at or below 4.57.2.
    """
    if like not in LIKES:
        raise ValueError(f"--like must be one of {LIKES}, got {like!r}")
    size, kind = like.split("-")
    s = (TINY if tiny else FULL)[size]
    model_type = {"CustomVoice": "custom_voice", "Base": "base", "VoiceDesign": "voice_design"}[
        kind
    ]
    languages = dict(LANGUAGE_IDS)
    speakers, dialects = {}, {}
    if model_type == "custom_voice":
        languages.update(DIALECT_IDS)
        speakers = dict(SPEAKER_IDS)
        dialects = {name: SPEAKER_DIALECTS.get(name, False) for name in SPEAKER_IDS}
    cfg = {
        "architectures": ["Qwen3TTSForConditionalGeneration"],
        "model_type": "qwen3_tts",
        "tokenizer_type": "qwen3_tts_tokenizer_12hz",
        "tts_model_size": "0b6" if size == "0.6B" else "1b7",
        "tts_model_type": model_type,
        "assistant_token_id": 77091,
        "im_start_token_id": 151644,
        "im_end_token_id": 151645,
        "tts_pad_token_id": 151671,
        "tts_bos_token_id": 151672,
        "tts_eos_token_id": 151673,
        "talker_config": {
            "hidden_size": s.hidden,
            "intermediate_size": s.intermediate,
            "num_hidden_layers": s.layers,
            "num_attention_heads": s.heads,
            "num_key_value_heads": s.kv_heads,
            "head_dim": s.head_dim,
            "hidden_act": "silu",
            "max_position_embeddings": 32768,
            "rms_norm_eps": 1e-06,
            "rope_theta": 1000000,
            "rope_scaling": {
                "interleaved": True,
                "mrope_section": list(s.mrope_section),
                "rope_type": "default",
                "type": "default",
            },
            "attention_bias": False,
            "position_id_per_seconds": 13,
            "vocab_size": 3072,
            "text_vocab_size": 151936,
            "text_hidden_size": s.text_hidden,
            "num_code_groups": 16,
            "codec_bos_id": 2149,
            "codec_eos_token_id": 2150,
            "codec_pad_id": 2148,
            "codec_think_id": 2154,
            "codec_nothink_id": 2155,
            "codec_think_bos_id": 2156,
            "codec_think_eos_id": 2157,
            "codec_language_id": languages,
            "spk_id": speakers,
            "spk_is_dialect": dialects,
            "code_predictor_config": {
                "hidden_size": s.cp_hidden,
                "intermediate_size": s.cp_intermediate,
                "num_hidden_layers": s.cp_layers,
                "num_attention_heads": s.heads,
                "num_key_value_heads": s.kv_heads,
                "head_dim": s.head_dim,
                "hidden_act": "silu",
                "max_position_embeddings": 65536,
                "rms_norm_eps": 1e-06,
                "rope_theta": 1000000,
                "rope_scaling": None,
                "attention_bias": False,
                "use_sliding_window": False,
                "sliding_window": None,
                "layer_types": ["full_attention"] * s.cp_layers,
                "vocab_size": 2048,
                "num_code_groups": 16,
            },
        },
        "transformers_version": transformers_version,
    }
    if model_type == "base":
        spk = {"enc_dim": s.hidden, "sample_rate": 24000}
        if tiny:
            spk["enc_channels"] = list(s.spk_channels)
        cfg["speaker_encoder_config"] = spk
    return cfg


def random_model_weights(
    cfg: ModelConfig, seed: int, tiny: bool, no_eos: bool
) -> dict[str, torch.Tensor]:
    """bf16 state dict of talker (+ speaker encoder) with the real key names.

    Made tensor by tensor in bf16, so a full-size 1.7B needs ~4 GB, not 8.
    """
    gen = torch.Generator().manual_seed(seed)
    with torch.device("meta"):
        model = Qwen3TTSModel(cfg, with_speaker_encoder=False)
    state = {}
    for name, p in model.talker.named_parameters():
        state[f"talker.{name}"] = _init(name, tuple(p.shape), gen).to(torch.bfloat16)
    # The text track must matter next to the codec track (architecture.md 9.1): scaling by a
    # power of two keeps the weights exact in bf16.
    if tiny:
        state["talker.model.text_embedding.weight"] *= 64
    if no_eos:
        # EOS logit pinned at 0: random hidden states put the top-50 codes far above it, so
        # neither greedy nor default top-k sampling ever ends early.
        state["talker.codec_head.weight"][cfg.talker.codec_eos_id] = 0
    if cfg.speaker_encoder is not None:
        from ownvoice.dev.random_speaker_encoder import random_speaker_encoder_weights

        spk = random_speaker_encoder_weights(cfg.speaker_encoder, seed + 1)
        state.update({k: v.to(torch.bfloat16) for k, v in spk.items()})
    return state


def _init(name: str, shape: tuple[int, ...], gen: torch.Generator) -> torch.Tensor:
    if name.endswith("norm.weight") or "layernorm" in name:
        # around 1, not 1: a bug that drops a norm weight must change the output
        return 1.0 + 0.2 * (torch.rand(shape, generator=gen) - 0.5)
    return torch.randn(shape, generator=gen) * 0.02


def write_random_checkpoint(
    out: str | Path,
    like: str,
    tiny: bool = False,
    seed: int = 0,
    no_eos: bool = False,
    transformers_version: str = "4.57.1",
) -> Path:
    """Write a random checkpoint shaped like `like` into `out`; returns the folder."""
    from ownvoice.dev.random_codec import codec_config_json, random_codec_weights

    out = Path(out)
    (out / "speech_tokenizer").mkdir(parents=True, exist_ok=True)
    cfg_json = model_config_json(like, tiny, transformers_version)
    cfg = ModelConfig.from_hf(cfg_json)
    weights = random_model_weights(cfg, seed, tiny, no_eos)
    save_file(
        {k: v.contiguous() for k, v in weights.items()},
        out / "model.safetensors",
        metadata={"format": "pt"},
    )
    del weights
    _write_json(out / "config.json", cfg_json)
    _write_json(out / "generation_config.json", GENERATION_CONFIG)
    _write_json(out / "preprocessor_config.json", PREPROCESSOR_CONFIG)
    write_text_tokenizer(out)

    codec_cfg = codec_config_json(tiny)
    codec = random_codec_weights(codec_cfg, seed + 2)
    save_file(
        {k: v.float().contiguous() for k, v in codec.items()},
        out / "speech_tokenizer" / "model.safetensors",
        metadata={"format": "pt"},
    )
    _write_json(out / "speech_tokenizer" / "config.json", codec_cfg)
    _write_json(out / "speech_tokenizer" / "preprocessor_config.json", CODEC_PREPROCESSOR_CONFIG)
    _write_json(
        out / "speech_tokenizer" / "configuration.json",
        {"framework": "pytorch", "task": "text-to-speech", "allow_remote": True},
    )
    return out


def _write_json(path: Path, obj: dict) -> None:
    path.write_text(json.dumps(obj, indent=2, ensure_ascii=False), encoding="utf-8")
