"""The parity scenarios: every mode, both text layouts, the edge cases of the acceptance list."""

from __future__ import annotations

import numpy as np

from tests.parity.harness import Scenario


def reference_clip(sr: int = 16000, seconds: float = 2.3, seed: int = 7) -> tuple[np.ndarray, int]:
    """A speech-like clip at 16 kHz, so both sides also resample it to 24 kHz."""
    from ownvoice.audio import resample
    from ownvoice.dev.random_speaker_encoder import synthetic_voice

    wav24 = synthetic_voice(np.random.default_rng(seed), seconds)
    return resample(wav24, 24000, sr).astype(np.float32), sr


TEXT = "Hello there! This is a test of our own voice, 42 times over."
REF_TEXT = "This is my voice, recorded once for cloning."

# (checkpoint like, scenario)
GREEDY = [
    ("1.7B-CustomVoice", Scenario("cv17 english", "custom_voice", TEXT, "english", "ryan")),
    ("1.7B-CustomVoice", Scenario("cv17 english streaming-text", "custom_voice", TEXT, "english", "ryan", non_streaming=False)),
    ("1.7B-CustomVoice", Scenario("cv17 instruct", "custom_voice", TEXT, "english", "vivian", instruct="Speak slowly, in a warm and calm voice.")),
    ("1.7B-CustomVoice", Scenario("cv17 instruct streaming-text", "custom_voice", TEXT, "english", "vivian", instruct="Whisper it.", non_streaming=False)),
    ("1.7B-CustomVoice", Scenario("cv17 auto language", "custom_voice", TEXT, "auto", "aiden")),
    ("1.7B-CustomVoice", Scenario("cv17 dialect speaker chinese", "custom_voice", "今天天气很好，我们一起去公园散步吧。", "chinese", "eric")),
    ("1.7B-CustomVoice", Scenario("cv17 dialect speaker auto streaming-text", "custom_voice", "今天天气很好。", "auto", "dylan", non_streaming=False)),
    ("0.6B-CustomVoice", Scenario("cv06 instruct dropped", "custom_voice", TEXT, "english", "ryan", instruct="Shout it.")),
    ("0.6B-CustomVoice", Scenario("cv06 german streaming-text", "custom_voice", "Der schnelle braune Fuchs springt.", "german", "serena", non_streaming=False)),
    ("1.7B-VoiceDesign", Scenario("vd17", "voice_design", TEXT, "english", instruct="A deep, slow male voice with a British accent.")),
    ("1.7B-VoiceDesign", Scenario("vd17 streaming-text", "voice_design", TEXT, "auto", instruct="A bright young voice.", non_streaming=False)),
    ("0.6B-Base", Scenario("base06 x-vector", "clone", TEXT, "english", ref_audio=reference_clip(), x_vector_only=True)),
    ("0.6B-Base", Scenario("base06 x-vector non-streaming-text", "clone", TEXT, "english", ref_audio=reference_clip(), x_vector_only=True, non_streaming=True)),
    ("1.7B-Base", Scenario("base17 ICL", "clone", TEXT, "english", ref_audio=reference_clip(), ref_text=REF_TEXT)),
    ("1.7B-Base", Scenario("base17 ICL non-streaming-text", "clone", TEXT, "english", ref_audio=reference_clip(), ref_text=REF_TEXT, non_streaming=True)),
    ("0.6B-Base", Scenario("base06 ICL long text", "clone", TEXT + " " + TEXT + " " + TEXT, "auto", ref_audio=reference_clip(seconds=1.1, seed=3), ref_text="Short.")),
]  # fmt: skip

SAMPLED = [
    ("1.7B-CustomVoice", Scenario("cv17 sampled", "custom_voice", TEXT, "english", "ryan", seed=3)),
    ("1.7B-VoiceDesign", Scenario("vd17 sampled streaming-text", "voice_design", TEXT, "english", instruct="An old storyteller.", non_streaming=False, seed=5)),
    ("1.7B-Base", Scenario("base17 ICL sampled", "clone", TEXT, "english", ref_audio=reference_clip(), ref_text=REF_TEXT, seed=4)),
    ("0.6B-Base", Scenario("base06 x-vector sampled", "clone", TEXT, "english", ref_audio=reference_clip(), x_vector_only=True, seed=6)),
]  # fmt: skip

# past the codec decoder's 72-frame attention window
LONG = ("0.6B-CustomVoice", Scenario("cv06 past the decoder window", "custom_voice", TEXT, "english", "sohee", frames=90))  # fmt: skip
