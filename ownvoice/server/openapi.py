"""The OpenAPI document, made to say exactly what this server accepts.

FastAPI's document is built from the wire types, which cannot know what a configuration and
the loaded models allow. On top of it: the text length limit (limits.max_input_chars), what a
one-shot clone's clip must look like (base64, maybe in a `data:` URL), the seed's exact bounds,
the voices that exist now (an enum: a name that is not listed is refused with 400), the
languages (names and codes, in every spelling the server takes), the rules that tie fields
together (ICL cloning needs the transcript; a task_type names voices of its kind), and no
security scheme when no API key is set. The voices change while the server runs, so the
document is made again on each request for it (a few milliseconds; clients read it rarely).
"""

from __future__ import annotations

import copy
import re

from fastapi import FastAPI

from ownvoice.languages import KNOWN, NAMES
from ownvoice.server.protocol import MAX_SEED, MIN_SEED, NOT_BLANK

# what planning.py decodes: standard base64 with its padding, maybe after a `data:...,` prefix
# (whether the bytes are 3-30 s of speech no schema can say)
BASE64_CLIP = (
    r"^(data:[^,]*,)?([A-Za-z0-9+/]{4})*"
    r"([A-Za-z0-9+/]{4}|[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)$"
)


def document(app: FastAPI, settings) -> dict:
    if app.openapi_schema is None:
        FastAPI.openapi(app)  # the static part, once (FastAPI caches it on the app)
    doc = copy.deepcopy(app.openapi_schema)
    schemas = doc["components"]["schemas"]
    languages = {"anyOf": [{"type": "string", "enum": sorted({*KNOWN, *NAMES})},
                           {"type": "string", "pattern": language_pattern()}]}  # fmt: skip
    text = dict(minLength=1, maxLength=settings.limits.max_input_chars, pattern=NOT_BLANK)
    schemas["DialogueTurn"]["properties"]["text"].update(text)
    schemas["DialogueTurn"]["properties"]["language"]["anyOf"] = [*languages["anyOf"],
                                                                  {"type": "null"}]  # fmt: skip
    for name in ("SpeechRequest", "VoiceCloneRequest", "DialogueRequest"):
        props = schemas[name]["properties"]
        if "input" in props:
            props["input"].update(text)
        props["language"]["anyOf"] = [*languages["anyOf"], {"type": "null"}]
        # FastAPI's document holds bounds as floats, and 2**64 - 1 is no float (it would say
        # 2**64, which the server refuses)
        seed = next(b for b in props["seed"]["anyOf"] if b.get("type") == "integer")
        seed.update(minimum=MIN_SEED, maximum=MAX_SEED)
    schemas["DesignRequest"]["properties"]["language"]["anyOf"] = [*languages["anyOf"],
                                                                    {"type": "null"}]  # fmt: skip
    schemas["VoiceCloneRequest"]["properties"]["ref_audio"].update(pattern=BASE64_CLIP)
    _voices(schemas, app.state.service.voicemap.list())
    # one-shot ICL cloning needs the clip's transcript; x-vector mode does not
    schemas["VoiceCloneRequest"]["if"] = {
        "not": {
            "properties": {"x_vector_only_mode": {"const": True}},
            "required": ["x_vector_only_mode"],
        }
    }
    schemas["VoiceCloneRequest"]["then"] = _required_text("ref_text")
    if settings.server.api_key is None:  # no key configured: nothing asks for one
        doc["components"].pop("securitySchemes", None)
        for operations in doc["paths"].values():
            for operation in operations.values():
                operation.pop("security", None)
    return doc


def _voices(schemas: dict, entries: list[dict]) -> None:
    """The voices that exist, and which of them each task_type (vLLM-Omni) may name."""
    voices = [v["id"] for v in entries]
    speech = schemas["SpeechRequest"]
    for branch in speech["properties"]["voice"]["anyOf"]:
        if branch.get("type") == "string":
            branch["enum"] = voices
    schemas["VoiceRef"]["properties"]["id"]["enum"] = voices
    schemas["DialogueTurn"]["properties"]["voice"] = _one_of(voices)
    kinds = {
        "CustomVoice": [v["id"] for v in entries if v["kind"] in ("preset", "alias")],
        "VoiceDesign": [v["id"] for v in entries if v["kind"] == "design"],
        "Base": [v["id"] for v in entries if v["kind"] == "clone"],
    }
    tasks = [task for task, ids in kinds.items() if ids]  # a task no voice can serve is out
    for branch in speech["properties"]["task_type"]["anyOf"]:
        if "enum" in branch:
            branch["enum"] = tasks
    rules = [
        # a voice is needed, unless the task is VoiceDesign (the `design` voice)
        {"if": {"not": _task("VoiceDesign")},
         "then": {"required": ["voice"], "properties": {"voice": _one_of(voices)}}},
        *({"if": _task(task), "then": {"properties": {"voice": _one_of(kinds[task])}}}
          for task in tasks),
    ]  # fmt: skip
    speech["allOf"] = rules


# what str.strip() removes (protocol.NOT_BLANK is its complement)
_SPACE = NOT_BLANK.replace("[^", "[", 1)


def language_pattern() -> str:
    """Every spelling languages.check_language takes: blank (auto), or a name or code in any
    case with spaces around, a code with any region after '-' or '_' ("en-US", " English ",
    "pt_BR")."""

    def any_case(word: str) -> str:
        return "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else re.escape(c) for c in word)

    def one_of(words) -> str:
        return "|".join(any_case(w) for w in sorted(words, key=len, reverse=True))

    # a code may carry a region ("en-US"); a name is said alone ("english")
    spoken = f"(?:{one_of(NAMES)})([-_][\\s\\S]*)?|(?:{one_of(KNOWN)})"
    return f"^{_SPACE}*({spoken})?{_SPACE}*$"


def _task(task: str) -> dict:
    return {"required": ["task_type"], "properties": {"task_type": {"const": task}}}


def _one_of(ids: list[str]) -> dict:
    """A voice (by name or as {"id": ...}) among `ids`."""
    return {
        "anyOf": [
            {"type": "string", "enum": ids},
            {"type": "object", "required": ["id"], "properties": {"id": {"enum": ids}}},
        ]
    }


def _required_text(field: str) -> dict:
    return {
        "required": [field],
        "properties": {field: {"type": "string", "pattern": NOT_BLANK}},
    }
