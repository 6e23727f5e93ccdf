"""Loading a speech_tokenizer/ folder written from random_codec_weights + codec_config_json."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import save_file

from ownvoice.errors import ModelLoadError
from ownvoice.model.codec.loading import load_codec
from tests.reference import import_reference


def write_folder(path, config_json, weights):
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(config_json))
    save_file({k: v.contiguous() for k, v in weights.items()}, str(path / "model.safetensors"))
    return path


@pytest.fixture(scope="module")
def folder(tmp_path_factory, tiny_checkpoint):
    return write_folder(tmp_path_factory.mktemp("codec") / "speech_tokenizer", *tiny_checkpoint)


def test_loaded_codec_equals_built_codec(folder, tiny_codec):
    codec = load_codec(folder, device="cpu", dtype=torch.float32, with_encoder=True)
    assert codec.config == tiny_codec.config
    assert codec.sample_rate == 24000 and codec.samples_per_frame == 1920
    assert not any(p.requires_grad for p in codec.decoder.parameters())
    codes = torch.randint(0, 2048, (1, 16, 6), generator=torch.Generator().manual_seed(0))
    wav = torch.randn(1, 5000, generator=torch.Generator().manual_seed(1)) * 0.2
    with torch.no_grad():
        assert torch.equal(codec.decoder(codes), tiny_codec.decoder(codes))
        assert torch.equal(codec.encoder(wav), tiny_codec.encoder(wav))


@pytest.mark.reference
def test_reference_loads_the_same_folder(folder, tiny_codec):
    """The folder is a valid upstream checkpoint: the official loader reads it and agrees."""
    import_reference()
    from qwen_tts.core.tokenizer_12hz.modeling_qwen3_tts_tokenizer_v2 import (
        Qwen3TTSTokenizerV2Model,
    )

    ref = Qwen3TTSTokenizerV2Model.from_pretrained(str(folder)).eval()
    codes = torch.randint(0, 2048, (1, 16, 6), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        expected = ref.decoder(codes).squeeze(1)
        assert (tiny_codec.decoder(codes) - expected).abs().max().item() <= 1e-5


def test_decoder_only_and_dtype(folder):
    codec = load_codec(folder, dtype=torch.bfloat16, with_encoder=False)
    assert codec.encoder is None
    assert {p.dtype for p in codec.decoder.state_dict().values()} == {torch.bfloat16}
    wav = codec.decoder(torch.zeros(1, 16, 2, dtype=torch.long))
    assert wav.dtype == torch.bfloat16 and wav.shape == (1, 3840)


def test_decoder_only_folder_loads_without_encoder(tmp_path, tiny_checkpoint):
    cj, weights = tiny_checkpoint
    decoder_only = {k: v for k, v in weights.items() if k.startswith("decoder.")}
    path = write_folder(tmp_path / "dec", cj, decoder_only)
    assert load_codec(path, with_encoder=False).encoder is None
    with pytest.raises(ModelLoadError, match=r"missing: encoder\."):
        load_codec(path, with_encoder=True)


def test_missing_files(tmp_path, tiny_checkpoint):
    with pytest.raises(ModelLoadError, match="no config.json"):
        load_codec(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps(tiny_checkpoint[0]))
    with pytest.raises(ModelLoadError, match="no model.safetensors"):
        load_codec(tmp_path)
    (tmp_path / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(ModelLoadError, match="cannot read"):
        load_codec(tmp_path)


def test_bad_config(tmp_path, tiny_checkpoint):
    cj, weights = tiny_checkpoint
    path = write_folder(tmp_path / "a", cj, {"x": torch.zeros(1)})
    (path / "config.json").write_text("{not json")
    with pytest.raises(ModelLoadError, match="config.json"):
        load_codec(path)
    (path / "config.json").write_text(json.dumps({**cj, "model_type": "qwen3_tts_tokenizer_25hz"}))
    with pytest.raises(ModelLoadError, match="model_type"):
        load_codec(path)


def test_tensor_problems_are_named(tmp_path, tiny_checkpoint):
    cj, weights = tiny_checkpoint
    broken = dict(weights)
    del broken["decoder.pre_conv.conv.weight"]
    broken["decoder.extra.weight"] = torch.zeros(3)
    broken["decoder.decoder.6.conv.bias"] = torch.zeros(2)
    path = write_folder(tmp_path / "b", cj, broken)
    with pytest.raises(ModelLoadError) as info:
        load_codec(path, with_encoder=False)
    message = str(info.value)
    assert "1 missing: decoder.pre_conv.conv.weight" in message
    assert "1 unexpected: decoder.extra.weight" in message
    assert "1 mis-shaped: decoder.decoder.6.conv.bias (2,) (expected (1,))" in message
