"""JSON nested deeper than Python's parser goes (50,000 `[`) is a clear 400 over HTTP and an
`error` event over the WebSocket, and the refusal log line is written. The parser's
RecursionError used to reach the refusal logger, so the 400's body never came; over the
WebSocket the connection dropped with 1006 and an ASGI traceback."""

from __future__ import annotations

import json
import logging

import httpx
import pytest
from websockets.sync.client import connect

from ownvoice.server.refusals import _asked_for
from tests.server.fakes import FakeEngine
from tests.server.helpers import make_settings, serve
from tests.server.test_errors import assert_envelope

DEEP = b"[" * 50_000


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    engines = {"cv": FakeEngine("custom_voice")}
    with serve(make_settings(tmp_path_factory.mktemp("voices")), engines=engines) as (base, _):
        yield base


@pytest.mark.parametrize(
    "path", ["/v1/audio/speech", "/v1/audio/speech/batch", "/v1/audio/designs"]
)
def test_http_answers_deep_json_with_a_400_in_the_envelope(server, path, caplog):
    caplog.set_level(logging.WARNING, logger="ownvoice.server")
    for body in (DEEP, b'{"voice": "ryan", "input": ' + DEEP + b"}"):
        r = httpx.post(f"{server}{path}", content=body, timeout=30,
                       headers={"content-type": "application/json"})  # fmt: skip
        error = assert_envelope(r, 400, None)
        assert error["message"] == "the request body is JSON nested too deeply to read"
        assert error["type"] == "invalid_request_error"
    # the refusal is logged, and no part of the body with it
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("refused 400")]
    assert lines and all("[[" not in line for line in lines), lines
    # the server carries on
    r = httpx.post(f"{server}/v1/audio/speech", json={"voice": "ryan", "input": "Hi."})
    assert r.status_code == 200


def test_the_refusal_logger_reads_nothing_from_deep_json():
    assert _asked_for(DEEP) == {}
    assert _asked_for(b'{"voice": "ryan", "x": ' + DEEP + b"}") == {}
    assert _asked_for(b'{"voice": "ryan", "model": "tts-1"}') == {"voice": "ryan", "model": "tts-1"}


def test_websocket_answers_deep_json_with_an_error_event_and_carries_on(server):
    url = server.replace("http://", "ws://") + "/v1/audio/speech/stream"
    with connect(url) as ws:
        ws.send(DEEP.decode())
        event = json.loads(ws.recv(timeout=10))
        assert event["type"] == "error" and event["code"] == "invalid_message", event
        assert "nested too deeply" in event["message"]
        # the usual handling goes on: a session and an utterance on the same connection
        ws.send(json.dumps({"type": "session.config", "voice": "ryan", "response_format": "pcm",
                            "stream_audio": True}))  # fmt: skip
        ws.send(json.dumps({"type": "input.text", "text": "Still here."}))
        ws.send(json.dumps({"type": "input.done"}))
        audio, kinds = 0, []
        while not kinds or kinds[-1] not in ("session.done", "error"):
            message = ws.recv(timeout=30)
            if isinstance(message, bytes):
                audio += len(message)
            else:
                kinds.append(json.loads(message)["type"])
        assert kinds[-1] == "session.done" and audio > 0, kinds


def test_a_body_that_is_not_utf8_is_a_400_saying_so(server):
    r = httpx.post(f"{server}/v1/audio/speech", content=b'{"voice": "ryan", "input": "\xff"}',
                   headers={"content-type": "application/json"}, timeout=30)  # fmt: skip
    error = assert_envelope(r, 400, None)
    assert error["message"] == "the request body is not valid JSON: it is not UTF-8 text"
