"""Acceptance against the real engine: tiny random checkpoints of every model type, loaded by the
server itself from a config, behind a real uvicorn; the official `openai` client talks to it.

Random weights never say "end of speech", so every request caps its length (max_frames) and
the tests compare formats and streams with each other rather than with a known duration.
"""

from __future__ import annotations

import base64
import contextlib
import json

import httpx
import openai
import pytest

from ownvoice.server import create_app
from ownvoice.service.encode import FORMATS
from tests.server.helpers import duration, live_server, make_settings, speech_clip, wav_bytes

FRAME_BYTES = 1920 * 2  # one 80 ms frame of 24 kHz s16le
LIKES = {"cv": "0.6B-CustomVoice", "design": "1.7B-VoiceDesign", "clone": "0.6B-Base"}


@pytest.fixture(scope="module")
def real(tiny_checkpoints, tmp_path_factory):
    paths = real_checkpoints(tiny_checkpoints)
    voices = tmp_path_factory.mktemp("voices")
    folder = voices / "profiles" / "abc123def456"  # a seed-server profile, written by hand
    folder.mkdir(parents=True)
    (folder / "ref_audio.wav").write_bytes(wav_bytes(speech_clip(3.5, rate=24000), 24000))
    (folder / "meta.json").write_text(json.dumps({
        "name": "Reader", "profile_id": "abc123def456", "ref_audio_filename": "ref_audio.wav",
        "ref_text": "Hello, this is my voice.", "x_vector_only_mode": False, "language": "English",
    }))  # fmt: skip
    settings = make_settings(
        voices, device="cpu", dtype="float32",
        models={name: {"source": str(p)} for name, p in paths.items()},  # types from config.json
        optimization={"streaming": {"emit_every_frames": 2}},
    )  # fmt: skip
    with serve_real(settings) as (base, app):
        client = openai.OpenAI(base_url=f"{base}/v1", api_key="x", max_retries=0, timeout=300)
        yield base, client, app


def real_checkpoints(tiny_checkpoints) -> dict:
    """name -> tiny checkpoint folder."""
    return {name: tiny_checkpoints[like] for name, like in LIKES.items()}


@contextlib.contextmanager
def serve_real(settings):
    """A live server that loads the real checkpoints itself."""
    app = create_app(settings, run_doctor=False)
    with live_server(app, timeout=600) as base:
        yield base, app


def capped(frames: int, **extra) -> dict:
    return {"extra_body": {"max_frames": frames, "seed": 0, **extra}}


def test_roles_come_from_the_checkpoints(real):
    base, _, app = real
    health = httpx.get(f"{base}/health").json()
    assert health["roles"] == {"presets": "cv", "design": "design", "clone": "clone"}
    assert all(m["state"] == "ready" for m in health["models"].values())
    assert {v["id"] for v in httpx.get(f"{base}/v1/audio/voices").json()["voices"]} >= {
        "alloy", "ryan", "design", "clone:Reader",
    }  # fmt: skip


def test_all_formats_decode_to_the_same_duration(real):
    _, client, _ = real
    wav = client.audio.speech.create(
        model="tts-1", voice="alloy", input="Hello.", response_format="wav", **capped(3)
    )
    want = duration(wav.content, "wav")
    assert want in (0.08, 0.16, 0.24)  # whole frames, at most the cap
    for fmt in FORMATS:
        audio = client.audio.speech.create(
            model="tts-1", voice="alloy", input="Hello.", response_format=fmt, **capped(3)
        )
        slack = 0.12 if fmt in ("mp3", "aac") else 0.001
        got = duration(audio.content, fmt)
        assert want - 0.001 <= got <= want + slack, f"{fmt}: {got:.3f} s, wav: {want:.3f} s"


def test_streaming_and_sse(real):
    _, client, _ = real
    with client.audio.speech.with_streaming_response.create(
        model="tts-1", voice="ryan", input="Streaming test.", response_format="pcm", **capped(6)
    ) as response:
        parts = list(response.iter_bytes())
    total = sum(len(p) for p in parts)
    assert total % FRAME_BYTES == 0 and FRAME_BYTES <= total <= 6 * FRAME_BYTES
    assert len(parts) >= 2 or total <= 2 * FRAME_BYTES, "audio came in one piece at the end"
    with client.audio.speech.with_streaming_response.create(
        model="tts-1",
        voice="ryan",
        input="Streaming test.",
        response_format="wav",
        stream_format="sse",
        **capped(4),
    ) as response:
        events = [
            json.loads(line[6:]) for line in response.iter_lines() if line.startswith("data: ")
        ]
    audio = b"".join(
        base64.b64decode(e["audio"]) for e in events if e["type"] == "speech.audio.delta"
    )
    assert events[-1]["type"] == "speech.audio.done"
    assert duration(audio, "wav") == pytest.approx(events[-1]["usage"]["output_tokens"] * 0.08)


def test_clone_profile_speaks_and_is_encoded_once(real):
    _, client, app = real
    for _ in range(2):
        audio = client.audio.speech.create(
            model="tts-1",
            voice="clone:Reader",
            input="Hi there.",
            response_format="wav",
            **capped(3),
        )
        assert duration(audio.content, "wav") > 0
    assert app.state.service.library.encode_count == 1


def test_voice_design(real):
    _, client, _ = real
    audio = client.audio.speech.create(
        model="tts-1",
        voice="design",
        input="Hi.",
        instructions="A warm, low voice.",
        response_format="wav",
        **capped(2),
    )
    assert duration(audio.content, "wav") > 0


def test_engine_errors_keep_their_param(real):
    _, client, _ = real
    with pytest.raises(openai.BadRequestError) as e:
        client.audio.speech.create(
            model="tts-1", voice="alloy", input="Hi.", **capped(2, language="klingon")
        )
    assert e.value.param == "language"
    with pytest.raises(openai.BadRequestError) as e:
        client.audio.speech.create(model="clone", voice="clone:Nobody", input="Hi.")
    assert e.value.param == "voice"
