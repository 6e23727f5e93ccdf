"""The parity suite must catch bugs: each deliberate mutation of our implementation below makes
at least one parity scenario fail. A suite that passed these would be blind."""

from __future__ import annotations

import pytest
import torch

import ownvoice.engine.decode as decode_module
import ownvoice.engine.engine as engine_module
from ownvoice.engine.loading import LoadedModel
from ownvoice.engine.prompt import Prompt, build_prompt
from ownvoice.model.codec.convs import SnakeBeta
from ownvoice.model.layers import RMSNorm, rope_inv_freq
from tests.parity.harness import mismatches, run_ours, run_reference
from tests.parity.scenarios import GREEDY, SAMPLED

pytestmark = pytest.mark.reference

SCENARIOS = {s.name: (like, s) for like, s in GREEDY + SAMPLED}
CHECKED = ["cv17 english", "cv17 english streaming-text", "base17 ICL", "cv17 sampled"]


@pytest.fixture(scope="module")
def reference_outcomes(reference_models):
    return {
        name: run_reference(reference_models(SCENARIOS[name][0]), SCENARIOS[name][1])
        for name in CHECKED
    }


def _rmsnorm_eps(monkeypatch, engines):
    for like in ("1.7B-CustomVoice", "1.7B-Base"):
        for m in engines(like)._m.model.modules():
            if isinstance(m, RMSNorm):
                monkeypatch.setattr(m, "eps", 1e-5)


def _rope_theta(monkeypatch, engines):
    for like in ("1.7B-CustomVoice", "1.7B-Base"):
        stack = engines(like)._m.model.talker.model
        monkeypatch.setitem(stack._buffers, "inv_freq", rope_inv_freq(stack.cfg.head_dim, 10000.0))


def _trailing_text_off_by_one(monkeypatch, engines):
    def shifted(*args, **kwargs):
        p = build_prompt(*args, **kwargs)
        return Prompt(embeds=p.embeds, trailing=p.trailing[:, 1:], pad=p.pad)

    monkeypatch.setattr(engine_module, "build_prompt", shifted)


def _no_repetition_penalty(monkeypatch, engines):
    monkeypatch.setattr(
        decode_module, "repetition_penalty", lambda logits, history, penalty: logits
    )


def _icl_without_reference_context(monkeypatch, engines):
    original = LoadedModel.new_stream_decoder
    monkeypatch.setattr(LoadedModel, "new_stream_decoder", lambda self, ref: original(self, None))


def _decoder_activation(monkeypatch, engines):
    def snake_without_exp(self, x):
        return x + 1.0 / (self.beta[None, :, None] + 1e-9) * torch.sin(
            x * self.alpha[None, :, None]
        ).pow(2)

    monkeypatch.setattr(SnakeBeta, "forward", snake_without_exp)


MUTATIONS = [
    _rmsnorm_eps,
    _rope_theta,
    _trailing_text_off_by_one,
    _no_repetition_penalty,
    _icl_without_reference_context,
    _decoder_activation,
]


@pytest.mark.parametrize("mutate", MUTATIONS, ids=lambda f: f.__name__.strip("_"))
def test_mutation_is_caught(mutate, monkeypatch, our_engines, reference_outcomes):
    mutate(monkeypatch, our_engines)
    caught = {}
    for name in CHECKED:
        like, scenario = SCENARIOS[name]
        problems = mismatches(reference_outcomes[name], run_ours(our_engines(like), scenario))
        if problems:
            caught[name] = problems
    assert caught, f"{mutate.__name__} went unnoticed by every scenario"
