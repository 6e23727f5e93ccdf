"""Wyoming events whose text is not valid Unicode (a lone UTF-16 surrogate, JSON's "\\ud800"),
or whose JSON is nested deeper than Python's parser goes, get an `error` event naming the
problem, as every bad input does; a fresh connection is served as usual. They were "speech
failed" (the tokenizer's TypeError), or a connection closed with a traceback and no word. A
FakeEngine speaks (it has no tokenizer: it spoke the surrogate)."""

from __future__ import annotations

import asyncio

import pytest

from tests.wyoming.test_wyoming import event_bytes, pcm_of, raw_exchange, synthesize
from tests.wyoming.test_wyoming_limits import wyoming_server

LONE = "a\ud800b."  # json.dumps writes it as the escape "a\\ud800b."
DEEP = b"[" * 50_000

CASES = {
    "synthesize": (event_bytes("synthesize", {"text": LONE, "voice": {"name": "ryan"}}),
                   "invalid_input", "not valid Unicode"),
    "a streamed chunk": (event_bytes("synthesize-start", {"voice": {"name": "ryan"}})
                         + event_bytes("synthesize-chunk", {"text": "Hello "})
                         + event_bytes("synthesize-chunk", {"text": LONE}),
                         "invalid_input", "not valid Unicode"),
    "the voice's name": (event_bytes("synthesize", {"text": "Hi.", "voice": {"name": LONE}}),
                         "invalid_input", "not valid Unicode"),
    "a ping's text": (event_bytes("ping", {"text": LONE}), "invalid_input", "not valid Unicode"),
    "a deep header": (DEEP + b"\n", "bad_event", "nested too deeply"),
    "deep data": (b'{"type": "synthesize", "data_length": 50000}\n' + DEEP, "bad_event",
                  "nested too deeply"),
}  # fmt: skip


@pytest.fixture(scope="module")
def port(tmp_path_factory):
    with wyoming_server(tmp_path_factory.mktemp("voices")) as (_, app):
        yield app.state.wyoming.port


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_bad_text_gets_an_error_event_and_a_fresh_connection_works(port, case):
    data, code, words = CASES[case]
    lines, closed = asyncio.run(raw_exchange(port, data))
    errors = [h["data"] for h in lines if h["type"] == "error"]
    assert closed and len(errors) == 1, lines
    assert errors[0]["code"] == code and words in errors[0]["text"], errors
    assert not any(h["type"].startswith("audio") for h in lines), lines
    events = asyncio.run(synthesize(port, "Still here.", "ryan"))
    assert events[-1].type == "audio-stop" and pcm_of(events)
