"""`ownvoice voices list|add|rm` on the folder the server reads."""

from __future__ import annotations

import json

import pytest

from ownvoice.cli import main
from ownvoice.service.library import VoiceLibrary
from tests.server.helpers import speech_clip, wav_bytes


def run(*argv) -> int:
    with pytest.raises(SystemExit) as e:
        main(list(argv))
    return e.value.code


def test_voices_add_list_rm(tmp_path, capsys):
    voices = tmp_path / "voices"
    clip = tmp_path / "alice.wav"
    clip.write_bytes(wav_bytes(speech_clip(4.0)))
    assert run("voices", "--voices-dir", str(voices), "add", "alice", str(clip),
               "--ref-text", "Hi, I am Alice.",
               "--language", "English") == 0  # fmt: skip
    assert "added clone:alice (icl)" in capsys.readouterr().out
    assert run("voices", "--voices-dir", str(voices), "add", "bob", str(clip)) == 0
    assert "x-vector only" in capsys.readouterr().out

    assert run("voices", "--voices-dir", str(voices), "list", "--json") == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["id"], r["mode"], r["language"]) for r in rows] == [
        ("clone:alice", "icl", "English"), ("clone:bob", "x-vector", "Auto"),
    ]  # fmt: skip
    assert VoiceLibrary(voices).get("alice").ref_text == "Hi, I am Alice."  # what the server reads

    assert run("voices", "--voices-dir", str(voices), "rm", "clone:bob") == 0
    assert capsys.readouterr().out == "removed clone:bob\n"
    assert run("voices", "--voices-dir", str(voices), "list") == 0
    out = capsys.readouterr().out
    assert "clone:alice" in out and "clone:bob" not in out


def test_voices_errors_are_one_line(tmp_path, capsys):
    voices = tmp_path / "voices"
    short = tmp_path / "short.wav"
    short.write_bytes(wav_bytes(speech_clip(1.0)))
    assert run("voices", "--voices-dir", str(voices), "add", "x", str(short)) == 2
    err = capsys.readouterr().err
    assert "between 3 and 30 s" in err and "Traceback" not in err
    assert run("voices", "--voices-dir", str(voices), "add", "../x", str(short)) == 2
    assert run("voices", "--voices-dir", str(voices), "rm", "nobody") == 2
    assert "not in the voice library" in capsys.readouterr().err


def test_voices_add_refuses_a_name_windows_cannot_use(tmp_path, capsys):
    voices = tmp_path / "voices"
    clip = tmp_path / "c.wav"
    clip.write_bytes(wav_bytes(speech_clip(4.0)))
    for name in ("CON", "nul.wav", "carol."):
        assert run("voices", "--voices-dir", str(voices), "add", name, str(clip)) == 2
        err = capsys.readouterr().err
        assert "Windows" in err and "Traceback" not in err
    assert not voices.exists() or not any(voices.iterdir())


def test_voices_dir_from_config(tmp_path, capsys):
    voices = tmp_path / "lib"
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"voices_dir: {voices}\n")
    clip = tmp_path / "c.wav"
    clip.write_bytes(wav_bytes(speech_clip(4.0)))
    assert run("voices", "--config", str(cfg), "add", "carol", str(clip), "--x-vector-only") == 0
    assert (voices / "carol" / "meta.json").is_file()
