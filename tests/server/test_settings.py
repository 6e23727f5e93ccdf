"""Settings: defaults, the example config, YAML + environment, roles, the CLI's overrides."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ownvoice.cli import build_parser
from ownvoice.cli.serve import build_settings
from ownvoice.engine.options import EngineConfig
from ownvoice.errors import InvalidInput
from ownvoice.server.settings import (
    DEFAULT_MODEL,
    ServerSettings,
    load_settings,
    model_type_hint,
    resolve_roles,
)
from ownvoice.service.config import Limits, ModelSpec, ServiceConfig
from ownvoice.service.designs import DesignedVoice

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


# -- every setting reaches the part that uses it ----------------------------------------------


def test_every_setting_reaches_the_serving_core_and_the_engine(tmp_path):
    s = load_settings(
        None,
        models={"a": {"source": "/m/a", "type": "custom_voice"}, "b": {"hf_id": "org/b-Base"}},
        roles={"clone": "b"},
        device="cuda:1",
        dtype="bfloat16",
        lazy_load=True,
        voices_dir=str(tmp_path),
        optimization={
            "attention": "eager", "use_compile": True, "use_cuda_graphs": False,
            "quantize": "int4", "num_threads": 3, "decoder_dtype": "bfloat16",
            "overlap_decoder": False,
            "streaming": {"decode_window_frames": 40, "emit_every_frames": 5},
        },
        limits={"max_input_chars": 999, "queue_size": 3, "max_batch": 6, "request_timeout_s": 42,
                "max_chunk_chars": 123, "max_upload_mb": 7.5},
        voice_aliases={"nova": "serena"},
        gpu_keepalive_interval_s=2.5,
    )  # fmt: skip
    assert s.engine_config() == EngineConfig(
        device="cuda:1", dtype="bfloat16", attention="eager", use_compile=True,
        use_cuda_graphs=False, decode_window_frames=40, quantize="int4", num_threads=3,
        decoder_dtype="bfloat16", overlap_decoder=False,
    )  # fmt: skip
    assert s.service_config() == ServiceConfig(
        models=(ModelSpec("a", "/m/a", "custom_voice"), ModelSpec("b", "org/b-Base", None)),
        roles={"clone": "b"},
        engine=s.engine_config(),
        limits=Limits(max_input_chars=999, queue_size=3, max_batch=6, request_timeout_s=42,
                      max_chunk_chars=123, max_upload_mb=7.5),
        lazy_load=True,
        voices_dir=tmp_path,
        chunk_frames=5,
        voice_aliases={"nova": "serena"},
        keepalive_s=2.5,
    )  # fmt: skip
    flash = load_settings(None, optimization={"attention": "flash_attention_2"})
    assert flash.engine_config().attention == "sdpa"


@pytest.mark.parametrize(
    "default_model, roles, want",
    [
        ("cv", {}, {"presets": "cv"}),
        ("vd", {}, {"design": "vd"}),
        ("base", {}, {}),  # clones are never routed by default_model
        ("cv", {"presets": "cv2"}, {"presets": "cv2"}),  # the roles block wins
        ("unknown", {}, {}),  # a type that cannot be told serves no role
        (None, {"design": "vd"}, {"design": "vd"}),
    ],
)
def test_default_model_serves_the_role_of_its_type(default_model, roles, want):
    models = {
        "cv": {"source": "/m/cv", "type": "custom_voice"},
        "cv2": {"source": "/m/cv2", "type": "custom_voice"},
        "vd": {"source": "/m/vd", "type": "voice_design"},
        "base": {"source": "/m/base", "type": "base"},
        "unknown": {"source": "/m/unknown"},
    }
    s = load_settings(None, models=models, default_model=default_model, roles=roles)
    assert s.explicit_roles() == want


def test_their_keys_are_explained_at_start():
    s = load_settings(
        None,
        models={"a": {"source": "/x/a", "type": "custom_voice"},
                "b": {"source": "/x/b", "type": "base"}},
        default_model="b",
        voices=["x"],
        optimization={"attention": "flash_attention_2", "compile_mode": "max",
                      "use_fast_codebook": True, "compile_codebook_predictor": False,
                      "streaming": {"decode_window_frames": 72}},
    )  # fmt: skip
    no_effect = (
        "has no effect here: ownvoice's own decode loop is always the fast one (static KV "
        "cache, CUDA graphs with use_cuda_graphs)"
    )
    assert s.compat_notes() == [
        "optimization.attention flash_attention_2 runs as sdpa: ownvoice does not use the "
        "flash-attn package; PyTorch's sdpa picks a flash kernel on the GPU by itself",
        "optimization.streaming.decode_window_frames 72: each chunk re-decodes the last 72 "
        "frames, as the Qwen3-TTS OpenAI server does; remove it for ownvoice's exact "
        "incremental decoder (same audio as decoding it all at once, less work per chunk)",
        f"optimization.compile_mode {no_effect}",
        f"optimization.use_fast_codebook {no_effect}",
        f"optimization.compile_codebook_predictor {no_effect}",
        "voices: the list has no effect here; the voices are the models' own speakers, the "
        "OpenAI names and the voice library (GET /v1/voices)",
        "default_model b serves the requests that name it; other voices go to the model of "
        "their kind (roles)",
    ]
    served = load_settings(None, models={"a": {"source": "/x/a", "type": "custom_voice"}},
                           default_model="a")  # fmt: skip
    assert served.compat_notes() == [
        "default_model a serves the presets role; other voices go to the model of their kind "
        "(roles)"
    ]
    assert load_settings(None).compat_notes() == []


def test_designed_voices_from_the_config():
    s = load_settings(None, designs={
        "narrator": "  A calm, deep voice.  ",
        "kid": {"instructions": "A bright young voice.", "language": "english", "seed": 4},
    })  # fmt: skip
    assert s.designed_voices() == {
        "narrator": DesignedVoice("narrator", "A calm, deep voice.", None, None, source="config"),
        "kid": DesignedVoice("kid", "A bright young voice.", "english", 4, source="config"),
    }


# -- what a bad config is told ---------------------------------------------------------------


@pytest.mark.parametrize(
    "yaml_text, message",
    [
        ("limits: {queue_sise: 3}\n",
         "limits.queue_sise: unknown key; did you mean limits.queue_size?"),
        ("limits: {zzz: 3}\n",
         "limits.zzz: unknown key; known here: max_input_chars, queue_size, max_batch, "
         "concurrency, request_timeout_s, max_chunk_chars, max_upload_mb, send_timeout_s, "
         "idle_timeout_s, max_queued_utterances"),
        ("models: {a: {sorce: x}}\n",
         "models.a.source: required (or hf_id): a Hugging Face hub id or a checkpoint folder; "
         "models.a.sorce: unknown key; did you mean models.a.source?"),
        ("models: {a: {source: x, hf_idd: y}}\n",
         "models.a.hf_idd: unknown key; did you mean models.a.hf_id?"),
        ("limits: {queue_size: -1, max_batch: 0}\n",
         "limits.queue_size: Input should be greater than or equal to 0; "
         "limits.max_batch: Input should be greater than or equal to 1"),
        ("designs: {x: {instructions: A warm voice., foo: 1}}\n",
         "designs.x.DesignEntry.foo: unknown key; designs.x.str: Input should be a valid string"),
        ("models: {a: {source: x}}\nroles: {clone: b}\n",
         "settings: Value error, roles.clone names model 'b', which is not in models "
         "(configured: a)"),
        ("- 1\n", None),
    ],
)  # fmt: skip
def test_a_bad_config_is_told_what_and_where(tmp_path, yaml_text, message):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml_text)
    with pytest.raises(InvalidInput) as caught:
        load_settings(cfg)
    assert caught.value.param == "config"
    if message is None:
        assert str(caught.value) == f"config file {str(cfg)!r} must hold a mapping of keys"
    else:
        assert str(caught.value) == f"config file {str(cfg)!r}: {message}"


def test_unreadable_and_unparsable_files_and_overrides(tmp_path):
    with pytest.raises(InvalidInput) as caught:
        load_settings(tmp_path)  # a folder
    assert str(caught.value).startswith(f"cannot read config file {str(tmp_path)!r}: ")
    assert caught.value.param == "config"
    cfg = tmp_path / "c.yaml"
    cfg.write_text("a: [\n")
    with pytest.raises(InvalidInput) as caught:
        load_settings(cfg)
    assert str(caught.value).startswith(f"config file {str(cfg)!r} is not valid YAML: ")
    assert caught.value.param == "config"
    cfg.write_text("")  # empty: the defaults
    assert load_settings(cfg).model_dump() == load_settings(None).model_dump()
    cfg.write_text("limits: {queue_size: 2}\nlog_text: true\n")
    s = load_settings(cfg, limits={"max_batch": 3})  # an override replaces the file's key
    assert (s.limits.queue_size, s.limits.max_batch, s.log_text) == (8, 3, True)
    with pytest.raises(InvalidInput) as caught:
        load_settings(None, limits={"queue_size": -1})
    assert (
        str(caught.value)
        == "settings: limits.queue_size: Input should be greater than or equal to 0"
    )
