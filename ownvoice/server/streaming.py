"""The HTTP side of a speech request: admit, run on the engine thread, stream, log one line.

The response starts when the first audio chunk exists: errors found before that (a bad
reference clip, an unsupported language) still become proper 4xx responses. A request that
waits in line longer than KEEPALIVE_S (the batch is full) gets its response started then, so
that clients which give up after 30 s without a byte stay; SSE streams get keep-alive comments
until the audio comes, a raw stream's bytes start with the audio. After that, bytes
go out as each chunk is encoded; an error can then only end the stream (SSE sends a
`speech.audio.error` event, a raw stream is cut). A client that goes away, while queued or
while streaming, cancels its generation between frames and frees its place; so does a client
that stops reading for limits.send_timeout_s (its socket buffers full, the send would wait
forever). When a shutdown drain runs out of time (drain.py), the generation stops with reason
"shutdown": a request that is still in line gets 503 `shutting_down` (if its response has not
started), an SSE stream an error event, and a raw
stream is cut off so that the client sees it incomplete.
"""

from __future__ import annotations

import asyncio
import base64
import contextvars
import json
import logging
import time

from fastapi import Request
from fastapi.responses import Response, StreamingResponse

from ownvoice.server.errors import (
    InsufficientResources,
    QueueTimeout,
    ShuttingDown,
    error_response,
    is_out_of_memory,
)
from ownvoice.server.refusals import request_id
from ownvoice.service.encode import MEDIA_TYPES, AudioEncoder, TimeStretch
from ownvoice.service.generation import Generation
from ownvoice.service.planning import SpeechPlan, plan_pieces

log = logging.getLogger("ownvoice.server")

# a request still in line after this long gets its response started (and SSE a keep-alive
# comment this often): common clients give up after 30 s without a byte
KEEPALIVE_S = 10.0


class RequestRecord:
    """Collects what the per-request log line and the metrics report."""

    def __init__(self, metrics, log_text: bool, endpoint: str, request_id: str = "-"):
        self.metrics = metrics
        self.request_id = request_id
        self.log_text = log_text
        self.endpoint = endpoint
        self.t0 = time.monotonic()
        self.plan: SpeechPlan | None = None
        self.job: Generation | None = None
        self.frames = 0
        self.seconds = 0.0  # audio made
        self.delivered = 0.0  # audio sent: differs from the above by the speed change
        self.t_first: float | None = None
        self.t_last: float | None = None
        self.stop: str | None = None
        self.text: str | None = None
        self._done = False

    def chunk(self, chunk) -> None:
        now = time.monotonic()
        if self.t_first is None:
            self.t_first = now
        self.t_last = now
        self.frames += chunk.num_frames
        self.seconds += len(chunk.samples) / chunk.sample_rate
        if chunk.is_last and chunk.stop_reason:
            self.stop = chunk.stop_reason

    def finish(self, status: str) -> None:
        if self._done:
            return
        self._done = True
        now = time.monotonic()
        plan = self.plan
        fmt = plan.response_format if plan else ""
        stream = plan.stream_format if plan else ""
        audio_s = self.delivered
        self.metrics.requests.labels(status, fmt, stream).inc()
        self.metrics.request_seconds.observe(now - self.t0)
        self.metrics.audio_seconds.inc(audio_s)
        if status.isdigit() and int(status) >= 400:
            return  # refused before any audio: refusals.RefusalLog says why, in one line
        fields = [f"{self.endpoint} {status} id={self.request_id}"]
        if plan is not None:
            fields += [
                f"voice={plan.choice.label}",
                f"model={plan.choice.worker.name}",
                *([f"asked_model={plan.choice.asked_model}"] if plan.choice.asked_model else []),
                f"chars={plan.chars}",
                f"pieces={len(plan.pieces)}",
            ]
        fields.append(f"audio={audio_s:.2f}s")
        started = getattr(self.job, "t_started", None)
        if self.seconds > 0 and started is not None and self.t_last is not None:
            rtf = (self.t_last - started) / self.seconds  # generation speed, before any stretch
            fields.append(f"rtf={rtf:.2f}")
            self.metrics.rtf.observe(rtf)
        if self.t_first is not None:
            fields.append(f"ttfa={self.t_first - self.t0:.2f}s")
            self.metrics.ttfa.observe(self.t_first - self.t0)
        fields.append(f"total={now - self.t0:.2f}s")
        if plan is not None:
            fields += [f"fmt={fmt}", f"stream={stream}"]
            if plan.speed != 1.0:
                fields.append(f"speed={plan.speed:g}")
            if plan.ignored:
                fields.append(f"ignored={','.join(plan.ignored)}")
        # why the service stopped it (shutdown, stalled, timeout) says more than the engine's
        # "cancelled", which is all the engine knows
        stop = getattr(self.job, "stop_reason", None) or self.stop
        if stop:
            fields.append(f"stop={stop}")
        if self.log_text and self.text is not None:
            fields.append(f"text={self.text[:500]!r}")
        log.info(" ".join(fields))
        if status == "cancelled":
            self.metrics.cancelled.inc()


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


class _ClientStalled(Exception):
    pass


class AudioStreamResponse(StreamingResponse):
    """A StreamingResponse that drops a client which stops reading for `send_timeout` seconds
    (then calls `on_stall`) and that can end cut off (the body raises StreamAborted)."""

    def __init__(self, content, send_timeout: float, on_stall, **kwargs):
        super().__init__(content, **kwargs)
        self.send_timeout = send_timeout
        self.on_stall = on_stall

    async def __call__(self, scope, receive, send):
        async def timed_send(message) -> None:
            try:
                async with asyncio.timeout(self.send_timeout):
                    await send(message)  # waits while the client's socket buffers are full
            except TimeoutError:
                raise _ClientStalled() from None

        try:
            await super().__call__(scope, receive, timed_send)
        except _ClientStalled:
            log.warning(
                "the client read nothing for %g s (limits.send_timeout_s); stream dropped",
                self.send_timeout,
            )
            self.on_stall()
            await self.body_iterator.aclose()  # its cleanup frees the slot now, not at GC
        except StreamAborted:
            _cut_on_purpose.set(True)  # uvicorn closes the connection: an incomplete body


class SpeechResponder:
    def __init__(self, settings, pool, library, metrics, drain):
        self.settings = settings
        self.pool = pool
        self.library = library
        self.metrics = metrics
        self.drain = drain

    async def respond(self, make_plan, request: Request, endpoint: str, text: str) -> Response:
        """Plan (cheap), admit (429 when full), start the job, answer at the first chunk."""
        record = RequestRecord(
            self.metrics, self.settings.log_text, endpoint, request_id(request.scope)
        )
        record.text = text
        try:
            plan = record.plan = make_plan()
            worker = plan.choice.worker
            slot = worker.admission.admit()
            deadline = record.t0 + self.settings.limits.request_timeout_s
            job = record.job = Generation(
                plan_pieces(plan, self.pool, self.library), slot, deadline
            )
            self.drain.track(job)
            worker.submit(job)
        except Exception as e:
            record.finish(str(error_response(e).status_code))
            raise
        watcher = asyncio.create_task(_cancel_on_disconnect(request, job))
        chunks = job.chunks()
        first_chunk = asyncio.ensure_future(anext(chunks, None))
        patience = min(KEEPALIVE_S, deadline - time.monotonic())
        await asyncio.wait({first_chunk}, timeout=max(0.0, patience))
        if not first_chunk.done() and time.monotonic() < deadline:
            # in line for a row of a full batch: answer now, so that a client with a limit on
            # the time to the headers (LiveKit: 30 s) neither times out nor retries; SSE gets
            # keep-alive comments until the audio comes
            waiting = self._after_wait(plan, job, chunks, first_chunk, record, watcher, deadline)
            return self._response(plan, job, waiting)
        try:
            # the deadline holds even if the engine ahead in the queue does not stop in time
            first = await asyncio.wait_for(first_chunk, deadline - time.monotonic())
        except TimeoutError:
            watcher.cancel()
            job.cancel()
            record.finish("503")
            raise QueueTimeout(
                "no audio within limits.request_timeout_s "
                f"({self.settings.limits.request_timeout_s:g} s); the server is busy"
            ) from None
        except BaseException as e:
            watcher.cancel()
            job.cancel()
            if is_out_of_memory(e):
                record.finish("503")
                raise InsufficientResources() from e
            status = (
                "cancelled"
                if isinstance(e, asyncio.CancelledError)
                else str(error_response(e).status_code)
            )
            record.finish(status)
            raise
        if first is None and job.stop_reason == "cancelled":  # the client left while queued
            watcher.cancel()
            record.finish("cancelled")
            return Response(status_code=499)
        if first is None and job.stop_reason == "shutdown":  # the drain ran out of time
            watcher.cancel()
            record.finish("503")
            raise ShuttingDown("the server shut down before this request's turn")
        return self._response(plan, job, self._body(plan, job, chunks, first, record, watcher))

    def _response(self, plan: SpeechPlan, job: Generation, body) -> AudioStreamResponse:
        media_type = (
            "text/event-stream"
            if plan.stream_format == "sse"
            else MEDIA_TYPES[plan.response_format]
        )
        return AudioStreamResponse(
            body,
            send_timeout=self.settings.limits.send_timeout_s,
            on_stall=lambda: job.cancel("stalled"),
            media_type=media_type,
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    async def _after_wait(
        self, plan: SpeechPlan, job: Generation, chunks, first_chunk, record, watcher, deadline
    ):
        """The body of a response that started while the request waited in line: keep-alive
        comments (SSE) until the first audio, then the audio. A failure before the audio can
        no longer be a status: SSE sends a `speech.audio.error` event, a raw stream is cut."""
        sse = plan.stream_format == "sse"
        first = None
        try:
            while not first_chunk.done():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise QueueTimeout(
                        "no audio within limits.request_timeout_s "
                        f"({self.settings.limits.request_timeout_s:g} s); the server is busy"
                    )
                await asyncio.wait({first_chunk}, timeout=min(KEEPALIVE_S, remaining))
                if sse and not first_chunk.done():
                    yield b": keep-alive\n\n"
            first = first_chunk.result()
            if first is None and job.stop_reason == "shutdown":
                raise ShuttingDown("the server shut down before this request's turn")
        except Exception as e:
            watcher.cancel()
            job.cancel()
            first_chunk.cancel()
            record.finish("error" if not isinstance(e, QueueTimeout) else "timeout")
            if not sse:
                raise StreamAborted() from e
            body = error_response(e).body
            yield _sse_event({"type": "speech.audio.error", "error": json.loads(body)["error"]})
            return
        except BaseException:  # the client went away (the stream was closed)
            watcher.cancel()
            job.cancel()
            first_chunk.cancel()
            record.finish("cancelled")
            raise
        if first is None:  # cancelled while in line
            watcher.cancel()
            record.finish("cancelled")
            return
        async for data in self._body(plan, job, chunks, first, record, watcher):
            yield data

    async def _body(
        self, plan: SpeechPlan, job: Generation, chunks, first, record: RequestRecord, watcher
    ):
        sse = plan.stream_format == "sse"
        encoder = AudioEncoder(plan.response_format)
        stretch = TimeStretch(plan.speed) if plan.speed != 1.0 else None
        status = "cancelled"  # unless the end is reached: the client went away
        try:
            chunk = first
            while chunk is not None:
                record.chunk(chunk)
                samples = stretch.process(chunk.samples) if stretch else chunk.samples
                record.delivered += len(samples) / chunk.sample_rate
                data = encoder.write(samples)
                if data:
                    yield _sse_delta(data) if sse else data
                chunk = await anext(chunks, None)
            if job.stop_reason == "shutdown":
                status = "aborted"
                if not sse:
                    raise StreamAborted()
                body = error_response(ShuttingDown("the server shut down during this stream"))
                yield _sse_event(
                    {"type": "speech.audio.error", "error": json.loads(body.body)["error"]}
                )
                return
            tail = stretch.flush() if stretch else None
            if tail is not None:
                record.delivered += len(tail) / encoder.sample_rate
            data = (encoder.write(tail) if tail is not None else b"") + encoder.close()
            if data:
                yield _sse_delta(data) if sse else data
            status = "timeout" if job.stop_reason == "timeout" else "200"
            if sse:
                usage = {"input_tokens": plan.chars, "output_tokens": record.frames}
                usage["total_tokens"] = usage["input_tokens"] + usage["output_tokens"]
                yield _sse_event({"type": "speech.audio.done", "usage": usage})
        except StreamAborted:
            raise
        except Exception as e:  # headers are gone: the stream can only end
            status = "error"
            log.error("speech stream failed after %d frames: %s", record.frames, e, exc_info=e)
            if not sse:
                raise  # the connection is cut, so the client sees a truncated body
            body = error_response(e).body
            yield _sse_event({"type": "speech.audio.error", "error": json.loads(body)["error"]})
        finally:
            watcher.cancel()
            if status == "cancelled":
                job.cancel()
                if job.cancel_reason == "stalled":
                    status = "stalled"
            record.finish(status)


async def _cancel_on_disconnect(request: Request, job: Generation) -> None:
    """Cancel the job when the client disconnects (also while it waits in the queue)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            job.cancel()
            return


def _sse_event(payload: dict) -> bytes:
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


def _sse_delta(data: bytes) -> bytes:
    return _sse_event(
        {"type": "speech.audio.delta", "audio": base64.b64encode(data).decode("ascii")}
    )
