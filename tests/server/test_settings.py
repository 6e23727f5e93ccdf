"""Settings: defaults, the example config, YAML + environment, roles, the CLI's overrides."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ownvoice.cli import build_parser
from ownvoice.cli.serve import build_settings
from ownvoice.errors import InvalidInput
from ownvoice.server.settings import (
    DEFAULT_MODEL,
    ServerSettings,
    load_settings,
    model_type_hint,
    resolve_roles,
)

REPO = Path(__file__).resolve().parents[2]


def test_defaults_serve_the_small_custom_voice_model_on_loopback():
    s = load_settings(None)
    assert (s.server.host, s.server.port, s.server.api_key) == ("127.0.0.1", 8880, None)
    assert DEFAULT_MODEL == "Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice"
    assert {n: (m.source, m.type) for n, m in s.models.items()} == {
        "cv": (DEFAULT_MODEL, "custom_voice")
    }
    assert resolve_roles(s, {"cv": "custom_voice"}) == {"presets": "cv"}
    assert (s.limits.max_input_chars, s.limits.queue_size, s.limits.max_batch) == (4096, 8, None)
    # unset: by device (a GPU batches 16, a CPU 4); the former `concurrency` key still counts
    assert s.service_config().max_batch in (4, 16)
    legacy = load_settings(None, limits={"concurrency": 1})
    assert legacy.service_config().max_batch == 1


def test_example_config_is_valid_and_matches_the_defaults():
    example = load_settings(REPO / "config.example.yaml")
    assert example.model_dump() == load_settings(None).model_dump()


def test_yaml_then_environment(tmp_path, monkeypatch):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(
        "server: {port: 7000, api_key: sekrit}\n"
        "models:\n  a: {source: /m/a}\n  b: {source: /m/b, type: base}\n"
        "roles: {presets: a}\n"
        "limits: {queue_size: 2}\n"
        "optimization: {quantize: int8, streaming: {emit_every_frames: 4, decode_window_frames: 72}}\n"
    )
    monkeypatch.setenv("OWNVOICE_SERVER__PORT", "9100")
    monkeypatch.setenv("OWNVOICE_LIMITS__CONCURRENCY", "2")
    s = load_settings(cfg)
    assert s.server.port == 9100  # env wins over the file
    assert s.server.api_key.get_secret_value() == "sekrit"
    assert "sekrit" not in repr(s)  # never printed by accident
    assert (s.limits.queue_size, s.limits.concurrency) == (2, 2)
    assert set(s.models) == {"a", "b"} and s.roles.presets == "a"
    assert s.chunk_frames == 4
    ec = s.engine_config()
    assert (ec.attention, ec.use_compile, ec.use_cuda_graphs, ec.decode_window_frames) == (
        "sdpa",
        False,
        True,
        72,
    )
    assert (ec.quantize, ec.num_threads) == ("int8", None)


def test_bad_config_names_file_and_key(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("limits: {queue_sise: 3}\n")
    with pytest.raises(InvalidInput, match=r"c\.yaml.*queue_sise"):
        load_settings(cfg)
    cfg.write_text("models: {a: {source: x}}\nroles: {clone: b}\n")
    with pytest.raises(InvalidInput, match="roles.clone names model 'b'"):
        load_settings(cfg)


def test_host_and_origin_lists_are_checked(tmp_path, monkeypatch):
    s = load_settings(None)
    assert (s.server.allowed_hosts, s.server.allowed_origins) == ([], [])
    assert (s.server.shutdown_timeout_s, s.limits.send_timeout_s) == (30, 30)
    cfg = tmp_path / "c.yaml"
    for bad in ("http://tts.lan", "tts.lan:8880", "a*.b", "", "[::1]:8880", "u@tts.lan"):
        cfg.write_text(f"server: {{allowed_hosts: [{json.dumps(bad)}]}}\n")
        with pytest.raises(InvalidInput, match=r"server\.allowed_hosts.*not a host pattern"):
            load_settings(cfg)
    for bad in (
        "localhost:3000",
        "http://localhost:3000/app",
        "ftp://x",
        "http://localhost:99999",
        "http://u@h",
    ):
        cfg.write_text(f"server: {{allowed_origins: [{json.dumps(bad)}]}}\n")
        with pytest.raises(InvalidInput, match=r"server\.allowed_origins.*scheme://host"):
            load_settings(cfg)
    monkeypatch.setenv("OWNVOICE_SERVER__ALLOWED_HOSTS", '["TTS.lan", "*.example.org", "fe80::1"]')
    assert load_settings(None).server.allowed_hosts == ["tts.lan", "*.example.org", "fe80::1"]


def test_roles_are_explicit_then_the_only_then_the_largest_model():
    s = ServerSettings(
        models={"first": {"source": "x"}, "second": {"source": "y"}}, roles={"presets": "second"}
    )
    types = {"first": "custom_voice", "second": "custom_voice"}
    assert resolve_roles(s, types)["presets"] == "second"
    unset = ServerSettings(models={"first": {"source": "x"}, "second": {"source": "y"}})
    assert resolve_roles(unset, types)["presets"] == "first"  # sizes unknown: file order
    assert resolve_roles(unset, types, {"second": 2})["presets"] == "second"
    wrong = ServerSettings(models={"a": {"source": "x"}}, roles={"clone": "a"})
    with pytest.raises(InvalidInput, match="needs a base model"):
        resolve_roles(wrong, {"a": "custom_voice"})
    mixed = ServerSettings(
        models={"c": {"source": "x"}, "b": {"source": "y"}, "d": {"source": "z"}}
    )
    assert resolve_roles(mixed, {"c": "custom_voice", "b": "base", "d": "voice_design"}) == {
        "presets": "c", "design": "d", "clone": "b",
    }  # fmt: skip


def test_model_type_from_config_json_or_hub_id(tmp_path):
    from ownvoice.server.settings import ModelEntry

    (tmp_path / "config.json").write_text(json.dumps({"tts_model_type": "voice_design"}))
    assert model_type_hint(ModelEntry(source=str(tmp_path))) == "voice_design"
    assert model_type_hint(ModelEntry(source="Qwen/Qwen3-TTS-12Hz-1.7B-Base")) == "base"
    assert model_type_hint(ModelEntry(source="someone/mystery")) is None
    assert model_type_hint(ModelEntry(source="someone/mystery", type="base")) == "base"


def test_cli_serve_flags(tmp_path, monkeypatch):
    default = build_settings(build_parser().parse_args(["serve"]))
    assert (default.server.host, default.server.port) == ("127.0.0.1", 8880)
    assert default.models["cv"].source == DEFAULT_MODEL

    monkeypatch.setenv("OWNVOICE_SERVER__PORT", "9100")
    ckpt = tmp_path / "my-ckpt"
    args = build_parser().parse_args(["serve", "--model", str(ckpt), "--port", "9001", "--lazy"])
    s = build_settings(args)
    assert s.server.port == 9001  # flags win over the environment
    assert {n: m.source for n, m in s.models.items()} == {"my-ckpt": str(ckpt)}
    assert s.roles.presets is None and s.lazy_load  # the role comes from the checkpoint's type
