"""Every failure is a 4xx/5xx in the OpenAI envelope; nothing escapes the voices folder; auth."""

from __future__ import annotations

import json
import logging
import os

import httpx
import pytest

from ownvoice.server.errors import (
    InsufficientResources,
    InvalidHost,
    InvalidInput,
    ModelLoadError,
    ModelNotFound,
    OriginNotAllowed,
    OwnvoiceError,
    PayloadTooLarge,
    QueueFull,
    QueueTimeout,
    ShuttingDown,
    Unauthorized,
    VoiceNotFound,
    error_response,
)
from tests.server.fakes import FakeEngine
from tests.server.helpers import make_settings, serve, speech_clip, wav_bytes

KEY = "test-key-123"
AUTH = {"Authorization": f"Bearer {KEY}"}


# OpenAI's envelope, plus the request id
ENVELOPE = {"message", "type", "param", "code", "request_id"}


def tree(root) -> set[str]:
    return {
        os.path.relpath(os.path.join(d, f), root) for d, _, files in os.walk(root) for f in files
    }


def assert_envelope(r: httpx.Response, status: int, param: str | None = "any") -> dict:
    assert r.status_code == status, (r.status_code, r.text)
    body = r.json()
    assert set(body) == {"error"} and set(body["error"]) == ENVELOPE, body
    # the id that the response header and the server's log line carry
    assert body["error"]["request_id"] == r.headers["x-request-id"], body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    if param != "any":
        assert body["error"]["param"] == param, body
    return body["error"]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("srv")
    voices = root / "voices"
    voices.mkdir()
    engines = {"cv": FakeEngine("custom_voice"), "clone": FakeEngine("base")}
    settings = make_settings(
        voices,
        device="cpu",
        server={"api_key": KEY},
        limits={"max_input_chars": 200, "max_upload_mb": 0.5},
    )
    with serve(settings, engines=engines) as (base, app):
        yield base, root, app


def speech(base, **body):
    request = {"model": "tts-1", "voice": "alloy", "input": "Hello.", **body}
    return httpx.post(f"{base}/v1/audio/speech", json=request, headers=AUTH, timeout=10)


def upload(base, name="alice", audio=None, consent="true", **fields):
    audio = wav_bytes(speech_clip(4.0)) if audio is None else audio
    data = {"name": name, "consent": consent, "ref_text": "Hello there.", **fields}
    return httpx.post(
        f"{base}/v1/audio/voices", data=data, files={"audio_sample": ("a.wav", audio, "audio/wav")},
        headers=AUTH, timeout=10,
    )  # fmt: skip


@pytest.mark.parametrize(
    "body, status, param",
    [
        ({"input": ""}, 400, "input"),
        ({"input": "x" * 201}, 400, "input"),
        ({"speed": 5}, 400, "speed"),
        ({"speed": "fast"}, 400, "speed"),
        ({"voice": "nobody"}, 400, "voice"),
        ({"voice": {"name": "x"}}, 400, "voice"),
        ({"model": "nope"}, 404, "model"),
        ({"stream_format": "ws"}, 400, "stream_format"),
        ({"seed": "abc"}, 400, "seed"),
        ({"max_frames": 0}, 400, "max_frames"),
    ],
)
def test_speech_request_errors(server, body, status, param):
    base, _, _ = server
    assert_envelope(speech(base, **body), status, param)


def test_malformed_requests(server):
    base, _, _ = server
    r = httpx.post(
        f"{base}/v1/audio/speech",
        content=b"{not json",
        headers={**AUTH, "content-type": "application/json"},
    )
    assert_envelope(r, 400)
    r = httpx.post(f"{base}/v1/audio/speech", json={"voice": "alloy"}, headers=AUTH)
    assert_envelope(r, 400, "input")
    assert_envelope(httpx.get(f"{base}/v1/nothing-here", headers=AUTH), 404)
    assert_envelope(httpx.put(f"{base}/v1/audio/speech", headers=AUTH), 405)


@pytest.mark.parametrize(
    "body, message, param",
    [
        ({"voice": "alloy"}, "input: Field required", "input"),
        # voice may be left out (vLLM-Omni: ref_audio or task_type VoiceDesign instead)
        ({"model": "tts-1"}, "input: Field required", "input"),
        (
            {"input": "hi", "voice": "alloy", "speed": 9, "seed": "x", "max_frames": 0},
            "speed: Input should be less than or equal to 4 (and 2 more problems)",
            "speed",
        ),
        ({"input": "hi", "voice": {"name": "x"}},
         "voice.str: Input should be a valid string (and 1 more problem)", "voice"),
        (b"{x", "the request body is not valid JSON", None),
        (b"[1]", "request body: Input should be a valid dictionary or object to extract fields from", None),
    ],
)  # fmt: skip
def test_validation_messages_name_the_field_and_count_the_rest(server, body, message, param):
    base, _, _ = server
    if isinstance(body, bytes):
        headers = {**AUTH, "content-type": "application/json"}
        r = httpx.post(f"{base}/v1/audio/speech", content=body, headers=headers)
    else:
        r = httpx.post(f"{base}/v1/audio/speech", json=body, headers=AUTH)
    error = assert_envelope(r, 400, param)
    assert error["message"] == message


@pytest.mark.parametrize(
    "method, path, allow",
    [
        ("PUT", "/v1/audio/speech", "POST"),
        ("PUT", "/v1/audio/voices", "GET, POST"),
        ("PATCH", "/v1/audio/voices/someone", "DELETE"),
        ("DELETE", "/v1/models", "GET"),
        ("PUT", "/openapi.json", "GET, HEAD"),
    ],
)
def test_a_wrong_method_is_told_every_method_of_the_path(server, method, path, allow):
    base, _, _ = server
    r = httpx.request(method, f"{base}{path}", headers=AUTH)
    assert_envelope(r, 405)
    assert r.headers["allow"] == allow


def test_validation_errors_do_not_echo_the_input(server, caplog):
    base, _, _ = server
    canary = "CANARY-private-text-4711"
    with caplog.at_level(logging.DEBUG, logger="ownvoice"):
        r = speech(base, input=canary, speed=99)
        ok = speech(base, input=canary)
    assert r.status_code == 400 and canary not in r.text
    assert ok.status_code == 200
    assert canary not in caplog.text  # log_text is off: lengths, not content
    assert "chars=24" in caplog.text


@pytest.mark.parametrize(
    "name", ["../evil", "../../etc/x", "a/b", "..", ".hidden", "．．／x", "x" * 80]
)
def test_upload_names_cannot_escape(server, name):
    base, root, _ = server
    before = tree(root)
    assert_envelope(upload(base, name=name), 400, "name")
    assert tree(root) == before


@pytest.mark.parametrize(
    "voice_id", ["..%2F..%2Fetc%2Fpasswd", "%2e%2e", "..", "clone:..%2Fvoices", "nobody"]
)
def test_delete_cannot_escape(server, voice_id):
    base, root, _ = server
    before = tree(root)
    r = httpx.delete(f"{base}/v1/audio/voices/{voice_id}", headers=AUTH)
    assert 400 <= r.status_code < 500
    assert_envelope(r, r.status_code)
    assert tree(root) == before


def test_bad_uploads(server):
    base, root, _ = server
    before = tree(root)
    big = b"RIFF" + b"\0" * (600 * 1024)
    err = assert_envelope(upload(base, audio=big), 413)
    assert err["code"] == "payload_too_large"

    def chunked():  # a valid multipart start, then too much file; no Content-Length
        yield b'--b\r\nContent-Disposition: form-data; name="audio_sample"; filename="a.wav"'
        yield b"\r\n\r\n"
        for _ in range(6):
            yield b"x" * (100 * 1024)

    r = httpx.post(
        f"{base}/v1/audio/voices",
        content=chunked(),
        headers={**AUTH, "content-type": "multipart/form-data; boundary=b"},
    )
    assert_envelope(r, 413)
    assert_envelope(upload(base, audio=b"this is not audio at all" * 100), 400, "audio_sample")
    assert_envelope(upload(base, audio=b"#EXTM3U\nfile:///etc/passwd\n"), 400, "audio_sample")
    assert_envelope(
        upload(base, audio=wav_bytes(speech_clip(1.5))), 400, "audio_sample"
    )  # too short
    assert_envelope(upload(base, consent="false"), 400, "consent")
    assert_envelope(upload(base, consent=""), 400, "consent")
    r = httpx.post(f"{base}/v1/audio/voices", data={"name": "x", "consent": "true"}, headers=AUTH)
    assert_envelope(r, 400, "audio_sample")
    assert tree(root) == before
    assert upload(base, name="twin").status_code == 200
    err = assert_envelope(upload(base, name="TWIN"), 409, "name")
    assert err["code"] == "voice_exists"
    httpx.delete(f"{base}/v1/audio/voices/twin", headers=AUTH)


def test_voice_clone_errors(server):
    import base64

    base, _, _ = server
    url = f"{base}/v1/audio/voice-clone"
    good = base64.b64encode(wav_bytes(speech_clip(4.0))).decode()
    r = httpx.post(url, json={"input": "Hi.", "ref_audio": good}, headers=AUTH)
    assert_envelope(r, 400, "ref_text")
    r = httpx.post(
        url, json={"input": "Hi.", "ref_audio": "%%%not base64", "ref_text": "x"}, headers=AUTH
    )
    assert_envelope(r, 400, "ref_audio")
    silent = base64.b64encode(wav_bytes(speech_clip(4.0, level=0.0) * 0)).decode()
    r = httpx.post(url, json={"input": "Hi.", "ref_audio": silent, "ref_text": "x"}, headers=AUTH)
    assert_envelope(r, 400, "ref_audio")


OPEN_ROUTES = {"/health", "/ready", "/v1/audio/models"}


def test_every_route_needs_the_key_except_discovery_and_health(server):
    base, _, app = server
    checked = 0
    for template, operations in app.openapi()["paths"].items():  # every API route, new ones too
        for method in sorted(m.upper() for m in operations):
            path = template.replace("{voice_id}", "someone").replace("{name}", "someone")
            path = path.replace("{model_id}", "tts-1")
            listing = path in ("/v1/audio/voices", "/v1/voices") and method == "GET"
            open_route = path in OPEN_ROUTES or listing
            r = httpx.request(method, f"{base}{path}", timeout=10)
            if open_route:
                assert r.status_code != 401, (method, path)
                continue
            checked += 1
            err = assert_envelope(r, 401)
            assert err["code"] == "invalid_api_key" and r.headers["www-authenticate"] == "Bearer"
            wrong = httpx.request(method, f"{base}{path}", headers={"Authorization": "Bearer nope"})
            assert wrong.status_code == 401, (method, path)
    assert checked >= 6  # speech, voice-clone, voices POST/DELETE, models, metrics


def test_the_open_voice_list_shows_no_transcript_or_consent_without_the_key(server):
    """Open WebUI lists voices without a key: it gets each voice's id and name; what the
    speaker said in the clip and the consent record are for key holders (issue 38)."""
    base, _, _ = server
    secret = "My bank PIN is 4711."
    r = upload(base, name="private-words", ref_text=secret, consent="consent-record-9")
    assert r.status_code == 200, r.text
    try:
        for headers in ({}, {"Authorization": "Bearer wrong"}):
            r = httpx.get(f"{base}/v1/audio/voices", headers=headers)
            assert r.status_code == 200
            assert secret not in r.text and "consent-record-9" not in r.text
            body = r.json()
            names = {v["id"]: v["name"] for v in body["voices"]}  # what Open WebUI reads
            assert names["clone:private-words"] == "private-words (clone)"
            assert body["uploaded_voices"] == []
        full = httpx.get(f"{base}/v1/voices", headers=AUTH).json()
        (mine,) = [v for v in full["uploaded_voices"] if v["name"] == "private-words"]
        assert (mine["ref_text"], mine["consent"]) == (secret, "consent-record-9")
    finally:
        httpx.delete(f"{base}/v1/audio/voices/private-words", headers=AUTH)


def test_without_a_configured_key_the_voice_list_has_every_detail(tmp_path):
    settings = make_settings(tmp_path, device="cpu")
    engines = {"cv": FakeEngine("custom_voice"), "clone": FakeEngine("base")}
    with serve(settings, engines=engines) as (base, _):
        data = {"name": "bob", "consent": "yes", "ref_text": "Hello there."}
        clip = {"audio_sample": ("b.wav", wav_bytes(speech_clip(4.0)), "audio/wav")}
        assert httpx.post(f"{base}/v1/audio/voices", data=data, files=clip).status_code == 200
        (bob,) = httpx.get(f"{base}/v1/audio/voices").json()["uploaded_voices"]
    assert (bob["name"], bob["ref_text"], bob["consent"]) == ("bob", "Hello there.", "yes")


@pytest.mark.parametrize(
    "method, path, status",
    [("GET", "/static/nothing.js", 404), ("GET", "/static/..%2Fserver%2Fapp.py", 404),
     ("GET", "/static/a/b.js", 404), ("POST", "/static/main.js", 405),
     ("DELETE", "/static/nothing.js", 405)],
)  # fmt: skip
def test_the_pages_files_answer_errors_in_the_envelope(server, method, path, status):
    base, _, _ = server
    err = assert_envelope(httpx.request(method, f"{base}{path}"), status)
    assert err["code"] == {404: "not_found", 405: "method_not_allowed"}[status]


def test_the_pages_files_are_still_served(server):
    from ownvoice.web import static_files

    base, _, _ = server
    for name in static_files():
        r = httpx.get(f"{base}/static/{name}")
        assert r.status_code == 200 and r.content == static_files()[name].read_bytes(), name


def test_oversized_upload_waiting_for_100_continue_is_refused_at_once(server):
    """curl sends `Expect: 100-continue` for big uploads: the 413 must come before any body."""
    import socket

    base, _, _ = server
    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(
            b"POST /v1/audio/voices HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Authorization: Bearer " + KEY.encode() + b"\r\n"
            b"Content-Type: multipart/form-data; boundary=b\r\n"
            b"Content-Length: 9000000\r\nExpect: 100-continue\r\n\r\n"
        )
        head = s.recv(4096)
    assert head.startswith(b"HTTP/1.1 413"), head[:200]


class OutOfMemoryError(RuntimeError):
    """Named as torch's is; recognised by name without importing torch."""


@pytest.mark.parametrize(
    "exc, status, type_, code, headers",
    [
        (QueueFull("busy", retry_after=2.2), 429, "rate_limit_error", "queue_full",
         {"retry-after": "3", "x-should-retry": "true"}),
        (QueueFull("busy", retry_after=0.1), 429, "rate_limit_error", "queue_full",
         {"retry-after": "1", "x-should-retry": "true"}),
        (VoiceNotFound("no such voice"), 404, "invalid_request_error", "voice_not_found", {}),
        (ModelNotFound("no such model"), 404, "invalid_request_error", "model_not_found", {}),
        (PayloadTooLarge("too big"), 413, "invalid_request_error", "payload_too_large", {}),
        (InvalidInput("bad"), 400, "invalid_request_error", None, {}),
        (ModelLoadError("broken"), 503, "server_error", "model_unavailable", {}),
        (QueueTimeout("waited"), 503, "server_error", "queue_timeout", {}),
        (ShuttingDown("stopping"), 503, "server_error", "shutting_down", {"connection": "close"}),
        (InsufficientResources(), 503, "server_error", "insufficient_resources",
         {"retry-after": "1"}),
        (OutOfMemoryError("CUDA out of memory"), 503, "server_error", "insufficient_resources",
         {"retry-after": "1"}),
        (Unauthorized("no key"), 401, "authentication_error", "invalid_api_key",
         {"www-authenticate": "Bearer"}),
        (OriginNotAllowed("cross-site"), 403, "permission_error", "origin_not_allowed", {}),
        (InvalidHost("evil.example"), 400, "invalid_request_error", "invalid_host", {}),
        (OwnvoiceError("odd"), 500, "server_error", None, {}),
        (RuntimeError("boom"), 500, "server_error", None, {}),
    ],
)  # fmt: skip
def test_each_error_class_has_its_status_type_code_and_headers(exc, status, type_, code, headers):
    response = error_response(exc)
    body = json.loads(response.body)["error"]
    assert response.status_code == status
    assert (body["type"], body["code"]) == (type_, code)
    assert {k: v for k, v in response.headers.items() if k in SPECIAL_HEADERS} == headers
    if not isinstance(exc, OutOfMemoryError):  # which says what the user can do instead
        assert body["message"] == str(exc) and body["param"] is None


SPECIAL_HEADERS = {"retry-after", "x-should-retry", "connection", "www-authenticate"}


def test_an_error_always_has_a_message_and_keeps_its_param():
    assert json.loads(error_response(InvalidInput("")).body)["error"]["message"] == "InvalidInput"
    assert json.loads(error_response(RuntimeError()).body)["error"]["message"] == "RuntimeError"
    body = json.loads(error_response(InvalidInput("too long", param="input")).body)["error"]
    assert (body["message"], body["param"]) == ("too long", "input")
    oom = json.loads(error_response(OutOfMemoryError("CUDA out of memory. 2 GiB")).body)["error"]
    assert oom["message"] == InsufficientResources().message
