"""Text that is not valid Unicode (a lone UTF-16 surrogate, which JSON's "\\ud800" can carry)
is a 400 naming the field on every front end that takes text: HTTP speech, voice-clone and
batch, and the WebSocket's session.config and input.text. A real model's tokenizer raised
TypeError on it (a 500, a `server_error` event); the FakeEngine has no tokenizer and spoke it,
so here it is refused before any engine sees it. Wyoming: tests/wyoming/test_wyoming_text.py."""

from __future__ import annotations

import base64
import json

import httpx
import pytest
from websockets.sync.client import connect

from ownvoice.errors import InvalidInput
from ownvoice.service.planning import check_unicode
from tests.server.fakes import FakeEngine
from tests.server.helpers import make_settings, serve, speech_clip, wav_bytes
from tests.server.test_errors import assert_envelope

LONE = "a\ud800b."  # json.dumps writes it as the escape "a\\ud800b."
CLIP = base64.b64encode(wav_bytes(speech_clip(4.0))).decode()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    engines = {"cv": FakeEngine("custom_voice"), "design": FakeEngine("voice_design"),
               "clone": FakeEngine("base")}  # fmt: skip
    with serve(make_settings(tmp_path_factory.mktemp("voices")), engines=engines) as (base, _):
        yield base


def post(base: str, path: str, body: dict) -> httpx.Response:
    """`body` as JSON with the surrogate escaped, as a client's JSON encoder writes it."""
    headers = {"content-type": "application/json"}
    return httpx.post(f"{base}{path}", content=json.dumps(body), headers=headers, timeout=30)


@pytest.mark.parametrize(
    "path, body, param",
    [
        ("/v1/audio/speech", {"voice": "ryan", "input": LONE}, "input"),
        ("/v1/audio/speech", {"voice": "design", "input": "Hi.", "instructions": LONE},
         "instructions"),
        ("/v1/audio/speech", {"voice": "design", "input": "Hi.", "instruct": LONE}, "instruct"),
        ("/v1/audio/speech", {"input": "Hi.", "ref_audio": CLIP, "ref_text": LONE}, "ref_text"),
        ("/v1/audio/voice-clone", {"input": LONE, "ref_audio": CLIP, "ref_text": "Hello."},
         "input"),
        ("/v1/audio/voice-clone", {"input": "Hi.", "ref_audio": CLIP, "ref_text": LONE},
         "ref_text"),
        ("/v1/audio/designs", {"name": "calm", "instructions": LONE}, "instructions"),
    ],
)  # fmt: skip
def test_http_refuses_a_lone_surrogate_naming_the_field(server, path, body, param):
    error = assert_envelope(post(server, path, body), 400, param)
    assert error["type"] == "invalid_request_error"


def test_a_batch_item_with_a_lone_surrogate_fails_alone(server):
    items = [{"input": "Fine."}, {"input": LONE}]
    r = post(server, "/v1/audio/speech/batch", {"voice": "ryan", "items": items})
    assert r.status_code == 200, r.text
    fine, bad = r.json()["results"]
    assert fine["status"] == "success"
    assert bad["status"] == "error" and bad["error_detail"]["param"] == "input"


def test_a_surrogate_pair_is_one_character_and_speaks(server):
    r = post(server, "/v1/audio/speech", {"voice": "ryan", "input": "Smile \U0001f600."})
    assert r.status_code == 200, r.text


def ws_events_until(ws, *kinds: str) -> list[dict]:
    events = []
    while True:
        message = ws.recv(timeout=30)
        if isinstance(message, bytes):
            continue
        events.append(json.loads(message))
        if events[-1]["type"] in kinds:
            return events


def test_websocket_refuses_a_lone_surrogate_in_text_and_config(server):
    url = server.replace("http://", "ws://") + "/v1/audio/speech/stream"
    with connect(url) as ws:
        ws.send(json.dumps({"type": "session.config", "input": "Hi.", "ref_audio": CLIP,
                            "ref_text": LONE}))  # fmt: skip
        (event,) = ws_events_until(ws, "error")
        assert event["param"] == "ref_text", event
        ws.send(json.dumps({"type": "session.config", "voice": "ryan", "response_format": "pcm"}))
        ws.send(json.dumps({"type": "input.text", "text": "Hello "}))
        ws.send(json.dumps({"type": "input.text", "text": LONE}))
        events = ws_events_until(ws, "error")
        assert events[-1]["param"] == "text" and "Unicode" in events[-1]["message"], events
        # the rest of the utterance is spoken as usual
        ws.send(json.dumps({"type": "input.text", "text": "world."}))
        ws.send(json.dumps({"type": "input.done"}))
        events = ws_events_until(ws, "session.done", "error")
        assert events[-1]["type"] == "session.done" and events[-1]["total_sentences"] == 1


def test_the_message_names_the_place_and_never_holds_the_surrogate():
    with pytest.raises(InvalidInput) as e:
        check_unicode(LONE, "input")
    assert e.value.param == "input"
    assert "\\ud800" in e.value.message and "character 1" in e.value.message
    e.value.message.encode("utf-8")  # it can be sent and logged as it is
    assert check_unicode("Grüße, 你好 \U0001f600", "input") == "Grüße, 你好 \U0001f600"
