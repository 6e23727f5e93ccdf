"""`ownvoice say` writes a 24 kHz mono WAV (and the codes) for every model type; user errors are
one line on stderr, never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import soundfile as sf

from tests.parity.scenarios import reference_clip


def say(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ownvoice", "say", *args],
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.parametrize(
    "like,voice_args",
    [
        ("0.6B-CustomVoice", ["--speaker", "ryan"]),
        ("1.7B-VoiceDesign", ["--instruct", "A warm, slow voice."]),
        ("0.6B-Base", ["--ref-audio", "REF", "--ref-text", "This is my voice."]),
        ("1.7B-Base", ["--ref-audio", "REF", "--x-vector-only"]),
    ],
)
def test_say_writes_a_wav_and_codes(tiny_checkpoints, tmp_path, like, voice_args):
    ref = tmp_path / "ref.wav"
    wav, sr = reference_clip()
    sf.write(ref, wav, sr)
    voice_args = [str(ref) if a == "REF" else a for a in voice_args]
    out, codes = tmp_path / "out.wav", tmp_path / "codes.json"
    proc = say(
        "Hello there, this is a test.", "--model", str(tiny_checkpoints[like]), *voice_args,
        "--max-frames", "7", "--greedy", "--device", "cpu", "-o", str(out), "--codes-out", str(codes),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    audio, rate = sf.read(out)
    info = sf.info(out)
    assert rate == 24000 and info.channels == 1 and audio.ndim == 1
    frames = json.loads(codes.read_text())
    assert 2 <= len(frames) <= 7 and all(len(f) == 16 for f in frames)
    assert len(audio) == len(frames) * 1920
    assert np.abs(audio).max() > 0.01


def test_user_errors_are_one_line(tiny_checkpoints, tmp_path):
    proc = say("Hi.", "--model", str(tiny_checkpoints["0.6B-CustomVoice"]), "--speaker", "nobody",
               "--device", "cpu", "-o", str(tmp_path / "x.wav"))  # fmt: skip
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "voice 'nobody' is not available" in proc.stderr and "ryan" in proc.stderr


def test_list_speakers_and_languages(tiny_checkpoints):
    proc = say(
        "--model", str(tiny_checkpoints["0.6B-CustomVoice"]), "--device", "cpu", "--list-speakers"
    )
    assert proc.returncode == 0 and "ryan" in proc.stdout.split()
    proc = say("--model", str(tiny_checkpoints["0.6B-Base"]), "--device", "cpu", "--list-languages")
    assert proc.returncode == 0
    assert proc.stdout.split()[0] == "auto" and "english" in proc.stdout.split()


@pytest.mark.parametrize("mode", ["int8", "int4"])
def test_say_quantize_speaks_with_integer_weights(tiny_checkpoints, tmp_path, mode):
    """The flag reaches the engine: the codes are those of an engine loaded with it."""
    from ownvoice.engine.engine import Engine
    from ownvoice.engine.options import SamplingOptions, SynthesisOptions

    model = str(tiny_checkpoints["1.7B-CustomVoice"])
    text = "Integer weights, spoken from the command line."
    codes = tmp_path / "codes.json"
    proc = say(text, "--model", model, "--speaker", "ryan", "--language", "english", "--greedy",
               "--max-frames", "20", "--device", "cpu", "--quantize", mode,
               "-o", str(tmp_path / "q.wav"), "--codes-out", str(codes))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    options = SynthesisOptions(language="english", sampling=SamplingOptions.greedy(), max_frames=20)
    engine = Engine.load(model, device="cpu", quantize=mode)
    want = engine.synthesize(text, voice="ryan", options=options).codes.tolist()
    assert json.loads(codes.read_text()) == want
