"""The eager decode loop: prompt embeddings in, codec frames out, one frame at a time.

This is the simple path kept for parity with the reference (same operations, same order, same
random draws); the fast path must produce the same greedy codes. Knows nothing about text,
voices or audio.

Per frame k:
    1) codebook 0 from the talker's last hidden state (penalty, min length, suppression, sampling)
    2) stop at EOS
    3) codebooks 1..15 from the code predictor, one step each, on a fresh cache
    4) emit the frame; feed the sum of its 16 embeddings + the next trailing text row back
"""

from __future__ import annotations

from collections.abc import Callable, Generator

import torch

from ownvoice.engine.options import SamplingOptions
from ownvoice.engine.prompt import Prompt
from ownvoice.engine.sampling import NEG_INF, pick, repetition_penalty, talker_logit_mask
from ownvoice.engine.sequence import FrameEvent
from ownvoice.model.code_predictor import CodePredictor
from ownvoice.model.layers import DynamicKVCache
from ownvoice.model.talker import Talker

MIN_FRAMES = 2  # EOS is not allowed before this many frames (upstream min_new_tokens)


def positions_from(start: int, length: int, device) -> torch.Tensor:
    return torch.arange(start, start + length, device=device)[None]


@torch.inference_mode()
def eager_frames(
    talker: Talker,
    prompt: Prompt,
    sampling: SamplingOptions,
    max_frames: int,
    generator: torch.Generator | None = None,
    should_stop: Callable[[], bool] | None = None,
    text_row: Callable[[int], torch.Tensor] | None = None,
) -> Generator[torch.Tensor, None, str]:
    """Yield frames as (1, 16) int64 tensors; return the stop reason ("eos", "max_frames",
    "cancelled") as the generator's value. `text_row(k)`: the text row after frame k (default:
    the prompt's; a sequence's own when its text is still arriving)."""
    text_row = text_row or prompt.text_row
    cfg = talker.cfg
    device = prompt.embeds.device
    cache = DynamicKVCache()
    length = prompt.embeds.shape[1]
    hidden = talker.model(prompt.embeds, positions_from(0, length, device), cache)
    suppress = talker_logit_mask(cfg.vocab_size, cfg.codec_eos_id, device)
    history = torch.zeros(1, 0, dtype=torch.long, device=device)
    for k in range(max_frames):
        if should_stop is not None and should_stop():
            return "cancelled"
        # 1) codebook 0. The head sees every position, as upstream's does (same GEMM shapes,
        # bit-identical logits), and the last one is used.
        logits = talker.codec_head(hidden)[:, -1].float()
        logits = repetition_penalty(logits, history, sampling.repetition_penalty)
        if k < MIN_FRAMES:
            logits[:, cfg.codec_eos_id] = NEG_INF
        logits = logits.masked_fill(suppress, NEG_INF)
        code0 = pick(
            logits,
            sampling.do_sample,
            sampling.temperature,
            sampling.top_k,
            sampling.top_p,
            generator,
        )
        # 2) end of speech: the EOS frame gets no residual codes
        if int(code0) == cfg.codec_eos_id:
            return "eos"
        history = torch.cat([history, code0[:, None]], dim=1)
        # 3) codebooks 1..15
        frame = predict_residual_codes(
            talker.code_predictor, talker, hidden[:, -1:], code0, sampling, generator
        )
        # 4) emit, then feed the frame back with the next text row
        yield frame
        if k == max_frames - 1:
            break
        x = talker.embed_frames(frame[:, None]) + text_row(k)
        hidden = talker.model(x, positions_from(length + k, 1, device), cache)
    return "max_frames"


def predict_residual_codes(
    cp: CodePredictor,
    talker: Talker,
    talker_hidden: torch.Tensor,
    code0: torch.Tensor,
    sampling: SamplingOptions,
    generator: torch.Generator | None,
) -> torch.Tensor:
    """Codebooks 1..15 for one frame. talker_hidden (B, 1, H), code0 (B,) -> frame (B, 16)."""
    cache = DynamicKVCache()
    x = torch.cat([talker_hidden, talker.embed_codec(code0[:, None])], dim=1)  # (B, 2, H)
    codes = [code0]
    pos = 0
    for step in range(1, cp.num_steps + 1):
        h = cp.model(
            cp.small_to_mtp_projection(x), positions_from(pos, x.shape[1], x.device), cache
        )
        pos += x.shape[1]
        logits = cp.lm_head[step - 1](h)[:, -1].float()
        code = pick(
            logits,
            sampling.sub_do_sample,
            sampling.sub_temperature,
            sampling.sub_top_k,
            sampling.sub_top_p,
            generator,
        )
        codes.append(code)
        x = cp.embed_code(step, code[:, None])  # (B, 1, H)
    return torch.stack(codes, dim=1)


class EagerLoop:
    """The eager parity loop behind the frame-loop interface (join / step), one generator per
    row, each advanced in turn: the slow path, so that every front end can use either engine."""

    exact_batching = True  # rows never touch each other
    timer = None

    def __init__(self, talker: Talker, max_batch: int = 8):
        self.talker, self.max_batch = talker, max_batch
        self.rows: list = []
        self.waiting = 0
        self._frames: dict = {}

    @property
    def free_slots(self) -> int:
        return self.max_batch - len(self.rows)

    def join(self, seq):
        if not self.free_slots:
            raise RuntimeError(f"batch full ({self.max_batch} rows); wait for a row to leave")
        seq.slot = len(self.rows)
        self.rows.append(seq)
        # an open text's cap grows with its text; step() applies the cap
        cap = seq.max_frames if seq.text is None else 1 << 30
        self._frames[id(seq)] = eager_frames(
            self.talker, seq.prompt, seq.sampling, cap, seq.generator,
            lambda: seq.cancelled, seq.text_row,
        )  # fmt: skip
        return None  # its first frame comes from the next step

    def step(self) -> list:
        events = []
        self.waiting = 0
        for seq in list(self.rows):
            try:
                # a row whose text has not arrived that far sits the step out (fast/loop.py)
                if seq.frames and not seq.cancelled and seq.text_row(seq.frames - 1) is None:
                    self.waiting += 1
                    continue
                frame = next(self._frames[id(seq)])
            except StopIteration as end:
                self._leave(seq)
                events.append(FrameEvent(seq, None, end.value or "eos"))
                continue
            except Exception as e:  # its own fault: it ends, the other rows go on
                self._leave(seq)
                seq.fail(e)
                events.append(FrameEvent(seq, None, "error"))
                continue
            seq.frames += 1
            done = seq.frames >= seq.max_frames
            events.append(FrameEvent(seq, frame[0], "max_frames" if done else None))
            if done:
                self._leave(seq)
        return events

    def _leave(self, seq) -> None:
        self.rows.remove(seq)
        self._frames.pop(id(seq)).close()
        seq.slot = None
        for i, other in enumerate(self.rows):
            other.slot = i

    def cancel_all(self) -> list:
        events = [FrameEvent(seq, None, "cancelled") for seq in list(self.rows)]
        for event in events:
            self._leave(event.seq)
        return events
