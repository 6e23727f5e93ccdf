"""One Wyoming client connection (Home Assistant's TTS client, a satellite, a script).

    describe                       -> info (voices read from the service each time)
    synthesize {text, voice}       -> audio-start, audio-chunk..., audio-stop
    synthesize-start {voice}       starts streaming text; nothing is spoken yet
    synthesize-chunk {text}...     text as an LLM writes it: each whole sentence is spoken as
                                   soon as the row is free (service/textfeed.py), so the first
                                   audio-chunk comes before the text ends
    synthesize                     (sent by streaming clients for older servers: ignored)
    synthesize-stop                -> the rest of the audio, audio-stop, synthesize-stopped
    ping                           -> pong

Audio is 24 kHz 16-bit mono, one audio-chunk per chunk the engine makes (the first after one
frame). Events are read all the time, also while audio is sent: a client that goes away
cancels its generation, which leaves the batch at the next step. Utterances on one connection
are spoken one after another. Any error (unknown voice, empty text, a full queue, a malformed
or oversized event) is answered with an `error` event and the connection is closed, so that a
client waiting for audio-stop (Home Assistant) fails at once instead of at its timeout; other
connections carry on, and the next request on a new connection is served as usual.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine
from functools import partial

from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.error import Error
from wyoming.event import Event, async_write_event
from wyoming.info import Describe
from wyoming.ping import Ping, Pong
from wyoming.tts import (
    Synthesize,
    SynthesizeChunk,
    SynthesizeStart,
    SynthesizeStop,
    SynthesizeStopped,
)

from ownvoice.audio import to_pcm16
from ownvoice.errors import InvalidInput, OwnvoiceError, is_out_of_memory
from ownvoice.service.generation import Generation
from ownvoice.service.planning import SpeechInput, SpeechPlan, plan_pieces
from ownvoice.wyoming.events import BadEvent, read_event
from ownvoice.wyoming.info import describe

log = logging.getLogger("ownvoice.wyoming")

SAMPLE_WIDTH = 2  # bytes: 16-bit PCM, as Home Assistant plays it
CHANNELS = 1


class Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, service):
        self.reader = reader
        self.writer = writer
        self.service = service  # listener.Service: what every connection shares
        self.peer = _peer(writer)
        self._write_lock = asyncio.Lock()
        self._tasks: set[asyncio.Task] = set()
        self._last: asyncio.Task | None = None  # utterances are spoken in order
        self._jobs: set[Generation] = set()
        self._stream: SpeechPlan | None = None  # between synthesize-start and synthesize-stop
        self._stream_speaking = False  # the stream's text has started to be spoken
        self._closing = False
        self._runner: asyncio.Task | None = None

    async def run(self) -> None:
        self._runner = asyncio.current_task()
        try:
            while not self._closing:
                try:
                    event = await read_event(self.reader)
                except BadEvent as e:
                    await self._fail(e.message, e.code)
                    break
                if event is None:
                    break
                await self._handle(event)
        except asyncio.CancelledError:  # _end_reading, from a task of this connection
            pass
        finally:
            await self._close()

    async def shutdown(self) -> None:
        """The server is stopping: generations end with reason "shutdown", then the socket."""
        for job in list(self._jobs):
            job.cancel("shutdown")
        self._end_reading()

    # -- events --------------------------------------------------------------------------------

    async def _handle(self, event: Event) -> None:
        kind = event.type
        try:
            if Describe.is_type(kind):
                info = await asyncio.to_thread(describe, self.service.voicemap, self.service.pool)
                await self._send(info.event())
            elif Ping.is_type(kind):
                await self._send(Pong(text=event.data.get("text")).event())
            elif Synthesize.is_type(kind):
                if self._stream is None:  # else: the whole text again, for older servers
                    self._queue(partial(self._speak, self._plan(event.data, _text(event.data))))
            elif SynthesizeStart.is_type(kind):
                if self._stream is not None:
                    raise InvalidInput("synthesize-start while a text stream is open")
                self._stream = self._plan(event.data, None)
            elif SynthesizeChunk.is_type(kind):
                self._stream_chunk(_text(event.data))
            elif SynthesizeStop.is_type(kind):
                self._stream_stop()
            else:  # newer protocol events, or events for other services: not ours to answer
                log.debug("wyoming %s: ignoring a %r event", self.peer, kind)
        except OwnvoiceError as e:
            await self._fail(e.message, e.code or "invalid_input")

    def _plan(self, data: dict, text: str | None) -> SpeechPlan:
        voice = data.get("voice") or {}
        if not isinstance(voice, dict):
            raise InvalidInput("`voice` must be an object with a `name`", param="voice")
        name, language = voice.get("name"), voice.get("language")
        if not isinstance(name, str | None) or not isinstance(language, str | None):
            raise InvalidInput("voice `name` and `language` must be strings", param="voice")
        options = self.service.options
        request = SpeechInput(
            input=text or "",
            voice=name or options.voice or self.service.default_voice(),
            language=language,
            seed=options.seed,
            response_format="pcm",
        )
        return self.service.planner.plan(request, streamed=text is None)

    def _stream_chunk(self, text: str) -> None:
        if self._stream is None:
            raise InvalidInput("synthesize-chunk without synthesize-start")
        feed = self._stream.pieces
        feed.push(text)
        if not self._stream_speaking and feed.has_text:
            self._stream_speaking = True
            self._queue(partial(self._speak, self._stream))

    def _stream_stop(self) -> None:
        """The text is complete; synthesize-stopped follows the last audio (or comes at once
        when no text came)."""
        if self._stream is None:
            raise InvalidInput("synthesize-stop without synthesize-start")
        self._stream.pieces.close()
        self._queue(partial(self._send, SynthesizeStopped().event()))
        self._stream = None
        self._stream_speaking = False

    # -- speaking ------------------------------------------------------------------------------

    async def _speak(self, plan: SpeechPlan) -> None:
        """Admit, generate and send one utterance: audio-start, audio-chunks, audio-stop."""
        service = self.service
        record = Record(service.metrics, plan, self.peer)
        worker = plan.choice.worker
        try:
            slot = worker.admission.admit()
        except OwnvoiceError as e:
            record.finish("refused")
            await self._fail(e.message, e.code or "busy")
            return
        deadline = record.t0 + service.options.request_timeout_s
        job = Generation(plan_pieces(plan, service.pool, service.library), slot, deadline)
        self._jobs.add(job)
        service.track(job)
        worker.submit(job)
        started = False
        try:
            async for chunk in job.chunks():
                record.chunk(chunk)
                if not started:
                    await self._send(AudioStart(chunk.sample_rate, SAMPLE_WIDTH, CHANNELS).event())
                    started = True
                audio = to_pcm16(chunk.samples)
                await self._send(
                    AudioChunk(chunk.sample_rate, SAMPLE_WIDTH, CHANNELS, audio).event()
                )
            if job.stop_reason is not None and job.stop_reason != "timeout":
                record.finish(job.stop_reason)  # cancelled, stalled, shutdown: nobody to tell
                self._end_reading()
                return
            if not started:
                rate = service.sample_rate(worker)
                await self._send(AudioStart(rate, SAMPLE_WIDTH, CHANNELS).event())
            await self._send(AudioStop().event())
            record.finish("timeout" if job.stop_reason == "timeout" else "200")
        except asyncio.CancelledError:  # the connection closed
            record.finish("cancelled")
            raise
        except OwnvoiceError as e:
            record.finish("error")
            await self._fail(e.message, e.code or "failed")
        except Exception as e:
            record.finish("error")
            log.error("wyoming %s: speech failed: %s", self.peer, e, exc_info=e)
            message = "out of memory; try again" if is_out_of_memory(e) else f"speech failed: {e}"
            await self._fail(message, "failed")
        finally:
            job.cancel()  # no-op once it ended; frees the row if this task was cancelled
            self._jobs.discard(job)

    # -- writing and closing -------------------------------------------------------------------

    def _queue(self, work: Callable[[], Coroutine]) -> asyncio.Task:
        """Run `work()` after everything queued before it on this connection."""
        previous = self._last

        async def in_turn() -> None:
            if previous is not None:
                await asyncio.wait({previous})
            if not self._closing:
                await work()

        task = self._last = asyncio.create_task(in_turn())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _send(self, event: Event) -> None:
        """Write one event; a client that reads nothing for limits.send_timeout_s, or is gone,
        ends the connection."""
        if self._closing:
            return
        try:
            async with self._write_lock, asyncio.timeout(self.service.options.send_timeout_s):
                await async_write_event(event, self.writer)
        except (TimeoutError, ConnectionError) as e:
            if isinstance(e, TimeoutError):
                log.warning("wyoming %s: the client read nothing for %g s; dropped", self.peer,
                            self.service.options.send_timeout_s)  # fmt: skip
            for job in self._jobs:
                job.cancel("stalled" if isinstance(e, TimeoutError) else "cancelled")
            self._end_reading()

    async def _fail(self, message: str, code: str) -> None:
        log.info("wyoming %s: error %s: %s", self.peer, code, message)
        await self._send(Error(text=message, code=code).event())
        self._end_reading()

    def _end_reading(self) -> None:
        """Stop reading: run() ends and closes the connection."""
        if self._closing:
            return
        self._closing = True
        if self._runner is not None and self._runner is not asyncio.current_task():
            self._runner.cancel()

    async def _close(self) -> None:
        self._closing = True
        for job in list(self._jobs):
            job.cancel()  # the client is gone: its row leaves at the next step
        if self._stream is not None:
            self._stream.pieces.close()
        current = asyncio.current_task()
        others = [t for t in self._tasks if t is not current]
        for task in others:
            task.cancel()
        with contextlib.suppress(Exception):
            await asyncio.gather(*others, return_exceptions=True)
        self.writer.close()
        with contextlib.suppress(Exception):
            await self.writer.wait_closed()


class Record:
    """One utterance's log line and metrics, as the HTTP side keeps them."""

    def __init__(self, metrics, plan: SpeechPlan, peer: str):
        self.metrics = metrics
        self.plan = plan
        self.peer = peer
        self.t0 = time.monotonic()
        self.t_first: float | None = None
        self.seconds = 0.0
        self.done = False

    def chunk(self, chunk) -> None:
        if self.t_first is None:
            self.t_first = time.monotonic()
            self.metrics.ttfa.observe(self.t_first - self.t0)
        self.seconds += len(chunk.samples) / chunk.sample_rate

    def finish(self, status: str) -> None:
        if self.done:
            return
        self.done = True
        now = time.monotonic()
        plan = self.plan
        streamed = not isinstance(plan.pieces, list)
        chars = plan.pieces.received if streamed else plan.chars
        self.metrics.requests.labels(status, "pcm", "wyoming").inc()
        self.metrics.request_seconds.observe(now - self.t0)
        self.metrics.audio_seconds.inc(self.seconds)
        if status == "cancelled":
            self.metrics.cancelled.inc()
        fields = [
            f"wyoming {status} peer={self.peer}",
            f"voice={plan.choice.label}",
            f"model={plan.choice.worker.name}",
            f"text={'streamed' if streamed else 'whole'}",
            f"chars={chars}",
            f"audio={self.seconds:.2f}s",
        ]
        if self.t_first is not None:
            fields.append(f"ttfa={self.t_first - self.t0:.2f}s")
        fields.append(f"total={now - self.t0:.2f}s")
        log.info(" ".join(fields))


def _text(data: dict) -> str:
    text = data.get("text")
    if not isinstance(text, str):
        raise InvalidInput("the event needs `text` (a string)", param="text")
    return text


def _peer(writer: asyncio.StreamWriter) -> str:
    peer = writer.get_extra_info("peername")
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return str(peer or "local")
