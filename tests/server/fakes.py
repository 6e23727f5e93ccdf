"""FakeEngine: a test double with the Engine interface, deterministic audio and counters.

It implements the batch API the service drives (start / join / step / cancel_all, see
ownvoice/service/engine_protocol.py) with the engine's own `Sequence`, so chunking and the last
chunk behave exactly as with a real model. Each frame is 1920 samples (80 ms) of a sine whose
pitch depends on the voice, with continuous phase; a request makes `frames_per_char` frames per
input character (runaway: always its cap), capped as Engine.start caps: options.max_frames,
else engine.options.frame_cap of the text. `frame_delay`
sleeps once per step (a step advances every running row), so tests can hold a generation open;
`gated=True` instead makes each step wait until the test allows it (`allow(n)`): for tests whose
subject is the order of events, not time. A cancelled row leaves at the next step, as in the
real engine (unless `ignore_stop`).
"""

from __future__ import annotations

import math
import threading
import time
import zlib

import numpy as np
import torch

from ownvoice.engine.options import SamplingOptions, SynthesisOptions
from ownvoice.engine.results import SAMPLE_RATE, SAMPLES_PER_FRAME, Synthesis
from ownvoice.engine.sequence import Sequence
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
        max_batch: int = 16,
        gated: bool = False,
    ):
        self.model_type = model_type
        self.device = device
        self.dtype = "float32"
        self.sample_rate = SAMPLE_RATE
        self.frames_per_char = frames_per_char
        self.frame_delay = frame_delay
        self.runaway = runaway
        self.ignore_stop = ignore_stop  # a stuck engine: never looks at cancellation
        self.max_batch = max_batch
        self.default_sampling = SamplingOptions()
        self._instruct = instruct_supported
        self.model_fingerprint = f"fake-{model_type}"
        self.speaker_embedding_size = 8 if model_type == "base" else None  # as make_voice's
        self.fail_after: int | None = None  # a row fails after this many frames
        self.lock = threading.Lock()
        self.calls: list[dict] = []  # one per start(): text, voice, instruct, options
        self.make_voice_calls = 0
        self.cancelled = 0
        self.frames_generated = 0
        self.warmed = 0
        self.threads: set[str] = set()
        self.rows: list[Sequence] = []
        self.audio: list[Sequence] = []  # sequences with audio not yet decoded
        self.max_active = 0  # most rows in one step
        self.steps = 0
        self.gate = threading.Semaphore(0) if gated else None
        self.batches: list[int] = []  # rows in each step, in order

    def allow(self, steps: int = 1) -> None:
        """Let `steps` more steps happen (gated engines)."""
        self.gate.release(steps)

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

    @property
    def running(self) -> list[Sequence]:
        return list(self.rows)

    @property
    def active(self) -> int:
        return len(self.rows)

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

    def start(self, text, voice=None, instruct=None, options=None, tag=None) -> Sequence:
        options = options or SynthesisOptions()
        options.validate()
        self._check_voice(voice, instruct)
        self.threads.add(threading.current_thread().name)
        call = {"text": text, "voice": voice, "instruct": instruct, "options": options}
        with self.lock:
            self.calls.append(call)
        cap = options.frames_for(text, 1 << 20)  # the engine's own cap (Engine.start)
        wanted = cap if self.runaway else max(1, math.ceil(len(text) * self.frames_per_char))
        seq = Sequence(
            prompt=None,
            sampling=options.sampling or self.default_sampling,
            max_frames=min(wanted, cap),
            generator=None,
            decoder=_SineDecoder(150 + zlib.crc32(repr(voice).encode()) % 300),
            first_chunk_frames=options.first_chunk_frames,
            chunk_frames=options.chunk_frames,
            tag=tag,
        )
        seq.fake_stop = "eos" if wanted <= seq.max_frames else "max_frames"
        call["frames"] = seq.max_frames  # what it will generate
        seq.fake_call = call
        return seq

    def start_open(self, source, voice=None, instruct=None, options=None, tag=None) -> Sequence:
        """Like Engine.start_open: frames_per_char frames per character known so far; a row
        whose text runs out waits (makes no frame) until more arrives or it is final."""
        options = options or SynthesisOptions()
        if options.text_mode == "non-streaming":
            raise InvalidInput("needs the streaming text mode", param="text_mode")
        seq = self.start("x", voice, instruct, options.with_(text_mode="streaming"), tag)
        seq.fake_source = source
        seq.max_frames = options.max_frames or 1 << 20
        return seq

    def startable(self, seq: Sequence) -> bool:
        source = getattr(seq, "fake_source", None)
        return source is None or bool(source().text.strip())

    @property
    def waiting_for_text(self) -> bool:
        return bool(self.rows) and all(self._waits(seq) for seq in self.rows)

    def _waits(self, seq: Sequence) -> bool:
        """An open row with no frame left to make for its text so far."""
        source = getattr(seq, "fake_source", None)
        if source is None or seq.cancelled:
            return False
        now = source()
        frames = max(1, math.ceil(len(now.text) * self.frames_per_char))
        if now.final:
            seq.max_frames = min(seq.max_frames, frames)
            seq.fake_stop = "eos"
            seq.fake_source = None
            seq.fake_call["text"] = now.text
            return False
        return seq.frames >= frames

    def join(self, seq: Sequence) -> None:
        if len(self.rows) >= self.max_batch:
            raise RuntimeError(f"batch full ({self.max_batch} rows); wait for a row to leave")
        seq.slot = len(self.rows)
        self.rows.append(seq)
        self.max_active = max(self.max_active, len(self.rows))

    def step(self):
        """Like Engine.step: frames now, their chunks decoded as the iterator is read."""
        if self.rows:
            if self.gate is not None and not self.gate.acquire(timeout=60):
                raise TimeoutError("the test allowed no step for 60 s")
            self.steps += 1
            self.batches.append(len(self.rows))
            self.threads.add(threading.current_thread().name)
            if self.frame_delay:
                time.sleep(self.frame_delay)
        for seq in list(self.rows):
            if self._waits(seq):
                continue
            if seq.cancelled and not self.ignore_stop:
                self.cancelled += 1
                self._leave(seq)
                seq.add(None, "cancelled")
            elif self.fail_after is not None and seq.frames >= self.fail_after:
                self._leave(seq)  # a fault of this row alone, as Engine's fault isolation ends it
                seq.fail(RuntimeError("the fake decoder failed"))
                seq.add(None, "error")
            else:
                seq.frames += 1
                self.frames_generated += 1
                stop = seq.fake_stop if seq.frames >= seq.max_frames else None
                if stop:
                    self._leave(seq)
                seq.add(torch.zeros(16, dtype=torch.long), stop)
            if seq not in self.audio:
                self.audio.append(seq)
        return self._chunks()

    def ready_chunks(self):
        return self._chunks()

    def _chunks(self):
        for seq in sorted(self.audio, key=lambda s: s.started_audio):
            while seq.due():
                chunk = seq.chunk()
                if seq.finished:
                    self.audio.remove(seq)
                yield seq, chunk

    @property
    def first_chunks_due(self) -> bool:
        return any(seq.due() and not seq.started_audio for seq in self.audio)

    def cancel_all(self):
        for seq in list(self.rows):
            self._leave(seq)
            seq.add(None, "cancelled")
            if seq not in self.audio:
                self.audio.append(seq)
        out = []
        for seq in self.audio:
            while not seq.finished:
                out.append((seq, seq.chunk()))
        self.audio = []
        return out

    def stream(self, text, voice=None, instruct=None, options=None):
        """One request alone, as Engine.stream does it."""
        seq = self.start(text, voice, instruct, options)
        self.join(seq)
        while True:
            for s, chunk in self.step():
                if s is seq:
                    yield chunk
                    if chunk.is_last:
                        return

    def synthesize(self, text, voice=None, instruct=None, options=None) -> Synthesis:
        chunks = list(self.stream(text, voice, instruct, options))
        return Synthesis(
            audio=np.concatenate([c.samples for c in chunks]),
            codes=np.concatenate([c.codes for c in chunks]),
            stop_reason=chunks[-1].stop_reason,
        )

    # -- internals ---------------------------------------------------------------------------

    def _leave(self, seq: Sequence) -> None:
        self.rows.remove(seq)
        seq.slot = None

    def _check_voice(self, voice, instruct) -> None:
        if self.model_type == "custom_voice" and voice not in SPEAKERS:
            raise InvalidInput(f"speaker {voice!r} is not supported", param="voice")
        if self.model_type == "base" and not isinstance(voice, VoicePrompt):
            raise InvalidInput("a Base model needs a VoicePrompt", param="voice")
        if self.model_type == "voice_design" and not instruct:
            raise InvalidInput("voice design needs instruct", param="instruct")


class _SineDecoder:
    """codes (n, 16) -> n frames of a sine with continuous phase."""

    def __init__(self, freq: float):
        self.freq, self.frames = freq, 0

    def __call__(self, codes: torch.Tensor) -> np.ndarray:
        n = codes.shape[0] * SAMPLES_PER_FRAME
        t = (self.frames * SAMPLES_PER_FRAME + np.arange(n)) / SAMPLE_RATE
        self.frames += codes.shape[0]
        return (0.3 * np.sin(2 * np.pi * self.freq * t)).astype(np.float32)
