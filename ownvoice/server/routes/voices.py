"""The voice list (open, for Open WebUI) and the library: upload and delete cloned voices.

GET /v1/voices and GET /v1/audio/voice-clone/capabilities answer as in the Qwen3-TTS OpenAI
server, whose users' scripts and write-ups call them."""

from __future__ import annotations

import asyncio
import calendar
import logging
import time

from fastapi import APIRouter, Depends, Request
from starlette.datastructures import UploadFile

from ownvoice.errors import AudioError, InvalidInput
from ownvoice.server.auth import require_api_key
from ownvoice.server.protocol import (
    ERROR_RESPONSES,
    CloneCapabilities,
    VoiceListResponse,
    VoiceResource,
)

log = logging.getLogger("ownvoice.server")
public = APIRouter(responses=ERROR_RESPONSES)
router = APIRouter(dependencies=[Depends(require_api_key)], responses=ERROR_RESPONSES)

_NO = ("", "0", "false", "no", "off", "none", "null")


@public.get("/v1/audio/voices", response_model=VoiceListResponse)
@public.get("/v1/voices", response_model=VoiceListResponse)
async def list_voices(request: Request) -> dict:
    state = request.app.state
    voices = await asyncio.to_thread(state.voicemap.list)
    languages = set()
    for w in state.pool.workers.values():
        if w.engine is not None:
            languages.update(w.engine.supported_languages)
    return {"voices": voices, "languages": sorted(languages)}


@router.get("/v1/audio/voice-clone/capabilities", response_model=CloneCapabilities)
async def clone_capabilities(request: Request) -> dict:
    """Whether `clone:` voices and POST /v1/audio/voice-clone work here, and on which model."""
    pool = request.app.state.pool
    model = pool.roles.get("clone")
    return {
        "supported": model is not None,
        "model_type": pool.types.get(model) if model else None,
        "model": model,
        "icl_mode_available": model is not None,  # reference clip + its transcript
        "x_vector_mode_available": model is not None,  # the clip's timbre alone
        "voices": len(await asyncio.to_thread(request.app.state.library.profiles)) if model else 0,
    }


@router.post("/v1/audio/voices", response_model=VoiceResource)
async def create_voice(request: Request) -> dict:
    """Multipart: name, audio_sample (file), consent, and optional ref_text, language,
    x_vector_only_mode. The clip must be 3-30 s of clean speech."""
    state = request.app.state
    if state.pool.roles.get("clone") is None:
        log.warning("voice uploaded, but no clone model is configured (roles.clone)")
    form = await request.form(max_files=1, max_fields=10)
    try:
        name = _text(form, "name")
        if not name:
            raise InvalidInput("name is required", param="name")
        upload = form.get("audio_sample")
        if not isinstance(upload, UploadFile):
            raise InvalidInput("audio_sample must be an attached audio file", param="audio_sample")
        consent = _text(form, "consent")
        if consent.lower() in _NO:
            raise InvalidInput(
                "consent is required: confirm that the speaker agreed to have their voice "
                "cloned (consent=true, or a consent id)",
                param="consent",
            )
        data = await upload.read()
        record = {
            "attested": True,
            "value": consent,
            "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "by": "api",
        }
        try:
            profile = await asyncio.to_thread(
                state.library.add,
                name,
                data,
                ref_text=_text(form, "ref_text") or None,
                x_vector_only=_text(form, "x_vector_only_mode").lower() not in _NO,
                language=_text(form, "language") or None,
                consent=record,
            )
        except AudioError as e:
            raise AudioError(f"audio_sample: {e.message}", param="audio_sample") from e
    finally:
        await form.close()
    log.info(
        "voice added: %s (%s)", profile.voice_id, "x-vector" if profile.x_vector_only else "icl"
    )
    return _resource(profile)


@router.delete("/v1/audio/voices/{voice_id}")
async def delete_voice(voice_id: str, request: Request) -> dict:
    profile = await asyncio.to_thread(request.app.state.library.remove, voice_id)
    log.info("voice deleted: %s", profile.voice_id)
    return {"id": profile.voice_id, "object": "audio.voice.deleted", "deleted": True}


def _text(form, key: str) -> str:
    value = form.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidInput(f"{key} must be a text field, not a file", param=key)
    return value.strip()


def _resource(profile) -> dict:
    created = 0
    if profile.created_at:
        try:
            created = calendar.timegm(time.strptime(profile.created_at, "%Y-%m-%dT%H:%M:%SZ"))
        except ValueError:
            pass
    return {
        "id": profile.voice_id,
        "name": profile.name,
        "created_at": created,
        "profile_id": profile.profile_id,
        "x_vector_only_mode": profile.x_vector_only,
        "language": profile.language,
    }
