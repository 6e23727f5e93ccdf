"""Shared fixtures of the codec tests: tiny random checkpoints (ours and the reference's view)."""

from __future__ import annotations

import contextlib
import copy

import pytest
import torch

from ownvoice.dev.random_codec import codec_config_json, random_codec_weights
from ownvoice.model.codec.config import CodecConfig
from ownvoice.model.codec.loading import Codec, build_codec
from tests.reference import import_reference

SEED = 0


@contextlib.contextmanager
def single_thread():
    # The CI/dev machines have 2 shared cores; torch's thread pool then spends more time waiting
    # than computing on these small shapes.
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@pytest.fixture(autouse=True)
def one_thread():
    with single_thread():
        yield


def tiny_json(layers: int = 1) -> dict:
    cj = codec_config_json(tiny=True)
    cj["decoder_config"]["num_hidden_layers"] = layers
    return cj


@pytest.fixture(scope="session")
def tiny_checkpoint() -> tuple[dict, dict[str, torch.Tensor]]:
    """(config json, upstream-named weights) of the tiny codec."""
    cj = tiny_json()
    with single_thread():
        return cj, random_codec_weights(cj, SEED)


@pytest.fixture(scope="session")
def tiny_codec(tiny_checkpoint) -> Codec:
    cj, weights = tiny_checkpoint
    return build_codec(CodecConfig.from_hf(cj), weights)


@pytest.fixture(scope="session")
def two_layer_decoder():
    """Decoder with 2 transformer layers, so per-layer attention caches are exercised."""
    cj = tiny_json(layers=2)
    with single_thread():
        weights = random_codec_weights(cj, SEED + 1)
    return build_codec(CodecConfig.from_hf(cj), weights, with_encoder=False).decoder


def reference_model(config_json: dict, weights: dict[str, torch.Tensor]):
    """The official `Qwen3TTSTokenizerV2Model` built from the same json and weights (strict)."""
    import_reference()
    from qwen_tts.core.tokenizer_12hz.configuration_qwen3_tts_tokenizer_v2 import (
        Qwen3TTSTokenizerV2Config,
    )
    from qwen_tts.core.tokenizer_12hz.modeling_qwen3_tts_tokenizer_v2 import (
        Qwen3TTSTokenizerV2Model,
    )

    model = Qwen3TTSTokenizerV2Model(
        Qwen3TTSTokenizerV2Config.from_dict(copy.deepcopy(config_json))
    )
    model.load_state_dict(weights, strict=True)
    return model.eval()


@pytest.fixture(scope="session")
def build_reference():
    """`reference_model` as a fixture, for tests that build a reference from modified weights."""
    return reference_model


@pytest.fixture(scope="session")
def tiny_reference(tiny_checkpoint):
    return reference_model(*tiny_checkpoint)
