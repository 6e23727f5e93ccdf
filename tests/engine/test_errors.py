"""Bad input gets a clear error naming what is wrong and what is accepted, never a traceback."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from ownvoice.engine.options import SamplingOptions, SynthesisOptions
from ownvoice.errors import AudioError, InvalidInput, VoiceNotFound
from tests.parity.scenarios import reference_clip

SHORT = SynthesisOptions(sampling=SamplingOptions.greedy(), max_frames=3)


@pytest.fixture(scope="module")
def engine(tiny_engine):
    return tiny_engine


def test_unknown_speaker_lists_the_valid_ones(engine):
    with pytest.raises(VoiceNotFound) as e:
        engine("0.6B-CustomVoice").synthesize("Hi there.", voice="nobody", options=SHORT)
    assert "nobody" in str(e.value) and "ryan" in str(e.value) and e.value.param == "voice"


def test_unsupported_language_lists_the_valid_ones(engine):
    with pytest.raises(InvalidInput) as e:
        engine("0.6B-CustomVoice").synthesize(
            "Hi.", voice="ryan", options=SHORT.with_(language="klingon")
        )
    assert "klingon" in str(e.value) and "english" in str(e.value) and e.value.param == "language"


def test_dialects_cannot_be_requested_directly(engine):
    with pytest.raises(InvalidInput):
        engine("0.6B-CustomVoice").synthesize(
            "Hi.", voice="eric", options=SHORT.with_(language="sichuan_dialect")
        )


def test_instruct_on_a_model_that_ignores_it_warns(engine, caplog):
    with caplog.at_level(logging.WARNING):
        out = engine("0.6B-CustomVoice").synthesize(
            "Hi.", voice="ryan", instruct="Shout.", options=SHORT
        )
    assert len(out.codes) > 0
    assert any("instruct ignored" in r.message for r in caplog.records)


def test_clone_request_to_a_non_base_model(engine):
    with pytest.raises(InvalidInput) as e:
        engine("0.6B-CustomVoice").make_voice(reference_clip(), ref_text="Hello.")
    assert "Base" in str(e.value)
    base_voice = engine("0.6B-Base").make_voice(reference_clip(), x_vector_only=True)
    with pytest.raises(InvalidInput, match="Base"):
        engine("0.6B-CustomVoice").synthesize("Hi.", voice=base_voice, options=SHORT)


def test_base_model_needs_a_voice_prompt(engine):
    with pytest.raises(InvalidInput, match="make_voice"):
        engine("0.6B-Base").synthesize("Hi.", voice="ryan", options=SHORT)


def test_icl_without_ref_text(engine):
    with pytest.raises(InvalidInput) as e:
        engine("0.6B-Base").make_voice(reference_clip())
    assert e.value.param == "ref_text"


@pytest.mark.parametrize(
    "audio,fragment",
    [
        (b"this is not audio at all", "format"),
        (b"", "empty"),
        ((np.zeros(0, np.float32), 24000), "empty"),
        ((np.zeros(2400, np.float32), 24000), "0.10 s"),
        ("/nonexistent/clip.wav", "clip.wav"),
    ],
)
def test_unreadable_empty_or_short_audio(engine, audio, fragment):
    with pytest.raises(AudioError) as e:
        engine("0.6B-Base").make_voice(audio, x_vector_only=True)
    assert fragment.lower() in str(e.value).lower(), str(e.value)


@pytest.mark.parametrize("text", ["", "   ", "\n\n"])
def test_text_that_tokenizes_to_nothing(engine, text):
    with pytest.raises(InvalidInput) as e:
        engine("0.6B-CustomVoice").synthesize(text, voice="ryan", options=SHORT)
    assert e.value.param == "input"


def test_bad_options_name_the_field(engine):
    for opts, field in [
        (SynthesisOptions(max_frames=0), "max_frames"),
        (SynthesisOptions(sampling=SamplingOptions(top_p=1.5)), "top_p"),
        (SynthesisOptions(text_mode="sideways"), "text_mode"),
    ]:
        with pytest.raises(InvalidInput) as e:
            engine("0.6B-CustomVoice").synthesize("Hi.", voice="ryan", options=opts)
        assert e.value.param == field


def test_missing_checkpoint_is_a_clear_error(tmp_path):
    from ownvoice.engine.engine import Engine
    from ownvoice.errors import ModelLoadError

    with pytest.raises(ModelLoadError, match="missing"):
        Engine.load(str(tmp_path), device="cpu")
    with pytest.raises(ModelLoadError, match="neither"):
        Engine.load("./no/such/folder", device="cpu")
