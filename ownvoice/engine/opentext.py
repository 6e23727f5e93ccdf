"""Text that is still being written while its sequence speaks (an LLM's answer, word by word).

In the streaming text mode the talker reads one text token per frame after the first, so a
sequence can start once its first tokens are known and take the rest as they arrive:

    seq = engine.start_open(source, voice="ryan")   # source() -> TextSoFar(text, final)
    while not engine.startable(seq): ...            # one stable token (an ICL clone: more)
    engine.join(seq); engine.step() ...             # the row waits when it reads past the text

`source()` returns the whole text known so far; it only ever grows. Every token but those of
the last pre-token is stable (the tokenizer may still re-split a word that is not finished);
those are embedded (in fixed blocks, prompt.embed_text_rows, so rows do not depend on how the
text was cut) and appended to the trailing rows. When the sequence needs a row that is not
known yet, `row()` says None and the frame loop leaves the row out of that step: it waits
instead of reading padding, so its codes are those of the same text given at once. Once
`final`, the end-of-text row follows, then padding, as for any prompt.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, replace

import torch

from ownvoice.engine.prompt import (
    TEXT_BLOCK,
    Conditioning,
    Prompt,
    embed_text_rows,
    icl_prefill_tokens,
)
from ownvoice.engine.tokenizer import PromptIds, TextTokenizer

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TextSoFar:
    """What a text source knows now."""

    text: str  # all of the text so far (it only grows)
    final: bool  # True once no more text will come


class OpenText:
    """The text track of one sequence whose text is still arriving (see module doc)."""

    def __init__(
        self,
        source: Callable[[], TextSoFar],
        tokenizer: TextTokenizer,
        talker,
        build: Callable[[PromptIds, bool], Prompt],  # (ids, text_open) -> Prompt
        cond: Conditioning,
        base: PromptIds,  # the request's role, instruct and reference ids (its text is unused)
        frame_cap: Callable[[str], int],  # text so far -> the sequence's frame cap
    ):
        self.source, self.tokenizer, self.talker, self.build = source, tokenizer, talker, build
        self.frame_cap = frame_cap
        self.base = base
        self.icl = cond.ref_codes is not None
        # text tokens the prefill takes: the first one, or (ICL) as many as the reference has
        # frames + 1, counted over the reference transcript + the text
        self.need = icl_prefill_tokens(cond) if self.icl else 1
        self.prompt: Prompt | None = None
        self.final = False
        self.max_frames: int | None = None  # for the text so far, once some has come
        self.waited = 0  # steps the row sat out for want of text
        self._seen: TextSoFar | None = None
        self._ref_ids: list[int] = (base.ref_text or []) if self.icl else []
        self._ids: list[int] = []  # text tokens taken (without the reference's)
        self._rows: torch.Tensor | None = None  # (1, n, H): trailing rows known so far
        self._closed_prompt = False  # the text was final before the start: a plain prompt

    # ---- reading ------------------------------------------------------------------------------

    @property
    def rows(self) -> torch.Tensor | None:
        """The trailing text rows known so far (1, n, H), without the end-of-text row."""
        return self.prompt.trailing[:, :-1] if self._closed_prompt else self._rows

    def row(self, k: int) -> torch.Tensor | None:
        """The text row added to the talker input after frame k, or None: not known yet."""
        if self._closed_prompt:
            return self.prompt.text_row(k)
        if k < self._rows.shape[1]:
            return self._rows[:, k : k + 1]
        if not self.final:
            return None
        return self.prompt.end if k == self._rows.shape[1] else self.prompt.pad

    # ---- taking text --------------------------------------------------------------------------

    @torch.inference_mode()
    def refresh(self) -> None:
        """Take what the source has now: more rows, the end, and the prompt once it can start."""
        now = self.source()
        if now == self._seen or self.final:
            return
        self._seen = now
        self.max_frames = self.frame_cap(now.text)
        ids = self._tokens(now)
        if ids is None:
            return
        if ids[: len(self._ids)] != self._ids:
            log.error("streamed text was rewritten under a running sequence; the rest is skipped")
            return
        if self.prompt is None:
            self._start(ids, now.final)
            return
        self._extend(ids)
        if now.final:
            self.final = True

    def _tokens(self, now: TextSoFar) -> list[int] | None:
        """The stable text tokens of what is known (None: not one yet)."""
        text = now.text if now.final else self.tokenizer.stable_prefix(now.text)
        if not text.strip():
            return None
        return self.tokenizer.prompt_ids(text).text

    def _start(self, ids: list[int], final: bool) -> None:
        if final:  # the whole text before the first frame: exactly the plain prompt
            self.prompt = self.build(replace(self.base, text=ids), False)
            self._ids, self.final, self._closed_prompt = ids, True, True
            return
        if len(self._ref_ids) + len(ids) < self.need:
            return
        self.prompt = self.build(replace(self.base, text=ids), True)
        self._ids = list(ids)
        self._rows = self.prompt.trailing

    def _extend(self, ids: list[int]) -> None:
        """Embed the tokens past the known ones, in the blocks the whole text would use."""
        if len(ids) == len(self._ids):
            return
        offset = len(self._ref_ids)  # the blocks count from the reference transcript's start
        known = offset + len(self._ids)
        first = known - known % TEXT_BLOCK  # the start of the block the new tokens fall in
        every = self._ref_ids + ids
        rows = embed_text_rows(self.talker, every[first:])[:, known - first :]
        self._rows = torch.cat([self._rows, rows], dim=1)
        self._ids = list(ids)
