"""The voice list (open, for Open WebUI; the library's details need the key when one is set)
and the library: upload and delete cloned voices.

GET /v1/voices and GET /v1/audio/voice-clone/capabilities answer as in the Qwen3-TTS OpenAI
server, whose users' scripts and write-ups call them."""

from __future__ import annotations

import asyncio
import calendar
import logging
import mimetypes
import time

from fastapi import APIRouter, Depends, Request
from starlette.datastructures import UploadFile

from ownvoice.errors import AudioError, InvalidInput
from ownvoice.languages import KNOWN, NAMES
from ownvoice.server.auth import require_api_key
from ownvoice.server.errors import Unauthorized
from ownvoice.server.protocol import (
    ERROR_RESPONSES,
    NOT_BLANK,
    CloneCapabilities,
    VoiceListResponse,
    VoiceResource,
)
from ownvoice.service.library import (
    MAX_CONSENT_CHARS,
    MAX_DESCRIPTION_CHARS,
    MAX_LANGUAGE_CHARS,
    MAX_REF_SECONDS,
    MAX_REF_TEXT_CHARS,
    MIN_REF_SECONDS,
    NAME_PATTERN,
    NAME_RULE,
    RESERVED_NAMES,
    WINDOWS_DEVICES,
    check_description,
    check_voice_fields,
)

log = logging.getLogger("ownvoice.server")
public = APIRouter(responses=ERROR_RESPONSES)
router = APIRouter(dependencies=[Depends(require_api_key)], responses=ERROR_RESPONSES)

_NO = ("", "0", "false", "no", "off", "none", "null")
_YES = ("1", "true", "yes", "on")


@public.get("/v1/audio/voices", response_model=VoiceListResponse)
@public.get("/v1/voices", response_model=VoiceListResponse)
async def list_voices(request: Request) -> dict:
    state = request.app.state
    voices = await asyncio.to_thread(state.service.voicemap.list)
    languages = set()
    for w in state.service.pool.workers.values():
        if w.engine is not None:
            languages.update(w.engine.supported_languages)
    # the route is open for Open WebUI, which reads only `voices` (ids and names); the library's
    # details, what each speaker said in the clip and their consent, are for key holders
    uploaded = []
    if _has_key(request):
        profiles = await asyncio.to_thread(state.service.library.profiles)
        uploaded = [_uploaded(p) for p in profiles]
    return {
        "voices": voices,
        "languages": sorted(languages),
        "uploaded_voices": uploaded,
        "reference_seconds": {"min": MIN_REF_SECONDS, "max": MAX_REF_SECONDS},
    }


def _has_key(request: Request) -> bool:
    """Whether the request may see what the key guards: it sends the key, or none is set."""
    try:
        require_api_key(request, None)
    except Unauthorized:
        return False
    return True


def _uploaded(profile) -> dict:
    try:
        size = profile.ref_audio.stat().st_size
    except OSError:  # deleted since it was listed
        size = 0
    return {
        "name": profile.name,
        "consent": profile.consent,
        "created_at": _resource(profile)["created_at"],
        "file_size": size,
        "mime_type": mimetypes.guess_type(profile.ref_audio.name)[0] or "application/octet-stream",
        "ref_text": profile.ref_text,
        **({"speaker_description": profile.description} if profile.description else {}),
    }


@router.get("/v1/audio/voice-clone/capabilities", response_model=CloneCapabilities)
async def clone_capabilities(request: Request) -> dict:
    """Whether `clone:` voices and POST /v1/audio/voice-clone work here, and on which model."""
    pool = request.app.state.service.pool
    model = pool.roles.get("clone")
    return {
        "supported": model is not None,
        "model_type": pool.types.get(model) if model else None,
        "model": model,
        "icl_mode_available": model is not None,  # reference clip + its transcript
        "x_vector_mode_available": model is not None,  # the clip's timbre alone
        "voices": len(await asyncio.to_thread(request.app.state.service.library.profiles))
        if model
        else 0,
    }


_FLAG = {"type": "string", "enum": ["true", "false"]}


def _any_case(word: str) -> str:
    """A JSON Schema pattern (no flags in its regex dialect) for `word` in any case."""
    return "".join(f"[{c.upper()}{c.lower()}]" if c.isalpha() else c for c in word)


# what the form's text fields lose to str.strip(), as a character class
_SPACE = NOT_BLANK.replace("[^", "[", 1) + "*"
# consent that is not blank and not what the server reads as a no (_NO, any case, spaces
# around); a lookahead, not `not`, which schemathesis cannot apply beside a binary field
_WORDS = "|".join(_any_case(w) for w in _NO if w)
_CONSENT = f"^(?!{_SPACE}(?:{_WORDS}){_SPACE}$){_SPACE}{NOT_BLANK}"
# a name Windows can hold too (library.validate_name): no device name, with any extension, and
# no ending "."
_DEVICES = "|".join(_any_case(d) for d in sorted(WINDOWS_DEVICES))
_NAME = NAME_PATTERN.replace("^", f"^(?!(?:{_DEVICES}) *(?:\\.|$))(?!.*\\.$)", 1)
# the multipart body, read by hand (a file and text fields); FastAPI cannot infer it
_UPLOAD_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["name", "audio_sample", "consent"],
                    "properties": {
                        "name": {
                            "type": "string",
                            "pattern": _NAME,
                            "description": f"{NAME_RULE}; not one of {sorted(RESERVED_NAMES)},"
                            " nor a name Windows refuses (CON, NUL, COM1, aux.txt, ..., or one "
                            "ending in '.')",
                        },
                        "audio_sample": {
                            "type": "string",
                            "format": "binary",
                            "description": f"WAV, FLAC, Ogg or MP3: {MIN_REF_SECONDS:.0f}-"
                            f"{MAX_REF_SECONDS:.0f} s of clean speech",
                        },
                        "consent": {
                            "type": "string",
                            "minLength": 1,
                            "maxLength": MAX_CONSENT_CHARS,
                            "pattern": _CONSENT,
                            "description": "The speaker agreed to be cloned: true, or an id",
                        },
                        "ref_text": {
                            "type": "string",
                            "maxLength": MAX_REF_TEXT_CHARS,
                            "description": "Transcript of the clip (ICL cloning, the better one)",
                        },
                        "language": {
                            "type": "string",
                            "maxLength": MAX_LANGUAGE_CHARS,
                            "enum": sorted({*KNOWN, *NAMES}),
                            "description": "Language name or code (english, en, zh, ...)",
                        },
                        "x_vector_only_mode": _FLAG,
                        "speaker_description": {
                            "type": "string",
                            "maxLength": MAX_DESCRIPTION_CHARS,
                            "description": "Who the speaker is, in words (kept and listed, "
                            "as vLLM-Omni does; it does not change the voice)",
                        },
                    },
                }
            }
        },
    }
}


@router.post("/v1/audio/voices", response_model=VoiceResource, openapi_extra=_UPLOAD_BODY)
async def create_voice(request: Request) -> dict:
    """Multipart: name, audio_sample (file), consent, and optional ref_text, language,
    x_vector_only_mode, speaker_description. The clip must be 3-30 s of clean speech."""
    state = request.app.state
    if state.service.pool.roles.get("clone") is None:
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
        x_vector_only = _flag(form, "x_vector_only_mode")
        ref_text, language = check_voice_fields(
            _text(form, "ref_text"), _text(form, "language"), consent, _clone_languages(state)
        )
        description = check_description(_text(form, "speaker_description"))
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
                state.service.library.add,
                name,
                data,
                ref_text=ref_text,
                x_vector_only=x_vector_only,
                language=language,
                consent=record,
                languages=_clone_languages(state),
                description=description,
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
    profile = await asyncio.to_thread(request.app.state.service.library.remove, voice_id)
    log.info("voice deleted: %s", profile.voice_id)
    return {"id": profile.voice_id, "object": "audio.voice.deleted", "deleted": True}


def _text(form, key: str) -> str:
    value = form.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise InvalidInput(f"{key} must be a text field, not a file", param=key)
    return value.strip()


def _flag(form, key: str) -> bool:
    """A yes/no form field, strictly: a value that is neither is refused, not read as yes."""
    value = _text(form, key).lower()
    if value in _NO:
        return False
    if value in _YES:
        return True
    raise InvalidInput(f"{key} must be true or false, not {value[:40]!r}", param=key)


def _clone_languages(state) -> list[str] | None:
    """The clone model's languages when it is loaded (None: every language of the family)."""
    worker = state.service.pool.workers.get(state.service.pool.roles.get("clone") or "")
    return worker.engine.supported_languages if worker and worker.engine else None


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
