"""The one entry for a speech request, whatever front end it came through.

    service = SpeechService(config, pool, library, designs, metrics)
    run = service.speak(SpeechInput(...), Origin("speech", request_id))   # plan + start
    async for chunk in run.chunks(): ...     # AudioChunks as the engine's steps make them
    stream = run.audio()                     # chunks -> bytes: the speed change and the format
    async with run.sending(): await send(stream.write(chunk.samples))
    run.cancel()                             # the client left: its row leaves at the next step
    run.finish(error)                        # once, in the front end's `finally`

Everything a request goes through between its front end's protocol and the engine happens here,
once: planning, admission (refused at once when the queue is full; `speak_in_turn` waits for a
place instead, for batch items, without taking the places single requests queue in), the
request deadline, the generation on the engine's scheduler, the idle time-out of streamed text,
the send time-out of a client that stops reading, drain (what runs is finished or aborted on
shutdown, and nothing new starts) and the record (one log line and the metrics, labelled by
front end). A front end only translates: its messages into a SpeechInput, the chunks into its
wire format, errors into its own error messages. Like vLLM's engine client, one call gives an
async iterator. Knows nothing about any transport.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator, Callable, Iterator

from ownvoice.errors import ClientStalled, InvalidInput, QueueTimeout, ShuttingDown, describe
from ownvoice.service.config import Limits, ServiceConfig
from ownvoice.service.encode import AudioStream
from ownvoice.service.generation import Generation
from ownvoice.service.library import VoiceLibrary
from ownvoice.service.markup import has_markup
from ownvoice.service.planning import SpeechInput, SpeechPlan, SpeechPlanner, plan_pieces
from ownvoice.service.pool import EnginePool
from ownvoice.service.record import Origin, SpeechRecord
from ownvoice.service.script import DialogueInput, ScriptPlan, ScriptPlanner
from ownvoice.service.script_run import ScriptJob
from ownvoice.service.voicemap import VoiceMap

__all__ = ["Origin", "Run", "SpeechService"]


class SpeechService:
    def __init__(self, config: ServiceConfig, pool, library, designs=None, metrics=None):
        self.config = config
        self.limits: Limits = config.limits
        self.pool = pool
        self.library = library
        self.designs = designs
        self.metrics = metrics
        self.voicemap = VoiceMap(pool, library, config.voice_aliases, designs)
        self.planner = SpeechPlanner(config, pool, self.voicemap, library)
        self.scripts = ScriptPlanner(self.planner, config.limits)
        self.draining = False
        self._runs: set[Run] = set()  # started, not finished
        self._turns: dict[str, asyncio.Lock] = {}  # model -> batch items waiting for a place

    @classmethod
    def local(cls, engine, *, name: str = "local", limits: Limits | None = None,
              chunk_frames: int = 8) -> SpeechService:  # fmt: skip
        """A service over one engine already loaded in this process (`ownvoice say`, the
        audiobook tool, bench), used as it is (no warm-up), with no voice library."""
        config = ServiceConfig(models=(), limits=limits or Limits(), chunk_frames=chunk_frames)
        pool = EnginePool(config, {name: engine}, warm=False)
        pool.start_threads()
        return cls(config, pool, VoiceLibrary(os.devnull))  # a library in which nothing is

    # -- starting a request -------------------------------------------------------------------

    def plan(self, req: SpeechInput, streamed: bool = False) -> SpeechPlan | ScriptPlan:
        """Check and plan a request without starting it (a WebSocket utterance is planned at
        its first words; its text is pushed to plan.pieces). Input with SSML or pause tags
        becomes a script of spans and silences (service/script.py)."""
        if streamed:
            if req.input_format == "ssml":
                raise InvalidInput(
                    "SSML needs the whole document before it is read; streamed text is plain "
                    "text: send the SSML to POST /v1/audio/speech",
                    param="input_format",
                )
        elif has_markup(req.input, req.input_format):
            return self.scripts.plan(req)
        return self.planner.plan(req, streamed)

    def speak(self, req: SpeechInput, origin: Origin) -> Run:
        """Plan and start a request; refused at once (QueueFull) when the model's queue is
        full. A refusal is counted under its status and raised."""
        return self._plan_and_start(lambda: self.plan(req), origin)

    def dialogue(self, dialogue: DialogueInput, origin: Origin) -> Run:
        """`speak` for turns of several voices (POST /v1/audio/dialogue)."""
        return self._plan_and_start(lambda: self.scripts.dialogue(dialogue), origin)

    def _plan_and_start(self, make_plan, origin: Origin) -> Run:
        record = self._record(origin)
        try:
            plan = record.plan = make_plan()
        except Exception as e:
            record.finish(str(describe(e).status), 0.0)
            raise
        return self.start(plan, origin, record)

    async def speak_in_turn(self, req: SpeechInput, origin: Origin) -> Run:
        """`speak`, but waiting for a place instead of being refused, in arrival order: for the
        items of a batch call. Such requests together hold at most the model's batch rows
        (`limits.max_batch`), never the `limits.queue_size` places single requests wait in, so
        a batch never turns single requests away; each item joins the queue behind the single
        requests that came before it."""
        record = self._record(origin)
        try:
            plan = record.plan = self.plan(req)
            slot = await self.wait_for_place(
                plan.choice.worker, record.t0 + self.limits.request_timeout_s
            )
        except Exception as e:
            record.finish(str(describe(e).status), 0.0)
            raise
        return self._run(plan, slot, record)

    def start(self, plan: SpeechPlan, origin: Origin, record: SpeechRecord | None = None) -> Run:
        """Start a planned request (refused at once when the queue is full or the service is
        shutting down; the refusal is counted and raised)."""
        record = record or self._record(origin)
        record.plan = plan
        try:
            if self.draining:
                raise ShuttingDown("the server is shutting down; retry on another instance")
            slot = plan.choice.worker.admission.admit()
        except Exception as e:
            record.finish(str(describe(e).status), 0.0)
            raise
        return self._run(plan, slot, record)

    def refuse(self, origin: Origin, error: Exception) -> Exception:
        """Count a request its front end refused before the service saw it (a malformed batch
        item); returns the error."""
        self._record(origin).finish(str(describe(error).status), 0.0)
        return error

    def _record(self, origin: Origin) -> SpeechRecord:
        return SpeechRecord(self.metrics, origin, self.config.log_text)

    def _run(self, plan: SpeechPlan | ScriptPlan, slot, record: SpeechRecord) -> Run:
        deadline = time.monotonic() + self.limits.request_timeout_s
        if isinstance(plan, ScriptPlan):
            job = record.job = ScriptJob(self, plan, slot, deadline)  # its first span starts
            run = Run(self, plan, record, job)
            self._runs.add(run)
            return run
        text = plan.pieces if plan.streamed else None
        job = Generation(plan_pieces(plan, self.pool, self.library), slot, deadline, text,
                         self.limits.idle_timeout_s)  # fmt: skip
        record.job = job
        run = Run(self, plan, record, job)
        self._runs.add(run)
        plan.choice.worker.submit(job)
        return run

    async def wait_for_place(self, worker, deadline: float):
        """A place in `worker`'s admission for a request that waits for one (module doc)."""
        admission = worker.admission
        loop = asyncio.get_running_loop()
        async with self._turns.setdefault(worker.name, asyncio.Lock()):  # first come, first
            while True:
                if self.draining:
                    raise ShuttingDown("the server is shutting down; retry on another instance")
                slot = admission.try_admit(spare=admission.queue_size)
                if slot is not None:
                    return slot
                freed = asyncio.Event()

                def wake(freed=freed) -> None:  # on the scheduler's thread
                    with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                        loop.call_soon_threadsafe(freed.set)

                admission.listeners.append(wake)
                try:
                    # the place may have freed between try_admit and listening: check again
                    # at least every second
                    timeout = min(1.0, deadline - time.monotonic())
                    if timeout <= 0:
                        raise QueueTimeout("no place in the queue within limits.request_timeout_s")
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(freed.wait(), timeout)
                finally:
                    admission.listeners.remove(wake)

    # -- sending ------------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def sending(self, on_stall: Callable[[], None] = lambda: None):
        """Around one send to a client: a send still waiting after limits.send_timeout_s (the
        client reads nothing, its buffers are full) calls `on_stall` and raises
        ClientStalled; the front end drops the connection."""
        seconds = self.limits.send_timeout_s
        try:
            async with asyncio.timeout(seconds):
                yield
        except TimeoutError:
            on_stall()
            raise ClientStalled(
                f"the client read nothing for {seconds:g} s (limits.send_timeout_s); dropped"
            ) from None

    # -- drain --------------------------------------------------------------------------------

    def begin_drain(self) -> None:
        """Shutting down: runs in flight go on, new ones are refused (ShuttingDown)."""
        self.draining = True

    @property
    def in_flight(self) -> int:
        """Requests started and not finished, on every front end."""
        return len(self._runs)

    def abort(self) -> None:
        """The drain ran out of time: every run stops at its next step (reason "shutdown");
        each front end ends its request as its protocol says (a cut stream, an error event,
        Wyoming's audio-stop)."""
        for run in list(self._runs):
            run.cancel("shutdown")

    def _ended(self, run: Run) -> None:
        self._runs.discard(run)


class Run:
    """One started request: its audio, its cancellation and its record."""

    def __init__(self, service: SpeechService, plan: SpeechPlan, record: SpeechRecord, job):
        self.service = service
        self.plan = plan
        self.record = record
        self.job: Generation = job
        # the front end began answering (HTTP headers, audio-start): a failure from now on can
        # only end the answer, not be a status
        self.answered = False
        self._streams: list[AudioStream] = []

    @property
    def stop_reason(self) -> str | None:
        """Why the service stopped it early: cancelled, stalled, shutdown, timeout, idle."""
        job = self.job
        if job.stop_reason is None and job.cancelled.is_set():
            return job.cancel_reason
        return job.stop_reason

    @property
    def time_left(self) -> float:
        return self.job.deadline - time.monotonic()

    async def chunks(self) -> AsyncIterator:
        """AudioChunks until the generation ends (it may stop early: see stop_reason);
        re-raises what failed it."""
        async for chunk in self.job.chunks():
            self.record.chunk(chunk)
            yield chunk

    def chunks_blocking(self) -> Iterator:
        """`chunks()` for a run started outside an event loop (a thread of the audiobook tool,
        `ownvoice say`)."""
        for chunk in self.job.chunks_blocking():
            self.record.chunk(chunk)
            yield chunk

    def audio(self, fmt: str | None = None) -> AudioStream:
        """A new encoded stream of this run's audio, in `fmt` (default: the request's format)
        at the request's speed; what it delivers is what the record counts."""
        stream = AudioStream(fmt or self.plan.response_format, self.plan.speed)
        self._streams.append(stream)
        return stream

    def sending(self):
        """`async with run.sending(): await send(...)`: a client that stops reading for
        limits.send_timeout_s stops the run ("stalled") and raises ClientStalled."""
        return self.service.sending(lambda: self.cancel("stalled"))

    def cancel(self, reason: str = "cancelled") -> None:
        """Stop it (its row leaves the batch at the next step); the first reason is kept."""
        self.job.cancel(reason)

    def finish(self, error: BaseException | None = None) -> str:
        """End the request, whatever happened (call it once, from a `finally`; later calls
        only return the status): free its row if it still has one, count it and write its
        log line. `error`: what ended it, if anything did. Returns the status."""
        if self.record.finished:
            return self.record.status
        status = self.status(error)
        self.job.cancel()  # a no-op once it ended
        self.service._ended(self)
        delivered = sum(stream.seconds for stream in self._streams)
        if not self._streams:  # a front end that sends raw samples: all of them went out
            delivered = self.record.seconds
        self.record.finish(status, delivered)
        return status

    def status(self, error: BaseException | None = None) -> str:
        """How it ended, for the record (service/record.py), decided here for every front
        end: the client's doing, a refusal before the answer began, a failure after, or why
        the service stopped it."""
        reason = self.stop_reason
        if isinstance(error, asyncio.CancelledError | GeneratorExit):  # the client went away
            return "stalled" if reason == "stalled" else "cancelled"
        if isinstance(error, ClientStalled):
            return "stalled"
        if error is not None:
            if not self.answered:
                return str(describe(error).status)
            if reason == "shutdown":  # the front end says so with an error (HTTP)
                return "aborted"
            return "timeout" if isinstance(error, QueueTimeout) else "error"
        if reason == "shutdown":
            return "aborted" if self.answered else "503"
        return reason or "200"
