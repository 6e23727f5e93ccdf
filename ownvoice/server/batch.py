"""POST /v1/audio/speech/batch (vLLM-Omni's): up to 32 speech requests in one call, run
together through the engines' batches; each item's audio or error, and the counts.

    {"items": [{"input": "Hello.", "voice": "ryan"}, {"input": "Bye.", "seed": 3}],
     "voice": "vivian", "response_format": "wav"}     # top-level fields: every item's default

An item is a whole speech request (any field of POST /v1/audio/speech; the item's own value wins
over the default). Its result, as vLLM-Omni's: {"index", "status": "success", "audio_data"
(base64 of the file), "media_type"} or {"index", "status": "error", "error": message}, plus
ours: "response_format" and "duration", or "error_detail" (the envelope's type, param, code).
Items are admitted one by one as places free, in order, and wait instead of refusing each
other with 429 (SpeechService.speak_in_turn: together they hold at most the batch's rows, so
single requests keep their queue); the call answers 200 once it was read, whatever its items
did, with `total`, `succeeded` and `failed`. A client that goes away cancels every item still
running.
"""

from __future__ import annotations

import asyncio
import base64
import uuid

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from ownvoice.errors import InvalidInput, QueueTimeout, ShuttingDown, describe
from ownvoice.server.errors import validation_message
from ownvoice.server.protocol import SpeechRequest
from ownvoice.server.refusals import request_id
from ownvoice.service.encode import MEDIA_TYPES
from ownvoice.service.speech import Origin, Run


async def speak_batch(request: Request, defaults: dict, items: list[dict]) -> dict:
    service = request.app.state.service
    runs: list[Run] = []
    gone = asyncio.Event()
    watcher = asyncio.create_task(_cancel_all_on_disconnect(request, runs, gone))
    try:
        results = await asyncio.gather(
            *(
                _item(service, request, n, {**defaults, **item}, runs, gone)
                for n, item in enumerate(items)
            )
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


async def _item(
    service, request: Request, index: int, fields: dict, runs: list[Run], gone: asyncio.Event
) -> dict:
    origin = Origin(
        "speech-batch", f"{request_id(request.scope)}.{index}", text=fields.get("input")
    )
    try:
        body = SpeechRequest.model_validate({**fields, "stream_format": "audio"})
    except ValidationError as e:
        errors = [{**err, "loc": ("body", *err["loc"])} for err in e.errors()]
        message, param = validation_message(RequestValidationError(errors))
        return _failed(index, service.refuse(origin, InvalidInput(message, param=param)))
    try:
        run = await service.speak_in_turn(body.to_input(), origin)
    except Exception as e:  # refused (and counted) by the service
        return _failed(index, e)
    runs.append(run)
    if gone.is_set():  # the client left while this item waited for its place
        run.cancel()
    error = None
    try:
        stream = run.audio()
        data = bytearray()
        async for chunk in run.chunks():
            data += stream.write(chunk.samples)
        if run.stop_reason == "shutdown":
            return _failed(index, ShuttingDown("the server shut down during this item"))
        if run.stop_reason is not None:
            return _failed(
                index, QueueTimeout(f"the item stopped before its end ({run.stop_reason})")
            )
        data += stream.close()
    except Exception as e:
        error = e
        return _failed(index, e)
    except BaseException as e:
        error = e
        raise
    finally:
        run.finish(error)
    return {
        "index": index,
        "status": "success",
        "audio_data": base64.b64encode(bytes(data)).decode("ascii"),
        "media_type": MEDIA_TYPES[run.plan.response_format],
        "response_format": run.plan.response_format,
        "duration": round(stream.seconds, 3),
    }


def _failed(index: int, e: BaseException) -> dict:
    error = describe(e).envelope()["error"]
    return {"index": index, "status": "error", "error": error["message"], "error_detail": error}


async def _cancel_all_on_disconnect(request: Request, runs: list[Run], gone) -> None:
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            gone.set()
            for run in runs:
                run.cancel()
            return
