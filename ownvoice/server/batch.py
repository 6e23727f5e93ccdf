"""POST /v1/audio/speech/batch (vLLM-Omni's): up to 32 speech requests in one call, run
together through the engines' batches; each item's audio or error, and the counts.

    {"items": [{"input": "Hello.", "voice": "ryan"}, {"input": "Bye.", "seed": 3}],
     "voice": "vivian", "response_format": "wav"}     # top-level fields: every item's default

An item is a whole speech request (any field of POST /v1/audio/speech; the item's own value wins
over the default). Its result, as vLLM-Omni's: {"index", "status": "success", "audio_data"
(base64 of the file), "media_type"} or {"index", "status": "error", "error": message}, plus
ours: "response_format" and "duration", or "error_detail" (the envelope's type, param, code).
Items wait for each other's places instead of refusing each other with 429; the call answers
200 once it was read, whatever its items did, with `total`, `succeeded` and `failed`. A client
that goes away cancels every item still running.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
import uuid

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from ownvoice.errors import QueueTimeout, ShuttingDown
from ownvoice.server.errors import error_body, error_response, validation_message
from ownvoice.server.protocol import SpeechRequest
from ownvoice.server.refusals import request_id
from ownvoice.server.streaming import RequestRecord
from ownvoice.service.encode import MEDIA_TYPES, AudioEncoder, TimeStretch
from ownvoice.service.generation import Generation
from ownvoice.service.planning import plan_pieces

MAX_ITEMS = 32
_ADMIT_POLL_S = 0.02


async def speak_batch(request: Request, defaults: dict, items: list[dict]) -> dict:
    state = request.app.state
    jobs: list[Generation] = []
    watcher = asyncio.create_task(_cancel_all_on_disconnect(request, jobs))
    try:
        results = await asyncio.gather(
            *(_item(state, request, n, {**defaults, **item}, jobs) for n, item in enumerate(items))
        )
    finally:
        watcher.cancel()
    succeeded = sum(r["status"] == "success" for r in results)
    return {
        "id": f"speechbatch-{uuid.uuid4().hex}",
        "object": "audio.speech.batch",
        "total": len(results),
        "succeeded": succeeded,
        "failed": len(results) - succeeded,
        "results": results,
    }


async def _item(state, request: Request, index: int, fields: dict, jobs: list) -> dict:
    record = RequestRecord(state.metrics, state.settings.log_text, "speech-batch",
                           f"{request_id(request.scope)}.{index}")  # fmt: skip
    try:
        try:
            body = SpeechRequest.model_validate({**fields, "stream_format": "audio"})
        except ValidationError as e:
            errors = [{**err, "loc": ("body", *err["loc"])} for err in e.errors()]
            message, param = validation_message(RequestValidationError(errors))
            record.finish("400")
            return _failed(index, error_body(message, "invalid_request_error", param))
        record.text = body.input
        plan = record.plan = state.planner.plan(body.to_input())
        worker = plan.choice.worker
        slot = await _admitted(worker, record.t0 + state.settings.limits.request_timeout_s)
        deadline = time.monotonic() + state.settings.limits.request_timeout_s
        job = record.job = Generation(plan_pieces(plan, state.pool, state.library), slot, deadline)
        jobs.append(job)
        state.drain.track(job)
        worker.submit(job)
        audio, seconds = await _collect(plan, job, record)
    except Exception as e:
        response = error_response(e)
        record.finish(str(response.status_code))
        return _failed(index, json.loads(response.body))
    record.finish("200")
    return {
        "index": index,
        "status": "success",
        "audio_data": base64.b64encode(audio).decode("ascii"),
        "media_type": MEDIA_TYPES[plan.response_format],
        "response_format": plan.response_format,
        "duration": round(seconds, 3),
    }


def _failed(index: int, envelope: dict) -> dict:
    error = envelope["error"]
    return {"index": index, "status": "error", "error": error["message"], "error_detail": error}


async def _admitted(worker, deadline: float):
    """A place in the worker's queue, waiting for one (the batch's own items hold the others)."""
    while (slot := worker.admission.try_admit()) is None:
        if time.monotonic() > deadline:
            raise QueueTimeout("no place in the queue within limits.request_timeout_s")
        await asyncio.sleep(_ADMIT_POLL_S)
    return slot


async def _collect(plan, job: Generation, record: RequestRecord) -> tuple[bytes, float]:
    """The whole encoded file of one item, and its length in seconds."""
    encoder = AudioEncoder(plan.response_format)
    stretch = TimeStretch(plan.speed) if plan.speed != 1.0 else None
    data = bytearray()
    async for chunk in job.chunks():
        record.chunk(chunk)
        samples = stretch.process(chunk.samples) if stretch else chunk.samples
        record.delivered += len(samples) / chunk.sample_rate
        data += encoder.write(samples)
    if job.stop_reason == "shutdown":
        raise ShuttingDown("the server shut down during this item")
    if job.stop_reason in ("cancelled", "timeout"):
        raise QueueTimeout(f"the item stopped before its end ({job.stop_reason})")
    tail = stretch.flush() if stretch else None
    if tail is not None:
        record.delivered += len(tail) / encoder.sample_rate
        data += encoder.write(tail)
    data += encoder.close()
    return bytes(data), record.delivered


async def _cancel_all_on_disconnect(request: Request, jobs: list) -> None:
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            for job in jobs:
                job.cancel()
            return
