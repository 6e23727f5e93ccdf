"""A script's generation: its spans spoken in order, their audio joined with exact silences.

    job = ScriptJob(service, plan, slot, deadline)   # the first span starts now, on `slot`
    async for chunk in job.chunks(): ...             # ScriptChunks, the parts in order
    job.cancel()                                     # every span started stops at its next step

A ScriptJob stands where a Generation stands in a Run (service/speech.py): the same cancel,
stop reason and deadline, so every front end answers a script as it answers plain text. Each
span is its own Generation on its own model's scheduler. While one is heard, up to AHEAD later
spans start where their model has a batch row free (never taking the places single requests
queue in), so a dialogue's turns on two models generate together; a span that found no row
waits for a place when its turn comes. A row's audio does not depend on its batch, so a span's
audio is what it would be alone.

The Mixer turns the spans' chunks into the script's audio: each span at its own speed (the
stretch flushed at its end, as a request of its own would be), levelled per voice when the
plan asks (a dialogue), and each silence exactly its samples long. Knows nothing about any
transport.
"""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field

import numpy as np

from ownvoice.service.encode import SAMPLE_RATE, TimeStretch
from ownvoice.service.generation import Generation
from ownvoice.service.planning import SpeechPlan, plan_pieces
from ownvoice.service.script import ScriptPlan, Silence

AHEAD = 4  # spans started beyond the one being heard, at most


@dataclass
class ScriptChunk:
    """A piece of a script's audio (what Run.chunks yields for a script). `turn_start`: on the
    first chunk of a dialogue turn, the turn's start in the delivered audio, in seconds. A
    pause belongs to the piece before it (a leading pause: to the first piece)."""

    samples: np.ndarray
    index: int = 1  # 0: the first chunk of a piece (a WebSocket "sentence"); pauses go on
    num_frames: int = 0
    is_last: bool = False
    stop_reason: str | None = None
    turn: int | None = None
    turn_start: float | None = None
    codes: np.ndarray = field(default_factory=lambda: np.zeros((0, 16), dtype=np.int64))
    sample_rate: int = SAMPLE_RATE


class ScriptJob:
    def __init__(self, service, plan: ScriptPlan, slot, deadline: float):
        self.service = service
        self.plan = plan
        self.deadline = deadline
        self.cancelled = threading.Event()
        self.cancel_reason = "cancelled"
        self._stop: str | None = None
        self._lock = threading.Lock()  # cancel (any thread) against a span starting
        self._gens: list[Generation | None] = [None] * len(plan.parts)
        first = next(i for i, p in enumerate(plan.parts) if isinstance(p, SpeechPlan))
        self._start(first, slot)

    # -- what a Run and its record read -------------------------------------------------------

    @property
    def stop_reason(self) -> str | None:
        if self._stop is not None:
            return self._stop
        return next((g.stop_reason for g in self._gens if g and g.stop_reason), None)

    @property
    def t_started(self) -> float | None:
        return next((g.t_started for g in self._gens if g is not None), None)

    def cancel(self, reason: str = "cancelled") -> None:
        with self._lock:
            if not self.cancelled.is_set():
                self.cancel_reason = reason
            self.cancelled.set()
            started = [g for g in self._gens if g is not None]
        for gen in started:
            gen.cancel(reason)

    # -- the parts ----------------------------------------------------------------------------

    async def chunks(self) -> AsyncIterator[ScriptChunk]:
        mixer = Mixer(self.plan)
        for i, part in enumerate(self.plan.parts):
            if self._stopped():
                return
            if isinstance(part, Silence):
                for chunk in mixer.silence(i):
                    yield chunk
                continue
            gen = self._gens[i]
            if gen is None:
                slot = await self.service.wait_for_place(part.choice.worker, self.deadline)
                gen = self._start(i, slot)
            self._run_ahead(i)
            async for chunk in gen.chunks():
                for out in mixer.speech(i, chunk):
                    yield out
            for out in mixer.end(i):
                yield out
            if gen.stop_reason is not None:  # cancelled, timed out: the rest is not said
                return
        for out in mixer.finish():
            yield out

    def chunks_blocking(self) -> Iterator[ScriptChunk]:
        """`chunks()` for a script started outside an event loop (`ownvoice say`)."""
        mixer = Mixer(self.plan)
        for i, part in enumerate(self.plan.parts):
            if self._stopped():
                return
            if isinstance(part, Silence):
                yield from mixer.silence(i)
                continue
            gen = self._gens[i] or self._start(i, self._place_blocking(part.choice.worker))
            self._run_ahead(i)
            for chunk in gen.chunks_blocking():
                yield from mixer.speech(i, chunk)
            yield from mixer.end(i)
            if gen.stop_reason is not None:
                return
        yield from mixer.finish()

    def _stopped(self) -> bool:
        if self.cancelled.is_set():
            self._stop = self._stop or self.cancel_reason
            return True
        if time.monotonic() > self.deadline:
            self._stop = "timeout"
            return True
        return False

    def _start(self, i: int, slot) -> Generation:
        plan: SpeechPlan = self.plan.parts[i]
        service = self.service
        gen = Generation(plan_pieces(plan, service.pool, service.library), slot, self.deadline)
        with self._lock:
            self._gens[i] = gen
            cancelled = self.cancelled.is_set()
        if cancelled:
            gen.cancel(self.cancel_reason)  # frees its place; it never runs
        plan.choice.worker.submit(gen)
        return gen

    def _run_ahead(self, current: int) -> None:
        """Start the next spans while their model has a batch row free, in order."""
        parts = self.plan.parts
        for j in range(current + 1, min(len(parts), current + 1 + AHEAD)):
            part = parts[j]
            if isinstance(part, Silence) or self._gens[j] is not None:
                continue
            if self.cancelled.is_set() or self.service.draining:
                return
            admission = part.choice.worker.admission
            slot = admission.try_admit(spare=admission.queue_size)
            if slot is None:  # a later span never starts before an earlier one
                return
            self._start(j, slot)

    def _place_blocking(self, worker):
        """A place for a span, waiting for one (a thread of an in-process caller)."""
        admission = worker.admission
        while True:
            slot = admission.try_admit(spare=admission.queue_size)
            if slot is not None:
                return slot
            if time.monotonic() > self.deadline or self.cancelled.is_set():
                from ownvoice.errors import QueueTimeout

                raise QueueTimeout("no place in the queue within limits.request_timeout_s")
            freed = threading.Event()
            admission.listeners.append(freed.set)
            try:
                freed.wait(1.0)
            finally:
                admission.listeners.remove(freed.set)


class Mixer:
    """The script's audio from its parts' chunks, in order (module doc)."""

    def __init__(self, plan: ScriptPlan):
        self.plan = plan
        self.position = 0  # samples delivered so far
        self.stretch: TimeStretch | None = None
        self.held: list[np.ndarray] = []  # a span being levelled: all of it before it goes
        self.frames = 0
        self.gains: dict[str, list[float]] = {}  # voice -> the gains its spans took
        self.turn: int | None = None  # the turn heard last
        self.span: int | None = None  # the span being heard
        self.lead: list[np.ndarray] = []  # pauses before the first audio: they go out with it

    def silence(self, i: int) -> list[ScriptChunk]:
        part: Silence = self.plan.parts[i]
        zeros = np.zeros(part.samples, dtype=np.float32)
        if self.span is None:  # nothing said yet: it opens the first piece
            self.lead.append(zeros)
            return []
        return [self._out(i, zeros)]

    def finish(self) -> list[ScriptChunk]:
        """Pauses still held (nothing was said after them)."""
        if not self.lead:
            return []
        return [self._out(len(self.plan.parts) - 1, np.zeros(0, dtype=np.float32), index=0)]

    def speech(self, i: int, chunk) -> list[ScriptChunk]:
        part: SpeechPlan = self.plan.parts[i]
        if self.span != i:  # one stretch for the whole span, all its pieces, as a request has
            self.span = i
            self.stretch = TimeStretch(part.speed) if part.speed != 1.0 else None
        samples = chunk.samples
        if self.stretch is not None:
            samples = self.stretch.process(samples)
        if self.plan.level is not None:
            self.held.append(samples)
            self.frames += chunk.num_frames
            return []
        return [self._out(i, samples, chunk)]

    def end(self, i: int) -> list[ScriptChunk]:
        """A span ended: the stretch's tail, and a levelled span's whole audio."""
        tail = self.stretch.flush() if self.stretch is not None else None
        self.stretch = None
        out = []
        if self.plan.level is None:
            if tail is not None and tail.size:
                out.append(self._out(i, tail))
            return out
        if tail is not None:
            self.held.append(tail)
        audio = np.concatenate(self.held) if self.held else np.zeros(0, dtype=np.float32)
        self.held = []
        frames, self.frames = self.frames, 0
        return [self._out(i, self._levelled(self.plan.parts[i], audio), frames=frames, index=0)]

    def _levelled(self, part: SpeechPlan, audio: np.ndarray) -> np.ndarray:
        from ownvoice import loudness

        level = self.plan.level
        voice = part.choice.label
        measured = loudness.integrated_loudness(audio, SAMPLE_RATE)
        if measured is not None:
            gain = loudness.gain_db(measured, level.target_lufs)
            self.gains.setdefault(voice, []).append(gain)
        else:  # too short to measure: what this voice took before, else the dialogue's
            known = self.gains.get(voice) or [g for gains in self.gains.values() for g in gains]
            gain = float(np.median(known)) if known else 0.0
        out, _ = loudness.limit(loudness.apply_gain(audio, gain), level.peak_dbtp, SAMPLE_RATE)
        return out

    def _out(self, i: int, samples: np.ndarray, chunk=None, frames=None, index: int = 1):
        turn = self.plan.turns[i]
        if self.lead:  # a leading pause: the start of the first turn, the first piece
            turn = next((t for t in self.plan.turns if t is not None), turn)
            samples, self.lead = np.concatenate([*self.lead, samples]), []
        start = None
        if turn is not None and turn != self.turn:
            self.turn, start = turn, self.position / SAMPLE_RATE
        self.position += len(samples)
        samples = np.asarray(samples, dtype=np.float32)
        out = ScriptChunk(samples=samples, index=index, turn=turn, turn_start=start)
        if chunk is not None:
            out.index, out.num_frames, out.codes = chunk.index, chunk.num_frames, chunk.codes
            out.is_last, out.stop_reason = chunk.is_last, chunk.stop_reason
        elif frames is not None:
            out.num_frames = frames
        return out
