"""vLLM-Omni's `task_type` and `ref_audio` on a speech request: which kind of voice the client
wants, said outright, and never guessed between two.

    task_type    CustomVoice (a preset speaker), VoiceDesign (a described voice) or Base (a clone:
                 a library voice, or `ref_audio` given with the request)
    ref_audio    a clip to clone for this request only, as base64 or a `data:` URL
    speaker_embedding   a speaker's x-vector as numbers, cloned in x-vector-only mode (Base)

A request that names a voice and also gives `ref_audio` without `task_type` is refused: either
could be meant, and speaking the wrong one silently is worse than asking. With `task_type: Base`
the clip wins, and with `task_type: VoiceDesign` the description does (vLLM-Omni's clients send a
voice name by default, `vivian`, and vLLM-Omni ignores it there; a `design:<name>` voice is a
saved design and is kept). A URL or a file path in
`ref_audio` is refused, never fetched or read. Knows nothing about HTTP.
"""

from __future__ import annotations

import re
from dataclasses import replace

import torch

from ownvoice.engine.voice import VoicePrompt
from ownvoice.errors import InvalidInput

MAX_EMBEDDING_VALUES = 8192  # an x-vector is 1024 or 2048 numbers

TASK_TYPES = ("CustomVoice", "VoiceDesign", "Base")
ROLE_OF_TASK = {"CustomVoice": "presets", "VoiceDesign": "design", "Base": "clone"}
_URL = re.compile(r"^\s*(?:[a-zA-Z][a-zA-Z0-9+.-]*://|file:|www\.)")
_PATH = re.compile(r"^\s*(?:/|~|\.{1,2}/|[a-zA-Z]:\\).*\.(?:wav|flac|mp3|ogg|opus|m4a|aac)\s*$",
                   re.I)  # fmt: skip


def resolve_task(req):
    """The request (a SpeechInput) with its voice settled by task_type and ref_audio; raises
    InvalidInput for a contradiction."""
    task = req.task_type
    if task is not None and task not in TASK_TYPES:
        raise InvalidInput(f"task_type must be one of {', '.join(TASK_TYPES)}, got {task!r}",
                           param="task_type")  # fmt: skip
    voice = (req.voice or "").strip()
    if req.speaker_embedding is not None:
        if task not in (None, "Base"):
            raise InvalidInput("'speaker_embedding' is only valid for task_type Base",
                               param="speaker_embedding")  # fmt: skip
        if req.ref_audio is not None:
            raise InvalidInput("'speaker_embedding' and 'ref_audio' are mutually exclusive",
                               param="speaker_embedding")  # fmt: skip
        if voice and task is None:
            raise InvalidInput(
                f"the request names the voice {voice!r} and gives speaker_embedding: say which "
                "to use, by leaving one out or by setting task_type to Base",
                param="voice",
            )
        return replace(req, voice="", voice_prompt=embedding_prompt(req.speaker_embedding))
    if req.voice_prompt is not None:  # a voice already encoded, in process: a clone
        if task not in (None, "Base"):
            raise InvalidInput(f"a voice prompt is cloned by task_type Base, not {task}",
                               param="voice")  # fmt: skip
        return req
    if req.ref_audio is not None:
        if task not in (None, "Base"):
            raise InvalidInput(
                f"ref_audio is a voice to clone, which task_type Base does, not {task}",
                param="ref_audio",
            )
        if voice and task is None:
            raise InvalidInput(
                f"the request names the voice {voice!r} and gives ref_audio: say which to use, "
                "by leaving one out or by setting task_type to Base (clone ref_audio)",
                param="voice",
            )
        check_reference_source(req.ref_audio)
        return replace(req, voice="")
    if task == "VoiceDesign":
        if voice.lower() != "design" and not voice.lower().startswith("design:"):
            voice = "design"  # vLLM-Omni's clients always send one ("vivian"); it ignores it
        return replace(req, voice=voice)
    if not voice:
        raise InvalidInput(
            "voice is required: a preset speaker, an OpenAI voice name, clone:<name> or design "
            "(or give ref_audio with task_type Base to clone a clip)",
            param="voice",
        )
    return req


def embedding_prompt(values) -> VoicePrompt:
    """A speaker's x-vector sent as numbers: a voice prompt of x-vector-only mode."""
    if not values:
        raise InvalidInput("speaker_embedding is empty", param="speaker_embedding")
    embedding = torch.tensor(values, dtype=torch.float32)
    if not bool(torch.isfinite(embedding).all()):
        raise InvalidInput("speaker_embedding holds a value that is not a finite number",
                           param="speaker_embedding")  # fmt: skip
    return VoicePrompt(speaker_embedding=embedding, ref_codes=None, ref_text=None)


def check_embedding_size(prompt: VoicePrompt, engine) -> None:
    """A sent x-vector has the length the clone model's speaker encoder gives (once loaded)."""
    size = engine.speaker_embedding_size if engine is not None else None
    have = prompt.speaker_embedding.numel()
    if size is not None and have != size:
        raise InvalidInput(
            f"speaker_embedding has {have} dimensions; this clone model's have {size}",
            param="speaker_embedding",
        )


def check_role(task: str | None, role: str, voice: str) -> None:
    """The voice chosen is of the kind task_type asks for."""
    if task is not None and ROLE_OF_TASK[task] != role:
        raise InvalidInput(
            f"task_type {task} needs a {_KIND[ROLE_OF_TASK[task]]}; {voice!r} is a {_KIND[role]}",
            param="voice",
        )


_KIND = {"presets": "preset speaker", "design": "designed voice", "clone": "cloned voice"}


def check_reference_source(data: str) -> None:
    """ref_audio is the clip itself: refuse a URL or a file path (never fetched, never read)."""
    if _URL.match(data):
        raise InvalidInput(
            "ref_audio must be the clip itself, as base64 or a data: URL; a URL is never fetched",
            param="ref_audio",
        )
    if _PATH.match(data):
        raise InvalidInput(
            "ref_audio must be the clip itself, as base64 or a data: URL; a file path is never "
            "read (send the file's bytes, base64-encoded)",
            param="ref_audio",
        )
