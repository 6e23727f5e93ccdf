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
are spoken one after another (at most limits.max_queued_utterances waiting). Any error (unknown
voice, empty text, a full queue, a malformed or oversized event) is answered with an `error`
event and the connection is closed, so that a client waiting for audio-stop (Home Assistant)
fails at once instead of at its timeout; other connections carry on, and the next request on a
new connection is served as usual.

Each utterance is one request of the speech service (service/speech.py), logged and counted as
`wyoming`. A connection with nothing to say for limits.idle_timeout_s (half a header
included) is closed, and so is one whose client reads nothing for limits.send_timeout_s. On
shutdown a synthesize in flight is finished, or cut short, with its audio-stop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
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

from ownvoice.errors import ClientStalled, InvalidInput, OwnvoiceError, describe
from ownvoice.service.planning import SpeechInput, SpeechPlan, check_unicode
from ownvoice.service.speech import Origin, Run
from ownvoice.wyoming.events import BadEvent, read_event
from ownvoice.wyoming.info import describe_voices

log = logging.getLogger("ownvoice.wyoming")

SAMPLE_RATE = 24000  # the 12 Hz codec's output, when no model is loaded yet to say so
SAMPLE_WIDTH = 2  # bytes: 16-bit PCM, as Home Assistant plays it
CHANNELS = 1
SHUTDOWN_WAIT_S = 5.0  # for the audio-stop of what was being spoken when the server stops


class Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, service,
                 options):  # fmt: skip
        self.reader = reader
        self.writer = writer
        self.service = service  # service.speech.SpeechService
        self.options = options  # listener.WyomingOptions
        self.peer = _peer(writer)
        self._write_lock = asyncio.Lock()
        self._tasks: set[asyncio.Task] = set()
        self._last: asyncio.Task | None = None  # utterances are spoken in order
        self._runs: set[Run] = set()
        self._stream: SpeechPlan | None = None  # between synthesize-start and synthesize-stop
        self._stream_speaking = False  # the stream's text has started to be spoken
        self._closing = False
        self._stopping = False  # the server is stopping: nothing more starts
        self._runner: asyncio.Task | None = None

    async def run(self) -> None:
        self._runner = asyncio.current_task()
        try:
            while not self._closing:
                try:
                    event = await self._next_event()
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

    async def _next_event(self) -> Event | None:
        """The next event; None when the client has gone or had nothing to say for
        limits.idle_timeout_s (while nothing of its is being spoken)."""
        idle = self.service.limits.idle_timeout_s
        reading = asyncio.ensure_future(read_event(self.reader))
        while True:
            done, _ = await asyncio.wait({reading}, timeout=idle)
            if done:
                return reading.result()
            if not self._tasks and self._stream is None:
                reading.cancel()
                log.info("wyoming %s: idle for %g s (limits.idle_timeout_s); closed", self.peer,
                         idle)  # fmt: skip
                return None

    async def shutdown(self) -> None:
        """The server is stopping: what is being spoken ends now with its audio-stop (reason
        "shutdown"), nothing queued starts, then the socket closes."""
        self._stopping = True
        for run in list(self._runs):
            run.cancel("shutdown")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(
                asyncio.gather(*list(self._tasks), return_exceptions=True), SHUTDOWN_WAIT_S
            )
        self._end_reading()

    # -- events --------------------------------------------------------------------------------

    async def _handle(self, event: Event) -> None:
        kind = event.type
        try:
            if Describe.is_type(kind):
                voicemap, pool = self.service.voicemap, self.service.pool
                info = await asyncio.to_thread(describe_voices, voicemap, pool)
                await self._send(info.event())
            elif Ping.is_type(kind):
                text = event.data.get("text")
                if isinstance(text, str):  # echoed: the wyoming package writes it as UTF-8
                    check_unicode(text, "text")
                await self._send(Pong(text=text).event())
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
        options = self.options
        request = SpeechInput(
            input=text or "",
            voice=name or options.voice or self._default_voice(),
            language=language,
            seed=options.seed,
            response_format="pcm",
        )
        return self.service.plan(request, streamed=text is None)

    def _default_voice(self) -> str:
        listed = [v["id"] for v in self.service.voicemap.list() if v["id"] != "design"]
        if not listed:
            raise InvalidInput("this server has no voice to speak with", param="voice")
        return listed[0]

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
        """Start, generate and send one utterance: audio-start, audio-chunks, audio-stop."""
        try:
            run = self.service.start(plan, Origin("wyoming", peer=self.peer))
        except OwnvoiceError as e:
            await self._fail(e.message, e.code or "busy")
            return
        self._runs.add(run)
        started, error = False, None
        try:
            stream = run.audio("pcm")
            async for chunk in run.chunks():
                if not started:
                    await self._send(AudioStart(chunk.sample_rate, SAMPLE_WIDTH, CHANNELS).event())
                    started = run.answered = True
                audio = stream.write(chunk.samples)
                await self._send(
                    AudioChunk(chunk.sample_rate, SAMPLE_WIDTH, CHANNELS, audio).event()
                )
            if run.stop_reason in ("cancelled", "stalled"):  # nobody to tell
                self._end_reading()
                return
            # complete, or cut short (timeout, shutdown): the client plays what came
            if not started:
                await self._send(
                    AudioStart(self._sample_rate(plan), SAMPLE_WIDTH, CHANNELS).event()
                )
            await self._send(AudioStop().event())
        except asyncio.CancelledError as e:  # the connection closed
            error = e
            raise
        except Exception as e:
            error = e
            if not isinstance(e, OwnvoiceError):
                log.error("wyoming %s: speech failed: %s", self.peer, e, exc_info=e)
            info = describe(e)
            await self._fail(info.message, info.code or "failed")
        finally:
            run.finish(error)  # frees the row if this task was cancelled
            self._runs.discard(run)

    def _sample_rate(self, plan: SpeechPlan) -> int:
        engine = plan.choice.worker.engine
        return engine.sample_rate if engine is not None else SAMPLE_RATE

    # -- writing and closing -------------------------------------------------------------------

    def _queue(self, work: Callable[[], Coroutine]) -> asyncio.Task:
        """Run `work()` after everything queued before it on this connection (at most
        limits.max_queued_utterances waiting)."""
        most = self.service.limits.max_queued_utterances
        if len(self._tasks) >= most:
            raise _TooManyUtterances(
                f"{len(self._tasks)} utterances are waiting on this connection "
                f"(limits.max_queued_utterances={most})"
            )
        previous = self._last

        async def in_turn() -> None:
            if previous is not None:
                await asyncio.wait({previous})
            if not self._closing and not self._stopping:
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
            async with self._write_lock, self.service.sending():
                await async_write_event(event, self.writer)
        except (ClientStalled, ConnectionError) as e:
            if isinstance(e, ClientStalled):
                log.warning("wyoming %s: %s", self.peer, e.message)
            for run in self._runs:
                run.cancel("stalled" if isinstance(e, ClientStalled) else "cancelled")
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
        for run in list(self._runs):
            run.cancel()  # the client is gone: its row leaves at the next step
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


class _TooManyUtterances(InvalidInput):
    code = "too_many_utterances"


def _text(data: dict) -> str:
    """The event's text; a streamed chunk never reaches planning, so it is checked here."""
    text = data.get("text")
    if not isinstance(text, str):
        raise InvalidInput("the event needs `text` (a string)", param="text")
    return check_unicode(text, "text")


def _peer(writer: asyncio.StreamWriter) -> str:
    peer = writer.get_extra_info("peername")
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return str(peer or "local")
