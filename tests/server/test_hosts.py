"""DNS rebinding and cross-site writes: unknown Host headers get 400, writes from a foreign
browser Origin get 403, clients without an Origin (curl, SDKs) are served."""

from __future__ import annotations

from types import SimpleNamespace

import httpx
import pytest

from ownvoice.server.hosts import HostPolicy
from tests.server.fakes import FakeEngine
from tests.server.helpers import make_settings, serve, speech_clip, wav_bytes

EVIL = "https://evil.example"


def envelope(r: httpx.Response, status: int, code: str) -> dict:
    assert r.status_code == status, (r.status_code, r.text)
    error = r.json()["error"]
    assert set(error) == {"message", "type", "param", "code", "request_id"}, error
    assert error["code"] == code, error
    return error


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    voices = tmp_path_factory.mktemp("voices")
    engines = {"cv": FakeEngine("custom_voice"), "clone": FakeEngine("base")}
    settings = make_settings(
        voices,
        device="cpu",
        server={"allowed_hosts": ["tts.lan"], "allowed_origins": ["http://localhost:3000"]},
    )
    with serve(settings, engines=engines) as (base, app):
        yield base, app, engines


def speech(base, headers=None):
    body = {"model": "tts-1", "voice": "alloy", "input": "Hi.", "response_format": "pcm"}
    return httpx.post(f"{base}/v1/audio/speech", json=body, headers=headers or {}, timeout=10)


def upload(base, name, headers=None):
    files = {"audio_sample": ("a.wav", wav_bytes(speech_clip(4.0)), "audio/wav")}
    data = {"name": name, "consent": "true", "ref_text": "Hello there."}
    return httpx.post(
        f"{base}/v1/audio/voices", data=data, files=files, headers=headers or {}, timeout=30
    )


def voice_ids(base) -> list[str]:
    return [v["id"] for v in httpx.get(f"{base}/v1/audio/voices").json()["voices"]]


def test_a_rebound_host_name_gets_400(server):
    base, app, engines = server
    port = base.rsplit(":", 1)[1]
    calls = len(engines["cv"].calls)
    for path in ("/v1/audio/voices", "/v1/models", "/docs"):
        r = httpx.get(f"{base}{path}", headers={"Host": f"evil.example:{port}"})
        envelope(r, 400, "invalid_host")
    envelope(speech(base, {"Host": "evil.example"}), 400, "invalid_host")
    assert len(engines["cv"].calls) == calls  # nothing was generated
    # the names the server answers to; probes answer whatever the host
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", "tts.lan", "TTS.LAN."):
        assert httpx.get(f"{base}/v1/models", headers={"Host": host}).status_code == 200, host
    assert httpx.get(f"{base}/ready", headers={"Host": "10.1.2.3:8880"}).status_code == 200
    # ... but a page that rebound a name learns the status only, not models, paths or warnings
    foreign = httpx.get(f"{base}/health", headers={"Host": "evil.example"}).json()
    assert set(foreign) == {"status", "ready"}, foreign
    assert "models" in httpx.get(f"{base}/health").json()


def test_writes_from_a_foreign_origin_get_403_and_change_nothing(server):
    base, app, engines = server
    calls = len(engines["cv"].calls)
    envelope(speech(base, {"Origin": EVIL}), 403, "origin_not_allowed")
    envelope(speech(base, {"Origin": "null"}), 403, "origin_not_allowed")  # sandboxed/file pages
    assert len(engines["cv"].calls) == calls

    envelope(upload(base, "mallory", {"Origin": EVIL}), 403, "origin_not_allowed")
    assert "clone:mallory" not in voice_ids(base)

    assert upload(base, "alice").status_code == 200  # no Origin: curl, SDKs, Open WebUI's backend
    r = httpx.delete(f"{base}/v1/audio/voices/clone:alice", headers={"Origin": EVIL})
    envelope(r, 403, "origin_not_allowed")
    assert "clone:alice" in voice_ids(base)

    # reading is allowed (the browser keeps the answer from the page without CORS)
    assert httpx.get(f"{base}/v1/audio/voices", headers={"Origin": EVIL}).status_code == 200


def test_the_servers_own_pages_and_configured_origins_may_write(server):
    base, app, engines = server
    assert speech(base).status_code == 200
    assert speech(base, {"Origin": base}).status_code == 200  # e.g. the /docs page
    assert speech(base, {"Origin": "http://localhost:3000"}).status_code == 200  # configured
    # same host, another port: another origin
    other = base.rsplit(":", 1)[0] + ":1"
    envelope(speech(base, {"Origin": other}), 403, "origin_not_allowed")


def test_configured_origins_get_cors_for_browser_calls(server):
    """A browser page of an allowed origin can preflight a JSON POST and read the answer."""
    base, app, engines = server
    preflight = {"Access-Control-Request-Method": "POST",
                 "Access-Control-Request-Headers": "content-type"}  # fmt: skip
    r = httpx.options(
        f"{base}/v1/audio/speech", headers={"Origin": "http://localhost:3000", **preflight}
    )
    assert r.status_code == 200
    assert r.headers["access-control-allow-origin"] == "http://localhost:3000"
    r = speech(base, {"Origin": "http://localhost:3000"})
    assert r.headers["access-control-allow-origin"] == "http://localhost:3000"
    r = httpx.options(f"{base}/v1/audio/speech", headers={"Origin": EVIL, **preflight})
    assert "access-control-allow-origin" not in r.headers


def policy(**server) -> HostPolicy:
    block = {"host": "127.0.0.1", "allowed_hosts": [], "allowed_origins": [], **server}
    return HostPolicy.from_settings(SimpleNamespace(**block))


def test_the_host_policy_follows_the_bind_address_and_settings():
    local = policy()
    assert not local.any_host and not local.host_allowed("evil.example")
    assert local.host_allowed("[0:0::1]:8880") and not local.host_allowed(None)
    assert not local.host_allowed("evil.example@127.0.0.1")
    # a concrete bind address or name is answered too
    assert policy(host="192.168.1.20").host_allowed("192.168.1.20:8880")
    # bound to all interfaces (Docker) with nothing configured: any host, origins still checked
    docker = policy(host="0.0.0.0")
    assert docker.any_host and docker.host_allowed("ownvoice:8880")
    assert not docker.origin_allowed("http://evil.example:8880", "evil.example:8880")
    assert docker.origin_allowed("http://localhost:8880", "localhost:8880")
    # ... and with names configured, only those
    named = policy(host="::", allowed_hosts=["tts.lan", "*.example.org"])
    assert named.host_allowed("tts.lan") and named.host_allowed("a.example.org:443")
    assert not named.host_allowed("evil.example") and not named.host_allowed("example.org.evil")
    assert policy(allowed_hosts=["*"]).host_allowed("anything")
    assert policy(allowed_origins=["*"]).origin_allowed("https://evil.example", "127.0.0.1")
    # default ports are the same origin
    assert local.origin_allowed("http://localhost", "localhost:80")
    assert not local.origin_allowed("https://localhost", "localhost:80")
