"""What real clients do: Open WebUI discovery, SillyTavern's request, the voice library."""

from __future__ import annotations

import base64
import json

import httpx
import openai
import pytest

from tests.server.fakes import FakeEngine
from tests.server.helpers import duration, make_settings, serve, speech_clip, wav_bytes

KEY = "k-123"
AUTH = {"Authorization": f"Bearer {KEY}"}


@pytest.fixture
def server(tmp_path):
    voices = tmp_path / "voices"
    voices.mkdir()
    engines = {
        "cv": FakeEngine("custom_voice"),
        "design": FakeEngine("voice_design"),
        "clone": FakeEngine("base"),
    }
    settings = make_settings(voices, device="cpu", server={"api_key": KEY})
    with serve(settings, engines=engines) as (base, app):
        yield base, voices, engines, app


def test_open_webui_discovery_without_auth(server):
    base, _, _, _ = server
    models = httpx.get(f"{base}/v1/audio/models")  # Open WebUI sends no Authorization here
    assert models.status_code == 200
    ids = [m["id"] for m in models.json()["models"]]
    assert {"tts-1", "tts-1-hd", "cv", "design", "clone"} <= set(ids)
    voices = httpx.get(f"{base}/v1/audio/voices")
    assert voices.status_code == 200
    entries = voices.json()["voices"]
    assert all(isinstance(v["id"], str) and isinstance(v["name"], str) for v in entries)
    ids = {v["id"] for v in entries}
    assert {"alloy", "echo", "nova", "ryan", "vivian", "design"} <= ids
    assert "english" in voices.json()["languages"]
    # the clip lengths the library takes (check_reference), for a page to say before uploading
    assert voices.json()["reference_seconds"] == {"min": 3.0, "max": 30.0}
    # then the speech call: Bearer key, its configured model, admin extras merged in the body,
    # and the whole body read at once
    body = {"model": "tts-1", "input": "Hello from Open WebUI.", "voice": "alloy",
            "response_format": "mp3",
            "speed": 1.0, "stream": False, "lang_code": "a"}  # fmt: skip
    r = httpx.post(f"{base}/v1/audio/speech", json=body, headers=AUTH)
    assert r.status_code == 200 and r.headers["content-type"] == "audio/mpeg"
    assert duration(r.content, "mp3") > 0.5


def test_sillytavern_request_shape(server):
    base, _, engines, _ = server
    # ST's "OpenAI Compatible" provider: full endpoint URL, model, voice from a typed list,
    # speed slider, always mp3
    body = {"input": "*waves* Hello, traveler!", "voice": "fable", "model": "tts-1", "speed": 1.25,
            "response_format": "mp3"}  # fmt: skip
    r = httpx.post(f"{base}/v1/audio/speech", json=body, headers=AUTH)
    assert r.status_code == 200
    frames = engines["cv"].frames_generated
    assert abs(duration(r.content, "mp3") - frames * 0.08 / 1.25) < 0.12
    assert engines["cv"].calls[-1]["voice"] == "eric"  # fable -> eric


def test_hand_written_seed_profile_speaks_and_is_encoded_once(server):
    base, voices, engines, app = server
    folder = voices / "profiles" / "5f1e0c2a9b3d"  # the seed server's layout, written by hand
    folder.mkdir(parents=True)
    (folder / "ref_audio.wav").write_bytes(wav_bytes(speech_clip(5.0)))
    (folder / "meta.json").write_text(json.dumps({
        "name": "Narrator", "profile_id": "5f1e0c2a9b3d", "ref_audio_filename": "ref_audio.wav",
        "ref_text": "This is how I sound when I read.", "x_vector_only_mode": False,
        "language": "English",
    }))  # fmt: skip
    listed = httpx.get(f"{base}/v1/audio/voices").json()["voices"]
    assert {
        "id": "clone:Narrator",
        "name": "Narrator (clone)",
        "kind": "clone",
        "language": "English",
    } in listed
    client = openai.OpenAI(base_url=f"{base}/v1", api_key=KEY, max_retries=0)
    for voice in ("clone:Narrator", "clone:narrator"):
        audio = client.audio.speech.create(
            model="tts-1", voice=voice, input="Once upon a time.", response_format="wav"
        )
        assert duration(audio.content, "wav") > 0.5
    clone = engines["clone"]
    assert clone.make_voice_calls == 1  # the second request did not re-encode the reference
    prompt = clone.calls[-1]["voice"]
    assert prompt.ref_text == "This is how I sound when I read." and not prompt.x_vector_only
    assert clone.calls[-1]["options"].language == "english"  # the profile's language
    assert list((folder / ".cache").glob("prompt-*.json"))
    # the profile id works too, as an OpenAI voice object
    client.audio.speech.create(
        model="tts-1", voice={"id": "5f1e0c2a9b3d"}, input="Hi.", response_format="pcm"
    )
    assert clone.make_voice_calls == 1


def test_upload_list_speak_delete(server):
    base, voices, engines, _ = server
    r = httpx.post(
        f"{base}/v1/audio/voices",
        data={
            "name": "Grace",
            "consent": "true",
            "ref_text": "My voice, my words.",
            "language": "en",
        },
        files={
            "audio_sample": (
                "grace.mp3",
                wav_bytes(speech_clip(6.0, rate=22050), 22050),
                "audio/mpeg",
            )
        },
        headers=AUTH,
    )
    assert r.status_code == 200, r.text
    resource = r.json()
    assert resource["object"] == "audio.voice" and resource["id"] == "clone:Grace"
    assert resource["x_vector_only_mode"] is False and resource["created_at"] > 0
    meta = json.loads((voices / "Grace" / "meta.json").read_text())
    assert meta["consent"]["attested"] is True and meta["ref_text"] == "My voice, my words."

    ids = [v["id"] for v in httpx.get(f"{base}/v1/audio/voices").json()["voices"]]
    assert "clone:Grace" in ids
    speak = {
        "model": "tts-1",
        "voice": {"id": "clone:Grace"},
        "input": "Hello.",
        "response_format": "flac",
    }
    r = httpx.post(f"{base}/v1/audio/speech", json=speak, headers=AUTH)
    assert r.status_code == 200 and duration(r.content, "flac") > 0.1

    r = httpx.delete(f"{base}/v1/audio/voices/clone:Grace", headers=AUTH)
    assert r.status_code == 200 and r.json()["deleted"] is True
    assert not (voices / "Grace").exists()
    assert "clone:Grace" not in [
        v["id"] for v in httpx.get(f"{base}/v1/audio/voices").json()["voices"]
    ]
    r = httpx.post(f"{base}/v1/audio/speech", json=speak, headers=AUTH)
    assert r.status_code == 400 and r.json()["error"]["param"] == "voice"
    assert httpx.delete(f"{base}/v1/audio/voices/Grace", headers=AUTH).status_code == 404


def test_one_shot_voice_clone(server):
    base, voices, engines, _ = server
    clip = base64.b64encode(wav_bytes(speech_clip(4.0))).decode()
    body = {"input": "A one-off line.", "ref_audio": f"data:audio/wav;base64,{clip}",
            "ref_text": "The words in the clip.", "response_format": "opus"}  # fmt: skip
    r = httpx.post(f"{base}/v1/audio/voice-clone", json=body, headers=AUTH)
    assert r.status_code == 200 and duration(r.content, "opus") > 0.5
    assert engines["clone"].calls[-1]["voice"].ref_text == "The words in the clip."
    assert list(voices.iterdir()) == []  # nothing saved


def test_health_ready_metrics(server):
    base, _, _, _ = server
    health = httpx.get(f"{base}/health").json()
    assert health["status"] == "ok" and health["ready"] is True
    assert health["roles"] == {"presets": "cv", "design": "design", "clone": "clone"}
    assert health["models"]["cv"]["device"] == "cpu" and health["models"]["cv"]["state"] == "ready"
    assert httpx.get(f"{base}/ready").status_code == 200
    assert httpx.get(f"{base}/metrics").status_code == 401
    text = httpx.get(f"{base}/metrics", headers=AUTH).text
    for name in ("tts_requests_total", "tts_queue_depth", "tts_inflight", "tts_rtf",
                 "tts_time_to_first_audio_seconds", "tts_audio_seconds_total",
                 "tts_rejected_total", "tts_cancelled_total"):  # fmt: skip
        assert f"# TYPE {name.removesuffix('_total')}" in text, name


def test_cpu_warning_is_loud_in_health(tmp_path):
    settings = make_settings(tmp_path, device="auto")  # a GPU was possible, but we run on the CPU
    with serve(settings, engines={"cv": FakeEngine("custom_voice", device="cpu")}) as (base, _):
        health = httpx.get(f"{base}/health").json()
    assert health["status"] == "degraded"
    assert any("runs on the CPU" in w for w in health["warnings"])


def test_models_on_the_cpu_are_one_warning_with_its_fix(tmp_path):
    """Three models on the CPU are one thing to fix, not three warnings on the page's badge."""
    settings = make_settings(tmp_path, device="auto")
    engines = {name: FakeEngine(kind, device="cpu") for name, kind in
               (("cv", "custom_voice"), ("design", "voice_design"), ("clone", "base"))}  # fmt: skip
    with serve(settings, engines=engines) as (base, _):
        warnings = httpx.get(f"{base}/health").json()["warnings"]
    on_cpu = [w for w in warnings if "on the CPU" in w]
    assert len(on_cpu) == 1, warnings
    assert "models cv, design, clone run on the CPU" in on_cpu[0]
    assert "`device: cpu`" in on_cpu[0] and "ownvoice doctor" in on_cpu[0]
