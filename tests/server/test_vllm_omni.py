"""vLLM-Omni's REST clients, unchanged: task_type, ref_audio (with ref_text or x-vector only),
non_streaming_mode, initial_codec_chunk_frames, the batch endpoint and uploaded_voices; and a
request that names a preset and gives a clip is refused instead of silently speaking the preset.
Real engines on tiny checkpoints (CustomVoice, VoiceDesign, Base)."""

from __future__ import annotations

import base64
import json
import re
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import pytest

from tests.server.helpers import make_settings, serve, speech_clip, wav_bytes

CLIP = wav_bytes(speech_clip(4.0, rate=24000), rate=24000)
B64 = base64.b64encode(CLIP).decode()
REF_TEXT = "This is the reference clip of a cloned voice."
DESCRIPTION = "  A warm, low voice;\n a narrator in her fifties. "


@pytest.fixture(scope="module")
def server(tiny_checkpoints, tmp_path_factory):
    settings = make_settings(
        tmp_path_factory.mktemp("voices"), device="cpu", dtype="float32",
        models={
            "cv": {"source": str(tiny_checkpoints["0.6B-CustomVoice"])},
            "design": {"source": str(tiny_checkpoints["1.7B-VoiceDesign"])},
            "base": {"source": str(tiny_checkpoints["0.6B-Base"])},
        },
        limits={"max_batch": 4},
    )  # fmt: skip
    with serve(settings) as (base, app):
        r = httpx.post(f"{base}/v1/audio/voices", files={"audio_sample": ("a.wav", CLIP)},
                       data={"name": "Alice", "consent": "consent-42", "ref_text": REF_TEXT,
                             "speaker_description": DESCRIPTION})  # fmt: skip
        assert r.status_code == 200, r.text
        yield base, app


def speech(base: str, **body) -> httpx.Response:
    body = {"model": "tts-1", "input": "Hello there, how are you?", "response_format": "pcm",
            "seed": 11, **body}  # fmt: skip
    return httpx.post(f"{base}/v1/audio/speech", json=body, timeout=300)


def together(base: str, *bodies: dict) -> list[httpx.Response]:
    """speech() for each body, all sent at once: they share the server's batch, which changes
    no row's audio (batched = solo), and take less time than one after the other."""
    with ThreadPoolExecutor(len(bodies)) as pool:
        return list(pool.map(lambda body: speech(base, **body), bodies))


def ok(r: httpx.Response) -> bytes:
    assert r.status_code == 200, r.text
    return r.content


def refused(r: httpx.Response, param: str, words: str) -> None:
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == param and words in error["message"], error


def clone_reference(base: str, **body) -> bytes:
    """The same clone through the seed server's /v1/audio/voice-clone."""
    body = {"input": "Hello there, how are you?", "response_format": "pcm", "seed": 11, **body}
    return ok(httpx.post(f"{base}/v1/audio/voice-clone", json=body, timeout=300))


def test_task_type_says_which_kind_of_voice_is_wanted(server):
    base, _ = server
    design = "A calm, low voice."
    # each pair: the same audio both ways
    pairs = together(base,
        dict(task_type="CustomVoice", voice="ryan"), dict(voice="ryan"),
        dict(speaker="ryan"), dict(voice="ryan"),  # vLLM's alias
        dict(task_type="VoiceDesign", instructions=design), dict(voice="design", instructions=design),
        # vLLM-Omni's clients send their default voice with every task: ignored, as there
        dict(task_type="VoiceDesign", voice="vivian", instructions=design),
        dict(voice="design", instructions=design),
        dict(task_type="Base", voice="clone:Alice"), dict(voice="Alice"),
    )  # fmt: skip
    for one, other in zip(pairs[::2], pairs[1::2], strict=True):
        assert ok(one) == ok(other)
    refused(speech(base, task_type="CustomVoice", voice="clone:Alice"), "voice",
            "task_type CustomVoice needs a preset speaker; 'clone:Alice' is a cloned voice")  # fmt: skip
    refused(speech(base, task_type="Base", voice="ryan"), "voice", "needs a cloned voice")
    refused(speech(base, task_type="Omni", voice="ryan"), "task_type", "")
    refused(speech(base), "voice", "voice is required")


def test_ref_audio_clones_exactly_as_the_voice_clone_endpoint(server):
    base, _ = server
    icl = clone_reference(base, ref_audio=B64, ref_text=REF_TEXT)
    xvec = clone_reference(base, ref_audio=B64, x_vector_only_mode=True)
    tagged, untagged, xvec_speech, default_voice = map(ok, together(base,
        dict(task_type="Base", ref_audio=f"data:audio/wav;base64,{B64}", ref_text=REF_TEXT),
        dict(ref_audio=B64, ref_text=REF_TEXT),  # no voice, no task_type
        dict(ref_audio=B64, x_vector_only_mode=True),
        # task_type Base says the clip is wanted: the voice a client sends by default is ignored
        dict(task_type="Base", voice="vivian", ref_audio=B64, ref_text=REF_TEXT),
    ))  # fmt: skip
    assert tagged == untagged == default_voice == icl
    assert xvec_speech == xvec != icl
    refused(speech(base, ref_audio=B64), "ref_text", "ref_text (the transcript of ref_audio)")
    # a model not served here is a 404 with a clip as without one, as in vLLM-Omni
    for body in (dict(voice="ryan"), dict(task_type="Base", ref_audio=B64, ref_text=REF_TEXT)):
        r = speech(base, **{**body, "model": "no-such-model"})
        assert r.status_code == 404 and r.json()["error"]["param"] == "model", r.text


def test_a_speaker_embedding_is_a_clone_in_x_vector_mode(server):
    """vLLM-Omni's `speaker_embedding`: the clip's x-vector as numbers speaks as the clip does
    with x_vector_only_mode; a wrong one is refused naming the field, never the voice."""
    from ownvoice.service.library import load_reference

    base, app = server
    engine = app.state.service.pool.workers["base"].engine
    samples, rate = load_reference(CLIP)
    vector = engine.make_voice((samples, rate), x_vector_only=True).speaker_embedding.tolist()
    by_clip, by_vector, with_voice = map(ok, together(base,
        dict(ref_audio=B64, x_vector_only_mode=True),
        dict(task_type="Base", speaker_embedding=vector),
        dict(task_type="Base", voice="vivian", speaker_embedding=vector),  # a client's default
    ))  # fmt: skip
    assert by_vector == by_clip == with_voice
    assert ok(speech(base, speaker_embedding=vector)) == by_clip  # no task_type, no voice
    for body, words in (
        (dict(task_type="CustomVoice", voice="ryan", speaker_embedding=vector),
         "only valid for task_type Base"),
        (dict(task_type="Base", speaker_embedding=vector, ref_audio=B64, ref_text=REF_TEXT),
         "mutually exclusive"),
        (dict(task_type="Base", speaker_embedding=vector[:-1]),
         f"has {len(vector) - 1} dimensions; this clone model's have {len(vector)}"),
        (dict(task_type="Base", speaker_embedding=[]), "is empty"),
    ):  # fmt: skip
        refused(speech(base, **body), "speaker_embedding", words)
    refused(speech(base, voice="vivian", speaker_embedding=vector), "voice", "say which")


def test_a_preset_and_a_clip_without_task_type_is_refused_not_guessed(server):
    base, _ = server
    r = speech(base, voice="vivian", ref_audio=B64, ref_text=REF_TEXT)
    refused(r, "voice", "names the voice 'vivian' and gives ref_audio: say which to use")
    refused(speech(base, task_type="CustomVoice", voice="ryan", ref_audio=B64), "ref_audio",
            "which task_type Base does, not CustomVoice")  # fmt: skip


@pytest.mark.parametrize(
    "source",
    ["https://example.com/voice.wav", "http://10.0.0.1/a.wav", "file:///etc/passwd",
     "/home/me/voice.wav", "~/voice.mp3", "./clips/me.flac", "C:\\voices\\me.wav"],
)  # fmt: skip
def test_a_url_or_a_path_in_ref_audio_is_never_fetched(server, source):
    base, _ = server
    r = speech(base, task_type="Base", ref_audio=source, ref_text=REF_TEXT)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == "ref_audio" and "never" in error["message"], error


def test_non_streaming_mode_selects_the_text_mode(server):
    base, _ = server
    default, whole, streaming, clone, clone_streaming, clone_whole = map(ok, together(base,
        dict(voice="ryan"),  # presets: the whole text in the prompt
        dict(voice="ryan", non_streaming_mode=True),
        dict(voice="ryan", non_streaming_mode=False),
        dict(voice="clone:Alice"),  # clones: one text token per frame
        dict(voice="clone:Alice", non_streaming_mode=False),
        dict(voice="clone:Alice", non_streaming_mode=True),
    ))  # fmt: skip
    assert whole == default and streaming != default and len(streaming) > 0
    assert clone_streaming == clone and clone_whole != clone


def test_initial_codec_chunk_frames_sets_the_first_chunk(server):
    base, _ = server

    def first_delta(**extra) -> int:
        r = speech(base, voice="ryan", stream_format="sse", **extra)
        event = next(line for line in r.text.splitlines() if line.startswith("data: "))
        return len(base64.b64decode(json.loads(event[6:])["audio"]))

    assert first_delta() == 1920 * 2  # one frame of 16-bit samples by default
    assert first_delta(initial_codec_chunk_frames=6) == 6 * 1920 * 2
    plain, other = (np.frombuffer(ok(r), "<i2").astype(int) for r in together(
        base, dict(voice="ryan"), dict(voice="ryan", initial_codec_chunk_frames=6)))  # fmt: skip
    # the same codes, decoded in other chunks: equal within float rounding (1 LSB)
    assert len(plain) == len(other) and np.abs(plain - other).max() <= 1
    assert first_delta(initial_codec_chunk_frames=0) == 1920 * 2  # 0: the default, as vLLM-Omni
    refused(speech(base, voice="ryan", initial_codec_chunk_frames=-1),
            "initial_codec_chunk_frames", "")  # fmt: skip


def _batch_rows(base: str) -> tuple[float, float]:
    """(rows, steps) the cv model has run so far; (0, 0) before its first step, when the
    histogram has no sample yet (this test may be the first of its server)."""
    text = httpx.get(f"{base}/metrics").text
    found = [re.search(rf'tts_batch_rows_{part}\{{model="cv"\}} (\S+)', text)
             for part in ("sum", "count")]  # fmt: skip
    rows, steps = (float(m.group(1)) if m else 0.0 for m in found)
    return rows, steps


def test_the_batch_endpoint_runs_its_items_together(server):
    base, _ = server
    items = [
        {"input": "The first item of the batch.", "seed": 1},
        {"input": "The second item, in another voice.", "voice": "vivian", "seed": 2},
        {"input": "The third item has an unknown voice.", "voice": "nobody"},
        {"input": "The fourth item speaks faster.", "seed": 4, "speed": 1.5},
        {"input": "The fifth item is a clone.", "voice": "clone:Alice", "seed": 5},
        {"input": "The sixth item has a bad speed.", "speed": "fast"},
    ]
    rows0, steps0 = _batch_rows(base)
    r = httpx.post(f"{base}/v1/audio/speech/batch", timeout=600,
                   json={"items": items, "voice": "ryan", "response_format": "wav"})  # fmt: skip
    rows1, steps1 = _batch_rows(base)
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["object"], body["total"], body["succeeded"], body["failed"]) == (
        "audio.speech.batch", 6, 4, 2)  # fmt: skip
    assert body["id"].startswith("speechbatch-")
    results = body["results"]
    assert [x["index"] for x in results] == list(range(6))
    # vLLM-Omni's result shape: status success/error, audio_data, media_type, error (text)
    assert [x["status"] for x in results] == ["success", "success", "error", "success",
                                              "success", "error"]  # fmt: skip
    assert "nobody" in results[2]["error"] and results[2]["error_detail"]["param"] == "voice"
    assert results[5]["error_detail"]["param"] == "speed" and results[5]["audio_data"] is None
    succeeded = [(item, r) for item, r in zip(items, results, strict=True)
                 if r["status"] == "success"]  # fmt: skip
    solos = together(base, *({"voice": "ryan", "response_format": "wav", **item}
                             for item, _ in succeeded))  # fmt: skip
    for (item, result), solo in zip(succeeded, solos, strict=True):
        assert result["media_type"] == "audio/wav"
        audio = base64.b64decode(result["audio_data"])
        # each item is its rendering by /v1/audio/speech: the same codes; the rows decode in
        # other chunk sizes, so the samples agree within float rounding (1 LSB)
        mine, alone = (np.frombuffer(x[44:], "<i2").astype(int) for x in (audio, ok(solo)))
        assert audio[:44] == ok(solo)[:44] and len(mine) == len(alone), item
        assert np.abs(mine - alone).max() <= 1, item
        # a streamed WAV: a 44-byte header (its lengths unknown when sent), then 16-bit mono
        assert audio[:4] == b"RIFF" and audio[8:16] == b"WAVEfmt "
        seconds = (len(audio) - 44) / 2 / 24000
        assert result["duration"] == pytest.approx(seconds, abs=0.01)
    assert (rows1 - rows0) / (steps1 - steps0) > 1.5  # the items shared the engine's steps


@pytest.mark.parametrize(("items", "words"), [([], "items"), ([{"input": "x"}] * 33, "items")])
def test_a_batch_has_1_to_32_items(server, items, words):
    base, _ = server
    r = httpx.post(f"{base}/v1/audio/speech/batch", json={"items": items})
    assert r.status_code == 400 and r.json()["error"]["param"] == words, r.text


def test_the_voice_list_carries_uploaded_voices_in_vllm_omnis_shape(server):
    base, _ = server
    body = httpx.get(f"{base}/v1/audio/voices").json()
    assert all({"id", "name"} <= set(v) for v in body["voices"])  # what Open WebUI reads
    (alice,) = body["uploaded_voices"]
    assert alice["name"] == "Alice" and alice["consent"] == "consent-42"
    assert alice["mime_type"] == "audio/x-wav" or alice["mime_type"] == "audio/wav"
    assert alice["file_size"] > 44 and alice["created_at"] > 1_700_000_000
    assert alice["ref_text"] == REF_TEXT
    # vLLM-Omni's speaker_description: kept (spaces tidied) and listed; it changes no audio
    assert alice["speaker_description"] == "A warm, low voice; a narrator in her fifties."
    r = httpx.post(
        f"{base}/v1/audio/voices",
        files={"audio_sample": ("a.wav", CLIP)},
        data={"name": "Bob", "consent": "yes", "speaker_description": "x" * 501},
    )
    assert r.status_code == 400 and r.json()["error"]["param"] == "speaker_description", r.text
