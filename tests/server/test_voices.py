"""The voice library: seed-server profiles, cheap rescans, checked atomic uploads, prompt cache."""

from __future__ import annotations

import json
import os
import time

import numpy as np
import pytest

from ownvoice.errors import AudioError, InvalidInput, VoiceNotFound
from ownvoice.voices import VoiceExists, VoiceLibrary
from tests.server.fakes import FakeEngine
from tests.server.helpers import speech_clip, wav_bytes

CLIP = wav_bytes(speech_clip(4.0))


def write_profile(
    folder, name="Alice", ref_text="Hello, this is Alice.", audio="ref_audio.wav", **meta
):
    """A profile folder as the seed server's Voice Studio writes it."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / audio).write_bytes(CLIP)
    body = {
        "name": name, "profile_id": "a1b2c3d4e5f6", "ref_audio_filename": audio,
        "ref_text": ref_text, "x_vector_only_mode": False, "language": "English",
        "task_type": "Base", "created_at": "2026-02-01T10:00:00Z", "origin": "voice_studio",
    }  # fmt: skip
    body.update(meta)
    (folder / "meta.json").write_text(json.dumps(body))
    return folder


def tree(root) -> set[str]:
    return {
        os.path.relpath(os.path.join(d, f), root) for d, _, files in os.walk(root) for f in files
    }


def test_seed_server_profiles_work_unchanged(tmp_path):
    write_profile(tmp_path / "profiles" / "a1b2c3d4e5f6")  # voice_library/profiles/<id>/
    write_profile(
        tmp_path / "bob",
        name="Bob",
        profile_id="0000000000bb",
        ref_text="",
        x_vector_only_mode=True,
    )
    lib = VoiceLibrary(tmp_path)
    assert [p.voice_id for p in lib.profiles()] == ["clone:Alice", "clone:Bob"]
    alice = lib.get("clone:alice")  # case-insensitive, with or without the prefix
    assert alice == lib.get("Alice") == lib.get("a1b2c3d4e5f6")
    assert (alice.ref_text, alice.x_vector_only, alice.language) == (
        "Hello, this is Alice.",
        False,
        "English",
    )
    bob = lib.get("bob")
    assert bob.x_vector_only and bob.ref_text is None
    with pytest.raises(VoiceNotFound, match="clone:Alice, clone:Bob"):
        lib.get("carol")


def test_new_and_removed_folders_show_up_without_restart(tmp_path):
    lib = VoiceLibrary(tmp_path)
    assert lib.profiles() == []
    write_profile(tmp_path / "alice")
    assert [p.name for p in lib.profiles()] == ["Alice"]
    meta = tmp_path / "alice" / "meta.json"
    body = json.loads(meta.read_text())
    body["ref_text"] = "A new transcript, longer than before."
    meta.write_text(json.dumps(body))  # edited in place
    assert lib.get("alice").ref_text == "A new transcript, longer than before."
    (tmp_path / "alice" / "meta.json").unlink()
    assert lib.profiles() == []


def test_rescan_parses_only_changed_profiles(tmp_path, monkeypatch):
    for i in range(200):
        write_profile(tmp_path / f"v{i:03d}", name=f"v{i:03d}")
    lib = VoiceLibrary(tmp_path)
    assert len(lib.profiles()) == 200
    reads = []
    real = VoiceLibrary._read_profile
    monkeypatch.setattr(
        VoiceLibrary, "_read_profile", lambda self, f, s: reads.append(f) or real(self, f, s)
    )
    times = []
    for _ in range(10):
        t0 = time.perf_counter()
        lib.profiles()
        times.append(time.perf_counter() - t0)
    assert reads == []  # nothing changed, nothing parsed
    assert sorted(times)[5] < 0.05, f"rescan of 200 voices took {sorted(times)[5] * 1000:.1f} ms"
    meta = tmp_path / "v007" / "meta.json"
    os.utime(meta, ns=(time.time_ns(), time.time_ns() + 10**9))
    lib.profiles()
    assert [f.name for f in reads] == ["v007"]


def test_broken_folders_are_skipped_not_fatal(tmp_path, caplog):
    outside = tmp_path / "outside"
    write_profile(outside, name="Sneaky")
    root = tmp_path / "voices"
    write_profile(root / "good", name="Good")
    (root / "nometa").mkdir()
    (root / "badjson").mkdir()
    (root / "badjson" / "meta.json").write_text("{not json")
    (root / "list").mkdir()
    (root / "list" / "meta.json").write_text("[1, 2]")
    write_profile(root / "noaudio", name="NoAudio")
    (root / "noaudio" / "ref_audio.wav").unlink()
    write_profile(root / "escape", name="Escape", audio="ref_audio.wav")
    body = json.loads((root / "escape" / "meta.json").read_text())
    body["ref_audio_filename"] = "../../outside/ref_audio.wav"
    (root / "escape" / "meta.json").write_text(json.dumps(body))
    os.symlink(outside, root / "linked")  # a symlink may not widen the library
    lib = VoiceLibrary(root)
    assert [p.name for p in lib.profiles()] == ["Good"]
    lib.profiles()
    warnings = [r for r in caplog.records if "skipping" in r.message]
    assert len(warnings) == 5, [r.message for r in warnings]  # once each, not per scan


def test_add_checks_the_clip_and_writes_atomically(tmp_path):
    lib = VoiceLibrary(tmp_path)
    p = lib.add(
        "Carol Ann",
        wav_bytes(speech_clip(5.0, rate=44100), rate=44100),
        ref_text="Hi there.",
        language="English",
    )
    assert p.voice_id == "clone:Carol Ann" and not p.x_vector_only
    meta = json.loads((p.folder / "meta.json").read_text())
    assert {
        "name",
        "profile_id",
        "ref_audio_filename",
        "ref_text",
        "x_vector_only_mode",
        "language",
    } <= set(meta)
    assert (p.folder / meta["ref_audio_filename"]).is_file()
    q = lib.add("dave", wav_bytes(speech_clip(4.0)))  # no transcript: timbre-only mode
    assert q.x_vector_only
    with pytest.raises(VoiceExists):
        lib.add("CAROL ANN", wav_bytes(speech_clip(4.0)))
    before = tree(tmp_path)
    cases = {
        "too short": speech_clip(2.0),
        "too long": speech_clip(31.0),
        "silent": np.zeros(16000 * 4, dtype=np.float32),
        "clipped": np.clip(speech_clip(4.0, level=1.0) * 3, -1, 1),
    }
    for what, clip in cases.items():
        with pytest.raises(AudioError):
            lib.add(f"x {what}", wav_bytes(clip))
    with pytest.raises(AudioError):
        lib.add("notaudio", b"#EXTM3U\nfile:///etc/passwd\n")
    assert tree(tmp_path) == before  # nothing half-written, no temporary folders left


@pytest.mark.parametrize(
    "name",
    ["../evil", "a/b", "a\\b", ".hidden", "..", "x..y", "", " ", "a\0b", "x" * 65, "．．／etc"],
)
def test_names_cannot_escape_the_folder(tmp_path, name):
    root = tmp_path / "voices"
    lib = VoiceLibrary(root)
    with pytest.raises(InvalidInput) as e:
        lib.add(name, wav_bytes(speech_clip(4.0)), ref_text="hi")
    assert e.value.param == "name"
    assert tree(tmp_path) == set()


def test_remove(tmp_path):
    lib = VoiceLibrary(tmp_path)
    p = lib.add("eve", wav_bytes(speech_clip(4.0)), ref_text="hi")
    assert lib.remove("clone:eve").name == "eve"
    assert not p.folder.exists() and lib.profiles() == [] and tree(tmp_path) == set()
    with pytest.raises(VoiceNotFound):
        lib.remove("eve")


def test_prompt_is_encoded_once_and_cached_on_disk(tmp_path):
    write_profile(tmp_path / "alice")
    engine = FakeEngine("base")
    lib = VoiceLibrary(tmp_path)
    profile = lib.get("alice")
    first = lib.prompt(profile, engine, "model-A", x_vector_only=False)
    again = lib.prompt(profile, engine, "model-A", x_vector_only=False)
    assert again is first and engine.make_voice_calls == 1
    assert any((tmp_path / "alice" / ".cache").glob("prompt-*.safetensors"))
    # a restarted server (new library object) reads the encoded prompt from disk
    restarted = VoiceLibrary(tmp_path)
    restarted.prompt(restarted.get("alice"), engine, "model-A", x_vector_only=False)
    assert engine.make_voice_calls == 1 and restarted.encode_count == 0
    # another model, another mode or another transcript means another encoding
    restarted.prompt(restarted.get("alice"), engine, "model-B", x_vector_only=False)
    restarted.prompt(restarted.get("alice"), engine, "model-A", x_vector_only=True)
    meta = tmp_path / "alice" / "meta.json"
    meta.write_text(meta.read_text().replace("Hello, this is Alice.", "Something else."))
    restarted.prompt(restarted.get("alice"), engine, "model-A", x_vector_only=False)
    assert engine.make_voice_calls == 4
    assert profile.folder.name == "alice" and restarted.get("alice").name == "Alice"
