"""WebSocket /v1/audio/speech/stream: text in as it is written, audio out (vLLM-Omni's protocol).

    client                                   server
    {"type": "session.config", ...}          (every speech request field but `input`, plus
                                              stream_audio; sticky; again between utterances)
    {"type": "input.text", "text": "..."}    {"type": "audio.start", "utterance_index": 0,
    ...                                        "sentence_index": 0, "format": "pcm"}
                                             <binary frames: audio>
    {"type": "input.done"}                   {"type": "audio.done", ...}
                                             {"type": "session.done", "utterance_index": 0,
                                              "total_sentences": 1, "cancelled": false}
    {"type": "input.cancel"}                 (ours: barge-in; the generation stops within a
                                              frame and session.done says cancelled: true)
    {"type": "session.close"}                the connection closes (1000)

One utterance (the text between two `input.done`) is one streamed generation (service/
textfeed.py): whole sentences are spoken as soon as they are known, so audio starts before the
text ends, and the connection takes the next utterance after `session.done`. Each piece the feed
hands out (one or more whole sentences) is a "sentence" of the protocol: audio.start (with its
`sentence_text`), its audio, audio.done. With `stream_audio: true` (PCM only) the audio goes out
as it is made; otherwise each piece comes as one file in `response_format`.

Errors are `{"type": "error", "message", "code", "param"}` and do not end the connection (as in
vLLM-Omni), except: no `session.config` first, an idle connection (IDLE_TIMEOUT_S), and a
message over MAX_MESSAGE_BYTES (closed with 1009). The handshake is refused (403) without the API
key when one is set (an `Authorization: Bearer` header, or the subprotocols `bearer, <key>` for
browsers, which cannot set headers), for a Host the server does not answer to, and for a page of
another origin. A client that goes away cancels its generation, which leaves the batch at the
next step. Not yet: a clip in `ref_audio` (use a library voice), word-level starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import time

from fastapi import WebSocket, WebSocketDisconnect
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from ownvoice.encode import AudioEncoder
from ownvoice.errors import InvalidInput, OwnvoiceError
from ownvoice.server.errors import error_response, validation_message
from ownvoice.server.protocol import SpeechSessionConfig
from ownvoice.service.generation import Generation
from ownvoice.service.planning import plan_pieces

log = logging.getLogger("ownvoice.server")

IDLE_TIMEOUT_S = 60.0  # no message for this long ends the connection
MAX_MESSAGE_BYTES = 4 * 2**20  # one message; more closes with 1009 (message too big)
MAX_TEXT_CHARS = 16_384  # one input.text


class SpeechStream:
    def __init__(self, websocket: WebSocket):
        self.ws = websocket
        self.state = websocket.app.state
        self.config: SpeechSessionConfig | None = None
        self.plan = None  # the open utterance's plan (its pieces are a TextFeed)
        self.task: asyncio.Task | None = None  # speaking the open utterance
        self.job: Generation | None = None
        self.utterance = 0
        self.cancelled = False

    # -- the handshake -------------------------------------------------------------------------

    async def run(self) -> None:
        subprotocol, refusal = self._check_handshake()
        if refusal is not None:
            log.info("refused websocket %s: %s", self.ws.url.path, refusal)
            await self.ws.close(code=1008, reason=refusal[:120])
            return
        await self.ws.accept(subprotocol=subprotocol)
        try:
            await self._serve()
        except WebSocketDisconnect:
            pass
        finally:
            if self.job is not None:
                self.job.cancel()  # a client that went away frees its row at the next step
            if self.task is not None:
                self.task.cancel()

    def _check_handshake(self) -> tuple[str | None, str | None]:
        """(subprotocol to accept, why the handshake is refused or None)."""
        headers, settings = self.ws.headers, self.state.settings
        policy = self.state.hosts
        host, origin = headers.get("host"), headers.get("origin")
        if not policy.host_allowed(host):
            return None, f"host {host!r} not allowed"
        if origin is not None and not policy.origin_allowed(origin, host):
            return None, f"origin {origin!r} not allowed"
        key = settings.server.api_key
        offered = [p.strip() for p in headers.get("sec-websocket-protocol", "").split(",") if p]
        if key is None:
            return None, None
        scheme, _, given = headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and _same(given.strip(), key):
            return None, None
        if len(offered) == 2 and offered[0].lower() == "bearer" and _same(offered[1], key):
            return offered[0], None
        return None, "the API key is missing or wrong"

    # -- messages -------------------------------------------------------------------------------

    async def _serve(self) -> None:
        while True:
            try:
                message = await asyncio.wait_for(self.ws.receive(), IDLE_TIMEOUT_S)
            except TimeoutError:
                await self._error(f"idle for {IDLE_TIMEOUT_S:g} s: closing", "idle_timeout")
                await self.ws.close(code=1000)
                return
            if message["type"] == "websocket.disconnect":
                raise WebSocketDisconnect(message.get("code", 1000))
            if message.get("bytes") is not None:
                await self._error("binary frames are not accepted: send JSON text messages",
                                  "invalid_message")  # fmt: skip
                continue
            raw = message.get("text") or ""
            if len(raw.encode()) > MAX_MESSAGE_BYTES:
                await self.ws.close(code=1009, reason="message too big")
                return
            try:
                msg = json.loads(raw)
            except ValueError:
                await self._error("the message is not valid JSON", "invalid_message")
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
            await self._configure(msg)
            return True
        if self.config is None:
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
        if self.plan is not None:
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
        if config.ref_audio is not None:
            await self._error("ref_audio is not streamed yet: add the voice to the library "
                              "(POST /v1/audio/voices) and name it", "unsupported", "ref_audio")  # fmt: skip
            return
        self.config = config

    async def _text(self, text) -> None:
        if not isinstance(text, str):
            raise InvalidInput("input.text needs `text`, a string", param="text")
        if len(text) > MAX_TEXT_CHARS:
            raise InvalidInput(f"input.text is over {MAX_TEXT_CHARS} characters", param="text")
        if not text:
            return
        if self.plan is None:
            request = self.config.to_input()
            self.plan = self.state.planner.plan(request, streamed=True)
            self.cancelled = False
        feed = self.plan.pieces
        feed.push(text)  # past limits.max_input_chars in one utterance: InvalidInput
        if self.task is None and feed.has_text:
            self.task = asyncio.create_task(self._speak(self.plan, self.utterance))

    async def _done(self) -> None:
        plan, task = self.plan, self.task
        if plan is None:  # nothing was said: an empty utterance
            await self._send({"type": "session.done", "utterance_index": self.utterance,
                              "total_sentences": 0, "cancelled": False})  # fmt: skip
            self.utterance += 1
            return
        plan.pieces.close()
        if task is None:  # only blanks arrived
            task = self.task = asyncio.create_task(self._speak(plan, self.utterance))
        await asyncio.wait({task})  # audio.done and session.done are sent by the task
        self.plan = self.task = None
        self.utterance += 1

    async def _cancel(self) -> None:
        if self.plan is None:
            return
        self.cancelled = True
        self.plan.pieces.close()
        if self.job is not None:
            self.job.cancel()
        await self._done()

    # -- speaking -------------------------------------------------------------------------------

    async def _speak(self, plan, utterance: int) -> None:
        """Speak the utterance piece by piece: each piece (one or more whole sentences, as the
        feed hands them out) is a "sentence" of vLLM-Omni's protocol, with its own audio.start
        (naming its text), audio and audio.done."""
        worker = plan.choice.worker
        try:
            slot = worker.admission.admit()
        except OwnvoiceError as e:
            await self._error_of(e)
            await self._finish(utterance, 0)
            return
        deadline = time.monotonic() + self.state.settings.limits.request_timeout_s
        job = self.job = Generation(
            plan_pieces(plan, self.state.pool, self.state.library), slot, deadline
        )
        self.state.drain.track(job)
        worker.submit(job)
        sentences, sentence = 0, None
        try:
            async for chunk in job.chunks():
                if chunk.index == 0:  # the first chunk of the next piece
                    if sentence is not None:
                        await sentence.end()
                    text = (
                        plan.pieces.given[sentences] if sentences < len(plan.pieces.given) else ""
                    )
                    sentence = _Sentence(self, plan.response_format, utterance, sentences, text)
                    sentences += 1
                    await sentence.start()
                await sentence.write(chunk.samples)
        except Exception as e:  # the engine or the voice failed: say so, keep the connection
            if not isinstance(e, OwnvoiceError):
                log.error("speech stream failed: %s", e, exc_info=e)
            await self._error_of(e)
        finally:
            job.cancel()
            self.job = None
        if sentence is not None:
            await sentence.end()
        await self._finish(utterance, sentences)

    async def _finish(self, utterance: int, sentences: int) -> None:
        await self._send({"type": "session.done", "utterance_index": utterance,
                          "total_sentences": sentences, "cancelled": self.cancelled})  # fmt: skip

    # -- sending --------------------------------------------------------------------------------

    async def _send(self, payload: dict) -> None:
        with contextlib.suppress(RuntimeError):  # closed meanwhile: nobody to tell
            await self.ws.send_text(json.dumps(payload))

    async def _error(self, message: str, code: str, param: str | None = None) -> None:
        await self._send({"type": "error", "message": message, "code": code, "param": param})

    async def _error_of(self, e: Exception) -> None:
        error = json.loads(error_response(e).body)["error"]
        await self._error(error["message"], error.get("code") or error["type"], error.get("param"))


class _Sentence:
    """One piece's audio on the wire: audio.start, the bytes (as made, or one file), audio.done."""

    def __init__(self, stream: SpeechStream, fmt: str, utterance: int, index: int, text: str):
        self.stream, self.fmt, self.text = stream, fmt, text
        self.ids = {"utterance_index": utterance, "sentence_index": index}
        self.encoder = AudioEncoder(fmt)
        self.streaming = stream.config.stream_audio
        self.held = bytearray()

    async def start(self) -> None:
        await self.stream._send({"type": "audio.start", **self.ids, "sentence_text": self.text,
                                 "format": self.fmt})  # fmt: skip

    async def write(self, samples) -> None:
        data = self.encoder.write(samples)
        if data and self.streaming:
            await self.stream.ws.send_bytes(data)
        else:
            self.held += data

    async def end(self) -> None:
        self.held += self.encoder.close()
        if self.held:
            await self.stream.ws.send_bytes(bytes(self.held))
        await self.stream._send({"type": "audio.done", **self.ids})


def _same(given: str, key) -> bool:
    """`given` is the key (a SecretStr), compared in constant time."""
    return hmac.compare_digest(given.encode(), key.get_secret_value().encode())
