"""A script spoken in process (`ownvoice say`, the audiobook tool): no event loop, the same
audio as the server's. Each span is its own request, the pauses exact, the spans that run
ahead of the one being read change nothing."""

from __future__ import annotations

import numpy as np

from ownvoice.service.planning import SpeechInput
from ownvoice.service.speech import Origin, SpeechService


def spoken(service: SpeechService, text: str, **fields) -> np.ndarray:
    request = SpeechInput(input=text, voice="ryan", seed=3, max_frames=5, **fields)
    run = service.speak(request, Origin("say"))
    try:  # as a front end delivers it: at the request's speed, as 16-bit PCM
        stream = run.audio("pcm")
        data = b"".join(stream.write(chunk.samples) for chunk in run.chunks_blocking())
        return np.frombuffer(data + stream.close(), dtype="<i2")
    finally:
        run.finish()


def test_pause_tags_and_ssml_in_process_are_the_spans_joined_with_exact_silence(tiny_engine):
    service = SpeechService.local(tiny_engine("0.6B-CustomVoice"))
    try:
        one, two, three = (spoken(service, t) for t in ("One.", "Two.", "Three."))
        fast = spoken(service, "Three.", speed=1.5)
        got = spoken(service, "One. [pause:0.5] Two. [pause:20ms] Three.")
        want = np.concatenate(
            [one, np.zeros(12000, dtype="<i2"), two, np.zeros(480, dtype="<i2"), three]
        )
        assert len(got) == len(want) and np.array_equal(got, want)
        ssml = (
            '<speak>One.<break strength="strong"/><prosody rate="x-fast">Three.</prosody></speak>'
        )
        got = spoken(service, ssml)
        want = np.concatenate([one, np.zeros(18000, dtype="<i2"), fast])
        assert len(got) == len(want) and np.array_equal(got, want)
    finally:
        service.pool.close()
