"""Voice-agent clients, unchanged, against a real server on a tiny checkpoint: LiveKit Agents'
OpenAI TTS plugin (1.8.9; plain `synthesize` and through its StreamAdapter) and the OpenAI Agents
SDK's TTS model (0.24).

LiveKit sends `stream_format: "audio"` for tts-1 and SSE for gpt-4o-mini-tts, with a 30 s
timeout, and warns "no request_id provided for TTS" when a response has no `x-request-id`.
Random weights never end on their own, so the length cap per text is scaled down here: each
request makes a few frames, and the tests count what arrives rather than listen to it.
"""

from __future__ import annotations

import asyncio
import logging

import pytest

from ownvoice.server import create_app
from ownvoice.service.encode import FORMATS
from tests.server.helpers import live_server, make_settings

FRAME = 1920  # samples per 80 ms frame at 24 kHz


@pytest.fixture(scope="module")
def c():
    """The two clients' modules, imported by the tests that use them (seconds of imports that
    collecting the other tests need not pay). The test extra installs both: a missing one
    fails here, it is not skipped."""
    from types import SimpleNamespace

    from agents.voice import OpenAITTSModel, TTSModelSettings
    from livekit.agents import APIStatusError, tokenize
    from livekit.agents import tts as lk_tts
    from livekit.plugins import openai as lk_openai
    from openai import AsyncOpenAI

    return SimpleNamespace(
        OpenAITTSModel=OpenAITTSModel, TTSModelSettings=TTSModelSettings,
        APIStatusError=APIStatusError, tokenize=tokenize, lk_tts=lk_tts, lk_openai=lk_openai,
        AsyncOpenAI=AsyncOpenAI,
    )  # fmt: skip


@pytest.fixture(scope="module")
def agent_server(tiny_checkpoints, tmp_path_factory):
    from ownvoice.engine import options as engine_options

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(engine_options, "MIN_CAP_FRAMES", 3)  # "Hi." -> 4 frames, not 49
        mp.setattr(engine_options, "CAP_FACTOR", 0.3)
        settings = make_settings(
            tmp_path_factory.mktemp("voices"), device="cpu", dtype="float32",
            models={"cv": {"source": str(tiny_checkpoints["0.6B-CustomVoice"])}},
            optimization={"streaming": {"emit_every_frames": 2}},
        )  # fmt: skip
        app = create_app(settings, run_doctor=False)
        with live_server(app, timeout=600) as base:
            yield f"{base}/v1"


async def livekit_samples(tts, text: str) -> tuple[int, str]:
    samples, request_id = 0, ""
    async with tts.synthesize(text) as stream:
        async for event in stream:
            samples += event.frame.samples_per_channel
            request_id = event.request_id
    return samples, request_id


@pytest.mark.parametrize("fmt", FORMATS)
def test_livekit_synthesize_in_every_format_with_a_request_id(c, agent_server, fmt, caplog):
    async def run():
        tts = c.lk_openai.TTS(base_url=agent_server, api_key="x", model="tts-1", voice="alloy",
                            response_format=fmt)  # fmt: skip
        try:
            return await livekit_samples(tts, "Hi there.")
        finally:
            await tts.aclose()

    with caplog.at_level(logging.WARNING):
        samples, request_id = asyncio.run(run())
    # LiveKit's own streaming FLAC decoder drops the file's last FLAC frame(s) (seen with any
    # FLAC, ours included, which PyAV and libsndfile read whole); the rest arrives in full
    assert samples >= (3 * FRAME if fmt != "flac" else 1), samples
    assert request_id and request_id != "unknown"
    assert "no request_id" not in caplog.text


def test_livekit_over_sse_and_through_its_stream_adapter(c, agent_server, caplog):
    async def run():
        # gpt-4o-mini-tts makes the plugin ask for SSE
        tts = c.lk_openai.TTS(base_url=agent_server, api_key="x", model="gpt-4o-mini-tts",
                            voice="ryan", response_format="pcm")  # fmt: skip
        try:
            sse, _ = await livekit_samples(tts, "Hello.")
            adapter = c.lk_tts.StreamAdapter(
                tts=tts, sentence_tokenizer=c.tokenize.basic.SentenceTokenizer(min_sentence_len=1)
            )
            streamed, segments = 0, set()
            async with adapter.stream() as stream:
                stream.push_text("Good morning. ")
                stream.push_text("The weather is fine today.")
                stream.end_input()
                async for event in stream:
                    if event.frame is not None:
                        streamed += event.frame.samples_per_channel
                        segments.add(event.segment_id)
            await adapter.aclose()
            return sse, streamed
        finally:
            await tts.aclose()

    with caplog.at_level(logging.WARNING):
        sse, streamed = asyncio.run(run())
    assert sse >= 3 * FRAME and streamed >= 6 * FRAME  # two sentences, each a request
    assert "no request_id" not in caplog.text


@pytest.mark.parametrize(
    ("text", "voice", "fmt", "says"),
    [
        ("", "alloy", "mp3", "input"),
        ("Hello.", "nobody-here", "mp3", "voice 'nobody-here' is not available"),
        ("Hello.", "alloy", "ogg", "response_format"),
        ("x" * 5000, "alloy", "mp3", "the limit is 4096"),
    ],
)
def test_livekit_shows_the_servers_own_message_for_bad_input(
    c, agent_server, text, voice, fmt, says
):
    async def run():
        tts = c.lk_openai.TTS(base_url=agent_server, api_key="x", model="tts-1", voice=voice,
                            response_format=fmt)  # fmt: skip
        try:
            async with tts.synthesize(text) as stream:
                async for _ in stream:
                    pass
        finally:
            await tts.aclose()

    with pytest.raises(c.APIStatusError) as e:
        asyncio.run(run())
    assert e.value.status_code == 400 and says in str(e.value), str(e.value)


def test_openai_agents_sdk_tts_model(c, agent_server):
    async def run():
        client = c.AsyncOpenAI(base_url=agent_server, api_key="x")
        model = c.OpenAITTSModel(model="tts-1", openai_client=client)
        data = b""
        async for chunk in model.run("Hello there.", c.TTSModelSettings(voice="alloy")):
            data += chunk
        await client.close()
        return data

    data = asyncio.run(run())
    assert len(data) >= 3 * FRAME * 2 and len(data) % 2 == 0  # pcm s16le at 24 kHz


def test_livekit_request_during_a_long_one_joins_the_batch_without_retry(c, agent_server, caplog):
    """Default configuration (a batch of 4 on the CPU): a LiveKit request sent while a
    1500-character request is being spoken starts at the next frame, finishes first, and is
    sent once (no timeout, no retry)."""
    import threading
    import time

    import httpx

    long_done = threading.Event()

    def long_request():
        httpx.post(f"{agent_server}/audio/speech", timeout=300, json={
            "model": "tts-1", "voice": "ryan", "input": ("All work and no play. " * 70)[:1500],
            "response_format": "pcm", "max_frames": 120})  # fmt: skip
        long_done.set()

    async def run():
        tts = c.lk_openai.TTS(base_url=agent_server, api_key="x", model="tts-1", voice="alloy",
                            response_format="pcm")  # fmt: skip
        try:
            return await livekit_samples(tts, "Quick answer.")
        finally:
            await tts.aclose()

    def generating() -> int:
        health = httpx.get(agent_server.removesuffix("/v1") + "/health").json()
        return health["queue"]["generating"]

    talker = threading.Thread(target=long_request)
    with caplog.at_level(logging.INFO, logger="ownvoice"):
        talker.start()
        deadline = time.monotonic() + 30
        while generating() < 1:  # the long one is being spoken
            assert time.monotonic() < deadline
            time.sleep(0.02)
        samples, _ = asyncio.run(run())
        finished_first = not long_done.is_set()
        talker.join()
    assert samples >= 3 * FRAME and finished_first
    livekit_lines = [m for m in caplog.messages if m.startswith("speech") and "voice=alloy" in m]
    assert len(livekit_lines) == 1 and livekit_lines[0].startswith("speech 200"), livekit_lines
