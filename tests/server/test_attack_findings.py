"""What an independent attack run found (issue 14), one test per class of defect: names that
collide with the library's layout, uploads that cost more than they may, fields without limits
or rules, leftovers of interrupted writes, an upload racing a delete, an OpenAPI document that
disagreed with the server, and small leaks (object reprs, plain-text errors, redirects)."""

from __future__ import annotations

import io
import logging
import os
import threading
import time
import tracemalloc
import uuid

import httpx
import numpy as np
import pytest
import soundfile as sf

from ownvoice.audio import load_audio
from ownvoice.errors import AudioError
from ownvoice.service.encode import MEDIA_TYPES
from ownvoice.service.library import MAX_REF_TEXT_CHARS, RESERVED_NAMES, VoiceLibrary
from tests.server.fakes import FakeEngine
from tests.server.helpers import make_settings, serve, speech_clip, wav_bytes
from tests.server.test_errors import AUTH, KEY, assert_envelope, tree, upload

CLIP = wav_bytes(speech_clip(4.0))


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("attack")
    voices = root / "voices"
    voices.mkdir()
    engines = {"cv": FakeEngine("custom_voice"), "clone": FakeEngine("base")}
    settings = make_settings(
        voices, device="cpu", server={"api_key": KEY}, limits={"max_input_chars": 300}
    )
    with serve(settings, engines=engines) as (base, app):
        yield base, voices, app


def listed(base) -> set[str]:
    return {v["id"] for v in httpx.get(f"{base}/v1/audio/voices").json()["voices"]}


# -- 1. names never collide with the library's layout ------------------------------------------


@pytest.mark.parametrize("name", sorted(RESERVED_NAMES) + ["Profiles", "META.JSON"])
def test_a_name_of_the_layout_is_refused_and_writes_nothing(server, name):
    base, voices, _ = server
    before = tree(voices)
    err = assert_envelope(upload(base, name=name), 400, "name")
    assert "reserved" in err["message"]
    assert tree(voices) == before
    # the library still takes new voices at its top level, and lists them
    assert upload(base, name="after-reserved").status_code == 200
    assert (voices / "after-reserved" / "meta.json").is_file()
    assert "clone:after-reserved" in listed(base)
    assert httpx.delete(f"{base}/v1/audio/voices/after-reserved", headers=AUTH).status_code == 200


@pytest.mark.parametrize("name", ["CON", "nul", "aux.txt", "LPT9", "name."])
def test_a_name_windows_cannot_use_is_refused_and_writes_nothing(server, name):
    """Such a folder cannot be opened, copied or deleted on Windows (issue 38)."""
    base, voices, _ = server
    before = tree(voices)
    err = assert_envelope(upload(base, name=name), 400, "name")
    assert "Windows" in err["message"]
    assert tree(voices) == before


def test_the_seed_servers_nested_layout_refuses_them_too(tmp_path):
    (tmp_path / "profiles").mkdir()
    library = VoiceLibrary(tmp_path)
    for name in ("profiles", "meta.json", "reference.wav"):
        with pytest.raises(Exception, match="reserved"):
            library.add(name, CLIP, ref_text="Hello there.")
    assert library.add("bob", CLIP, ref_text="Hello there.").folder == tmp_path / "profiles/bob"


def test_a_name_taken_by_a_file_answers_409_without_the_path(server):
    base, voices, _ = server
    (voices / "notes.txt").write_text("the user's own file")
    err = assert_envelope(upload(base, name="notes.txt"), 409, "name")
    assert str(voices) not in err["message"] and "/" not in err["message"]
    assert (voices / "notes.txt").read_text() == "the user's own file"


# -- 2. an upload is never decoded past the longest clip allowed -------------------------------


def flac_of_silence(seconds: float, rate: int = 24000) -> bytes:
    buf = io.BytesIO()
    sf.write(buf, np.zeros(int(seconds * rate), np.float32), rate, format="FLAC")
    return buf.getvalue()


def test_half_an_hour_of_compressed_silence_is_refused_from_its_header(server):
    base, voices, _ = server
    data = flac_of_silence(1800)
    assert len(data) < 300_000  # small enough for any upload limit
    tracemalloc.start()
    try:
        with pytest.raises(AudioError, match="1800.0 s long"):
            load_audio(data, max_seconds=30)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 20 * 2**20, f"{peak / 2**20:.0f} MB allocated (decoded: 173 MB)"
    before = tree(voices)
    err = assert_envelope(upload(base, name="long", audio=data), 400, "audio_sample")
    assert "1800.0 s" in err["message"] and "30 s" in err["message"]
    assert tree(voices) == before


def test_a_header_that_hides_the_length_still_stops_the_decoder(monkeypatch):
    real_info = sf.info

    def lying_info(f):  # as a stream with no length in its header reports
        info = real_info(f)
        info.frames = 2**63 - 1
        return info

    monkeypatch.setattr(sf, "info", lying_info)
    data = flac_of_silence(600)
    tracemalloc.start()
    try:
        with pytest.raises(AudioError, match="at most 30 s"):
            load_audio(data, max_seconds=30)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 20 * 2**20, f"{peak / 2**20:.0f} MB allocated (decoded: 58 MB)"
    samples, rate = load_audio(flac_of_silence(20), max_seconds=30)  # one that fits is whole
    assert len(samples) == 20 * rate


# -- 3. and 4. every field has a limit and the rules speaking applies ---------------------------


@pytest.mark.parametrize(
    "fields, param",
    [
        ({"ref_text": "word " * 300}, "ref_text"),
        ({"consent": "y" * 257}, "consent"),
        ({"language": "english" * 5}, "language"),
        ({"language": "klingon"}, "language"),
        ({"x_vector_only_mode": "banana"}, "x_vector_only_mode"),
        ({"name": "n" * 65}, "name"),
    ],
)
def test_fields_are_checked_at_upload(server, fields, param):
    base, voices, _ = server
    before = tree(voices)
    assert_envelope(upload(base, name=fields.pop("name", "fielded"), **fields), 400, param)
    assert tree(voices) == before


def test_valid_fields_are_stored_and_the_voice_speaks(server):
    base, voices, _ = server
    r = upload(base, name="fields-ok", language="pt-BR", x_vector_only_mode="FALSE")
    assert r.status_code == 200, r.text
    assert r.json()["language"] == "pt-BR" and r.json()["x_vector_only_mode"] is False
    r = upload(base, name="fields-xv", x_vector_only_mode="yes", ref_text="")
    assert r.json()["x_vector_only_mode"] is True
    for voice in ("clone:fields-ok", "clone:fields-xv"):
        body = {"model": "tts-1", "voice": voice, "input": "Hi.", "response_format": "pcm"}
        spoken = httpx.post(f"{base}/v1/audio/speech", json=body, headers=AUTH, timeout=30)
        assert spoken.status_code == 200 and spoken.content, spoken.text


def test_speaking_uses_the_same_transcript_limit(server):
    base, _, _ = server
    import base64

    body = {
        "input": "Hi.",
        "ref_audio": base64.b64encode(CLIP).decode(),
        "ref_text": "w" * (MAX_REF_TEXT_CHARS + 1),
    }
    r = httpx.post(f"{base}/v1/audio/voice-clone", json=body, headers=AUTH, timeout=30)
    assert_envelope(r, 400, "ref_text")


def test_a_hand_written_transcript_past_the_limit_is_skipped_with_a_reason(tmp_path, caplog):
    library = VoiceLibrary(tmp_path)
    library.add("huge", CLIP, ref_text="Hello there.")
    meta = tmp_path / "huge" / "meta.json"
    meta.write_text(meta.read_text().replace("Hello there.", "x" * 1_000_000))
    with caplog.at_level(logging.WARNING):
        assert library.profiles() == []
    assert "ref_text" in caplog.text and "1000000 characters" in caplog.text


# -- 5. what interrupted writes leave is cleaned at start-up, and nothing else -------------------


def test_leftovers_of_interrupted_writes_are_removed_at_start(tmp_path, caplog):
    voices = tmp_path / "voices"
    library = VoiceLibrary(voices)
    library.add("kept", CLIP, ref_text="Hello there.")
    dead = 2**22 + 12345  # above pid_max's default: no such process
    leftovers = [
        f".tmp-{uuid.uuid4().hex}",  # written before ids carried the process
        f".tmp-{dead}-{uuid.uuid4().hex}",
        f".trash-{dead}-{uuid.uuid4().hex}",
        f".trash-{os.getpid()}-{uuid.uuid4().hex}",  # this process, before it restarted
    ]
    for name in leftovers:
        (voices / name).mkdir()
        (voices / name / "reference.wav").write_bytes(CLIP)
    live = voices / f".tmp-{os.getppid()}-{uuid.uuid4().hex}"  # a running writer's
    live.mkdir()
    others = [voices / ".my-notes", voices / ".tmp-not-ours", voices / "kept" / ".cache"]
    for path in others:
        path.mkdir(exist_ok=True)
    (voices / f".tmp-{uuid.uuid4().hex}.wav").write_bytes(b"a file, not a folder")
    settings = make_settings(voices, device="cpu")
    with caplog.at_level(logging.INFO, logger="ownvoice.server"):
        engines = {"cv": FakeEngine("custom_voice"), "clone": FakeEngine("base")}
        with serve(settings, engines=engines) as (base, _):
            assert {v for v in listed(base) if v.startswith("clone:")} == {"clone:kept"}
    for name in leftovers:
        assert not (voices / name).exists(), name
    assert live.is_dir() and all(p.is_dir() for p in others)
    assert len(list(voices.glob(".tmp-*.wav"))) == 1
    assert "removed 4 leftover(s)" in caplog.text


# -- 6. an upload racing a delete of the same name ---------------------------------------------


def test_an_upload_racing_a_delete_answers_with_the_voice_it_made(tmp_path, monkeypatch):
    library = VoiceLibrary(tmp_path)
    real_rename, real_get = os.rename, library.get
    deleters: list[threading.Thread] = []
    deleted = []

    def rename_then_delete(src, dst):  # a delete of the same name arrives the moment it lands
        real_rename(src, dst)
        if os.path.basename(str(src)).startswith(".tmp-"):
            deleter = threading.Thread(target=lambda: deleted.append(library.remove("racer")))
            deleter.start()
            deleters.append(deleter)

    def slow_get(key):  # gives the delete every chance to run before the answer is read
        time.sleep(0.05)
        return real_get(key)

    monkeypatch.setattr("ownvoice.service.library.os.rename", rename_then_delete)
    monkeypatch.setattr(library, "get", slow_get)
    for _ in range(3):
        profile = library.add("racer", CLIP, ref_text="Hello there.")  # never VoiceNotFound
        assert profile.name == "racer"
        deleters[-1].join(5)
    assert len(deleted) == 3  # and every delete then found the voice it deleted
    assert library.profiles() == []


# -- 7. the OpenAPI document says what the server does -----------------------------------------


def test_the_openapi_document_matches_the_server(server):
    base, _, _ = server
    doc = httpx.get(f"{base}/openapi.json").json()
    paths = doc["paths"]
    upload_body = paths["/v1/audio/voices"]["post"]["requestBody"]["content"]
    form = upload_body["multipart/form-data"]["schema"]
    assert set(form["required"]) == {"name", "audio_sample", "consent"}
    assert form["properties"]["audio_sample"]["format"] == "binary"
    assert form["properties"]["ref_text"]["maxLength"] == MAX_REF_TEXT_CHARS
    for path in ("/v1/audio/speech", "/v1/audio/voice-clone"):
        content = paths[path]["post"]["responses"]["200"]["content"]
        assert set(content) == set(MEDIA_TYPES.values()) | {"text/event-stream"}, path
    assert set(paths["/metrics"]["get"]["responses"]["200"]["content"]) == {"text/plain"}
    schemas = doc["components"]["schemas"]
    for name in ("SpeechRequest", "VoiceCloneRequest"):
        text = schemas[name]["properties"]["input"]
        assert (text["minLength"], text["maxLength"]) == (1, 300), name  # limits.max_input_chars
    assert schemas["SpeechRequest"]["properties"]["speed"]["maximum"] == 4.0


def test_options_and_405_name_every_method_of_the_path(server):
    base, _, _ = server
    for method in ("OPTIONS", "PUT"):
        r = httpx.request(method, f"{base}/v1/audio/voices", headers=AUTH)
        assert_envelope(r, 405)
        assert {m.strip() for m in r.headers["allow"].split(",")} >= {"GET", "POST"}


# -- 8. small leaks and inconsistencies --------------------------------------------------------


def test_decoder_errors_show_no_python_objects(server):
    base, _, _ = server
    err = assert_envelope(upload(base, name="garbage", audio=b"\x00garbage" * 500), 400)
    assert "0x" not in err["message"] and "<" not in err["message"], err["message"]


def test_a_trailing_slash_is_the_same_path_not_a_redirect(server):
    base, _, _ = server
    r = httpx.delete(f"{base}/v1/audio/voices/", headers=AUTH)
    assert_envelope(r, 405)  # the collection cannot be deleted; no 307 to follow
    assert httpx.get(f"{base}/v1/models/", headers=AUTH).status_code == 200


@pytest.mark.parametrize(
    "head",
    [
        b"GET /v1/models HTTP/1.1\r\nHost: \r\n",  # empty: the Host check (ASGI)
        b"GET /v1/models HTTP/1.1\r\n",  # none: the HTTP parser refuses it
        b"GET /v1/models HTTP/1.1\r\nHost: localhost\r\nHost: evil\r\n",  # two
        b"GET /v1/models HTTP/9\r\nHost: localhost\r\n",
    ],
)
def test_a_missing_empty_or_doubled_host_is_refused_in_the_envelope(server, head, caplog):
    import json
    import socket

    base, _, _ = server
    port = int(base.rsplit(":", 1)[1])
    with caplog.at_level(logging.WARNING, logger="ownvoice.server"):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(head + b"Connection: close\r\n\r\n")
            raw = b""
            while chunk := s.recv(65536):
                raw += chunk
    status, _, rest = raw.partition(b"\r\n")
    headers, _, body = rest.partition(b"\r\n\r\n")
    assert status.startswith(b"HTTP/1.1 400"), raw
    fields = dict(line.split(b": ", 1) for line in headers.lower().split(b"\r\n"))
    assert fields[b"content-type"] == b"application/json"
    error = json.loads(body)["error"]
    assert error["request_id"] == fields[b"x-request-id"].decode()
    assert "refused 400" in caplog.text and error["request_id"] in caplog.text
