"""Architecture configs read from a checkpoint's `config.json`.

Frozen dataclasses, one per sub-model. `from_hf(dict)` reads the upstream keys; a key that is
absent takes the default of the reference implementation (qwen-tts 0.1.1), so a checkpoint means
the same thing to both. Knows nothing about files, devices or generation.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

MODEL_TYPES = ("custom_voice", "voice_design", "base")


@dataclass(frozen=True)
class TransformerConfig:
    """A Qwen3 decoder stack (talker backbone or code predictor)."""

    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    max_position_embeddings: int = 32768


@dataclass(frozen=True)
class TalkerConfig:
    """The talker: predicts codebook 0 of each frame from text + codec tracks."""

    transformer: TransformerConfig
    vocab_size: int = 3072  # codec vocab: 2048 codes + control, language and speaker ids
    text_vocab_size: int = 151936
    text_hidden_size: int = 2048
    num_code_groups: int = 16
    codec_bos_id: int = 4197
    codec_eos_id: int = 4198
    codec_pad_id: int = 4196
    codec_think_id: int = 4202
    codec_nothink_id: int = 4203
    codec_think_bos_id: int = 4204
    codec_think_eos_id: int = 4205
    # name -> codec id; dialects included (they are selected through spk_is_dialect)
    language_ids: dict[str, int] = field(default_factory=dict)
    # speaker name (lower case) -> codec id
    speaker_ids: dict[str, int] = field(default_factory=dict)
    # speaker name -> dialect language name, or False
    speaker_dialects: dict[str, str | bool] = field(default_factory=dict)

    @property
    def hidden_size(self) -> int:
        return self.transformer.hidden_size


@dataclass(frozen=True)
class CodePredictorConfig:
    """The code predictor ("sub-talker"): codebooks 1..15 of one frame."""

    transformer: TransformerConfig
    vocab_size: int = 2048
    num_code_groups: int = 16


@dataclass(frozen=True)
class SpeakerEncoderConfig:
    """ECAPA-TDNN x-vector extractor of the Base models."""

    mel_dim: int = 128
    enc_dim: int = 1024
    enc_channels: tuple[int, ...] = (512, 512, 512, 512, 1536)
    kernel_sizes: tuple[int, ...] = (5, 3, 3, 3, 1)
    dilations: tuple[int, ...] = (1, 2, 3, 4, 1)
    attention_channels: int = 128
    res2net_scale: int = 8
    se_channels: int = 128
    sample_rate: int = 24000


@dataclass(frozen=True)
class ModelConfig:
    """Everything in a Qwen3-TTS `config.json`."""

    model_type: str  # custom_voice | voice_design | base
    size_tag: str  # "0b6" or "1b7" (upstream `tts_model_size`)
    talker: TalkerConfig
    code_predictor: CodePredictorConfig
    speaker_encoder: SpeakerEncoderConfig | None
    im_start_token_id: int = 151644
    im_end_token_id: int = 151645
    tts_pad_token_id: int = 151671
    tts_bos_token_id: int = 151672
    tts_eos_token_id: int = 151673

    @property
    def instruct_supported(self) -> bool:
        """Whether the model reads an instruction.

        Upstream drops CustomVoice instructions when `tts_model_size` is a substring of "0b6"
        (the 0.6B CustomVoice model was not trained with them); VoiceDesign always reads one.
        """
        if self.model_type == "custom_voice":
            return self.size_tag not in "0b6"
        return self.model_type == "voice_design"

    @property
    def supported_languages(self) -> list[str]:
        """`auto` plus every language except dialects (those come from the speaker)."""
        return ["auto"] + sorted(k for k in self.talker.language_ids if "dialect" not in k)

    @property
    def supported_speakers(self) -> list[str]:
        return sorted(self.talker.speaker_ids)

    @classmethod
    def from_hf(cls, cfg: dict[str, Any]) -> ModelConfig:
        model_type = cfg.get("tts_model_type")
        if model_type not in MODEL_TYPES:
            raise ValueError(
                f"config.json has tts_model_type={model_type!r}; expected one of {MODEL_TYPES}"
            )
        talker = _talker_from_hf(cfg.get("talker_config") or {})
        cp = _code_predictor_from_hf(
            (cfg.get("talker_config") or {}).get("code_predictor_config") or {}
        )
        spk = None
        if model_type == "base":
            s = cfg.get("speaker_encoder_config") or {}
            spk = SpeakerEncoderConfig(
                mel_dim=s.get("mel_dim", 128),
                enc_dim=s.get("enc_dim", 1024),
                enc_channels=tuple(s.get("enc_channels", (512, 512, 512, 512, 1536))),
                kernel_sizes=tuple(s.get("enc_kernel_sizes", (5, 3, 3, 3, 1))),
                dilations=tuple(s.get("enc_dilations", (1, 2, 3, 4, 1))),
                attention_channels=s.get("enc_attention_channels", 128),
                res2net_scale=s.get("enc_res2net_scale", 8),
                se_channels=s.get("enc_se_channels", 128),
                sample_rate=s.get("sample_rate", 24000),
            )
        return cls(
            model_type=model_type,
            size_tag=str(cfg.get("tts_model_size") or ""),
            talker=talker,
            code_predictor=cp,
            speaker_encoder=spk,
            im_start_token_id=cfg.get("im_start_token_id", 151644),
            im_end_token_id=cfg.get("im_end_token_id", 151645),
            tts_pad_token_id=cfg.get("tts_pad_token_id", 151671),
            tts_bos_token_id=cfg.get("tts_bos_token_id", 151672),
            tts_eos_token_id=cfg.get("tts_eos_token_id", 151673),
        )


def _speaker_id(value: Any) -> int:
    # Public copies of config.json write speaker ids either as ints or as 1-element lists.
    if isinstance(value, list):
        assert len(value) == 1, value
        return int(value[0])
    return int(value)


def _talker_from_hf(t: dict[str, Any]) -> TalkerConfig:
    hidden = t.get("hidden_size", 1024)
    heads = t.get("num_attention_heads", 16)
    tf = TransformerConfig(
        hidden_size=hidden,
        intermediate_size=t.get("intermediate_size", 2048),
        num_layers=t.get("num_hidden_layers", 20),
        num_heads=heads,
        num_kv_heads=t.get("num_key_value_heads", 2),
        head_dim=t.get("head_dim", hidden // heads),
        rms_norm_eps=t.get("rms_norm_eps", 1e-6),
        rope_theta=float(t.get("rope_theta", 10000)),
        max_position_embeddings=t.get("max_position_embeddings", 32768),
    )
    return TalkerConfig(
        transformer=tf,
        vocab_size=t.get("vocab_size", 3072),
        text_vocab_size=t.get("text_vocab_size", 151936),
        text_hidden_size=t.get("text_hidden_size", 2048),
        num_code_groups=t.get("num_code_groups", 32),
        codec_bos_id=t.get("codec_bos_id", 4197),
        codec_eos_id=t.get("codec_eos_token_id", 4198),
        codec_pad_id=t.get("codec_pad_id", 4196),
        codec_think_id=t.get("codec_think_id", 4202),
        codec_nothink_id=t.get("codec_nothink_id", 4203),
        codec_think_bos_id=t.get("codec_think_bos_id", 4204),
        codec_think_eos_id=t.get("codec_think_eos_id", 4205),
        language_ids={k.lower(): int(v) for k, v in (t.get("codec_language_id") or {}).items()},
        speaker_ids={k.lower(): _speaker_id(v) for k, v in (t.get("spk_id") or {}).items()},
        speaker_dialects={k.lower(): v for k, v in (t.get("spk_is_dialect") or {}).items()},
    )


def _code_predictor_from_hf(c: dict[str, Any]) -> CodePredictorConfig:
    hidden = c.get("hidden_size", 1024)
    heads = c.get("num_attention_heads", 16)
    tf = TransformerConfig(
        hidden_size=hidden,
        intermediate_size=c.get("intermediate_size", 3072),
        num_layers=c.get("num_hidden_layers", 5),
        num_heads=heads,
        num_kv_heads=c.get("num_key_value_heads", 8),
        head_dim=c.get("head_dim", 128),
        rms_norm_eps=c.get("rms_norm_eps", 1e-6),
        rope_theta=float(c.get("rope_theta", 10000)),
        max_position_embeddings=c.get("max_position_embeddings", 32768),
    )
    return CodePredictorConfig(
        transformer=tf,
        vocab_size=c.get("vocab_size", 2048),
        num_code_groups=c.get("num_code_groups", 32),
    )
