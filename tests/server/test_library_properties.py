"""Property-based tests (Hypothesis) of the voice library and its upload route: whatever name,
fields and file arrive, the answer is a voice that lists and speaks, or a refusal in the
envelope; nothing is written outside voices_dir, nothing half-made stays, the library lists."""

from __future__ import annotations

import io
import os
import tempfile
from pathlib import Path

import httpx
import numpy as np
import pytest
import soundfile as sf
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ownvoice.errors import InvalidInput
from ownvoice.service.library import VoiceLibrary
from tests.server.fakes import FakeEngine
from tests.server.helpers import make_settings, serve, speech_clip, wav_bytes
from tests.server.test_errors import AUTH, KEY, assert_envelope

CLIP = wav_bytes(speech_clip(4.0))
FLAC = io.BytesIO()
sf.write(FLAC, speech_clip(4.0, rate=24000), 24000, format="FLAC")
FLAC = FLAC.getvalue()

# names people and attackers type: short words, paths, dots, unicode look-alikes, reserved ones
names = st.one_of(
    st.text(min_size=0, max_size=70),
    st.from_regex(r"[A-Za-z0-9][A-Za-z0-9 _.\-]{0,70}", fullmatch=True),
    st.sampled_from(["profiles", "meta.json", "reference.wav", ".cache", "..", "a/../b", "ＡＢ"]),
    st.builds(lambda a, b: f"{a}/{b}", st.text(max_size=8), st.text(max_size=8)),
)
fields = st.one_of(st.none(), st.text(max_size=40), st.text(min_size=990, max_size=1100))
languages = st.one_of(
    st.none(),
    st.sampled_from(["en", "English", "pt-BR", "zh_CN", "auto", "klingon", "", " "]),
    st.text(max_size=40),
)


def files_of(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() if p.is_file() else b"<dir>"
        for p in sorted(root.rglob("*"))
    }


def mutated(data: bytes, positions: list[int], values: list[int]) -> bytes:
    out = bytearray(data)
    for p, v in zip(positions, values, strict=False):
        out[p % len(out)] = v
    return bytes(out)


audio = st.one_of(
    st.just(CLIP),
    st.binary(max_size=2048),
    st.builds(lambda n: CLIP[:n], st.integers(0, len(CLIP))),  # cut short
    st.builds(  # header damaged: sizes, rates, channel counts, formats
        mutated,
        st.just(CLIP),
        st.lists(st.integers(0, 64), max_size=6),
        st.lists(st.integers(0, 255), max_size=6),
    ),
    st.builds(
        mutated,
        st.just(FLAC),
        st.lists(st.integers(0, 200), max_size=6),
        st.lists(st.integers(0, 255), max_size=6),
    ),  # fmt: skip
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=names, ref_text=fields, language=languages, xv=st.booleans(), data=audio)
def test_any_upload_makes_a_usable_voice_or_changes_nothing(name, ref_text, language, xv, data):
    with tempfile.TemporaryDirectory() as tmp:
        outside = Path(tmp)
        (outside / "sibling.txt").write_text("not the library's")
        root = outside / "voices"
        library = VoiceLibrary(root)
        library.add("existing", CLIP, ref_text="Hello there.")
        before = files_of(outside)
        try:
            profile = library.add(
                name, data, ref_text=ref_text, x_vector_only=xv, language=language
            )
        except InvalidInput:  # the 4xx family: bad name, field or audio, or the name is taken
            assert files_of(outside) == before  # nothing written, nothing left half-made
        else:
            assert profile.folder.resolve().is_relative_to(root.resolve())
            assert profile.folder.parent == root and (profile.folder / "meta.json").is_file()
            assert library.get(profile.voice_id) == profile
            new = set(files_of(outside)) - set(before)
            assert {Path(p).parts[0] for p in new} == {"voices"}
            library.remove(profile.voice_id)
            assert files_of(outside) == before
        assert [p.name for p in library.profiles()] == ["existing"]
        assert not [p for p in root.iterdir() if p.name.startswith((".tmp-", ".trash-"))]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    outside = tmp_path_factory.mktemp("props")
    voices = outside / "voices"
    voices.mkdir()
    engines = {"cv": FakeEngine("custom_voice"), "clone": FakeEngine("base")}
    settings_ = make_settings(voices, device="cpu", server={"api_key": KEY})
    with serve(settings_, engines=engines) as (base, _):
        yield base, outside, voices


text_fields = st.dictionaries(
    st.sampled_from(["ref_text", "language", "consent", "x_vector_only_mode", "name", "extra"]),
    st.one_of(st.text(max_size=30), st.sampled_from(["true", "false", "banana", "en", ""])),
)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(name=names, form=text_fields, data=audio)
def test_any_upload_over_http_answers_2xx_or_4xx_in_the_envelope(server, name, form, data):
    base, outside, voices = server
    before = files_of(outside)
    body = {"name": name, "consent": "true", **form}
    body = {k: v.encode("utf-8", "surrogatepass") for k, v in body.items()}
    files = {"audio_sample": ("clip.bin", data, "application/octet-stream")}
    r = httpx.post(f"{base}/v1/audio/voices", data=body, files=files, headers=AUTH, timeout=30)
    assert r.status_code < 500, r.text
    listing = httpx.get(f"{base}/v1/audio/voices", timeout=30)
    assert listing.status_code == 200
    if r.status_code == 200:
        voice = r.json()["id"]
        assert voice in {v["id"] for v in listing.json()["voices"]}
        spoken = httpx.post(
            f"{base}/v1/audio/speech",
            json={"model": "tts-1", "voice": voice, "input": "Hi.", "response_format": "pcm"},
            headers=AUTH,
            timeout=30,
        )
        assert spoken.status_code == 200 and spoken.content, spoken.text
        deleted = httpx.delete(f"{base}/v1/audio/voices/{voice}", headers=AUTH, timeout=30)
        assert deleted.status_code == 200, deleted.text
    else:
        assert_envelope(r, r.status_code)
    after = files_of(outside)
    assert {p for p in after if not p.startswith("voices" + os.sep + ".cache")} == {
        p for p in before if not p.startswith("voices" + os.sep + ".cache")
    }  # nothing outside, and the library as it was (a spoken voice's cache went with it)
    assert not [p for p in voices.iterdir() if p.name.startswith((".tmp-", ".trash-"))]


def test_a_valid_flac_and_a_valid_wav_are_accepted():
    """The strategies above must reach the success branch, or the properties prove little."""
    with tempfile.TemporaryDirectory() as tmp:
        library = VoiceLibrary(tmp)
        assert library.add("w", CLIP, ref_text="Hi.").name == "w"
        assert library.add("f", FLAC, language="en").x_vector_only
        samples, _ = sf.read(io.BytesIO(FLAC))
        assert np.isfinite(samples).all()
