"""Coming from the Qwen3-TTS OpenAI server (groxaxo's Qwen3-TTS-Openai-Fastapi and the forks its
"Qwen3-TTS in Docker on my iGPU" write-ups use): its config, endpoints and commands as they are.

The config block below is the one those write-ups print, verbatim but for the hub ids, which
point at local tiny checkpoints (no downloads here). The commands are the write-ups' own: a curl
to /v1/audio/speech with a `clone:` voice, the `openai` client lines, GET /v1/voices and the
voice-clone capabilities call. Random weights never end on their own: the server's length cap
for the text stops them, as it would a runaway real model.
"""

from __future__ import annotations

import json
import logging
import subprocess

import httpx
import openai
import pytest
from safetensors.torch import load_file

from ownvoice.errors import InvalidInput
from ownvoice.server.settings import load_settings
from ownvoice.service.config import ModelSpec, ServiceConfig
from ownvoice.service.pool import EnginePool
from ownvoice.service.roles import choose_roles
from tests.server.helpers import speech_clip, wav_bytes
from tests.server.test_serve_command import free_port, start, stop, wait_ready

SEED_CONFIG = """\
models:
  0.6B-CustomVoice:
    hf_id: Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice
    type: customvoice
  1.7B-Base:
    hf_id: Qwen/Qwen3-TTS-12Hz-1.7B-Base
    type: base
optimization:
  attention: sdpa
  use_compile: false
  use_cuda_graphs: false
  streaming:
    decode_window_frames: 72
    emit_every_frames: 6
"""


def seed_library(root) -> None:
    """A voice as the seed server's Voice Studio saves it: profiles/<uuid>/meta.json + clip."""
    folder = root / "profiles" / "5f2b9c0e7a1d"
    folder.mkdir(parents=True)
    (folder / "ref_audio.wav").write_bytes(wav_bytes(speech_clip(3.5, rate=24000), 24000))
    (folder / "meta.json").write_text(json.dumps({
        "name": "MyVoice", "profile_id": "5f2b9c0e7a1d", "ref_audio_filename": "ref_audio.wav",
        "ref_text": "Hello, this is my voice.", "x_vector_only_mode": False, "language": "English",
        "task_type": "Base", "created_at": "2026-02-10T12:00:00Z",
    }))  # fmt: skip


def test_their_config_and_commands_work_unchanged(tiny_checkpoints, tmp_path):
    config = SEED_CONFIG.replace(
        "Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice", str(tiny_checkpoints["0.6B-CustomVoice"])
    ).replace("Qwen/Qwen3-TTS-12Hz-1.7B-Base", str(tiny_checkpoints["1.7B-Base"]))
    (tmp_path / "config.yaml").write_text(config)
    seed_library(tmp_path / "voice_library")
    port = free_port()
    proc = start(
        ["--config", "config.yaml", "--port", str(port), "--device", "cpu",
         "--voices-dir", "voice_library"],
        cwd=tmp_path,
    )  # fmt: skip
    base = f"http://localhost:{port}"
    try:
        wait_ready(proc, base)
        # the write-ups' curl, as printed (only the port differs)
        out = tmp_path / "clone.wav"
        subprocess.run(
            ["curl", "-sf", "-X", "POST", f"{base}/v1/audio/speech",
             "-H", "Content-Type: application/json",
             "-d", '{"model": "qwen3-tts", "input": "Hello from my cloned voice.", '
                   '"voice": "clone:MyVoice", "response_format": "wav"}',
             "--output", str(out)],
            check=True, timeout=300,
        )  # fmt: skip
        assert out.read_bytes()[:4] == b"RIFF" and len(out.read_bytes()) > 44 + 1920 * 2

        # the openai client lines (mp3 is OpenAI's default format)
        client = openai.OpenAI(base_url=f"{base}/v1", api_key="not-needed")
        response = client.audio.speech.create(
            model="qwen3-tts", voice="clone:MyVoice", input="Hello world."
        )
        response.write_to_file(tmp_path / "out.mp3")
        assert (tmp_path / "out.mp3").stat().st_size > 1000
        preset = client.audio.speech.create(model="tts-1", voice="Vivian", input="Hi.")
        assert len(preset.content) > 1000

        voices = httpx.get(f"{base}/v1/voices").json()
        assert voices == httpx.get(f"{base}/v1/audio/voices").json()
        ids = {v["id"] for v in voices["voices"]}
        assert "clone:MyVoice" in ids and "vivian" in ids, ids

        caps = httpx.get(f"{base}/v1/audio/voice-clone/capabilities").json()
        assert caps["supported"] is True and caps["model_type"] == "base"
        assert caps["model"] == "1.7B-Base"
        assert caps["icl_mode_available"] and caps["x_vector_mode_available"]

        assert httpx.get(f"{base}/v1/models/1.7B-Base").json()["id"] == "1.7B-Base"
        missing = httpx.get(f"{base}/v1/models/nope")
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "model_not_found"
    finally:
        code, log = stop(proc)
    assert code == 0, log
    # the lines they grep for, and what their config keys mean here
    assert f"ready on http://127.0.0.1:{port}" in log, log
    assert "GPU: not used (device: cpu)" in log, log
    assert "cloned voices (clone:<name>): model 1.7B-Base (the only base model)" in log, log
    assert "decode_window_frames 72: each chunk re-decodes the last 72 frames" in log, log


def _parameters(folder) -> int:
    # counted independently of the server: every tensor of the checkpoint, loaded
    return sum(a.numel() for f in folder.glob("*.safetensors") for a in load_file(f).values())


@pytest.mark.parametrize("larger_first", [True, False])
def test_the_larger_base_model_serves_clones_whichever_comes_first(
    tiny_checkpoints, larger_first, caplog
):
    folders = {"a": tiny_checkpoints["0.6B-Base"], "b": tiny_checkpoints["1.7B-Base"]}
    sizes = {name: _parameters(f) for name, f in folders.items()}
    assert sizes["a"] != sizes["b"]  # tiny 0.6B has the wider code predictor
    larger = max(sizes, key=sizes.get)
    order = sorted(folders, key=lambda n: sizes[n], reverse=larger_first)
    config = ServiceConfig(
        models=tuple(ModelSpec(n, str(folders[n])) for n in order), lazy_load=True
    )
    pool = EnginePool(config)
    assert pool.roles == {"clone": larger}
    import asyncio

    with caplog.at_level(logging.INFO, logger="ownvoice"):
        try:
            asyncio.run(pool.start())
        finally:
            pool.close()
    assert f"cloned voices (clone:<name>): model {larger} (the largest base model" in caplog.text


def test_hub_ids_are_sized_by_their_names(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HOME", str(tmp_path))  # an empty cache: the names must tell
    from ownvoice.service.roles import model_size_hint

    small = model_size_hint("Qwen/Qwen3-TTS-12Hz-0.6B-Base")
    big = model_size_hint("Qwen/Qwen3-TTS-12Hz-1.7B-Base")
    assert (small, big) == (600_000_000, 1_700_000_000)
    for types in ({"s": "base", "b": "base"}, {"b": "base", "s": "base"}):
        roles = choose_roles({}, types, {"s": small, "b": big})
        assert roles["clone"].model == "b"
    # equal (or unknown) sizes: the first listed, and the reason says so
    tie = choose_roles({}, {"x": "base", "y": "base"}, {})
    assert tie["clone"].model == "x" and "sizes are equal or unknown" in tie["clone"].why
    # roles: still wins
    assert (
        choose_roles({"clone": "s"}, {"s": "base", "b": "base"}, {"b": big})["clone"].model == "s"
    )


def test_their_spellings_and_keys_are_understood(tmp_path):
    cfg = tmp_path / "config.yaml"
    cfg.write_text(
        SEED_CONFIG
        + "default_model: 0.6B-CustomVoice\n"
        + "voices:\n  - {name: Vivian, language: Chinese}\n"
    )
    s = load_settings(cfg)
    assert {n: (m.source, m.type) for n, m in s.models.items()} == {
        "0.6B-CustomVoice": ("Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice", "custom_voice"),
        "1.7B-Base": ("Qwen/Qwen3-TTS-12Hz-1.7B-Base", "base"),
    }
    engine = s.engine_config()
    assert engine.use_cuda_graphs is False and engine.decode_window_frames == 72
    assert s.chunk_frames == 6
    assert s.service_config().roles == {"presets": "0.6B-CustomVoice"}
    notes = "\n".join(s.compat_notes())
    assert "voices: the list has no effect here" in notes
    assert "default_model 0.6B-CustomVoice serves the presets role" in notes

    cfg.write_text(
        "models:\n  cv: {hf_id: x, type: voicedesign}\n"
        "optimization: {attention: flash_attention_2, compile_mode: max-autotune}\n"
    )
    s = load_settings(cfg)
    assert s.models["cv"].type == "voice_design" and s.engine_config().attention == "sdpa"
    notes = "\n".join(s.compat_notes())
    assert "flash_attention_2 runs as sdpa" in notes
    assert "optimization.compile_mode has no effect here" in notes


@pytest.mark.parametrize(
    ("yaml_text", "named", "meant"),
    [
        ("optimization: {use_cuda_graph: false}\n", "optimization.use_cuda_graph",
         "optimization.use_cuda_graphs"),
        ("models:\n  cv: {hf_idd: x}\n", "models.cv.hf_idd", "models.cv.hf_id"),
        ("limits: {max_bach: 2}\n", "limits.max_bach", "limits.max_batch"),
        ("defualt_model: cv\n", "defualt_model", "default_model"),
    ],
)  # fmt: skip
def test_a_misspelled_key_is_named_with_the_likely_one(tmp_path, yaml_text, named, meant):
    cfg = tmp_path / "config.yaml"
    cfg.write_text(yaml_text)
    with pytest.raises(InvalidInput) as e:
        load_settings(cfg)
    assert f"{named}: unknown key; did you mean {meant}?" in e.value.message


def test_keys_neither_server_knows_still_fail(tmp_path):
    cfg = tmp_path / "config.yaml"
    cfg.write_text("optimization: {turbo: true}\nmodels:\n  a: {hf_id: x, type: vocoder}\n")
    with pytest.raises(InvalidInput) as e:
        load_settings(cfg)
    text = e.value.message
    assert "optimization.turbo: unknown key; known here:" in text
    assert "models.a.type" in text
    cfg.write_text("models:\n  a: {hf_id: x, source: y}\n")
    with pytest.raises(InvalidInput, match="not both"):
        load_settings(cfg)
    cfg.write_text("models:\n  a: {type: base}\ndefault_model: b\n")
    with pytest.raises(InvalidInput) as e:
        load_settings(cfg)
    assert "models.a.source: required (or hf_id)" in e.value.message


def test_sizes_are_read_from_the_weights_not_the_folder_name(tiny_checkpoints):
    from ownvoice.service.roles import model_size_hint

    folder = tiny_checkpoints["1.7B-Base"]
    assert model_size_hint(str(folder)) == _parameters(folder)
