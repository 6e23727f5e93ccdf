"""One request in flight: its prompt, sampling, random stream, frame cap, audio decoder and end.

A `Sequence` is what the frame loop advances (alone, or as one row of a batch) and what turns
its frames into `AudioChunk`s: it owns its streaming speech decoder and its chunk schedule
(a small first chunk for a quick start, then fixed chunks). Made by `Engine.start()`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from ownvoice.engine.opentext import OpenText
from ownvoice.engine.options import SamplingOptions
from ownvoice.engine.prompt import Prompt
from ownvoice.engine.results import AudioChunk


@dataclass(frozen=True)
class FrameEvent:
    """What a step did to one sequence: a new frame (fresh (16,) int64 tensor) and/or its end."""

    seq: Sequence
    frame: torch.Tensor | None
    stop_reason: str | None = None


@dataclass(frozen=True)
class DueChunk:
    """A chunk taken off a sequence's pending frames, not decoded yet."""

    codes: torch.Tensor | None  # (n, 16); None for an empty last chunk
    index: int
    start_frame: int
    is_last: bool
    stop_reason: str | None


@dataclass(eq=False)
class Sequence:
    prompt: Prompt | None  # None until an open text can start (Engine.startable)
    sampling: SamplingOptions
    max_frames: int
    generator: torch.Generator | None  # None = nondeterministic sampling
    decoder: Callable[[torch.Tensor], np.ndarray]  # (n, 16) codes -> (n * 1920,) samples
    first_chunk_frames: int = 2
    chunk_frames: int = 8
    tag: object = None  # the caller's (e.g. a request id)
    # frames by which chunks after the first are decoded late, so that rows which joined
    # together decode at different steps instead of all at once (set by Engine.join)
    stagger: int = 0
    text: OpenText | None = None  # the text track while the text is still arriving
    codebooks: int = 16  # codes per frame (the model's num_code_groups)
    sample_rate: int = 24000  # of the decoded audio
    # progress, kept by the frame loop
    frames: int = 0  # frames generated
    position: int = 0  # talker position of the next input
    slot: int | None = None  # row in the batch while running
    cancelled: bool = False  # set by anyone; the loop retires the row at its next step
    # "eos", "max_frames", "cancelled" once ended; "error" when it failed on its own (`error`)
    stop_reason: str | None = None
    error: BaseException | None = None
    # audio
    _pending: list[torch.Tensor] = field(default_factory=list)
    _chunks: int = 0
    _start_frame: int = 0
    _last_sent: bool = False

    @property
    def done(self) -> bool:
        return self.stop_reason is not None

    @property
    def started_audio(self) -> bool:
        """True once its first chunk went out."""
        return self._chunks > 0

    def text_row(self, k: int) -> torch.Tensor | None:
        """The text row added to the talker input after frame k; None while that part of an
        open text has not arrived (the row then sits out the step)."""
        if self.text is None:
            return self.prompt.text_row(k)
        self.refresh_text()
        row = self.text.row(k)
        if row is None:
            self.text.waited += 1
        return row

    def refresh_text(self) -> None:
        """Take what an open text's source has now: its prompt once it can start, more rows,
        the frame cap for the text so far."""
        self.text.refresh()
        self.prompt = self.text.prompt
        if self.text.max_frames is not None:
            self.max_frames = self.text.max_frames

    def cancel(self) -> None:
        """Stop at the next step boundary (within one frame)."""
        self.cancelled = True

    def fail(self, error: BaseException) -> None:
        """End with `error`, a fault of this sequence alone (its text, its cache, its decoder):
        the frames not decoded yet are dropped, the next chunk is an empty last one with
        stop_reason "error", and the loop retires the row at its next step."""
        self.error, self.stop_reason, self.cancelled = error, "error", True
        self._pending, self._last_sent = [], False

    def add(self, frame: torch.Tensor | None, stop_reason: str | None = None) -> None:
        """A new frame (16,) and/or the end; its audio is decoded by `chunk()`."""
        if self.error is not None:  # failed: what the loop says after that changes nothing
            return
        if frame is not None:
            self._pending.append(frame.reshape(1, -1))
        if stop_reason is not None:
            self.stop_reason = stop_reason

    @property
    def finished(self) -> bool:
        """Ended, and its last chunk went out."""
        return self.done and self._last_sent

    def _target(self) -> int:
        return self.first_chunk_frames if self._chunks == 0 else self.chunk_frames

    def due(self) -> bool:
        """Whether a chunk is ready: its frames are all there (the first waits for
        `first_chunk_frames`, later ones for `chunk_frames`, plus `stagger` frames of delay),
        or the end."""
        if self._last_sent:
            return False
        if self.done:
            return True
        delay = self.stagger if self._chunks else 0
        return len(self._pending) >= self._target() + delay

    def chunk(self) -> AudioChunk:
        """Decode the next chunk: exactly the next `first_chunk_frames`, then `chunk_frames`
        frames (once ended, what is left: the last chunk, which always comes, empty when
        nothing was left). The boundaries do not depend on when chunks are read, so a request
        decodes to the same samples however its audio was collected."""
        return self.decode(self.take_chunk())

    def take_chunk(self) -> DueChunk:
        """The next chunk's frames and place, taken off the pending frames (the bookkeeping of
        `chunk()` without the decoding). `decode()` it next: a sequence's chunks must be
        decoded in the order they were taken, since its decoder carries state."""
        take = len(self._pending)
        if not self.done or take > self._target():
            take = min(take, self._target())
        frames, self._pending = self._pending[:take], self._pending[take:]
        codes = torch.cat(frames, dim=0) if frames else None  # (n, 16)
        last = self.done and not self._pending
        due = DueChunk(
            codes=codes,
            index=self._chunks,
            start_frame=self._start_frame,
            is_last=last,
            stop_reason=self.stop_reason if last else None,
        )
        self._chunks += 1
        self._start_frame += len(frames)
        self._last_sent = last
        return due

    def decode(self, due: DueChunk) -> AudioChunk:
        """A taken chunk's audio (may run on another thread than the frame loop's)."""
        if due.codes is not None:
            samples = self.decoder(due.codes)
            codes_np = due.codes.cpu().numpy()
        else:
            samples, codes_np = np.zeros(0, np.float32), np.zeros((0, self.codebooks), np.int64)
        return AudioChunk(
            samples=samples,
            codes=codes_np,
            index=due.index,
            start_frame=due.start_frame,
            is_last=due.is_last,
            stop_reason=due.stop_reason,
            sample_rate=self.sample_rate,
        )

    def take(self, frame: torch.Tensor | None, stop_reason: str | None) -> AudioChunk | None:
        """`add`, then the chunk if one is due (None otherwise)."""
        self.add(frame, stop_reason)
        return self.chunk() if self.due() else None
