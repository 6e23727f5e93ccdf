"""The public front door: load a checkpoint, make voices, synthesize and stream speech.

    engine = Engine.load("Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice")        # or a local folder
    for chunk in engine.stream("Hello there.", voice="ryan"):            # AudioChunk generator
        sink.write(chunk.samples)
    result = engine.synthesize("Hello there.", voice="ryan")            # = concat of stream()
    voice = engine.make_voice("me.wav", ref_text="what I say in me.wav")  # Base models only

`voice` is a speaker name (CustomVoice), a VoicePrompt (Base), or None (VoiceDesign, which takes
`instruct` instead). Knows nothing about HTTP, the voice library's files or output formats.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from dataclasses import replace

import numpy as np
import torch

from ownvoice.engine.audio_out import AudioOut
from ownvoice.engine.decode_worker import decode_worker
from ownvoice.engine.forced import ForcedLogits, forced_logits
from ownvoice.engine.loading import LoadedModel, load_model
from ownvoice.engine.opentext import OpenText, TextSoFar
from ownvoice.engine.options import EngineConfig, SamplingOptions, SynthesisOptions
from ownvoice.engine.prompt import build_prompt
from ownvoice.engine.requests import resolve_request
from ownvoice.engine.results import AudioChunk, Synthesis
from ownvoice.engine.sequence import Sequence
from ownvoice.engine.voice import VoicePrompt
from ownvoice.engine.weights import WeightInfo, weight_info
from ownvoice.errors import AudioError, InvalidInput
from ownvoice.threads import choose_threads

log = logging.getLogger(__name__)

MIN_REFERENCE_SECONDS = 0.5


class Engine:
    """Owns the model on one device. Not thread-safe: one thread drives it, running one
    sequence (`stream`, `synthesize`) or a batch of them (`start`, `join`, `step`)."""

    def __init__(self, loaded: LoadedModel, config: EngineConfig):
        self._m = loaded
        self._loop = loaded.loop
        self._joined = 0  # sequences joined so far (their chunk boundaries are staggered)
        self.config = config
        self.source = loaded.source
        self.model_config = loaded.cfg
        self.model_type = loaded.cfg.model_type
        self.device = str(loaded.device)
        self.dtype = str(loaded.dtype).removeprefix("torch.")
        self.sample_rate = loaded.codec.sample_rate  # of the audio it makes (24 kHz)
        self.num_codebooks = loaded.cfg.talker.num_code_groups  # codes per frame (16)
        self._threads = torch.get_num_threads()  # this engine's CPU threads (set by load())
        self._worker, from_rows = decode_worker(
            config, self.device, self._threads, self.backend == "cpu-kernels"
        )
        self._out = AudioOut(self._worker, from_rows)  # frames to audio chunks

    @property
    def overlap(self) -> str:
        """Decoding beside the generation: "on", "off", or "batches" (while two or more
        sequences play; a stream alone decodes in line). See EngineConfig.overlap_decoder."""
        if self._worker is None:
            return "off"
        return "on" if self._out.overlap_from <= 1 else "batches"

    def _cores(self):
        """Computing on this thread: on the threads the decode worker leaves while it decodes."""
        return nullcontext() if self._worker is None else self._worker.leftover()

    @classmethod
    def load(cls, path_or_id: str, config: EngineConfig | None = None, **overrides) -> Engine:
        """Load a checkpoint folder or a Hugging Face hub id (downloaded to the HF cache).

        `overrides` are EngineConfig fields, e.g. `Engine.load(p, device="cpu", dtype="float32")`.
        """
        config = replace(config or EngineConfig(), **overrides)
        config.validate()
        threads = choose_threads(config.num_threads, default=torch.get_num_threads())
        if threads.count != torch.get_num_threads():
            torch.set_num_threads(threads.count)  # the CPU kernels share torch's pool
        log.info("CPU threads: %d (%s)", threads.count, threads.why)
        t0 = time.perf_counter()
        loaded = load_model(path_or_id, config)
        log.info(
            "loaded %s (%s) on %s in %s in %.1fs",
            path_or_id, loaded.cfg.model_type, loaded.device, loaded.dtype, time.perf_counter() - t0,
        )  # fmt: skip
        return cls(loaded, config)

    # ---- what the model offers -------------------------------------------------------------

    @property
    def supported_speakers(self) -> list[str]:
        return self.model_config.supported_speakers

    @property
    def supported_languages(self) -> list[str]:
        return self.model_config.supported_languages

    @property
    def instruct_supported(self) -> bool:
        return self.model_config.instruct_supported

    @property
    def speaker_embedding_size(self) -> int | None:
        """Numbers in a speaker's x-vector (Base models: the speaker encoder's output); None
        for models that clone no voices."""
        encoder = self.model_config.speaker_encoder
        return encoder.enc_dim if encoder is not None and self.model_type == "base" else None

    @property
    def model_fingerprint(self) -> str:
        """Identifies the checkpoint a VoicePrompt was made with ('' for non-Base models)."""
        return self._m.fingerprint

    @property
    def default_sampling(self) -> SamplingOptions:
        return self._m.default_sampling

    @property
    def backend(self) -> str:
        """What runs the decode loop: "cpu-kernels", "torch" (GPU, or CPU without our kernels)
        or "eager" (the parity path)."""
        return getattr(self._loop, "backend_name", "eager")

    @property
    def compiled(self) -> bool:
        """True when the loop's phases were torch.compile'd (EngineConfig.use_compile)."""
        return getattr(self._loop, "compiled", False)

    @property
    def phase_timer(self):
        """A PhaseTimer (ownvoice.engine.fast.timing) that times prefill, talker and code
        predictor per step while set; None (the default) times nothing."""
        return self._loop.timer

    @phase_timer.setter
    def phase_timer(self, timer) -> None:
        self._loop.timer = timer

    def new_decoder(self, ref_codes: torch.Tensor | None = None):
        """A fresh incremental speech decoder: (n, 16) codes -> (n * 1920,) float32 samples."""
        return self._m.new_stream_decoder(ref_codes)

    def weight_info(self) -> WeightInfo:
        """How the decode loop's weights are stored and how many bytes one frame reads."""
        return weight_info(self._m.model.talker, self.dtype)

    def forced_logits(
        self,
        text: str,
        codes,
        voice: str | VoicePrompt | None = None,
        instruct: str | None = None,
        options: SynthesisOptions | None = None,
    ) -> ForcedLogits:
        """Teacher-forced logits of every codebook position of `codes` (F, 16) for this request
        (see ownvoice.engine.forced)."""
        options = options or SynthesisOptions()
        req = resolve_request(self._m, text, voice, instruct, options)
        m = self._m
        with torch.inference_mode():
            prompt = self._prompt(req.ids, req.cond)
        codes = torch.as_tensor(codes).to(m.device)
        return forced_logits(m.model.talker, prompt, codes)

    def warmup(self) -> float:
        """Run one short synthesis so later requests pay no first-call costs; returns seconds."""
        t0 = time.perf_counter()
        voice = None
        if self.model_type == "custom_voice":
            voice = self.supported_speakers[0]
        elif self.model_type == "base":
            # a second of low noise stands in for a reference clip
            rate = self.sample_rate
            noise = np.random.default_rng(0).normal(0, 0.05, rate).astype(np.float32)
            voice = self.make_voice((noise, rate), x_vector_only=True)
        opts = SynthesisOptions(sampling=SamplingOptions.greedy(), max_frames=4, seed=0)
        self.synthesize("Hello.", voice=voice, options=opts)
        return time.perf_counter() - t0

    # ---- voices -------------------------------------------------------------------------------

    @torch.inference_mode()
    def make_voice(
        self, audio, ref_text: str | None = None, x_vector_only: bool = False
    ) -> VoicePrompt:
        """Encode a reference clip (path, bytes, or (np.ndarray, sample_rate)) into a VoicePrompt.

        ICL mode (default) also needs `ref_text`, the transcript of the clip; x-vector-only
        mode uses just the speaker embedding.
        """
        from ownvoice.audio import load_audio, resample

        if self.model_type != "base":
            raise InvalidInput(
                f"voice cloning needs a Base checkpoint; {self.source} is a {self.model_type} model",
                param="voice",
            )
        if not x_vector_only and not (ref_text and ref_text.strip()):
            raise InvalidInput(
                "ref_text (the transcript of the reference audio) is required for voice cloning "
                "in ICL mode; pass it, or use x-vector-only mode",
                param="ref_text",
            )
        wav, sr = load_audio(audio)
        if len(wav) < MIN_REFERENCE_SECONDS * sr:
            raise AudioError(
                f"reference audio is {len(wav) / sr:.2f} s long; at least "
                f"{MIN_REFERENCE_SECONDS} s is needed (3-10 s of clear speech works best)",
                param="ref_audio",
            )
        rate = self.model_config.speaker_encoder.sample_rate  # what the speaker encoder hears
        wav24 = resample(wav, sr, rate) if sr != rate else wav
        x = torch.from_numpy(np.ascontiguousarray(wav24)).to(self._m.device)
        embedding = self._m.model.speaker_encoder.embed(x)  # mel in float32, as upstream
        codes = None
        if not x_vector_only:
            codes = self._m.codec.encoder(x[None].to(self._m.dtype))[0].T.contiguous()  # (T, 16)
            # the speech decoder primed with the reference now, not in the voice's first request
            self._m.prime(codes.cpu())
        return VoicePrompt(
            speaker_embedding=embedding.float().cpu(),
            ref_codes=None if codes is None else codes.cpu(),
            ref_text=None if x_vector_only else ref_text,
            model_fingerprint=self._m.fingerprint,
        )

    # ---- speech: one sequence at a time, or many through step() -------------------------------

    def start(
        self,
        text: str,
        voice: str | VoicePrompt | None = None,
        instruct: str | None = None,
        options: SynthesisOptions | None = None,
        tag: object = None,
    ) -> Sequence:
        """Validate a request and build its prompt; `join()` it to run it (alone or batched)."""
        options = options or SynthesisOptions()
        options.validate()
        req = resolve_request(self._m, text, voice, instruct, options)
        with torch.inference_mode():
            prompt = self._prompt(req.ids, req.cond)
        return self._sequence(req, prompt, options, tag)

    def start_open(
        self,
        source: Callable[[], TextSoFar],
        voice: str | VoicePrompt | None = None,
        instruct: str | None = None,
        options: SynthesisOptions | None = None,
        tag: object = None,
    ) -> Sequence:
        """A sequence whose text is still being written (engine/opentext.py): `source()` gives
        the text so far. It can join once `startable()`; a row whose text runs out sits steps
        out until more arrives. The codes are those of `start()` with the final text in the
        streaming text mode (on the fast path), however the text was cut and timed."""
        options = options or SynthesisOptions()
        if options.text_mode == "non-streaming":
            raise InvalidInput(
                "text that is spoken while it arrives needs the streaming text mode",
                param="text_mode",
            )
        options = options.with_(text_mode="streaming")
        options.validate()
        # the voice, language, sampling and reference checks, on a stand-in text
        req = resolve_request(self._m, "a", voice, instruct, options)

        def build(ids, text_open: bool):
            return self._prompt(ids, req.cond, text_open, row_invariant=True)

        m = self._m

        def cap(text: str) -> int:
            return options.frames_for(text, m.default_max_frames)

        text = OpenText(source, m.tokenizer, m.model.talker, build, req.cond, req.ids, cap)
        return self._sequence(req, None, options, tag, text)

    def startable(self, seq: Sequence) -> bool:
        """Whether `seq` can join: always for a plain one; for an open text, once enough of it
        has arrived (one stable token; an ICL clone's reference frames + 1)."""
        if seq.prompt is None:
            seq.refresh_text()
        return seq.prompt is not None

    @property
    def waiting_for_text(self) -> bool:
        """True when the last step advanced no row because every row waits for its text
        (the caller may sleep until text arrives instead of stepping again)."""
        return bool(self._loop.rows) and self._loop.waiting == len(self._loop.rows)

    def _prompt(self, ids, cond, text_open: bool = False, row_invariant: bool | None = None):
        m = self._m
        if row_invariant is None:
            row_invariant = self.config.fast
        return build_prompt(m.model.talker, m.cfg, ids, cond, row_invariant, text_open)

    def _sequence(self, req, prompt, options, tag, text=None) -> Sequence:
        m = self._m
        generator = None
        if options.seed is not None:
            generator = torch.Generator(m.device).manual_seed(options.seed)
        return Sequence(
            prompt=prompt,
            sampling=req.sampling,
            max_frames=req.max_frames,
            generator=generator,
            decoder=m.new_stream_decoder(req.cond.ref_codes),
            first_chunk_frames=options.first_chunk_frames,
            chunk_frames=options.chunk_frames,
            tag=tag,
            text=text,
            codebooks=self.num_codebooks,
            sample_rate=self.sample_rate,
        )

    @property
    def max_batch(self) -> int:
        """How many sequences can run at once (EngineConfig.max_batch)."""
        return self._loop.max_batch

    @property
    def running(self) -> list[Sequence]:
        """The sequences in the batch now (each is one row of every step)."""
        return list(self._loop.rows)

    @property
    def exact_batching(self) -> bool:
        """True when a sequence's codes do not depend on what else is in the batch."""
        return self._loop.exact_batching

    def join(self, seq: Sequence) -> None:
        """Prefill `seq`, make its first frame at once (so its first chunk is ready without
        waiting for a batched step: read it with `ready_chunks()`) and add it to the batch.
        Raises RuntimeError when the batch is full (see `max_batch`)."""
        if not self.startable(seq):
            raise RuntimeError("this sequence's text has not started yet; see startable()")
        if self._loop.rows:  # alone, chunk boundaries need no spreading
            seq.stagger = self._joined % seq.chunk_frames
        self._joined += 1
        with self._cores():
            event = self._loop.join(seq)
        if event is not None:
            self._out.keep(event.seq, event.frame, event.stop_reason)

    def step(self) -> Iterator[tuple[Sequence, AudioChunk]]:
        """Advance every running sequence by one frame; yields the audio chunks now due.

        The frames are made at once; their audio is decoded as the iterator is read, first
        for sequences that have no audio yet (a request that just joined hears its first
        chunk without waiting for the others). A caller may stop reading early: what it did
        not read stays pending and comes out, in bigger chunks, from a later step (a scheduler
        does so to let a waiting request join sooner). A sequence's last chunk has `is_last`
        set. A sequence that fails on its own (its text, its cache, its decoder) ends with an
        empty last chunk whose stop_reason is "error" (the exception in `seq.error`); the
        others go on. Not thread-safe: one thread drives an engine (the service's scheduler, or
        `stream()`).
        """
        with self._cores():
            events = self._loop.step()
        for event in events:
            self._out.keep(event.seq, event.frame, event.stop_reason)
        return self.ready_chunks()

    @property
    def first_chunks_due(self) -> bool:
        """Whether a sequence that has no audio yet has its first chunk due (step() yields
        those first)."""
        return self._out.first_chunks_due

    def ready_chunks(self) -> Iterator[tuple[Sequence, AudioChunk]]:
        """The chunks due now, without a step (a joined sequence's first; what a step left),
        decoded as read, sequences without audio first (engine/audio_out.py). With the decode
        worker, a playing sequence's later chunks come a step or more late; a sequence that
        ended has all of its audio out by the end of this iterator."""
        return self._out.ready(generating=bool(self._loop.rows))

    def cancel_all(self) -> list[tuple[Sequence, AudioChunk]]:
        """End every running sequence now; returns the chunks every sequence had not had yet
        (their pending frames decoded), down to each one's last."""
        for event in self._loop.cancel_all():
            self._out.keep(event.seq, None, event.stop_reason)
        return self._out.cancel_all()

    def stream(
        self,
        text: str,
        voice: str | VoicePrompt | None = None,
        instruct: str | None = None,
        options: SynthesisOptions | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> Iterator[AudioChunk]:
        """Yield audio as it is generated. `should_stop()` is polled between frames.

        Chunks follow `options.first_chunk_frames` then `options.chunk_frames`; every chunk's
        samples are final (the decoder is causal and exact), and their concatenation is
        `synthesize(...)`'s audio. This is a batch of one sequence through `step()`.
        """
        seq = self.start(text, voice, instruct, options)
        return self._run_alone(seq, should_stop)

    def _run_alone(self, seq: Sequence, should_stop) -> Iterator[AudioChunk]:
        if self._loop.rows or self._out.pending:
            raise RuntimeError(
                "this engine is running a batch; use join()/step() from the thread that drives it"
            )
        if should_stop is not None and should_stop():
            seq.cancel()
        self.join(seq)
        try:
            chunks = self.ready_chunks()
            while True:
                for _, chunk in chunks:
                    if seq.error is not None:  # it failed on its own: the caller hears why
                        raise seq.error
                    yield chunk
                    if chunk.is_last:
                        return
                if should_stop is not None and should_stop():
                    seq.cancel()
                chunks = self.step()
        finally:
            if not seq.finished:  # the caller stopped reading: free the row
                self.cancel_all()

    def synthesize(
        self,
        text: str,
        voice: str | VoicePrompt | None = None,
        instruct: str | None = None,
        options: SynthesisOptions | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> Synthesis:
        """The whole utterance at once: the concatenation of `stream(...)`."""
        options = (options or SynthesisOptions()).with_(first_chunk_frames=64, chunk_frames=64)
        chunks = list(self.stream(text, voice, instruct, options, should_stop))
        return Synthesis(
            audio=np.concatenate([c.samples for c in chunks]).astype(np.float32, copy=False),
            sample_rate=self.sample_rate,
            codes=np.concatenate([c.codes for c in chunks]).reshape(-1, self.num_codebooks),
            stop_reason=chunks[-1].stop_reason,
        )
