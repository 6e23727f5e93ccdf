"""The talker: a Qwen3 decoder over the sum of a text track and a codec track.

It holds the embeddings of both tracks, the text projection, the decoder stack and the head
that predicts codebook 0. It knows no token strings, prompts or sampling (see ownvoice.engine).
Module names mirror the checkpoint keys under `talker.` (architecture.md section 8).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from ownvoice.model.code_predictor import CodePredictor
from ownvoice.model.config import TalkerConfig
from ownvoice.model.layers import DecoderStack


class TextProjection(nn.Module):
    """Maps Qwen text embeddings (2048-d) to the talker width: fc2(silu(fc1(x)))."""

    def __init__(self, text_hidden: int, hidden: int):
        super().__init__()
        self.linear_fc1 = nn.Linear(text_hidden, text_hidden, bias=True)
        self.linear_fc2 = nn.Linear(text_hidden, hidden, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear_fc2(F.silu(self.linear_fc1(x)))


class TalkerBackbone(DecoderStack):
    """The decoder stack plus the two input embedding tables (`talker.model.*`)."""

    def __init__(self, cfg: TalkerConfig, implementation: str = "sdpa"):
        super().__init__(cfg.transformer, implementation)
        self.codec_embedding = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.text_embedding = nn.Embedding(cfg.text_vocab_size, cfg.text_hidden_size)


class Talker(nn.Module):
    def __init__(
        self, cfg: TalkerConfig, code_predictor: CodePredictor, implementation: str = "sdpa"
    ):
        super().__init__()
        self.cfg = cfg
        self.model = TalkerBackbone(cfg, implementation)
        self.text_projection = TextProjection(cfg.text_hidden_size, cfg.hidden_size)
        self.codec_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        self.code_predictor = code_predictor

    @property
    def activation_dtype(self) -> torch.dtype:
        # from a norm weight: linears may have been packed into other dtypes for decoding
        return self.model.norm.weight.dtype

    @property
    def device(self) -> torch.device:
        return self.model.norm.weight.device

    def embed_text(self, ids: torch.Tensor) -> torch.Tensor:
        """Text-track rows: (..., T) token ids -> (..., T, H)."""
        return self.text_projection(self.model.text_embedding(ids))

    def embed_codec(self, ids: torch.Tensor) -> torch.Tensor:
        """Codec-track rows for codebook-0 codes and control ids: (..., T) -> (..., T, H)."""
        return self.model.codec_embedding(ids)

    def embed_frames(self, codes: torch.Tensor) -> torch.Tensor:
        """Sum of the 16 codebook embeddings of each frame: (B, T, 16) -> (B, T, H).

        Stacked then summed in one reduction, the order upstream uses, so float results match.
        """
        rows = [self.model.codec_embedding(codes[..., 0])]
        rows += [
            emb(codes[..., q + 1])
            for q, emb in enumerate(self.code_predictor.model.codec_embedding)
        ]
        return torch.stack(rows, dim=-2).sum(-2)
