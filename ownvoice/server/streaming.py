"""The HTTP answer to a speech request started by the service: a status, or a stream of audio.

    run = service.speak(body.to_input(), Origin("speech", request_id))
    return await respond(run, request)

The response starts when the first audio chunk exists: errors found before that (a bad
reference clip, an unsupported language) still become proper 4xx responses. A request that
waits in line longer than KEEPALIVE_S (the batch is full) gets its response started then, so
that clients which give up after 30 s without a byte stay; SSE streams get keep-alive comments
until the audio comes, a raw stream's bytes start with the audio. After that, bytes go out as
each chunk is encoded; an error can then only end the stream (SSE sends a `speech.audio.error`
event, a raw stream is cut). A client that goes away, while queued or while streaming, cancels
its generation between frames and frees its place; so does a client that stops reading for
limits.send_timeout_s. When a shutdown drain runs out of time, the generation stops with reason
"shutdown": a request still in line gets 503 `shutting_down` (if its response has not started),
an SSE stream an error event, and a raw stream is cut off so that the client sees it incomplete.

The whole answer is one generator (`_answer`) with one `finally`, which ends the run: the
status the request is counted under is decided once, by the service (Run.status).
"""

from __future__ import annotations

import asyncio
import base64
import contextvars
import json
import logging

from fastapi import Request
from fastapi.responses import Response, StreamingResponse

from ownvoice.errors import ClientStalled, QueueTimeout, ShuttingDown, describe
from ownvoice.service.encode import MEDIA_TYPES
from ownvoice.service.speech import Run

log = logging.getLogger("ownvoice.server")

# a request still in line after this long gets its response started (and SSE a keep-alive
# comment this often): common clients give up after 30 s without a byte
KEEPALIVE_S = 10.0


class StreamAborted(Exception):
    """Ends a response without completing it: the server closes the connection mid-body."""


# set in the request's own task when a stream is cut on purpose (already logged here)
_cut_on_purpose = contextvars.ContextVar("ownvoice_cut_on_purpose", default=False)


class QuietCuts(logging.Filter):
    """For uvicorn's error logger: a response this server cut off on purpose (shutdown, a
    failure after the headers) is logged once, by the request's own line, not again as
    uvicorn's "ASGI callable returned without completing response" error. uvicorn logs that
    in the request's task, where `_cut_on_purpose` was set."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (_cut_on_purpose.get() and "without completing response" in record.getMessage())


class AudioStreamResponse(StreamingResponse):
    """A StreamingResponse whose sends are the run's (a client that stops reading for
    limits.send_timeout_s is dropped) and that can end cut off (the body raises
    StreamAborted)."""

    def __init__(self, content, run: Run, **kwargs):
        super().__init__(content, **kwargs)
        self.run = run

    async def __call__(self, scope, receive, send):
        async def timed_send(message) -> None:
            async with self.run.sending():  # waits while the client's socket buffers are full
                await send(message)

        try:
            await super().__call__(scope, receive, timed_send)
        except ClientStalled as e:
            log.warning("%s", e.message)
            await self.body_iterator.aclose()  # its `finally` ends the run now, not at GC
        except StreamAborted:
            _cut_on_purpose.set(True)  # uvicorn closes the connection: an incomplete body


async def respond(run: Run, request: Request) -> Response:
    """Answer at the first chunk (or once the request waited KEEPALIVE_S in line); a failure
    before that is raised, and becomes the envelope with its status."""
    answer = _answer(run, request)
    try:
        head = await anext(answer)
    except StopAsyncIteration:  # the client left while queued
        return Response(status_code=499)
    run.answered = True
    media_type = (
        "text/event-stream"
        if run.plan.stream_format == "sse"
        else MEDIA_TYPES[run.plan.response_format]
    )
    return AudioStreamResponse(
        _after(head, answer),
        run,
        media_type=media_type,
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


async def _after(head: bytes, answer):
    yield head
    async for data in answer:
        yield data


async def _answer(run: Run, request: Request):
    """The response's bytes. The first item starts the response: the first audio, or (SSE) a
    keep-alive comment / (raw) nothing while the request still waits in line."""
    sse = run.plan.stream_format == "sse"
    watcher = asyncio.create_task(_cancel_on_disconnect(request, run))
    chunks = run.chunks()
    first = asyncio.ensure_future(anext(chunks, None))
    error: BaseException | None = None
    try:
        async for keepalive in _waiting(run, first, sse):
            yield keepalive
        chunk = first.result()
        if chunk is None and run.stop_reason == "shutdown":  # the drain ran out of time
            raise ShuttingDown("the server shut down before this request's turn")
        if chunk is None:  # cancelled while in line
            return
        wrap = _sse_delta if sse else bytes
        stream = run.audio()
        head = _turn_event(chunk) if sse else b""  # a dialogue's turn starts here
        data = stream.write(chunk.samples)  # the response starts now, bytes or not
        yield head + (wrap(data) if data else b"")
        async for chunk in chunks:
            if sse and (event := _turn_event(chunk)):
                yield event
            if data := stream.write(chunk.samples):
                yield wrap(data)
        if run.stop_reason == "shutdown":
            raise ShuttingDown("the server shut down during this stream")
        if data := stream.close():
            yield wrap(data)
        if sse:
            yield _sse_done(run)
    except Exception as e:
        error = e
        if not run.answered:
            raise  # before the headers: a status, in the envelope
        if not isinstance(e, ShuttingDown | QueueTimeout):
            log.error("speech stream failed after %d frames: %s", run.record.frames, e, exc_info=e)
        if not sse:
            raise StreamAborted() from e  # the client sees a truncated body
        yield _sse_event({"type": "speech.audio.error", "error": describe(e).envelope()["error"]})
    except BaseException as e:  # the client went away (the response was closed)
        error = e
        raise
    finally:
        watcher.cancel()
        first.cancel()
        run.finish(error)


async def _waiting(run: Run, first: asyncio.Future, sse: bool):
    """Until the first chunk: every KEEPALIVE_S in line for a row of a full batch, something to
    answer with now (a client with a limit on the time to the headers, LiveKit's 30 s, neither
    times out nor retries): a keep-alive comment (SSE), nothing (raw audio). The deadline holds
    even if the engine ahead in the queue does not stop in time."""
    while True:
        await asyncio.wait({first}, timeout=max(0.0, min(KEEPALIVE_S, run.time_left)))
        if first.done():
            return
        if run.time_left <= 0:
            raise QueueTimeout(
                "no audio within limits.request_timeout_s "
                f"({run.service.limits.request_timeout_s:g} s); the server is busy"
            )
        yield b": keep-alive\n\n" if sse else b""


async def _cancel_on_disconnect(request: Request, run: Run) -> None:
    """Cancel the run when the client disconnects (also while it waits in the queue)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            run.cancel()
            return


def _sse_event(payload: dict) -> bytes:
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


def _turn_event(chunk) -> bytes:
    """`speech.turn.start` before a dialogue turn's first audio: its index and its start in
    the delivered audio, in seconds."""
    start = getattr(chunk, "turn_start", None)
    if start is None:
        return b""
    return _sse_event({"type": "speech.turn.start", "turn": chunk.turn, "start": round(start, 6)})


def _sse_done(run: Run) -> bytes:
    usage = {"input_tokens": run.plan.chars, "output_tokens": run.record.frames}
    usage["total_tokens"] = usage["input_tokens"] + usage["output_tokens"]
    return _sse_event({"type": "speech.audio.done", "usage": usage})


def _sse_delta(data: bytes) -> bytes:
    return _sse_event(
        {"type": "speech.audio.delta", "audio": base64.b64encode(data).decode("ascii")}
    )
