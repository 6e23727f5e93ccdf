"""Sampling options past their bounds are refused up front, naming the field, on every front
end: HTTP speech, a batch item, WebSocket session.config, and the in-process service that
`ownvoice say` uses. `temperature: 1e39` was a 500 (the engine's float32 overflowed)."""

from __future__ import annotations

import json
import math

import httpx
import pytest
from websockets.sync.client import connect

from ownvoice.engine.options import (
    CODE_PREDICTOR_VOCAB,
    MAX_REPETITION_PENALTY,
    MAX_TEMPERATURE,
    TALKER_VOCAB,
    SamplingOptions,
)
from ownvoice.errors import InvalidInput
from ownvoice.service.planning import SpeechInput
from ownvoice.service.speech import SpeechService
from tests.server.fakes import FakeEngine
from tests.server.helpers import make_settings, serve
from tests.server.test_errors import assert_envelope

# what each HTTP field refuses (the API takes the talker's three; the rest are in-process only)
OUT_OF_BOUNDS = [
    ("temperature", 1e39),
    ("temperature", MAX_TEMPERATURE * 1.01),
    ("temperature", 0),
    ("top_k", 10**20),
    ("top_k", TALKER_VOCAB + 1),
    ("top_k", -1),
    ("top_p", 0),
    ("top_p", 1.5),
]


@pytest.fixture(scope="module")
def fake_server(tmp_path_factory):
    engines = {"cv": FakeEngine("custom_voice")}
    with serve(make_settings(tmp_path_factory.mktemp("voices")), engines=engines) as (base, app):
        yield base, app, engines


@pytest.mark.parametrize(
    "name, value",
    [*OUT_OF_BOUNDS, ("temperature", math.nan), ("temperature", math.inf),
     ("top_p", math.nan), ("repetition_penalty", 0), ("repetition_penalty", 1e39),
     ("repetition_penalty", math.nan), ("sub_temperature", 1e39), ("sub_temperature", 0),
     ("sub_top_k", CODE_PREDICTOR_VOCAB + 1), ("sub_top_k", 10**20), ("sub_top_p", 0)],
)  # fmt: skip
def test_sampling_options_refuse_values_past_their_bounds(name, value):
    with pytest.raises(InvalidInput) as e:
        SamplingOptions(**{name: value}).validate()
    assert e.value.param == name and name in e.value.message


def test_sampling_options_take_their_bounds_and_top_k_zero_is_off():
    SamplingOptions(temperature=MAX_TEMPERATURE, sub_temperature=MAX_TEMPERATURE, top_k=0,
                    sub_top_k=0, top_p=1.0, repetition_penalty=MAX_REPETITION_PENALTY).validate()  # fmt: skip
    SamplingOptions(top_k=TALKER_VOCAB, sub_top_k=CODE_PREDICTOR_VOCAB, temperature=1e-3).validate()


@pytest.mark.parametrize("name, value", OUT_OF_BOUNDS)
def test_http_speech_refuses_them_with_a_400_naming_the_field(fake_server, name, value):
    base, _, engines = fake_server
    before = len(engines["cv"].calls)
    body = {"voice": "ryan", "input": "Hello.", name: value}
    r = httpx.post(f"{base}/v1/audio/speech", json=body, timeout=30)
    assert_envelope(r, 400, name)
    assert len(engines["cv"].calls) == before  # refused before the engine saw it


def test_a_batch_item_past_the_bounds_fails_alone(fake_server):
    base, _, _ = fake_server
    items = [{"input": "Hello."}, {"input": "Hot.", "temperature": 1e39},
             {"input": "Wide.", "top_k": 10**20}]  # fmt: skip
    r = httpx.post(f"{base}/v1/audio/speech/batch", json={"voice": "ryan", "items": items},
                   timeout=60)  # fmt: skip
    assert r.status_code == 200, r.text
    ok, hot, wide = r.json()["results"]
    assert ok["status"] == "success"
    assert hot["status"] == "error" and hot["error_detail"]["param"] == "temperature"
    assert hot["error_detail"]["type"] == "invalid_request_error"
    assert wide["status"] == "error" and wide["error_detail"]["param"] == "top_k"


@pytest.mark.parametrize("name, value", [("temperature", 1e39), ("top_k", 10**20), ("top_p", 0)])
def test_websocket_session_config_refuses_them_with_an_error_event(fake_server, name, value):
    base, _, _ = fake_server
    url = base.replace("http://", "ws://") + "/v1/audio/speech/stream"
    with connect(url) as ws:
        ws.send(json.dumps({"type": "session.config", "voice": "ryan", name: value}))
        event = json.loads(ws.recv(timeout=10))
        assert event["type"] == "error" and event["param"] == name, event
        # the connection stays, and a config within the bounds is taken (no answer: no error)
        ws.send(json.dumps({"type": "session.config", "voice": "ryan", "response_format": "pcm",
                            "stream_audio": True}))  # fmt: skip
        ws.send(json.dumps({"type": "input.text", "text": "Hi."}))
        ws.send(json.dumps({"type": "input.done"}))
        assert next_event(ws, "session.done", "error")["type"] == "session.done"


def next_event(ws, *kinds: str) -> dict:
    """The first JSON event of one of `kinds` (audio frames and other events skipped)."""
    while True:
        message = ws.recv(timeout=30)
        if isinstance(message, str) and (event := json.loads(message))["type"] in kinds:
            return event


def test_the_in_process_service_refuses_them_too():
    """`ownvoice say`, the audiobook tool and bench pass SamplingOptions fields the API does not
    take (repetition_penalty, sub_*): planning validates them before anything starts."""
    service = SpeechService.local(FakeEngine())
    try:
        for name, value in [("repetition_penalty", 1e39), ("sub_top_k", 10**20),
                            ("temperature", 1e39)]:  # fmt: skip
            req = SpeechInput(input="Hello.", voice="ryan", sampling={name: value})
            with pytest.raises(InvalidInput) as e:
                service.plan(req)
            assert e.value.param == name
    finally:
        service.pool.close()


def test_the_openapi_document_states_the_same_bounds(fake_server):
    base, _, _ = fake_server
    props = httpx.get(f"{base}/openapi.json").json()["components"]["schemas"]["SpeechRequest"][
        "properties"
    ]

    def bounds(name: str) -> dict:
        (number,) = [b for b in props[name]["anyOf"] if b.get("type") != "null"]
        return {k: v for k, v in number.items() if "imum" in k}

    assert bounds("temperature") == {"exclusiveMinimum": 0, "maximum": MAX_TEMPERATURE}
    assert bounds("top_k") == {"minimum": 0, "maximum": TALKER_VOCAB}
    assert bounds("top_p") == {"exclusiveMinimum": 0, "maximum": 1}
    assert "0 = off" in props["top_k"]["description"]
