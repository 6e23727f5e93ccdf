"""The code predictor ("sub-talker"): codebooks 1..15 of one frame, one at a time.

Per frame it reads a fresh sequence: position 0 = the talker's last hidden state, position 1 =
the embedding of codebook 0, position 1+j = the embedding of codebook j; head j (at position
j+1) predicts codebook j+1. Module names mirror `talker.code_predictor.*`.
"""

from __future__ import annotations

import torch
from torch import nn

from ownvoice.model.config import CodePredictorConfig
from ownvoice.model.layers import DecoderStack


class CodePredictorBackbone(DecoderStack):
    def __init__(self, cfg: CodePredictorConfig, talker_hidden: int, implementation: str = "sdpa"):
        super().__init__(cfg.transformer, implementation)
        # embeddings of codebooks 1..15, at the *talker* width (they are also summed into
        # the talker's input)
        self.codec_embedding = nn.ModuleList(
            nn.Embedding(cfg.vocab_size, talker_hidden) for _ in range(cfg.num_code_groups - 1)
        )


class CodePredictor(nn.Module):
    def __init__(self, cfg: CodePredictorConfig, talker_hidden: int, implementation: str = "sdpa"):
        super().__init__()
        self.cfg = cfg
        self.model = CodePredictorBackbone(cfg, talker_hidden, implementation)
        self.lm_head = nn.ModuleList(
            nn.Linear(cfg.transformer.hidden_size, cfg.vocab_size, bias=False)
            for _ in range(cfg.num_code_groups - 1)
        )
        # 1.7B: the talker is wider than the code predictor
        if talker_hidden != cfg.transformer.hidden_size:
            self.small_to_mtp_projection = nn.Linear(talker_hidden, cfg.transformer.hidden_size)
        else:
            self.small_to_mtp_projection = nn.Identity()

    @property
    def num_steps(self) -> int:
        return self.cfg.num_code_groups - 1

    def embed_code(self, step: int, codes: torch.Tensor) -> torch.Tensor:
        """Embedding of codebook `step` (1..15) codes at the talker width."""
        return self.model.codec_embedding[step - 1](codes)
