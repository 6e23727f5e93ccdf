"""POST /v1/audio/dialogue: turns of several voices in one request, answered like a speech
request (the same formats, raw or SSE streaming; each turn's start in a `speech.turn.start`
event). Each turn is spoken as `POST /v1/audio/speech` speaks its text in its voice with the
request's seed; turns are joined with `pause_s` of silence and, unless `level` is false, each
voice is brought to the same loudness (service/script.py)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response
from pydantic import Field

from ownvoice.server.auth import require_api_key
from ownvoice.server.protocol import ERROR_RESPONSES, OpenAIBaseModel, SpeechOptions, VoiceRef
from ownvoice.server.refusals import request_id
from ownvoice.server.routes.speech import AUDIO_RESPONSES, log_ignored
from ownvoice.server.streaming import respond
from ownvoice.service.script import DEFAULT_TURN_PAUSE_S, MAX_TURNS, DialogueInput, Turn
from ownvoice.service.speech import Origin

router = APIRouter(dependencies=[Depends(require_api_key)], responses=ERROR_RESPONSES)


class DialogueTurn(OpenAIBaseModel):
    voice: str | VoiceRef
    """Any voice `/v1/audio/voices` lists: preset, `clone:<name>`, `design:<name>`."""
    text: str = Field(min_length=1)
    """What this voice says; pause tags (`[pause:1.5]`) and SSML are read as in `input`."""
    instructions: str | None = Field(None, max_length=4096)
    """Style for this turn (models that take one); default: the request's `instructions`."""
    language: str | None = None
    """This turn's language; default: the request's."""


class DialogueRequest(SpeechOptions):
    """POST /v1/audio/dialogue. Every field of a speech request but `input` and `voice` applies
    to every turn."""

    model: str | None = None
    turns: list[DialogueTurn] = Field(min_length=1, max_length=MAX_TURNS)
    pause_s: float = Field(DEFAULT_TURN_PAUSE_S, ge=0, le=10)
    """Silence between two turns, in seconds (exact)."""
    level: bool = True
    """Bring each voice to the same loudness (-18 LUFS, peaks under -1 dBTP), as a book's cast
    is; false: each turn exactly as `/v1/audio/speech` makes it."""
    instructions: str | None = Field(None, max_length=4096)

    def to_dialogue(self) -> DialogueInput:
        turns = tuple(
            Turn(
                voice=t.voice.id if isinstance(t.voice, VoiceRef) else t.voice,
                text=t.text,
                instructions=t.instructions,
                language=t.language,
            )
            for t in self.turns
        )
        base = self._input(input="", model=self.model, instructions=self.instructions)
        return DialogueInput(turns=turns, base=base, pause_s=self.pause_s, level=self.level)


@router.post("/v1/audio/dialogue", response_class=Response, responses=AUDIO_RESPONSES)
async def create_dialogue(body: DialogueRequest, request: Request) -> Response:
    """Speak a dialogue: turns of several voices, joined with exact pauses, each voice levelled."""
    log_ignored(body)
    text = "\n".join(t.text for t in body.turns)
    origin = Origin("dialogue", request_id(request.scope), text=text)
    return await respond(request.app.state.service.dialogue(body.to_dialogue(), origin), request)
