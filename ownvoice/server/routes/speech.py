"""POST /v1/audio/speech (OpenAI), POST /v1/audio/voice-clone (seed server, one-shot clone) and
POST /v1/audio/speech/batch (vLLM-Omni)."""

from __future__ import annotations

import logging

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from ownvoice.server.auth import require_api_key
from ownvoice.server.batch import speak_batch
from ownvoice.server.protocol import (
    ERROR_RESPONSES,
    SpeechBatchRequest,
    SpeechBatchResponse,
    SpeechRequest,
    VoiceCloneRequest,
)
from ownvoice.server.refusals import request_id
from ownvoice.server.streaming import respond
from ownvoice.service.encode import MEDIA_TYPES
from ownvoice.service.speech import Origin

log = logging.getLogger("ownvoice.server")
router = APIRouter(dependencies=[Depends(require_api_key)], responses=ERROR_RESPONSES)

_BYTES = {"schema": {"type": "string", "format": "binary"}}
# what is actually sent: the response_format's type, or SSE events for stream_format=sse
AUDIO_RESPONSES = {
    200: {
        "description": "The audio, streamed as it is made (or SSE events)",
        "content": {
            **{media: _BYTES for media in dict.fromkeys(MEDIA_TYPES.values())},
            # each event: `data:` a JSON speech.audio.delta / .done / .error
            "text/event-stream": {
                "schema": {
                    "type": "object",
                    "required": ["data"],
                    "properties": {"data": {"type": "string"}, "event": {"type": "string"}},
                }
            },
        },
    }
}


@router.post("/v1/audio/speech", response_class=Response, responses=AUDIO_RESPONSES)
async def create_speech(body: SpeechRequest, request: Request) -> Response:
    """Generate speech; audio is streamed as it is generated."""
    return await _speak(body, request, "speech")


@router.post("/v1/audio/voice-clone", response_class=Response, responses=AUDIO_RESPONSES)
async def create_voice_clone(body: VoiceCloneRequest, request: Request) -> Response:
    """Speak in the voice of a base64 reference clip, without saving it."""
    return await _speak(body, request, "voice-clone")


async def _speak(body: SpeechRequest | VoiceCloneRequest, request: Request, endpoint: str):
    log_ignored(body)
    origin = Origin(endpoint, request_id(request.scope), text=body.input)
    return await respond(request.app.state.service.speak(body.to_input(), origin), request)


@router.post("/v1/audio/speech/batch", response_model=SpeechBatchResponse)
async def create_speech_batch(body: SpeechBatchRequest, request: Request) -> dict:
    """Up to 32 speech requests at once, run together; each item's audio (base64) or error."""
    return await speak_batch(request, body.model_extra or {}, body.items)


def log_ignored(body) -> None:
    if body.model_extra:
        log.debug("ignoring unknown request fields: %s", ", ".join(sorted(body.model_extra)))
