"""WebSocket /v1/audio/speech/stream: text in as it is written, audio out (vLLM-Omni's protocol).

    client                                   server
    {"type": "session.config", ...}          (every speech request field but `input`, plus
                                              stream_audio; sticky; again between utterances)
    {"type": "input.text", "text": "..."}    {"type": "audio.start", "utterance_index": 0,
    ...                                        "sentence_index": 0, "format": "pcm",
                                               "sample_rate": 24000, "channels": 1}
                                             <binary frames: audio>
    {"type": "input.done"}                   {"type": "audio.done", ..., "total_bytes": N,
                                              "error": false}
                                             {"type": "session.done", "utterance_index": 0,
                                              "total_sentences": 1, "cancelled": false}
    {"type": "input.cancel"}                 (ours: barge-in; the generation stops within a
                                              frame and session.done says cancelled: true)
    {"type": "session.close"}                the connection closes (1000)

One utterance (the text between two `input.done`) is one streamed generation. In the streaming
text mode (the default; `non_streaming_mode: false`) it is spoken word by word (service/
livetext.py): a piece starts on its first stable words and reads the rest as it arrives, so
the audio is the audio `POST /v1/audio/speech` makes of the whole text in that mode, pieces and
all. With `non_streaming_mode: true` whole sentences are spoken as soon as they are known
(service/textfeed.py, vLLM-Omni's behaviour). Each piece is a "sentence" of the protocol:
audio.start (with its `sentence_text` as known then), its audio, audio.done (with the text as
known at its end). With `stream_audio: true` (PCM only) the audio goes out as it is made;
otherwise each piece comes as one file in `response_format`. The connection takes the next
utterance after `session.done`.

With `input_format` in session.config (`"ssml"`, or `"text"` for plain text with pause tags),
the session reads markup: an utterance's text is kept until input.done and then spoken whole,
as `POST /v1/audio/speech` speaks it (service/script.py); each piece of each span is a
sentence, and a pause goes out with the sentence before it.

Each utterance is one request of the speech service (service/speech.py): counted in the metrics
and logged as `websocket <status> id=<connection>.<utterance>`, spoken at the session's `speed`,
ended with an `idle_timeout` error when its text stops arriving for limits.idle_timeout_s (its
row is freed; the next input.text begins a new utterance), and on shutdown let finish (or cut
short, with a `shutting_down` error) with its audio.done and session.done. An input.cancel
sends no partial file in a whole-file format: that sentence's audio.done says `cancelled: true`.

Errors are `{"type": "error", "message", "code", "param"}` and do not end the connection (as in
vLLM-Omni), except: no `session.config` first, an idle connection (limits.idle_timeout_s with
nothing to say), a message over MAX_MESSAGE_BYTES, text or binary (an error, then closed with
1009), and a client that reads
nothing for limits.send_timeout_s (dropped, its generations stopped). More than
limits.max_queued_utterances utterances waiting on one connection are refused. The handshake is refused (403) without the API
key when one is set (an `Authorization: Bearer` header, or the subprotocols `bearer, <key>` for
browsers, which cannot set headers), for a Host the server does not answer to, and for a page of
another origin. A client that goes away cancels its generation, which leaves the batch at the
next step.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from dataclasses import replace

from fastapi import WebSocket, WebSocketDisconnect
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from ownvoice.errors import ClientStalled, InvalidInput, OwnvoiceError, ShuttingDown, describe
from ownvoice.server.auth import websocket_handshake
from ownvoice.server.errors import validation_message
from ownvoice.server.protocol import SpeechSessionConfig
from ownvoice.server.stream_sentence import Sentence, Utterance, piece_text
from ownvoice.service.planning import check_unicode
from ownvoice.service.speech import Origin

log = logging.getLogger("ownvoice.server")

MAX_MESSAGE_BYTES = 4 * 2**20  # one message; more closes with 1009 (message too big)
MAX_TEXT_CHARS = 16_384  # one input.text


class SpeechStream:
    def __init__(self, websocket: WebSocket):
        self.ws = websocket
        self.state = websocket.app.state
        self.service = self.state.service
        self.limits = self.service.limits
        self.id = uuid.uuid4().hex[:12]  # the connection's; an utterance's is id.index
        client = websocket.client
        self.peer = f"{client.host}:{client.port}" if client else None
        self.config: SpeechSessionConfig | None = None
        self.config_refused = False  # a session.config came and none was accepted yet
        self.open: Utterance | None = None  # the utterance whose text is still coming
        self.active: list[Utterance] = []  # utterances not finished speaking, in order
        self.last: asyncio.Task | None = None  # the last utterance's task: the next waits for it
        self.count = 0  # utterances so far (the next one's index)
        self.dropped = False  # the client stopped reading: the connection is being dropped
        self._reader: asyncio.Task | None = None

    # -- the handshake -------------------------------------------------------------------------

    async def run(self) -> None:
        subprotocol, refusal = websocket_handshake(self.ws, self.state)
        if refusal is not None:
            log.info("refused websocket %s: %s", self.ws.url.path, refusal)
            await self.ws.close(code=1008, reason=refusal[:120])
            return
        await self.ws.accept(subprotocol=subprotocol)
        self._reader = asyncio.current_task()
        try:
            await self._serve()
        except WebSocketDisconnect:
            pass
        except asyncio.CancelledError:
            if not self.dropped:  # not our own doing (_drop): the server is stopping
                raise
        finally:
            for utterance in self.active:  # a client that went away frees its row at once
                utterance.stop()

    # -- messages -------------------------------------------------------------------------------

    async def _serve(self) -> None:
        idle = self.limits.idle_timeout_s
        while True:
            try:
                message = await asyncio.wait_for(self.ws.receive(), idle)
            except TimeoutError:
                if self.active:  # still speaking: a client that listens is not idle
                    continue
                await self._error(f"idle for {idle:g} s (limits.idle_timeout_s): closing",
                                  "idle_timeout")  # fmt: skip
                await self.ws.close(code=1000)
                return
            if message["type"] == "websocket.disconnect":
                raise WebSocketDisconnect(message.get("code", 1000))
            data = message.get("bytes")
            raw = message.get("text") or ""
            if len(data if data is not None else raw.encode()) > MAX_MESSAGE_BYTES:
                await self._error(f"a message is at most {MAX_MESSAGE_BYTES} bytes: closing",
                                  "message_too_big")  # fmt: skip
                await self.ws.close(code=1009, reason="message too big")
                return
            if data is not None:
                await self._error("binary frames are not accepted: send JSON text messages",
                                  "invalid_message")  # fmt: skip
                continue
            try:
                msg = json.loads(raw)
            except ValueError:
                await self._error("the message is not valid JSON", "invalid_message")
                continue
            except RecursionError:  # `[[[[...`: deeper than Python's parser can go
                await self._error("the message is JSON nested too deeply to read",
                                  "invalid_message")  # fmt: skip
                continue
            if not isinstance(msg, dict):
                await self._error("a message must be a JSON object", "invalid_message")
                continue
            if not await self._handle(msg):
                return

    async def _handle(self, msg: dict) -> bool:
        """Act on one message; False ends the connection."""
        kind = msg.get("type")
        if kind == "session.config":
            try:
                await self._configure(msg)
            except OwnvoiceError as e:
                await self._error_of(e)
            self.config_refused = self.config is None
            return True
        if self.config is None:
            if self.config_refused:  # say why, not only that one must come first
                await self._error(f"got {kind!r}, but no session.config was accepted yet (the "
                                  "last one was refused: see the error before)", "no_config")  # fmt: skip
                await self.ws.close(code=1008, reason="no accepted session.config")
                return False
            await self._error(f"expected session.config first, got {kind!r}", "no_config")
            await self.ws.close(code=1008, reason="session.config must come first")
            return False
        try:
            if kind == "input.text":
                await self._text(msg.get("text"))
            elif kind == "input.done":
                await self._done()
            elif kind == "input.cancel":
                await self._cancel()
            elif kind == "session.close":
                await self._cancel()
                await self.ws.close(code=1000)
                return False
            else:
                await self._error(f"unknown message type {kind!r}", "unknown_type")
        except OwnvoiceError as e:
            await self._error_of(e)
        return True

    async def _configure(self, msg: dict) -> None:
        if self.open is not None:
            await self._error("session.config cannot change an utterance in progress; send "
                              "input.done (or input.cancel) first", "utterance_open")  # fmt: skip
            return
        try:
            config = SpeechSessionConfig.model_validate(
                {k: v for k, v in msg.items() if k != "type"}
            )
        except ValidationError as e:
            errors = [{**err, "loc": ("body", *err["loc"])} for err in e.errors()]
            message, param = validation_message(RequestValidationError(errors))
            await self._error(f"session.config: {message}", "invalid_config", param)
            return
        # the voice, the clip, the language and the rest are checked now, not at the first word
        # (a markup session's text is read whole at input.done: its own checks wait till then)
        self.service.plan(replace(config.to_input(), input_format=None), streamed=True)
        self.config = config

    async def _text(self, text) -> None:
        if not isinstance(text, str):
            raise InvalidInput("input.text needs `text`, a string", param="text")
        if len(text) > MAX_TEXT_CHARS:
            raise InvalidInput(f"input.text is over {MAX_TEXT_CHARS} characters", param="text")
        check_unicode(text, "text")  # session.config's strings were checked by its plan
        if not text:
            return
        u = self.open
        if u is None:
            self._check_queue()
            if self.config.input_format is not None:  # SSML or pause tags: read at input.done
                u = Utterance(self.count, None, self.config.stream_audio, markup=[])
            else:
                plan = self.service.plan(self.config.to_input(), streamed=True)
                u = Utterance(self.count, plan, self.config.stream_audio)
            self.open = u
            self.count += 1
            self.active.append(u)
        if u.markup is not None:
            self._hold(u, text)
            return
        try:
            u.plan.pieces.push(text)
        except InvalidInput:
            # past limits.max_input_chars: the utterance is refused as a whole, so it stops
            # now, not after speaking the text that fitted (what went out stays out); its
            # session.done says cancelled, and the next input.text begins a new utterance
            u.cancelled = True
            u.stop()
            self.open = None
            if u.task is None:
                self._start(u)
            raise
        if u.task is None and u.plan.pieces.has_text:
            self._start(u)

    def _hold(self, u: Utterance, text: str) -> None:
        """A markup session's text, kept until input.done (an SSML document is read whole)."""
        u.markup.append(text)
        chars, limit = sum(map(len, u.markup)), self.limits.max_input_chars
        if chars > limit:
            u.markup, u.cancelled = None, True
            self.open = None
            self._start(u)  # nothing is said; its session.done says cancelled
            raise InvalidInput(f"the utterance is over {limit} characters "
                               "(limits.max_input_chars)", param="text")  # fmt: skip

    async def _read_markup(self, u: Utterance) -> None:
        """input.done in a markup session: the whole text planned (SSML, pause tags); a
        refused text gets its error, then session.done with no sentence."""
        text, u.markup = "".join(u.markup), None
        try:
            u.plan = self.service.plan(replace(self.config.to_input(), input=text))
        except OwnvoiceError as e:
            await self._error_of(e)

    def _check_queue(self) -> None:
        """A new utterance may wait behind at most limits.max_queued_utterances others."""
        most = self.limits.max_queued_utterances
        if len(self.active) >= most:
            raise _TooManyUtterances(
                f"{len(self.active)} utterances are waiting to be spoken on this connection "
                f"(limits.max_queued_utterances={most}); wait for session.done",
                param="text",
            )

    def _start(self, u: Utterance) -> None:
        """Speak `u` once the utterance before it has been spoken."""
        u.task = asyncio.create_task(self._speak(u, self.last))
        self.last = u.task

    async def _done(self) -> None:
        """The open utterance is complete: it speaks its rest and sends session.done; the next
        message is read at once (an input.cancel must get through while audio still goes out)."""
        u, self.open = self.open, None
        if u is None:  # nothing was said: an empty utterance, answered in its turn
            self._check_queue()
            u = Utterance(self.count, None, False)
            self.count += 1
            self.active.append(u)
        elif u.markup is not None:
            await self._read_markup(u)
        else:
            u.plan.pieces.close()
        if u.task is None:
            self._start(u)

    async def _cancel(self) -> None:
        """Barge-in: every utterance not yet spoken stops (its session.done says cancelled)."""
        for u in list(self.active):
            u.cancelled = True
            u.stop()
        if self.open is not None:
            await self._done()

    # -- speaking -------------------------------------------------------------------------------

    async def _speak(self, u: Utterance, previous: asyncio.Task | None) -> None:
        """Speak the utterance piece by piece: each piece (one or more whole sentences, as the
        feed hands them out) is a "sentence" of vLLM-Omni's protocol, with its own audio.start
        (naming its text), audio and audio.done; then session.done."""
        if previous is not None:
            await asyncio.wait({previous})
        sentences = 0
        try:
            if u.plan is not None and not u.cancelled:
                sentences = await self._generate(u)
        finally:
            if u in self.active:
                self.active.remove(u)
            if self.open is u:  # ended before its input.done (idle, failed): the next text
                self.open = None  # begins a new utterance
                u.stop()
        await self._send({"type": "session.done", "utterance_index": u.index,
                          "total_sentences": sentences, "cancelled": u.cancelled})  # fmt: skip

    async def _generate(self, u: Utterance) -> int:
        plan = u.plan
        try:
            run = u.run = self.service.start(plan, Origin("websocket", f"{self.id}.{u.index}",
                                                          peer=self.peer))  # fmt: skip
        except OwnvoiceError as e:
            await self._error_of(e)
            return 0
        if u.cancelled:  # cancelled while waiting for the one before it
            run.cancel()
        sentences, sentence, error = 0, None, None
        try:
            async for chunk in run.chunks():
                if chunk.index == 0 or sentence is None:  # the first chunk of the next piece
                    if sentence is not None:
                        await sentence.end(piece_text(plan, sentences - 1))
                    sentence = Sentence(self, run, u, sentences, piece_text(plan, sentences))
                    sentences += 1
                    await sentence.start()
                    run.answered = True
                await sentence.write(chunk.samples)
            stopped = _STOPPED.get(run.stop_reason)
            if stopped is not None:
                await self._error_of(stopped(self.limits))
        except ClientStalled as e:  # _drop has begun
            error = e
        except Exception as e:  # the engine or the voice failed: say so, keep the connection
            error = e
            if not isinstance(e, OwnvoiceError):
                log.error("speech stream failed: %s", e, exc_info=e)
            await self._error_of(e)
        except BaseException as e:
            error = e
            raise
        finally:
            if sentence is not None and not self.dropped:
                cancelled = u.cancelled or run.stop_reason == "cancelled"
                failed = error is not None and not isinstance(error, ClientStalled)
                await sentence.end(piece_text(plan, sentences - 1), cancelled, failed)
            run.finish(error)
        return sentences

    # -- sending --------------------------------------------------------------------------------

    async def _write(self, message: dict) -> None:
        """One ASGI message to the client; one that reads nothing for limits.send_timeout_s
        is dropped (every generation of the connection stops, "stalled")."""
        if self.dropped:
            raise ClientStalled("the connection is being dropped")
        try:
            async with self.service.sending(self._drop):
                await self.ws.send(message)
        except (RuntimeError, OSError, WebSocketDisconnect):  # closed meanwhile: nobody to tell
            pass

    def _drop(self) -> None:
        log.warning(
            "websocket %s: the client read nothing for %g s (limits.send_timeout_s); dropped",
            self.id, self.limits.send_timeout_s,
        )  # fmt: skip
        self.dropped = True
        for u in self.active:
            if u.run is not None:
                u.run.cancel("stalled")
            u.stop()
        if self._reader is not None and self._reader is not asyncio.current_task():
            self._reader.cancel()

    async def _send(self, payload: dict) -> None:
        with contextlib.suppress(ClientStalled):
            await self._write({"type": "websocket.send", "text": json.dumps(payload)})

    async def _send_bytes(self, data: bytes) -> None:
        await self._write({"type": "websocket.send", "bytes": data})

    async def _error(self, message: str, code: str, param: str | None = None) -> None:
        await self._send({"type": "error", "message": message, "code": code, "param": param})

    async def _error_of(self, e: Exception) -> None:
        info = describe(e)
        await self._error(info.message, info.code or info.type, info.param)


class _TooManyUtterances(InvalidInput):
    code = "too_many_utterances"


class _Idle(OwnvoiceError):
    code = "idle_timeout"


class _TooLong(OwnvoiceError):
    code = "request_timeout"


# why an utterance stopped early, as the error its client is sent (cancelled or stalled: none)
_STOPPED = {
    "idle": lambda limits: _Idle(
        f"no text for {limits.idle_timeout_s:g} s (limits.idle_timeout_s): the utterance ended; "
        "the next input.text begins a new one"
    ),
    "timeout": lambda limits: _TooLong(
        f"the utterance ran past limits.request_timeout_s ({limits.request_timeout_s:g} s)"
    ),
    "shutdown": lambda limits: ShuttingDown(
        "the server is shutting down: the utterance was cut short"
    ),
}
