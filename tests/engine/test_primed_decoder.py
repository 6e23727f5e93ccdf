"""An ICL clone's speech decoder is primed once per reference: every request of the voice goes on
from a copy of that state, and hears exactly what a decoder primed for it alone would give."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
import torch

from ownvoice.engine.loading import PRIMED_VOICES
from tests.parity.scenarios import REF_TEXT, reference_clip


@pytest.fixture(scope="module", params=["kernels", "torch"])
def loaded(request, tiny_checkpoints):
    from ownvoice.engine.engine import Engine

    engine = Engine.load(str(tiny_checkpoints["0.6B-Base"]), dtype="float32",
                         fast=request.param == "kernels")  # fmt: skip
    return engine, engine.make_voice(reference_clip(), ref_text=REF_TEXT)


def primed_alone(m, ref_codes: torch.Tensor):
    """What the decoder did before the cache: a fresh one, primed for this request only."""
    dec = m._fresh_decoder()
    with torch.inference_mode():
        dec.prime(ref_codes.T[None])

    def push(codes):
        with torch.inference_mode():
            return dec.push(codes.T[None])[0].float().numpy()

    return push


def test_every_request_of_a_voice_hears_what_its_own_priming_gives(loaded):
    engine, voice = loaded
    m = engine._m
    m.primed.clear()
    codes = torch.randint(0, 2048, (23, 16), generator=torch.Generator().manual_seed(1))
    want = chunked(primed_alone(m, voice.ref_codes), codes)
    first = m.new_stream_decoder(voice.ref_codes)  # primes, keeps the state
    assert len(m.primed) == 1
    assert np.array_equal(chunked(first, codes), want)
    # the kept state was not moved on by the first request's audio
    second = m.new_stream_decoder(voice.ref_codes)
    assert len(m.primed) == 1 and np.array_equal(chunked(second, codes), want)
    # a voice without a reference is not primed at all
    plain = chunked(m.new_stream_decoder(None), codes)
    assert len(m.primed) == 1 and not np.allclose(plain, want, atol=1e-3)


def chunked(push, codes: torch.Tensor) -> np.ndarray:
    """A stream's chunks: the first frame, then eight, then the rest."""
    return np.concatenate([push(codes[:1]), push(codes[1:9]), push(codes[9:])])


def test_another_reference_is_primed_on_its_own_and_the_oldest_goes(loaded):
    engine, voice = loaded
    m = engine._m
    m.primed.clear()
    codes = torch.randint(0, 2048, (9, 16), generator=torch.Generator().manual_seed(2))
    other = voice.ref_codes.flip(0).contiguous()  # same shape, other codes
    a = m.new_stream_decoder(voice.ref_codes)(codes)
    b = m.new_stream_decoder(other)(codes)
    assert len(m.primed) == 2 and not np.array_equal(a, b)
    assert np.array_equal(b, primed_alone(m, other)(codes))
    for i in range(PRIMED_VOICES):  # the voice asked for again first, then 15 new references
        m.new_stream_decoder(voice.ref_codes[i:].contiguous())
    assert len(m.primed) == PRIMED_VOICES
    kept = "".join(m.primed)
    assert key_of(voice.ref_codes) in kept and key_of(other) not in kept  # the oldest went


def key_of(codes: torch.Tensor) -> str:
    return hashlib.sha256(codes.contiguous().numpy().tobytes()).hexdigest()


def test_a_voice_is_primed_when_it_is_made_and_only_with_a_reference(loaded):
    engine, voice = loaded
    m = engine._m
    m.primed.clear()
    made = engine.make_voice(reference_clip(), ref_text=REF_TEXT)
    assert list(m.primed) == [key_of(made.ref_codes) + str(tuple(made.ref_codes.shape))]
    engine.make_voice(reference_clip(), x_vector_only=True)
    assert len(m.primed) == 1
