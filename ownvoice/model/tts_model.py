"""The Qwen3-TTS language model as stored in `model.safetensors`: talker (with its code
predictor) and, for Base checkpoints, the speaker encoder. The codec lives in
`speech_tokenizer/` and is loaded separately (ownvoice.model.codec)."""

from __future__ import annotations

from torch import nn

from ownvoice.model.code_predictor import CodePredictor
from ownvoice.model.config import ModelConfig
from ownvoice.model.talker import Talker


class Qwen3TTSModel(nn.Module):
    def __init__(
        self, cfg: ModelConfig, with_speaker_encoder: bool = True, attention: str = "sdpa"
    ):
        super().__init__()
        self.cfg = cfg
        cp = CodePredictor(cfg.code_predictor, cfg.talker.hidden_size, attention)
        self.talker = Talker(cfg.talker, cp, attention)
        self.speaker_encoder = None
        if with_speaker_encoder and cfg.speaker_encoder is not None:
            from ownvoice.model.speaker_encoder import SpeakerEncoder

            self.speaker_encoder = SpeakerEncoder(cfg.speaker_encoder)

    def set_attention(self, implementation: str) -> None:
        self.talker.model.set_attention(implementation)
        self.talker.code_predictor.model.set_attention(implementation)
