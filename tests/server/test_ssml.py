"""SSML, pause tags and the dialogue endpoint, through the HTTP API on tiny real engines.

The oracle of every test is the API itself: each span (or turn) spoken alone by
`POST /v1/audio/speech` with its own text, voice, language and speed and the same seed. A
script must be those pieces joined with exact silences, byte for byte (raw PCM), so a pause
that is a sample off, a span given to the wrong voice or model, or a tag read aloud fails.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import pytest

from tests.server.helpers import make_settings, serve, speech_clip, wav_bytes

RATE = 24000
CLIP = wav_bytes(speech_clip(4.0, rate=24000), rate=24000)
BASE_BODY = {"model": "tts-1", "response_format": "pcm", "seed": 5, "max_frames": 6}


@pytest.fixture(scope="module")
def server(tiny_checkpoints, tmp_path_factory):
    settings = make_settings(
        tmp_path_factory.mktemp("voices"), device="cpu", dtype="float32",
        models={
            "cv": {"source": str(tiny_checkpoints["0.6B-CustomVoice"])},
            "base": {"source": str(tiny_checkpoints["0.6B-Base"])},
        },
        limits={"max_batch": 4},
    )  # fmt: skip
    with serve(settings) as (base, app):
        r = httpx.post(f"{base}/v1/audio/voices", files={"audio_sample": ("a.wav", CLIP)},
                       data={"name": "Alice", "consent": "consent-42",
                             "ref_text": "This is the reference clip."})  # fmt: skip
        assert r.status_code == 200, r.text
        yield base


def post(base: str, path: str = "/v1/audio/speech", **body) -> httpx.Response:
    return httpx.post(f"{base}{path}", json={**BASE_BODY, **body}, timeout=300)


def pcm(r: httpx.Response) -> np.ndarray:
    assert r.status_code == 200, r.text
    return np.frombuffer(r.content, dtype="<i2")


def alone(base: str, *pieces: dict) -> list[np.ndarray]:
    """Each piece spoken by itself (all sent at once: the batch changes no row's audio)."""
    defaults = {"voice": "ryan"}
    with ThreadPoolExecutor(len(pieces)) as pool:
        return list(pool.map(lambda body: pcm(post(base, **{**defaults, **body})), pieces))


def gap(seconds: float) -> np.ndarray:
    return np.zeros(round(seconds * RATE), dtype="<i2")


def joined(*parts: np.ndarray) -> np.ndarray:
    return np.concatenate(parts)


def same(got: np.ndarray, want: np.ndarray) -> None:
    assert len(got) == len(want), f"{len(got)} samples, want {len(want)}"
    assert np.array_equal(got, want), "the samples differ"


def refused(r: httpx.Response, *words: str, param: str = "input") -> dict:
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == param, error
    for word in words:
        assert word in error["message"], error
    return error


def test_a_break_is_exact_silence_between_the_spans_as_they_are_spoken_alone(server):
    got = pcm(post(server, voice="ryan",
                   input='<speak>Hello there. <break time="700ms"/>How are you?</speak>'))  # fmt: skip
    a, b = alone(server, {"input": "Hello there."}, {"input": "How are you?"})
    same(got, joined(a, gap(0.7), b))
    # the silence, measured from the PCM: 16800 zero samples where the first span ends
    assert np.all(got[len(a) : len(a) + 16800] == 0) and got[len(a) + 16800 :].any()


def test_break_strengths_and_paragraphs_have_their_documented_lengths(server):
    ssml = ('<speak><p>One.</p><p>Two.<break strength="weak"/>Three.'
            '<break/>Four.<break strength="x-strong"/>Five.</p></speak>')  # fmt: skip
    got = pcm(post(server, voice="ryan", input=ssml))
    one, two, three, four, five = alone(
        server, *({"input": t} for t in ("One.", "Two.", "Three.", "Four.", "Five."))
    )
    want = joined(one, gap(0.75), two, gap(0.25), three, gap(0.5), four, gap(1.0), five)
    same(got, want)


def test_pause_tags_in_plain_text_are_silences_never_read_aloud(server):
    got = pcm(
        post(
            server, voice="ryan", input="Hello there. [pause:1.5] How are you? [PAUSE: 250ms] Fine."
        )
    )
    a, b, c = alone(
        server, {"input": "Hello there."}, {"input": "How are you?"}, {"input": "Fine."}
    )
    same(got, joined(a, gap(1.5), b, gap(0.25), c))


def test_a_pause_tag_is_capped_at_ten_seconds(server):
    got = pcm(post(server, voice="ryan", input="Wait. [pause:30] Done."))
    a, b = alone(server, {"input": "Wait."}, {"input": "Done."})
    same(got, joined(a, gap(10.0), b))


def test_voice_lang_prosody_sub_say_as_and_emphasis_each_speak_their_span(server):
    ssml = (
        '<speak xml:lang="en-US">Hi <emphasis level="strong">there</emphasis>.'
        '<voice name="clone:Alice">I am the clone.</voice>'
        '<prosody rate="150%">Quickly now.</prosody>'
        '<lang xml:lang="de-DE">Guten Tag.</lang>'
        '<sub alias="World Wide Web">WWW</sub> has '
        '<say-as interpret-as="cardinal">42</say-as> pages.</speak>'
    )
    got = pcm(post(server, voice="ryan", input=ssml))
    pieces = alone(
        server,
        {"input": "Hi there.", "language": "en"},  # <speak xml:lang> holds for every span
        {"input": "I am the clone.", "voice": "clone:Alice", "language": "en"},  # the Base model
        {"input": "Quickly now.", "speed": 1.5, "language": "en"},
        {"input": "Guten Tag.", "language": "de"},
        {"input": "World Wide Web has forty-two pages.", "language": "en"},
    )
    same(got, joined(*pieces))


def test_nested_prosody_multiplies_with_the_request_speed(server):
    ssml = '<speak><prosody rate="slow"><prosody rate="200%">Nested.</prosody></prosody></speak>'
    got = pcm(post(server, voice="ryan", speed=1.2, input=ssml))
    (want,) = alone(server, {"input": "Nested.", "speed": 1.2 * 0.75 * 2.0})
    same(got, want)


def test_input_format_decides_how_the_input_is_read(server):
    text = "<speak>Hello</speak>"
    as_text, hello = alone(server, {"input": text, "input_format": "text"}, {"input": "Hello"})
    # "text": the tags are words to read (other tokens, other audio); ssml: they are not read
    assert len(as_text) != len(hello) or not np.array_equal(as_text, hello)
    same(pcm(post(server, voice="ryan", input=text, input_format="ssml")), hello)
    same(pcm(post(server, voice="ryan", input=text)), hello)  # detected by its <speak>
    # ssml without a <speak> root is refused
    refused(post(server, voice="ryan", input="Hello", input_format="ssml"), "speak")


@pytest.mark.parametrize(
    ("ssml", "words"),
    [
        ('<speak><audio src="x.wav"/>Hi</speak>', ["<audio>"]),
        ("<speak><phoneme ph='x'>Hi</phoneme></speak>", ["<phoneme>"]),
        ('<speak><prosody pitch="+2st">Hi</prosody></speak>', ["pitch"]),
        ('<speak><say-as interpret-as="unit">3 kg</say-as></speak>', ["unit"]),
        ('<speak><break time="soon"/>Hi</speak>', ["soon"]),
        ('<speak><prosody rate="-200%">Hi</prosody></speak>', ["-200%"]),
        ("<speak>Hi\n<break>\n</speak>", ["line 3"]),
        ('<!DOCTYPE speak [<!ENTITY a "aaaa">]><speak>&a;</speak>', ["entit"]),
    ],
)
def test_unsupported_or_malformed_ssml_is_a_400_naming_what(server, ssml, words):
    refused(post(server, voice="ryan", input=ssml, input_format="ssml"), *words)


def test_a_voice_in_the_markup_must_exist_before_anything_speaks(server):
    r = post(server, voice="ryan", input='<speak>Hi <voice name="nobody">there</voice></speak>')
    assert r.status_code == 400 and r.json()["error"]["param"] == "voice", r.text


def test_dialogue_of_three_voices_over_two_models_is_its_turns_joined(server):
    turns = [
        {"voice": "ryan", "text": "Good morning."},
        {"voice": "clone:Alice", "text": "Morning! [pause:0.3] Coffee?"},
        {"voice": "vivian", "text": "Yes, please."},
    ]
    r = post(server, "/v1/audio/dialogue", turns=turns, pause_s=0.5, level=False)
    got = pcm(r)
    a, b1, b2, c = alone(
        server,
        {"input": "Good morning."},
        {"input": "Morning!", "voice": "clone:Alice"},
        {"input": "Coffee?", "voice": "clone:Alice"},
        {"input": "Yes, please.", "voice": "vivian"},
    )
    same(got, joined(a, gap(0.5), b1, gap(0.3), b2, gap(0.5), c))


def test_dialogue_levels_each_voice_and_says_where_each_turn_starts(server):
    turns = [
        {"voice": "ryan", "text": "Good morning to you."},
        {"voice": "clone:Alice", "text": "And a good morning to you."},
    ]
    body = {**BASE_BODY, "max_frames": 12, "turns": turns, "pause_s": 0.25,
            "stream_format": "sse"}  # fmt: skip
    r = httpx.post(f"{server}/v1/audio/dialogue", json=body, timeout=300)
    assert r.status_code == 200, r.text
    events = [json.loads(line[6:]) for line in r.text.splitlines() if line.startswith("data: ")]
    starts = [e for e in events if e["type"] == "speech.turn.start"]
    import base64

    audio = b"".join(
        base64.b64decode(e["audio"]) for e in events if e["type"] == "speech.audio.delta"
    )
    got = np.frombuffer(audio, dtype="<i2").astype(np.float64) / 32768
    a, b = (x.astype(np.float64) / 32768 for x in alone(
        server, {"input": turns[0]["text"], "max_frames": 12},
        {"input": turns[1]["text"], "voice": "clone:Alice", "max_frames": 12},
    ))  # fmt: skip
    assert [e["turn"] for e in starts] == [0, 1]
    assert starts[0]["start"] == 0.0
    assert starts[1]["start"] == pytest.approx((len(a) + 0.25 * RATE) / RATE, abs=1e-6)
    assert len(got) == len(a) + round(0.25 * RATE) + len(b)
    # each turn is its solo audio times one gain (its own voice's), to the same loudness
    from ownvoice.loudness import integrated_loudness

    first, second = got[: len(a)], got[len(a) + round(0.25 * RATE) :]
    for turn, solo in ((first, a), (second, b)):
        if integrated_loudness(solo.astype(np.float32), RATE) is None:
            continue
        g = float(np.dot(turn, solo) / np.dot(solo, solo))
        assert np.allclose(turn, g * solo, atol=2 / 32768 + 0.02 * np.abs(solo).max())
        assert integrated_loudness(turn.astype(np.float32), RATE) == pytest.approx(-18.0, abs=1.0)


def test_dialogue_refuses_an_unknown_voice_naming_its_turn(server):
    turns = [{"voice": "ryan", "text": "Hi."}, {"voice": "nobody", "text": "Hello."}]
    r = post(server, "/v1/audio/dialogue", turns=turns)
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert "nobody" in error["message"] and error["param"] == "turns[1].voice", error
    # an unknown model is still a 404, as for /v1/audio/speech
    assert post(server, "/v1/audio/dialogue", turns=turns[:1], model="nope").status_code == 404


def test_a_batch_item_reads_its_markup_as_a_single_request_does(server):
    items = [{"input": "Hello there. [pause:0.5] How are you?", "voice": "ryan"},
             {"input": '<speak><s>Fine.</s><s>Thanks.</s></speak>', "voice": "vivian"}]  # fmt: skip
    r = httpx.post(f"{server}/v1/audio/speech/batch", json={**BASE_BODY, "items": items},
                   timeout=300)  # fmt: skip
    assert r.status_code == 200, r.text
    import base64

    got = [
        np.frombuffer(base64.b64decode(x["audio_data"]), dtype="<i2") for x in r.json()["results"]
    ]
    a, b, fine, thanks = alone(
        server, {"input": "Hello there."}, {"input": "How are you?"},
        {"input": "Fine.", "voice": "vivian"}, {"input": "Thanks.", "voice": "vivian"},
    )  # fmt: skip
    same(got[0], joined(a, gap(0.5), b))
    same(got[1], joined(fine, thanks))  # each <s> its own span, no silence between
