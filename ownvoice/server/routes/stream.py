"""WebSocket /v1/audio/speech/stream: text in pieces, audio out (server/speech_stream.py)."""

from __future__ import annotations

from fastapi import APIRouter, WebSocket

from ownvoice.server.speech_stream import SpeechStream

public = APIRouter()  # the session checks the key itself (a header or a subprotocol)
router = APIRouter()


@public.websocket("/v1/audio/speech/stream")
async def speech_stream(websocket: WebSocket) -> None:
    await SpeechStream(websocket).run()
