"""FakeEngine: a test double with the Engine interface, deterministic audio and counters.

Each frame is 1920 samples (80 ms) of a sine whose pitch depends on the voice, with continuous
phase; the number of frames is `frames_per_char` per input character (runaway: always
max_frames), capped by options.max_frames. `frame_delay` sleeps per frame, so tests can hold a
generation open; `should_stop` is polled between frames, as the real engine does.
"""

from __future__ import annotations

import math
import threading
import time
import zlib

import numpy as np
import torch

from ownvoice.engine.options import SynthesisOptions
from ownvoice.engine.results import SAMPLE_RATE, SAMPLES_PER_FRAME, AudioChunk, Synthesis
from ownvoice.engine.voice import VoicePrompt
from ownvoice.errors import InvalidInput

SPEAKERS = ["aiden", "dylan", "eric", "ono_anna", "ryan", "serena", "sohee", "uncle_fu", "vivian"]
LANGUAGES = ["auto", "chinese", "english", "french", "german", "italian", "japanese", "korean",
             "portuguese", "russian", "spanish"]  # fmt: skip


class FakeEngine:
    def __init__(
        self,
        model_type: str = "custom_voice",
        frames_per_char: float = 0.5,
        frame_delay: float = 0.0,
        runaway: bool = False,
        instruct_supported: bool = False,
        device: str = "cpu",
        ignore_stop: bool = False,
    ):
        self.model_type = model_type
        self.device = device
        self.dtype = "float32"
        self.frames_per_char = frames_per_char
        self.frame_delay = frame_delay
        self.runaway = runaway
        self.ignore_stop = ignore_stop  # a stuck engine: never looks at should_stop
        self._instruct = instruct_supported
        self.model_fingerprint = f"fake-{model_type}"
        self.lock = threading.Lock()
        self.calls: list[dict] = []  # one per stream(): text, voice, instruct, options
        self.make_voice_calls = 0
        self.cancelled = 0
        self.frames_generated = 0
        self.warmed = 0
        self.threads: set[str] = set()
        self.active = 0  # streams running right now
        self.max_active = 0

    # -- the Engine interface ----------------------------------------------------------------

    @property
    def supported_speakers(self) -> list[str]:
        return list(SPEAKERS) if self.model_type == "custom_voice" else []

    @property
    def supported_languages(self) -> list[str]:
        return list(LANGUAGES)

    @property
    def instruct_supported(self) -> bool:
        return self._instruct or self.model_type == "voice_design"

    def warmup(self) -> float:
        self.warmed += 1
        return 0.0

    def make_voice(self, audio, ref_text=None, x_vector_only=False) -> VoicePrompt:
        if self.model_type != "base":
            raise InvalidInput("make_voice needs a Base model", param="voice")
        samples, rate = audio
        self.make_voice_calls += 1
        self.threads.add(threading.current_thread().name)
        level = float(np.sqrt(np.mean(samples**2)))
        return VoicePrompt(
            speaker_embedding=torch.full((8,), level),
            ref_codes=None if x_vector_only else torch.zeros((4, 16), dtype=torch.long),
            ref_text=None if x_vector_only else ref_text,
            model_fingerprint=self.model_fingerprint,
        )

    def stream(self, text, voice=None, instruct=None, options=None, should_stop=None):
        options = options or SynthesisOptions()
        options.validate()
        self._check_voice(voice, instruct)
        self.threads.add(threading.current_thread().name)
        with self.lock:
            self.calls.append(
                {"text": text, "voice": voice, "instruct": instruct, "options": options}
            )
            self.active += 1
            self.max_active = max(self.max_active, self.active)
        try:
            yield from self._frames(text, voice, options, should_stop)
        finally:
            with self.lock:
                self.active -= 1

    def synthesize(self, text, voice=None, instruct=None, options=None) -> Synthesis:
        chunks = list(self.stream(text, voice, instruct, options))
        return Synthesis(
            audio=np.concatenate([c.samples for c in chunks]),
            codes=np.concatenate([c.codes for c in chunks]),
            stop_reason=chunks[-1].stop_reason,
        )

    # -- internals ---------------------------------------------------------------------------

    def _check_voice(self, voice, instruct) -> None:
        if self.model_type == "custom_voice" and voice not in SPEAKERS:
            raise InvalidInput(f"speaker {voice!r} is not supported", param="voice")
        if self.model_type == "base" and not isinstance(voice, VoicePrompt):
            raise InvalidInput("a Base model needs a VoicePrompt", param="voice")
        if self.model_type == "voice_design" and not instruct:
            raise InvalidInput("voice design needs instruct", param="instruct")

    def _frames(self, text, voice, options, should_stop):
        wanted = (
            options.max_frames
            if self.runaway
            else max(1, math.ceil(len(text) * self.frames_per_char))
        )
        total = min(wanted, options.max_frames)
        stop = "eos" if wanted <= options.max_frames else "max_frames"
        freq = 150 + zlib.crc32(repr(voice).encode()) % 300
        frame, index, pending = 0, 0, []
        size = options.first_chunk_frames
        while frame < total:
            if should_stop is not None and not self.ignore_stop and should_stop():
                self.cancelled += 1
                stop = "cancelled"
                break
            if self.frame_delay:
                time.sleep(self.frame_delay)
            pending.append(frame)
            frame += 1
            self.frames_generated += 1
            if len(pending) == size or frame == total:
                yield self._chunk(pending, index, freq, is_last=frame == total, stop=stop)
                index, pending, size = index + 1, [], options.chunk_frames
        if pending or stop == "cancelled" or index == 0:
            yield self._chunk(pending, index, freq, is_last=True, stop=stop)

    @staticmethod
    def _chunk(frames, index, freq, is_last, stop) -> AudioChunk:
        n = len(frames) * SAMPLES_PER_FRAME
        start = frames[0] * SAMPLES_PER_FRAME if frames else 0
        t = (start + np.arange(n)) / SAMPLE_RATE
        samples = (0.3 * np.sin(2 * np.pi * freq * t)).astype(np.float32)
        return AudioChunk(
            samples=samples,
            codes=np.zeros((len(frames), 16), dtype=np.int64),
            index=index,
            start_frame=frames[0] if frames else 0,
            is_last=is_last,
            stop_reason=stop if is_last else None,
        )
