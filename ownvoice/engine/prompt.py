"""The talker's prefill: text track + codec track rows for every mode (architecture.md 5.2-5.3).

    [instruct]                      text only (VoiceDesign, 1.7B CustomVoice)
    role: <|im_start|>assistant\\n   text only
    codec prefix                    tts_pad.. / tts_bos + [think, think_bos, LANG, think_eos]
                                    (or [nothink, think_bos, think_eos] for "auto"),
                                    speaker row, pad   (the prefix's final bos goes below)
    text block                      mode dependent (streaming / non-streaming / ICL)

plus the "trailing" text rows added to the talker input one per generated frame.
Projections are computed in the same groups as upstream so float results match exactly; the fast
path computes the streaming text mode's text rows in fixed blocks instead (`embed_text_rows`), so
that text which arrives while it is spoken (engine/opentext.py) gives the same rows as text known
at once.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ownvoice.engine.tokenizer import PromptIds
from ownvoice.model.config import ModelConfig
from ownvoice.model.talker import Talker

TEXT_BLOCK = 8  # tokens per text-projection call in the fast path's streaming text mode


@dataclass(frozen=True)
class Prompt:
    embeds: torch.Tensor  # (1, L, H) prefill rows
    trailing: torch.Tensor  # (1, N, H) text rows fed one per frame, then `pad`
    pad: torch.Tensor  # (1, 1, H) tts_pad row, fed once `trailing` runs out
    end: torch.Tensor | None = None  # (1, 1, H) tts_eos row, which ends the text

    def text_row(self, k: int) -> torch.Tensor:
        """The text row added to the talker input after frame k: (1, 1, H)."""
        return self.trailing[:, k : k + 1] if k < self.trailing.shape[1] else self.pad


@dataclass(frozen=True)
class Conditioning:
    """Who speaks and how, resolved and validated by the engine."""

    language_id: int | None  # codec language id; None = "auto" (no language row)
    speaker_id: int | None = None  # CustomVoice speaker codec id
    speaker_embedding: torch.Tensor | None = None  # Base: x-vector (enc_dim,)
    ref_codes: torch.Tensor | None = None  # Base ICL: (T_ref, 16) codes of the reference
    non_streaming: bool = True  # whole text in the prefill (True) or one token per frame


def embed_text_rows(talker: Talker, ids: list[int]) -> torch.Tensor:
    """Text-track rows (1, N, H) computed TEXT_BLOCK tokens at a time, blocks aligned at ids[0].

    torch's matrix product rounds a row differently depending on how many rows it multiplies,
    so rows embedded as the text arrives would differ from rows embedded at once in the last
    bits. Here a row depends only on its token and its index: any prefix of `ids` gives the
    same rows as the whole.
    """
    device = talker.device
    blocks = []
    for start in range(0, len(ids), TEXT_BLOCK):
        block = ids[start : start + TEXT_BLOCK]
        padded = block + [0] * (TEXT_BLOCK - len(block))
        rows = talker.embed_text(torch.tensor([padded], dtype=torch.long, device=device))
        blocks.append(rows[:, : len(block)])
    if not blocks:
        return torch.zeros(1, 0, talker.cfg.hidden_size, device=device,
                           dtype=talker.activation_dtype)  # fmt: skip
    return torch.cat(blocks, dim=1)


def build_prompt(
    talker: Talker,
    cfg: ModelConfig,
    ids: PromptIds,
    cond: Conditioning,
    row_invariant: bool = False,
    text_open: bool = False,
) -> Prompt:
    """The prefill rows and the trailing text of a request.

    `row_invariant` (the fast path): streaming-mode text rows come from `embed_text_rows`.
    `text_open`: `ids.text` is the start of a text still being written (streaming mode only):
    the trailing rows stop there, without the end-of-text row (OpenText adds the rest).
    """
    if text_open and (cond.non_streaming or not row_invariant):
        raise ValueError("text that is still arriving needs the streaming text mode, fast path")
    tc = cfg.talker
    device, dtype = talker.device, talker.activation_dtype

    def tensor(values: list[int]) -> torch.Tensor:
        return torch.tensor([values], dtype=torch.long, device=device)

    def text(values: list[int]) -> torch.Tensor:
        return talker.embed_text(tensor(values))

    def codec(values: list[int]) -> torch.Tensor:
        return talker.embed_codec(tensor(values))

    tts_bos, tts_eos, tts_pad = text(
        [cfg.tts_bos_token_id, cfg.tts_eos_token_id, cfg.tts_pad_token_id]
    ).chunk(3, dim=1)

    # 1) codec prefix: language tag, speaker, pad, bos
    if cond.language_id is None:
        tag = [tc.codec_nothink_id, tc.codec_think_bos_id, tc.codec_think_eos_id]
    else:
        tag = [tc.codec_think_id, tc.codec_think_bos_id, cond.language_id, tc.codec_think_eos_id]
    prefix = [codec(tag)]
    if cond.speaker_id is not None:
        prefix.append(
            talker.embed_codec(torch.tensor(cond.speaker_id, device=device)).view(1, 1, -1)
        )
    elif cond.speaker_embedding is not None:
        prefix.append(cond.speaker_embedding.to(device, dtype).view(1, 1, -1))
    prefix.append(codec([tc.codec_pad_id, tc.codec_bos_id]))
    prefix = torch.cat(prefix, dim=1)  # (1, P, H); its last row (bos) opens the text block

    # 2) role + prefix rows over tts_pad, the last one over tts_bos
    n = prefix.shape[1]
    rows = torch.cat([tts_pad.expand(-1, n - 2, -1), tts_bos], dim=1) + prefix[:, :-1]
    parts = [text(ids.instruct)] if ids.instruct else []
    parts += [text(ids.role), rows]
    codec_bos = prefix[:, -1:]

    # 3) the text block and what trails it
    if cond.ref_codes is not None:
        block, trailing = _icl_block(
            talker, ids, cond, tts_eos, tts_pad, codec_bos, codec, row_invariant, text_open
        )
        parts.append(block)
    elif cond.non_streaming:
        body = torch.cat([text(ids.text), tts_eos], dim=1)
        parts.append(body + codec([tc.codec_pad_id] * body.shape[1]))
        parts.append(tts_pad + codec_bos)
        trailing = tts_pad
    elif row_invariant:
        rows = embed_text_rows(talker, ids.text)
        parts.append(rows[:, :1] + codec_bos)
        trailing = rows[:, 1:] if text_open else torch.cat([rows[:, 1:], tts_eos], dim=1)
    else:
        parts.append(text(ids.text[:1]) + codec_bos)
        trailing = torch.cat([text(ids.text[1:]), tts_eos], dim=1)
    return Prompt(embeds=torch.cat(parts, dim=1), trailing=trailing, pad=tts_pad, end=tts_eos)


def icl_prefill_tokens(cond: Conditioning) -> int:
    """Text tokens (reference transcript + text) an ICL prompt in the streaming text mode zips
    with codec bos and the reference's frames, and so needs before it can start."""
    return cond.ref_codes.shape[0] + 1


def _icl_block(talker, ids, cond, tts_eos, tts_pad, codec_bos, codec, row_invariant, text_open):
    """ICL: the reference transcript + text against codec bos + the reference's frames."""
    tc = talker.cfg
    all_ids = ids.ref_text + ids.text
    if row_invariant and not cond.non_streaming:
        text = embed_text_rows(talker, all_ids)
    else:
        text = talker.embed_text(torch.tensor([all_ids], dtype=torch.long, device=codec_bos.device))
    if not text_open:
        text = torch.cat([text, tts_eos], dim=1)  # (1, T1, H)
    ref = cond.ref_codes.to(codec_bos.device)
    frames = talker.embed_frames(ref[None])  # (1, T_ref, H)
    codecs = torch.cat([codec_bos, frames], dim=1)  # (1, T2, H)
    t1, t2 = text.shape[1], codecs.shape[1]
    if text_open and t1 < t2:
        raise ValueError(f"an open ICL text needs {t2} tokens to start, has {t1}")
    if cond.non_streaming:
        block = torch.cat([text + codec([tc.codec_pad_id] * t1), codecs + tts_pad], dim=1)
        return block, tts_pad
    if t1 > t2 or text_open:
        return text[:, :t2] + codecs, text[:, t2:]
    text = torch.cat([text] + [tts_pad] * (t2 - t1), dim=1)
    return text + codecs, tts_pad
