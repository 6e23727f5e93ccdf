"""What Open WebUI and SillyTavern send, byte for byte, and what their users meet.

Open WebUI 0.12.4 (backend/open_webui/routers/audio.py, TTS engine "OpenAI"):
- discovery, with no auth header: GET {base}/audio/models -> {"models": [{"id"}]} and
  GET {base}/audio/voices -> {"voices": [{"id", "name"}]}; on any failure it silently falls back
  to tts-1 and OpenAI's six voices.
- speech: POST {base}/audio/speech with `Authorization: Bearer <AUDIO_TTS_OPENAI_API_KEY>` and
  `Content-Type: application/json`; body {"input", "voice", "model"} (model: the admin's choice
  from /audio/models, voice: the admin's or the user's choice from /audio/voices), no
  response_format unless the admin's "Additional Parameters" (AUDIO_TTS_OPENAI_PARAMS, a JSON
  object merged into the body) give one, with `instructions` or any other field. {base} is joined with "/", so a base URL
  entered with a trailing slash gives /v1//audio/speech.
- its page shows only the status text of a refusal ("Bad Request").

SillyTavern 1.12.6 ("OpenAI Compatible" TTS provider, public/scripts/extensions/tts/
openai-compatible.js and src/endpoints/openai.js): the page posts to its own server, which sends
POST <provider_endpoint> (the full URL the user pasted, e.g. http://host:8880/v1/audio/speech)
with `Content-Type: application/json` and `Authorization: Bearer <key>`, body {"input",
"response_format": "mp3", "voice", "speed", "model"}; voices are typed in by the user as a comma
list (no discovery); any refusal reaches the page as a toast "Internal Server Error".
"""

from __future__ import annotations

import asyncio
import io
import logging
import re

import httpx
import numpy as np
import pytest
import soundfile as sf

from ownvoice.service.designs import DEFAULT_DESCRIPTION
from ownvoice.service.encode import FORMATS
from tests.server.fakes import FakeEngine
from tests.server.helpers import decode, make_settings, serve, speech_clip, wav_bytes

KEY = "sk-local-test"
TEXT = "Hello there, this is a test."  # 28 characters -> 14 fake frames


def owui_speech(
    base: str, model: str, voice: str, text: str = TEXT, slash: str = "", params: dict | None = None
) -> httpx.Response:
    """`params`: the admin's "Additional Parameters" (AUDIO_TTS_OPENAI_PARAMS), which Open WebUI
    merges into every speech body."""
    return httpx.post(
        f"{base}/v1{slash}/audio/speech",
        headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"},
        json={"input": text, "voice": voice, "model": model, **(params or {})},
        timeout=60,
    )


def st_speech(base: str, model: str, voice: str, speed: float = 1.0) -> httpx.Response:
    body = {"input": TEXT, "response_format": "mp3", "voice": voice, "speed": speed,
            "model": model}  # fmt: skip
    return httpx.post(
        f"{base}/v1/audio/speech",
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {KEY}"},
        json=body,
        timeout=60,
    )


@pytest.fixture(scope="module")
def clients_server(tmp_path_factory):
    voices = tmp_path_factory.mktemp("voices")
    engines = {
        "cv": FakeEngine("custom_voice"),
        "vd": FakeEngine("voice_design"),
        "base": FakeEngine("base"),
    }
    settings = make_settings(
        voices, device="cpu", server={"api_key": KEY},
        designs={"narrator": {"instructions": "A warm, low male voice, unhurried.", "seed": 7},
                 "Bright Guide": "A bright, friendly female voice."},
    )  # fmt: skip
    with serve(settings, engines=engines) as (base, app):
        app.state.service.library.add(
            "Alice", wav_bytes(speech_clip(3.5)), ref_text="Hello, this is my voice."
        )
        yield base, app, engines


def served_by(engines: dict, before: dict) -> str:
    """The engine that started a sequence since `before` (name -> number of calls)."""
    grown = [n for n, e in engines.items() if len(e.calls) > before[n]]
    assert len(grown) == 1, grown
    return grown[0]


def counts(engines):
    return {n: len(e.calls) for n, e in engines.items()}


def listed(base: str, slash: str = "") -> list[dict]:
    r = httpx.get(f"{base}/v1{slash}/audio/voices")  # no auth header, as Open WebUI
    assert r.status_code == 200, r.text
    return r.json()["voices"]


# -- 2: every name we list is a name we accept ------------------------------------------------


def test_every_listed_id_and_display_name_is_accepted(clients_server):
    base, _, engines = clients_server
    voices = listed(base)
    names = {v["name"] for v in voices}
    assert {"Uncle Fu", "Ono Anna", "alloy (Vivian)", "Alice (clone)"} <= names, names
    for v in voices:
        for voice in (v["id"], v["name"], v["name"].upper(), v["name"].replace(" ", "")):
            r = owui_speech(base, "tts-1", voice)
            assert r.status_code == 200, (voice, r.text)
    before = counts(engines)
    assert owui_speech(base, "tts-1", "uncle fu").status_code == 200
    assert engines["cv"].calls[-1]["voice"] == "uncle_fu" and served_by(engines, before) == "cv"


def test_the_plain_design_voice_speaks_without_instructions_or_with_the_admins(clients_server):
    """Open WebUI sends no `instructions` unless its admin puts them in Additional Parameters:
    the listed `design` voice speaks either way (a neutral default description, or theirs)."""
    base, _, engines = clients_server
    r = owui_speech(base, "tts-1", "design")
    assert r.status_code == 200, r.text
    assert engines["vd"].calls[-1]["instruct"] == DEFAULT_DESCRIPTION
    params = {"instructions": "A deep, slow voice.", "response_format": "wav", "speed": 1.25}
    r = owui_speech(base, "tts-1", "design", params=params)
    assert r.status_code == 200 and r.headers["content-type"] == "audio/wav", r.text
    assert engines["vd"].calls[-1]["instruct"] == "A deep, slow voice."
    assert sf.info(io.BytesIO(r.content)).format == "WAV"


# -- 3: a listed model never makes a listed voice unusable --------------------------------------


def test_any_listed_model_with_any_listed_voice(clients_server, caplog):
    base, _, engines = clients_server
    models = [m["id"] for m in httpx.get(f"{base}/v1/audio/models").json()["models"]]
    assert {"cv", "vd", "base", "tts-1"} <= set(models)
    cases = {"alloy": "cv", "Uncle Fu": "cv", "clone:Alice": "base", "design:narrator": "vd"}
    for model in models:
        for voice, engine in cases.items():
            before = counts(engines)
            with caplog.at_level(logging.INFO, logger="ownvoice"):
                caplog.clear()
                r = owui_speech(base, model, voice)
            assert r.status_code == 200, (model, voice, r.text)
            assert served_by(engines, before) == engine, (model, voice)
            lines = [m for m in caplog.messages if m.startswith("speech 200")]
            assert len(lines) == 1
            if model in engines and model != engine:  # the log says so, once per request
                assert f"model={engine} asked_model={model}" in lines[0], lines
            else:
                assert "asked_model" not in lines[0], lines
    missing = owui_speech(base, "gpt-5-tts", "alloy")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "model_not_found"


# -- 4: a base URL with a trailing slash ---------------------------------------------------------


def test_doubled_slashes_reach_the_same_routes(clients_server):
    base, _, _ = clients_server
    assert listed(base, slash="/") == listed(base)
    models = httpx.get(f"{base}/v1//audio/models").json()["models"]
    assert models and models[0]["id"]
    r = owui_speech(base, "tts-1", "alloy", slash="/")
    assert r.status_code == 200 and r.headers["content-type"] == "audio/mpeg"


# -- 5: FLAC and every other format read back by PyAV and by libsndfile --------------------------


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_reads_back_at_the_length_generated(clients_server, fmt):
    base, _, engines = clients_server
    r = httpx.post(
        f"{base}/v1/audio/speech",
        headers={"Authorization": f"Bearer {KEY}"},
        json={"input": TEXT, "voice": "alloy", "model": "tts-1", "response_format": fmt},
        timeout=60,
    )
    assert r.status_code == 200, r.text
    generated = engines["cv"].calls[-1]["frames"] * 1920
    n, rate = decode(r.content, fmt)
    slack = {"mp3": 1152 + 1105, "aac": 2048 + 1024}.get(fmt, 0)  # codec priming/padding
    scale = 2 if fmt == "opus" else 1  # libopus decodes at 48 kHz in PyAV
    assert generated * scale <= n <= (generated + slack) * scale, (fmt, n, generated)
    if fmt in ("wav", "flac", "opus", "mp3"):  # what libsndfile (soundfile) can read
        y, sr = sf.read(io.BytesIO(r.content), dtype="float32")
        assert sr == 24000
        assert generated <= y.shape[0] <= generated + slack, (fmt, y.shape, generated)
        if fmt == "flac":
            assert sf.info(io.BytesIO(r.content)).frames == generated


# -- 6: designed voices by name -------------------------------------------------------------------


def test_designed_voices_by_name_need_no_instructions(clients_server):
    base, _, engines = clients_server
    ids = {v["id"] for v in listed(base)}
    assert {"design:narrator", "design:Bright Guide"} <= ids
    r = st_speech(base, "tts-1", "design:narrator")
    assert r.status_code == 200, r.text
    call = engines["vd"].calls[-1]
    assert call["instruct"] == "A warm, low male voice, unhurried."
    assert call["options"].seed == 7  # a fixed seed: the same voice every time
    # saved over the API, then used by its listed name; deleted, it is gone
    auth = {"Authorization": f"Bearer {KEY}"}
    saved = httpx.post(f"{base}/v1/audio/designs", headers=auth, json={
        "name": "Old Sailor", "instructions": "An old sailor, gravelly and slow.", "seed": 3})  # fmt: skip
    assert saved.status_code == 200 and saved.json()["id"] == "design:Old Sailor"
    assert "Old Sailor (designed)" in {v["name"] for v in listed(base)}
    assert owui_speech(base, "tts-1", "Old Sailor (designed)").status_code == 200
    assert engines["vd"].calls[-1]["instruct"] == "An old sailor, gravelly and slow."
    assert engines["vd"].calls[-1]["options"].seed == 3
    assert httpx.delete(f"{base}/v1/audio/designs/Old Sailor", headers=auth).status_code == 200
    gone = owui_speech(base, "tts-1", "design:Old Sailor")
    assert gone.status_code == 400 and gone.json()["error"]["code"] == "voice_not_found"
    # a config design cannot be deleted over the API
    kept = httpx.delete(f"{base}/v1/audio/designs/narrator", headers=auth)
    assert kept.status_code == 400 and "config" in kept.json()["error"]["message"]


# -- 7 and 1: the log says what was delivered, and why anything was refused -----------------------


def test_the_log_says_the_audio_delivered_after_a_speed_change(clients_server, caplog):
    base, _, engines = clients_server
    with caplog.at_level(logging.INFO, logger="ownvoice"):
        r = st_speech(base, "tts-1", "alloy", speed=0.25)
    assert r.status_code == 200
    generated = engines["cv"].calls[-1]["frames"] * 0.08
    line = next(m for m in caplog.messages if m.startswith("speech 200"))
    logged = float(re.search(r"audio=([\d.]+)s", line).group(1))
    assert logged == pytest.approx(generated / 0.25, abs=0.02), line


def test_every_refusal_is_logged_with_its_reason(clients_server, caplog):
    base, _, _ = clients_server
    auth = {"Authorization": f"Bearer {KEY}"}
    secret_text = "my very private sentence"
    with caplog.at_level(logging.INFO, logger="ownvoice"):
        bad_voice = owui_speech(base, "tts-1", "Nobody Here", text=secret_text)
        bad_key = httpx.post(
            f"{base}/v1/audio/speech", headers={"Authorization": "Bearer wrong-key-123"},
            json={"input": secret_text, "voice": "alloy", "model": "tts-1"},
        )  # fmt: skip
        no_route = httpx.post(f"{base}/v1/audio/speach", headers=auth, json={"input": "x"})
        too_long = httpx.post(
            f"{base}/v1/audio/speech", headers=auth,
            json={"input": "x" * 5000, "voice": "alloy", "model": "tts-1"},
        )  # fmt: skip
    assert [r.status_code for r in (bad_voice, bad_key, no_route, too_long)] == [400, 401, 404, 400]
    refused = [m for m in caplog.messages if m.startswith("refused")]
    text = "\n".join(refused)
    rid = bad_voice.headers["x-request-id"]
    assert bad_voice.json()["error"]["request_id"] == rid  # the envelope names it too
    assert no_route.json()["error"]["request_id"] == no_route.headers["x-request-id"]
    assert re.search(
        rf"refused 400 POST /v1/audio/speech id={rid} code=voice_not_found param=voice "
        r"voice='Nobody Here' model='tts-1': voice 'Nobody Here' is not available",
        text,
    ), text
    assert "refused 401 POST /v1/audio/speech" in text and "code=invalid_api_key" in text
    assert "refused 404 POST /v1/audio/speach" in text
    assert re.search(r"refused 400 POST /v1/audio/speech .*param=input .*limit is 4096", text)
    assert secret_text not in caplog.text and "wrong-key-123" not in caplog.text
    assert KEY not in caplog.text
    assert len(refused) == 4  # one line each, and no second "speech 400" line


def test_repeated_refusals_keep_their_ids_and_say_the_reason_once(clients_server, caplog):
    base, _, _ = clients_server
    with caplog.at_level(logging.INFO, logger="ownvoice"):
        ids = [owui_speech(base, "tts-1", "Somebody Else").headers["x-request-id"]
               for _ in range(5)]  # fmt: skip
    refused = [m for m in caplog.messages if m.startswith("refused 400 POST /v1/audio/speech")]
    assert sum("Somebody Else" in m for m in refused) == 1, refused  # the reason, once
    for rid in ids[1:]:  # every request's id is in the log, pointing at the first's line
        assert any(m.endswith(f"id={rid}: as id={ids[0]}") for m in refused), refused


def test_the_ready_probe_during_a_start_is_not_an_error(tmp_path, caplog):
    """/ready answers 503 while the models load: a normal start, logged at INFO, not ERROR."""
    from ownvoice.server.refusals import RefusalLog

    async def ready_503(scope, receive, send):
        await send({"type": "http.response.start", "status": 503,
                    "headers": [(b"content-type", b"application/json")]})  # fmt: skip
        await send({"type": "http.response.body", "body": b'{"status": "loading"}'})

    async def probe(path: str):
        async def receive():
            return {"type": "http.request", "body": b""}

        async def send(message):
            pass

        scope = {"type": "http", "method": "GET", "path": path, "headers": []}
        await RefusalLog(ready_503)(scope, receive, send)

    with caplog.at_level(logging.DEBUG, logger="ownvoice.server"):
        asyncio.run(probe("/ready"))
        asyncio.run(probe("/v1/audio/speech"))
    levels = {r.getMessage().split()[3]: r.levelname for r in caplog.records}
    assert levels == {"/ready": "INFO", "/v1/audio/speech": "ERROR"}, levels


def test_a_client_request_id_is_kept(clients_server):
    base, _, _ = clients_server
    r = httpx.get(f"{base}/v1/audio/voices", headers={"X-Request-Id": "owui-42"})
    assert r.headers["x-request-id"] == "owui-42"
    r = httpx.get(f"{base}/v1/audio/voices", headers={"X-Request-Id": "bad id\twith tabs"})
    assert r.headers["x-request-id"] != "bad id\twith tabs"


# -- 8: from another container: host.docker.internal --------------------------------------------


def test_docker_host_name_is_refused_until_allowed_and_the_reason_says_how(tmp_path):
    engines = {"cv": FakeEngine("custom_voice")}
    body = {"input": TEXT, "voice": "alloy", "model": "tts-1"}
    host = {"Host": "host.docker.internal:8880"}
    with serve(make_settings(tmp_path), engines=engines) as (base, _):
        r = httpx.post(f"{base}/v1/audio/speech", headers=host, json=body)
        assert r.status_code == 400 and "server.allowed_hosts" in r.json()["error"]["message"]
    allowed = make_settings(tmp_path, server={"allowed_hosts": ["host.docker.internal"]})
    with serve(allowed, engines=engines) as (base, _):
        assert httpx.post(f"{base}/v1/audio/speech", headers=host, json=body).status_code == 200
    docs = (__import__("pathlib").Path(__file__).parents[2] / "docs" / "clients.md").read_text()
    assert "host.docker.internal" in docs and "allowed_hosts" in docs


def test_sillytavern_voices_by_id_and_speed(clients_server):
    base, _, engines = clients_server
    for voice in ("ryan", "clone:Alice", "Alice", "alloy"):
        r = st_speech(base, "tts-1", voice, speed=1.5)
        assert r.status_code == 200, (voice, r.text)
        assert r.headers["content-type"] == "audio/mpeg"
    n, _ = decode(r.content, "mp3")
    frames = engines["cv"].calls[-1]["frames"]
    assert n == pytest.approx(frames * 1920 / 1.5, abs=1152 + 1105 + 10)
    assert np.isfinite(n)
