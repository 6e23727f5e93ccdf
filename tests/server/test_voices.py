"""The voice library: seed-server profiles, cheap rescans, checked atomic uploads, prompt cache."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from ownvoice.errors import AudioError, InvalidInput, VoiceNotFound
from ownvoice.service.library import VoiceExists, VoiceLibrary
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


# Windows refuses these as file or folder names (a device name, with any extension, in any
# case; a trailing dot or space), or they hold characters it does not allow in names
WINDOWS_REFUSES = [
    "CON", "con", "nul", "Nul.txt", "aux.txt", "PRN", "COM1", "com9.tar.gz", "LPT9", "lpt0",
    "CON .wav", "name.", "name...", "a. ", 'a"b', "a<b", "a>b", "a:b", "a|b", "a?b", "a*b",
    "a\x01b", "a\x1fb", "a\tb",
]  # fmt: skip
WINDOWS_ACCEPTS = ["Console", "CONX", "COM10", "LPT", "my.con", "nul-voice", "auxiliary", "a.b"]


@pytest.mark.parametrize("name", WINDOWS_REFUSES)
def test_names_windows_cannot_use_are_refused_and_write_nothing(tmp_path, name):
    lib = VoiceLibrary(tmp_path / "voices")
    with pytest.raises(InvalidInput) as e:
        lib.add(name, CLIP, ref_text="hi")
    assert e.value.param == "name"
    assert tree(tmp_path) == set()


@pytest.mark.parametrize(
    "name, problem",
    [
        ("CON", "Windows reserves 'CON' for a device"),
        ("nul", "Windows reserves 'nul' for a device"),
        ("aux.txt", "Windows reserves 'aux' for a device"),
        ("COM1", "Windows reserves 'COM1' for a device"),
        ("name.", "ends with '.', which Windows drops from folder names"),
    ],
)
def test_the_refusal_of_a_windows_name_says_why(name, problem):
    from ownvoice.service.library import validate_name

    with pytest.raises(InvalidInput) as caught:
        validate_name(name)
    assert problem in str(caught.value)


@pytest.mark.parametrize("name", WINDOWS_ACCEPTS)
def test_names_that_only_look_like_windows_devices_are_kept(tmp_path, name):
    assert VoiceLibrary(tmp_path).add(name, CLIP, ref_text="hi").name == name


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


# -- the rules at their edges, and what is written and read ------------------------------------


def clip(seconds: float, rate: int = 8000, level: float = 0.3) -> np.ndarray:
    return speech_clip(seconds, rate=rate, level=level)


@pytest.mark.parametrize(
    "samples, message",
    [
        (clip(3.0), None),  # both ends of the length are allowed
        (clip(30.0), None),
        (clip(2.99), "reference audio is 3.0 s long; it must be between 3 and 30 s (about 10 s "
                     "of clear speech works best)"),
        (clip(30.01), "reference audio is 30.0 s long; it must be between 3 and 30 s (about 10 s "
                      "of clear speech works best)"),
        (np.full(8000 * 4, 1.01 * 10 ** (-50 / 20), np.float32), None),  # just above -50 dBFS
        (np.full(8000 * 4, 1e-4, np.float32),
         "reference audio is silent (-80 dBFS RMS); record some speech"),
        (np.zeros(8000 * 4, np.float32),
         "reference audio is silent (-240 dBFS RMS); record some speech"),
    ],
)  # fmt: skip
def test_reference_length_and_silence_limits(samples, message):
    from ownvoice.service.library import check_reference

    if message is None:
        check_reference(samples, 8000)
        return
    with pytest.raises(AudioError) as caught:
        check_reference(samples, 8000)
    assert str(caught.value) == message


@pytest.mark.parametrize(
    "clipped, refused, share", [(32, False, ""), (33, True, "0.10"), (160, True, "0.50")]
)  # 0.1 % of 32 000 samples is allowed
def test_clipping_counts_samples_at_full_scale(clipped, refused, share):
    from ownvoice.service.library import check_reference

    samples = clip(4.0)
    samples[:clipped] = 0.999  # at the clip level counts as clipped
    if not refused:
        check_reference(samples, 8000)
        return
    with pytest.raises(AudioError) as caught:
        check_reference(samples, 8000)
    assert str(caught.value) == (
        f"reference audio is clipped ({share} % of samples at full scale); record it again at a "
        "lower level"
    )


def test_a_long_upload_is_never_decoded_past_the_longest_clip():
    from ownvoice.service.library import load_reference

    with pytest.raises(AudioError) as caught:
        load_reference(wav_bytes(clip(40.0), 8000))
    assert str(caught.value) == "audio is 40.0 s long; at most 30 s is accepted"


@pytest.mark.parametrize(
    "fields, param, message",
    [
        ({"ref_text": "x" * 1000}, None, None),
        ({"ref_text": "x" * 1001}, "ref_text",
         "ref_text is 1001 characters; at most 1000 (the transcript of a clip of at most 30 s)"),
        ({"language": "l" * 33}, "language", "language is 33 characters; at most 32"),
        ({"language": "l" * 32}, "language", "language 'llllllllllllllllllllllllllllllll' is "
         "not supported; use one of english (or an ISO code such as en, zh, pt-BR)"),
        ({"language": "german"}, "language", "language 'german' is not supported; use one of "
         "english (or an ISO code such as en, zh, pt-BR)"),
        ({"consent": "y" * 256}, None, None),
        ({"consent": "y" * 257}, "consent",
         "consent is 257 characters; at most 256 (a yes or an id)"),
    ],
)  # fmt: skip
def test_voice_fields_at_their_limits(fields, param, message):
    from ownvoice.service.library import check_voice_fields

    args = {"ref_text": None, "language": None, "consent": None, **fields}
    if message is None:
        check_voice_fields(args["ref_text"], args["language"], args["consent"], ["english"])
        return
    with pytest.raises(InvalidInput) as caught:
        check_voice_fields(args["ref_text"], args["language"], args["consent"], ["english"])
    assert (caught.value.param, str(caught.value)) == (param, message)


def test_voice_fields_are_stripped_and_blank_is_none():
    from ownvoice.service.library import check_voice_fields

    assert check_voice_fields("  Hi there.  ", " english ", None, None) == ("Hi there.", "english")
    assert check_voice_fields("   ", "  ", None, None) == (None, None)


@pytest.mark.parametrize(
    "name, message",
    [
        ("x" * 64, None),
        ("x" * 79 + "!", "voice name '" + "x" * 79 + "!' is not allowed; use 1-64 characters: "
         "letters, digits, space, '_', '-', '.', starting with a letter or digit"),
        ("x" * 80 + "!", "voice name '" + "x" * 80 + "...' is not allowed; use 1-64 characters: "
         "letters, digits, space, '_', '-', '.', starting with a letter or digit"),
        ("Profiles", "voice name 'Profiles' is reserved by the voice library's layout; choose "
         "another"),
        ("META.JSON", "voice name 'META.JSON' is reserved by the voice library's layout; choose "
         "another"),
    ],
)  # fmt: skip
def test_names_at_their_limits(name, message):
    from ownvoice.service.library import validate_name

    if message is None:
        assert validate_name(f" {name} ") == name
        return
    with pytest.raises(InvalidInput) as caught:
        validate_name(name)
    assert (caught.value.param, str(caught.value)) == ("name", message)


def test_what_add_writes(tmp_path):
    lib = VoiceLibrary(tmp_path / "new" / "voices")  # made, parents and all
    before = time.gmtime()
    p = lib.add("Zoe", CLIP, ref_text=" Grüß dich. ", language="german",
                consent={"given": True}, languages=["german"])  # fmt: skip
    text = (p.folder / "meta.json").read_text(encoding="utf-8")
    assert "Grüß" in text and text.startswith('{\n  "name"')  # readable
    meta = json.loads(text)
    assert meta["created_at"] == p.created_at
    created = time.strptime(meta.pop("created_at"), "%Y-%m-%dT%H:%M:%SZ")
    assert time.mktime(before) - 1 <= time.mktime(created) <= time.mktime(time.gmtime()) + 1
    assert len(meta.pop("profile_id")) == 12
    assert meta == {
        "name": "Zoe", "ref_audio_filename": "reference.wav", "ref_text": "Grüß dich.",
        "x_vector_only_mode": False, "language": "german", "origin": "ownvoice",
        "consent": {"given": True},
    }  # fmt: skip
    bare = json.loads((lib.add("Bare", CLIP).folder / "meta.json").read_text())
    assert (bare["ref_text"], bare["x_vector_only_mode"], bare["language"]) == ("", True, "Auto")
    assert "consent" not in bare
    with pytest.raises(InvalidInput) as caught:  # the clone model's languages are the rule
        lib.add("Other", CLIP, ref_text="Hi.", language="german", languages=["english"])
    assert caught.value.param == "language"


def test_add_goes_into_the_seed_servers_profiles_folder_when_there_is_one(tmp_path):
    (tmp_path / "profiles").mkdir()
    p = VoiceLibrary(tmp_path).add("Dana", CLIP, ref_text="Hello there.")
    assert p.folder == tmp_path / "profiles" / "Dana"


def test_a_taken_name_is_refused_with_409(tmp_path):
    lib = VoiceLibrary(tmp_path)
    lib.add("Eve", CLIP, ref_text="Hello.")
    for name, message in (
        ("EVE", "a voice named 'EVE' already exists"),
        ("notes.txt", "the name 'notes.txt' is taken in the voice library's folder"),
    ):
        (tmp_path / "notes.txt").write_text("mine")
        with pytest.raises(VoiceExists) as caught:
            lib.add(name, CLIP, ref_text="Hello.")
        assert (caught.value.param, str(caught.value), caught.value.status) == (
            "name", message, 409,
        )  # fmt: skip


def test_a_failed_write_leaves_nothing(tmp_path, monkeypatch):
    import ownvoice.service.library as voices

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(voices, "write_wav", broken)
    with pytest.raises(OSError, match="disk full"):
        VoiceLibrary(tmp_path).add("Fay", CLIP, ref_text="Hello.")
    assert list(tmp_path.iterdir()) == []


def test_a_hand_written_profile_is_read_as_written(tmp_path):
    write_profile(tmp_path / "a", name=" Gil ", profile_id=123, created_at="2025-01-02T03:04:05Z",
                  language="", ref_text="  Hi.  ")  # fmt: skip
    write_profile(tmp_path / "b", name="Hal", profile_id="", language="French")
    body = json.loads((tmp_path / "b" / "meta.json").read_text())
    del body["x_vector_only_mode"]
    (tmp_path / "b" / "meta.json").write_text(json.dumps(body))
    gil, hal = VoiceLibrary(tmp_path).profiles()
    assert (gil.name, gil.profile_id, gil.created_at, gil.language, gil.ref_text) == (
        "Gil", "123", "2025-01-02T03:04:05Z", None, "Hi.",
    )  # fmt: skip
    assert (hal.profile_id, hal.language, hal.x_vector_only) == (None, "French", False)


@pytest.mark.parametrize(
    "meta, reason",
    [
        ("[1]", "meta.json is not a JSON object"),
        ({"name": " ", "ref_audio_filename": "ref_audio.wav"}, "'name' is missing"),
        ({"name": 5, "ref_audio_filename": "ref_audio.wav"}, "'name' is missing"),
        ({"name": "N", "ref_audio_filename": ""}, "'ref_audio_filename' is missing"),
        ({"name": "N", "ref_audio_filename": 3}, "'ref_audio_filename' is missing"),
        ({"name": "N", "ref_audio_filename": "../x.wav"}, "'../x.wav' points outside the voice "
                                                           "library"),
        ({"name": "N", "ref_audio_filename": "none.wav"}, "reference audio 'none.wav' is missing "
                                                           "or empty"),
        ({"name": "N", "ref_audio_filename": "empty.wav"}, "reference audio 'empty.wav' is "
                                                            "missing or empty"),
        ({"name": "N", "ref_audio_filename": "ref_audio.wav", "ref_text": " " + "x" * 1001},
         "'ref_text' is 1001 characters; at most 1000 are used (a transcript of a clip of at "
         "most 30 s)"),
    ],
)  # fmt: skip
def test_a_broken_profile_is_skipped_with_its_reason(tmp_path, caplog, meta, reason):
    folder = write_profile(tmp_path / "v")
    (folder / "empty.wav").write_bytes(b"")
    (folder / "meta.json").write_text(meta if isinstance(meta, str) else json.dumps(meta))
    with caplog.at_level("WARNING", logger="ownvoice.service.library"):
        assert VoiceLibrary(tmp_path).profiles() == []
    assert [r.getMessage() for r in caplog.records] == [
        f"voice library: skipping {folder}: {reason}"
    ]


def test_a_transcript_of_the_longest_length_is_kept(tmp_path):
    write_profile(tmp_path / "v", ref_text="x" * 1000)
    assert VoiceLibrary(tmp_path).get("Alice").ref_text == "x" * 1000


def test_folders_of_the_layout_are_not_voices(tmp_path):
    write_profile(tmp_path / ".hidden", name="Hidden")
    write_profile(tmp_path / "profiles" / "profiles", name="Nested")  # a voice named so, inside
    write_profile(tmp_path / "profiles" / "seed", name="Seed")
    write_profile(tmp_path / "top", name="Top")
    (tmp_path / "file.txt").write_text("not a folder")
    assert [p.name for p in VoiceLibrary(tmp_path).profiles()] == ["Nested", "Seed", "Top"]


def test_voices_are_listed_in_case_insensitive_order(tmp_path):
    for name in ("b", "Aa", "a_b", "C"):
        write_profile(tmp_path / name, name=name)
    assert [p.name for p in VoiceLibrary(tmp_path).profiles()] == ["a_b", "Aa", "b", "C"]


def test_modes_of_a_voice_without_transcript_are_encoded_apart(tmp_path, caplog):
    write_profile(tmp_path / "v", ref_text="")
    engine = FakeEngine("base")
    lib = VoiceLibrary(tmp_path)
    profile = lib.get("Alice")
    lib.prompt(profile, engine, "m", x_vector_only=False)
    lib.prompt(profile, engine, "m", x_vector_only=True)
    assert engine.make_voice_calls == 2
    # a damaged cache entry is re-made, and said so
    for entry in (tmp_path / "v" / ".cache").glob("prompt-*"):
        entry.write_bytes(b"damaged")
    with caplog.at_level("WARNING", logger="ownvoice.service.library"):
        VoiceLibrary(tmp_path).prompt(profile, engine, "m", x_vector_only=False)
    assert engine.make_voice_calls == 3
    (message,) = [r.getMessage() for r in caplog.records]
    head = f"voice Alice: ignoring cached prompt {tmp_path / 'v' / '.cache'}"
    stem = Path(message[len("voice Alice: ignoring cached prompt ") :].split(": ")[0])
    from ownvoice.engine.voice import VoicePrompt

    (tmp_path / "v" / ".cache" / f"{stem.name}.json").write_bytes(b"damaged")
    with pytest.raises(Exception) as why:
        VoicePrompt.load(stem)
    assert (
        message.startswith(head)
        and message == f"voice Alice: ignoring cached prompt {stem}: {why.value}"
    )


def test_prompts_are_made_with_the_profiles_text_and_mode_and_kept_most_recent_first(tmp_path):
    for name in ("a", "b", "c"):
        write_profile(tmp_path / name, name=name.upper(), ref_text=f"Text of {name}.")
    engine, asked = FakeEngine("base"), []
    make = engine.make_voice

    def recording(audio, ref_text=None, x_vector_only=False):
        asked.append((ref_text, x_vector_only))
        return make(audio, ref_text=ref_text, x_vector_only=x_vector_only)

    engine.make_voice = recording
    lib = VoiceLibrary(tmp_path, prompt_cache_size=2)
    a, b, c = (lib.get(n) for n in "abc")
    lib.prompt(a, engine, "m", x_vector_only=False)
    lib.prompt(a, engine, "m", x_vector_only=True)
    assert asked == [("Text of a.", False), (None, True)] and lib.encode_count == 2
    shutil.rmtree(tmp_path / "a" / ".cache")  # from now on only memory can answer for a
    lib.prompt(b, engine, "m", x_vector_only=False)  # a (ICL) is the least recent: it goes
    lib.prompt(a, engine, "m", x_vector_only=True)  # still in memory
    assert lib.encode_count == 3
    lib.prompt(a, engine, "m", x_vector_only=False)  # evicted and not on disk: made again
    assert lib.encode_count == 4 and asked[-1] == ("Text of a.", False)


def test_a_read_only_library_still_speaks_and_says_why_it_cannot_cache(
    tmp_path, caplog, monkeypatch
):
    from ownvoice.engine.voice import VoicePrompt

    write_profile(tmp_path / "v")

    def read_only(self, stem):
        raise OSError("Read-only file system")

    monkeypatch.setattr(VoicePrompt, "save", read_only)
    lib = VoiceLibrary(tmp_path)
    with caplog.at_level("WARNING", logger="ownvoice.service.library"):
        lib.prompt(lib.get("Alice"), FakeEngine("base"), "m", x_vector_only=False)
    assert [r.getMessage() for r in caplog.records] == [
        "voice Alice: cannot cache the encoded prompt: Read-only file system"
    ]


def test_a_running_process_is_told_from_a_finished_one():
    import subprocess
    import sys

    from ownvoice.service.library import _running

    done = subprocess.run([sys.executable, "-c", "pass"], check=True)
    assert done.returncode == 0
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert _running(os.getpid()) and not _running(child.pid)


def test_leftovers_of_killed_writes_are_cleaned_and_nothing_else(tmp_path):
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    dead, hexa = child.pid, "0123456789abcdef" * 2
    (tmp_path / "profiles").mkdir()
    gone = [f".tmp-{dead}-{hexa}", f".trash-{dead}-{hexa}", f".trash-{hexa}",
            f".tmp-{os.getpid()}-{hexa}"]  # fmt: skip
    kept = [f".tmp-1-{hexa}", f".tmp-{dead}-{hexa[:-1]}", ".tmp-x", "alice"]  # pid 1 runs
    gone += [f".tmp-{dead}-{i:032x}" for i in range(12)]  # seen after pid 1's, too
    for name in gone + kept:
        (tmp_path / name).mkdir()
    (tmp_path / "profiles" / f".trash-{hexa}").mkdir()
    (tmp_path / f".tmp-{dead}-{'f' * 32}").write_text("a file, not a folder")
    os.symlink(tmp_path / "alice", tmp_path / f".trash-{'e' * 32}")
    removed = VoiceLibrary(tmp_path).clean_leftovers()
    assert sorted(removed) == sorted([*gone, f".trash-{hexa}"])
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == sorted([*kept, "profiles", f".tmp-{dead}-{'f' * 32}", f".trash-{'e' * 32}"])
    assert list((tmp_path / "profiles").iterdir()) == []
    assert VoiceLibrary(tmp_path / "missing").clean_leftovers() == []


def test_a_process_of_another_user_counts_as_running(monkeypatch):
    from ownvoice.service.library import _running

    def not_ours(pid, signal):
        raise PermissionError("not permitted")

    monkeypatch.setattr(os, "kill", not_ours)
    assert _running(12345)


def test_a_voice_is_found_by_name_id_or_folder(tmp_path):
    write_profile(tmp_path / "folder-a", name="Alice", profile_id="id-123")
    lib = VoiceLibrary(tmp_path)
    for key in ("alice", "clone:ALICE", " Alice ", "id-123", "folder-a"):
        assert lib.get(key).name == "Alice", key
    with pytest.raises(VoiceNotFound) as caught:
        lib.get("id-12")
    assert str(caught.value) == "voice 'id-12' is not in the voice library; available: clone:Alice"
    with pytest.raises(VoiceNotFound) as caught:
        VoiceLibrary(tmp_path / "none").get("x")
    assert str(caught.value) == (
        "voice 'x' is not in the voice library; available: none (the library is empty)"
    )


def test_a_profile_broken_again_differently_is_reported_again(tmp_path, caplog):
    folder = write_profile(tmp_path / "v")
    lib = VoiceLibrary(tmp_path)
    with caplog.at_level("WARNING", logger="ownvoice.service.library"):
        (folder / "meta.json").write_text("{broken")
        lib.profiles()
        lib.profiles()
        (folder / "meta.json").write_text("{broken, and longer")
        lib.profiles()
    assert len(caplog.records) == 2


def test_add_keeps_the_mode_asked_for_the_clip_rate_and_utc_time(tmp_path, monkeypatch):
    monkeypatch.setenv("TZ", "Asia/Kolkata")  # +05:30: a local time would show
    time.tzset()
    try:
        p = VoiceLibrary(tmp_path).add("Ivy", CLIP, ref_text="Hello there.", x_vector_only=True)
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()
    meta = json.loads((p.folder / "meta.json").read_text())
    assert meta["x_vector_only_mode"] is True and p.x_vector_only
    created = time.mktime(time.strptime(meta["created_at"], "%Y-%m-%dT%H:%M:%SZ"))
    assert abs(created - time.mktime(time.gmtime())) < 60
    import soundfile as sf

    assert sf.info(p.ref_audio).samplerate == 16000  # the clip's own rate
