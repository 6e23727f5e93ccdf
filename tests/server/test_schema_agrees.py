"""The OpenAPI document and the server agree on the edge cases schemathesis found: a request the
document calls valid is taken, one it calls invalid is refused. Checked with two JSON Schema
validators (Python's `jsonschema`, whose regexes are Python's, and the Rust `jsonschema_rs`),
since regex dialects differ on what `\\s` is."""

from __future__ import annotations

import base64
import json
import re
import sys

import httpx
import jsonschema
import jsonschema_rs
import pytest

from ownvoice.server.protocol import NOT_BLANK, DesignRequest
from tests.server.fakes import FakeEngine
from tests.server.helpers import make_settings, serve, speech_clip, wav_bytes

CLIP = base64.b64encode(wav_bytes(speech_clip(4.0))).decode()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    engines = {"cv": FakeEngine("custom_voice"), "design": FakeEngine("voice_design"),
               "clone": FakeEngine("base")}  # fmt: skip
    with serve(make_settings(tmp_path_factory.mktemp("voices")), engines=engines) as (base, _):
        yield base, httpx.get(f"{base}/openapi.json").json()


def document_says(doc: dict, schema: str, body: dict) -> bool:
    """Whether `body` is valid for components.schemas[schema], by both validators (which must
    agree)."""
    root = {**doc, "$ref": f"#/components/schemas/{schema}"}
    python = jsonschema.Draft202012Validator(root).is_valid(body)
    rust = jsonschema_rs.validator_for(root).is_valid(body)
    assert python == rust, (schema, body, python, rust)
    return python


CASES = [
    # either `instructions` or the seed server's `instruct` describes the designed voice: a blank
    # one of them leaves the other to do it
    ("/v1/audio/speech", "SpeechRequest",
     {"voice": "design", "input": "Hi.", "instructions": "\u0085", "instruct": "calm and low"}),
    ("/v1/audio/speech", "SpeechRequest",
     {"voice": "design", "input": "Hi.", "instructions": "calm", "instruct": "\u0085"}),
    ("/v1/audio/speech", "SpeechRequest", {"voice": "design", "input": "Hi.", "instructions": "\u0085"}),
    ("/v1/audio/speech", "SpeechRequest", {"voice": "ryan", "input": "\u0085"}),
    ("/v1/audio/speech", "SpeechRequest", {"voice": "ryan", "input": "\x1c\x1f"}),
    ("/v1/audio/speech", "SpeechRequest", {"voice": "ryan", "input": "\ufeff"}),  # not blank
    ("/v1/audio/speech", "SpeechRequest", {"voice": "ryan", "input": "Hi.", "temperature": 1e39}),
    ("/v1/audio/speech", "SpeechRequest", {"voice": "ryan", "input": "Hi.", "top_k": 3073}),
    ("/v1/audio/speech", "SpeechRequest", {"voice": "ryan", "input": "Hi.", "top_k": 0}),
    ("/v1/audio/voice-clone", "VoiceCloneRequest",
     {"input": "Hi.", "ref_audio": "", "ref_text": "Hello."}),
    ("/v1/audio/voice-clone", "VoiceCloneRequest",
     {"input": "Hi.", "ref_audio": "not base64!", "ref_text": "Hello."}),
    ("/v1/audio/voice-clone", "VoiceCloneRequest",
     {"input": "Hi.", "ref_audio": CLIP, "ref_text": "x" * 1001}),
    ("/v1/audio/voice-clone", "VoiceCloneRequest",
     {"input": "Hi.", "ref_audio": "data:audio/wav;base64," + CLIP, "ref_text": "Hello there."}),
    # every spelling of a language the server takes (blank is auto), and not a name with a region
    *(("/v1/audio/speech", "SpeechRequest", {"voice": "ryan", "input": "Hi.", "language": lang})
      for lang in ("", "\u0085", " EN-us ", "pt_BR", "English", "english-x", "en-\n", "enx")),
    ("/v1/audio/speech", "SpeechRequest",
     {"voice": {"id": "design"}, "input": "Hi.", "language": "", "task_type": None}),
    ("/v1/audio/designs", "DesignRequest", {"name": "calm", "instructions": "\u0085"}),
    ("/v1/audio/designs", "DesignRequest", {"name": "calm", "instructions": "\x1c"}),
]  # fmt: skip


@pytest.mark.parametrize("path, schema, body", CASES)
def test_the_document_and_the_server_agree(server, path, schema, body):
    base, doc = server
    r = httpx.post(f"{base}{path}", content=json.dumps(body), timeout=30,
                   headers={"content-type": "application/json"})  # fmt: skip
    assert r.status_code in (200, 400), r.text
    assert document_says(doc, schema, body) == (r.status_code == 200), r.text


def test_not_blank_is_what_strip_keeps_in_every_regex_dialect():
    """Spelled as a class of code points, with no `\\s` or `\\S`, so every dialect reads it the
    same; Python's regexes and pydantic's (Rust) agree with str.strip() on every character."""
    assert "\\s" not in NOT_BLANK.lower()
    pattern = re.compile(NOT_BLANK)
    for code in range(sys.maxunicode + 1):
        if 0xD800 <= code <= 0xDFFF:
            continue
        c = chr(code)
        assert bool(pattern.search(c)) == bool(c.strip()), hex(code)
    for c in "\t\x1c\x1f \x85\xa0\u2028\u3000\ufeff\u200bx":  # every kind the dialects differ on
        try:
            DesignRequest(name="a", instructions=c)
            taken = True
        except ValueError:
            taken = False
        assert taken == bool(c.strip()), hex(ord(c))


def test_the_seed_bounds_are_exact_integers(server):
    """FastAPI writes bounds as floats; 2**64 - 1 as a float is 2**64, a seed the server
    refuses. The document says the exact integers."""
    base, doc = server
    for schema in ("SpeechRequest", "VoiceCloneRequest"):
        (seed,) = [b for b in doc["components"]["schemas"][schema]["properties"]["seed"]["anyOf"]
                   if b.get("type") == "integer"]  # fmt: skip
        assert (seed["minimum"], seed["maximum"]) == (-(2**63), 2**64 - 1), seed
        assert all(isinstance(seed[k], int) for k in ("minimum", "maximum"))
    for value, taken in (
        (2**64 - 1, True),
        (2**64, False),
        (-(2**63), True),
        (-(2**63) - 1, False),
    ):
        body = {"voice": "ryan", "input": "Hi.", "seed": value}
        valid = jsonschema.Draft202012Validator(
            {**doc, "$ref": "#/components/schemas/SpeechRequest"}
        ).is_valid(body)
        r = httpx.post(f"{base}/v1/audio/speech", json=body, timeout=30)
        assert valid == taken and (r.status_code == 200) == taken, (value, r.text)


UPLOADS = [  # the upload form's text fields (the clip is a real one in every case)
    {"name": "anna", "consent": "false"},
    {"name": "anna", "consent": " No "},
    {"name": "anna", "consent": "\u0085"},
    {"name": "anna", "consent": "consent-2026-12"},
    {"name": "CON", "consent": "true"},
    {"name": "aux.txt", "consent": "true"},
    {"name": "anna.", "consent": "true"},
    {"name": "Console", "consent": "true"},
    {"name": "anna", "consent": "true", "language": "klingon"},
    {"name": "anna", "consent": "true", "language": "en"},
]


@pytest.mark.parametrize("fields", UPLOADS)
def test_the_upload_form_and_the_server_agree(server, fields):
    """The multipart upload's schema (written by hand in routes/voices.py) says what the server
    takes: a consent that reads as a no, a name Windows cannot hold, an unknown language."""
    base, doc = server
    body = doc["paths"]["/v1/audio/voices"]["post"]["requestBody"]["content"]
    schema = body["multipart/form-data"]["schema"]
    valid = jsonschema.Draft202012Validator(schema).is_valid({**fields, "audio_sample": "clip"})
    assert valid == jsonschema_rs.validator_for(schema).is_valid({**fields, "audio_sample": "c"})
    files = {"audio_sample": ("clip.wav", wav_bytes(speech_clip(4.0)), "audio/wav")}
    r = httpx.post(f"{base}/v1/audio/voices", data=fields, files=files, timeout=30)
    assert r.status_code in (200, 201, 400), r.text
    assert valid == (r.status_code < 300), (fields, r.text)
    if r.status_code < 300:
        httpx.delete(f"{base}/v1/audio/voices/{r.json()['id']}", timeout=30)
