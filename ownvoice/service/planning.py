"""From a speech request to what a scheduler runs: voice, options, text pieces, caps.

Front ends describe a request as a `SpeechInput` (the HTTP edge converts its pydantic bodies).
Planning is cheap and happens before admission (bad requests never take a queue place); the
expensive parts (decoding a reference, encoding a voice prompt, generating) happen on the
engine's scheduler thread, after admission: `plan_pieces` gives the Sequences to run there.

Long input is split at sentence boundaries into pieces of at most limits.max_chunk_chars, each
generated in turn into one continuous stream. Text that is still being written when the
request starts (the WebSocket, Wyoming's streaming text) comes through a StreamedText instead of
a list of pieces: `plan(req, streamed=True)`, then push to `plan.pieces`. Each piece's frame cap
is the engine's: derived from its text (engine/options.py `frame_cap`) unless the request gives
`max_frames`.

Every text field of a request must be valid Unicode (`check_unicode`): JSON can carry a lone
UTF-16 surrogate ("\\ud800"), which the tokenizer cannot take. Planning checks each field;
a front end that takes text after planning (the WebSocket's input.text, Wyoming's
synthesize-chunk) checks each piece with the same function.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import logging
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

from ownvoice.engine.options import SamplingOptions, SynthesisOptions
from ownvoice.errors import InvalidInput, PayloadTooLarge
from ownvoice.languages import KNOWN as KNOWN_LANGS
from ownvoice.languages import check_language, model_language
from ownvoice.service.designs import DEFAULT_DESCRIPTION
from ownvoice.service.generation import PENDING
from ownvoice.service.library import check_voice_fields
from ownvoice.service.livetext import LiveText, StreamedText, split_input
from ownvoice.service.tasks import check_embedding_size, check_role, resolve_task
from ownvoice.service.textfeed import TextFeed
from ownvoice.service.voicemap import VoiceChoice

log = logging.getLogger("ownvoice.server")

_SURROGATE = re.compile(r"[\ud800-\udfff]")


def check_unicode(text: str, param: str) -> str:
    """`text`, refused (InvalidInput naming `param`) when it holds a lone UTF-16 surrogate: a
    string that is not valid Unicode and that UTF-8 cannot encode, so the tokenizer fails on it.
    (A pair written as two JSON escapes, "\\ud83d\\ude00", arrives as its one character.)"""
    bad = _SURROGATE.search(text)
    if bad is not None:
        raise InvalidInput(
            f"{param} is not valid Unicode: it holds a lone UTF-16 surrogate "
            f"(\\u{ord(bad.group()):04x}) at character {bad.start()}; send UTF-8 text",
            param=param,
        )
    return text


@dataclass(frozen=True)
class SpeechInput:
    """A speech request, whatever it came through (OpenAI's fields plus Qwen3-TTS's)."""

    input: str
    voice: str = ""  # OpenAI name, preset speaker, clone:<name>, design
    # None: SSML when the input starts with <speak>; "text": plain (pause tags still read);
    # "ssml": must be SSML (service/markup.py)
    input_format: str | None = None
    model: str | None = None
    instructions: str | None = None  # style (CustomVoice 1.7B) or the voice (VoiceDesign)
    response_format: str = "mp3"
    speed: float = 1.0
    stream_format: str = "audio"
    language: str | None = None
    seed: int | None = None
    temperature: float | None = None
    top_k: int | None = None
    top_p: float | None = None
    max_frames: int | None = None
    x_vector_only_mode: bool | None = None
    # one-shot cloning (no library voice): base64 clip and its transcript
    ref_audio: str | None = None
    ref_text: str | None = None
    # vLLM-Omni's: a speaker's x-vector, cloned in x-vector-only mode (tasks.py)
    speaker_embedding: tuple[float, ...] | None = None
    task_type: str | None = None  # "CustomVoice" | "VoiceDesign" | "Base" (vLLM-Omni)
    text_mode: str | None = None  # "streaming" | "non-streaming"; None = the model type's
    first_chunk_frames: int | None = None  # frames in the first streamed chunk; None = 1
    # in-process front ends (`ownvoice say`, the audiobook tool, bench): a voice already encoded
    # (a VoicePrompt, for the clone model), and more SamplingOptions fields (do_sample,
    # repetition_penalty, sub_*) than the API takes
    voice_prompt: object | None = None
    sampling: dict = field(default_factory=dict)


@dataclass
class SpeechPlan:
    """Everything decided before admission; `plan_pieces` runs it on the engine thread."""

    choice: VoiceChoice
    # the text, or the text as it arrives while it is spoken: word by word (LiveText, in the
    # streaming text mode) or sentence by sentence (TextFeed, in the non-streaming one)
    pieces: list[str] | StreamedText
    # each piece's: language, seed, chunks, text mode, and the request's frame cap per piece
    # (None: the engine derives one from the piece's text)
    options: SynthesisOptions
    instruct: str | None
    response_format: str
    speed: float
    stream_format: str
    input_chars: int
    sampling: dict = field(default_factory=dict)  # the request's SamplingOptions changes
    x_vector_only: bool = False
    reference: bytes | None = None  # one-shot clone: the uploaded clip
    ref_text: str | None = None
    ignored: list[str] = field(default_factory=list)

    @property
    def streamed(self) -> bool:
        return isinstance(self.pieces, StreamedText)

    @property
    def chars(self) -> int:
        """Characters of input: all of it, or what has arrived of a streamed text."""
        return self.pieces.received if self.streamed else self.input_chars

    @property
    def piece_count(self) -> int:
        return len(self.pieces.given if self.streamed else self.pieces)

    def piece_options(self, engine) -> SynthesisOptions:
        """Options for a piece: the checkpoint's sampling defaults with the request's changes."""
        base = engine.default_sampling if engine is not None else self.options.sampling
        return self.options.with_(sampling=replace(base or SamplingOptions(), **self.sampling))


class SpeechPlanner:
    def __init__(self, config, pool, voicemap, library):
        self.config = config  # ServiceConfig
        self.pool = pool
        self.voicemap = voicemap
        self.library = library

    def plan(self, req: SpeechInput, streamed: bool = False) -> SpeechPlan:
        """With `streamed`, `req.input` is ignored: the text is pushed to the plan's pieces (a
        StreamedText) as it arrives."""
        _check_text_fields(req)
        req = resolve_task(req)
        text = "" if streamed else self.check_input(req.input)
        choice = self._choose(req)
        instruct, ignored = self._instruct(req, choice)
        x_vector_only, reference, ref_text = False, None, None
        if req.ref_audio is not None:
            reference, ref_text, x_vector_only = self._reference(req)
        elif choice.profile is not None:
            x_vector_only = self._clone_mode(req.x_vector_only_mode, choice)
        default_language = None
        if choice.profile is not None:
            default_language = choice.profile.language
        if choice.design is not None:
            default_language = choice.design.language
        options = self._options(req, default_language, choice.worker.engine)
        if choice.design is not None and req.seed is None and choice.design.seed is not None:
            options = options.with_(seed=choice.design.seed)  # a fixed seed: the same voice
        options, pieces = self._pieces(text, streamed, options, choice.worker)
        return SpeechPlan(
            choice=choice,
            pieces=pieces,
            options=options,
            sampling=_sampling(req),
            instruct=instruct,
            response_format=req.response_format,
            speed=req.speed,
            stream_format=req.stream_format,
            input_chars=len(text),
            x_vector_only=x_vector_only,
            reference=reference,
            ref_text=ref_text,
            ignored=ignored,
        )

    def _choose(self, req: SpeechInput) -> VoiceChoice:
        """The voice and the model that speaks it: a clip to clone (ref_audio), a voice already
        encoded (voice_prompt), or a named voice."""
        if req.ref_audio is not None or req.voice_prompt is not None:
            # an unknown model is a 404 here as everywhere (vLLM-Omni checks it first too)
            named = self.voicemap.model_worker(req.model)
            worker = self.voicemap.serving("clone", named, param="ref_audio")
            if req.speaker_embedding is not None:
                check_embedding_size(req.voice_prompt, worker.engine)
            label = "voice-clone" if req.voice_prompt is None else (req.voice or "voice-prompt")
            return VoiceChoice(worker, "clone", label, prompt=req.voice_prompt)
        choice = self.voicemap.choose(req.model, req.voice)
        check_role(req.task_type, choice.role, req.voice)
        return choice

    def _instruct(self, req: SpeechInput, choice: VoiceChoice) -> tuple[str | None, list[str]]:
        """The instruction the model gets, and the request fields it ignores."""
        style = req.instructions
        instruct = style.strip() if style and style.strip() else None
        if choice.design is not None:  # design:<name>: the saved description, then the request's
            instruct = choice.design.instructions + (f" {instruct}" if instruct else "")
        if choice.role == "design" and instruct is None:  # a client that cannot describe it
            instruct = DEFAULT_DESCRIPTION
        engine = choice.worker.engine
        if choice.role == "clone" or (
            choice.role == "presets" and engine is not None and not engine.instruct_supported
        ):
            if instruct is not None:  # clients send it by default; this model has no use for it
                return None, ["instructions"]
        return instruct, []

    def _reference(self, req: SpeechInput) -> tuple[bytes, str | None, bool]:
        """A one-shot clone's clip, its transcript and its mode."""
        reference = self._decode_base64(req.ref_audio or "")
        ref_text, _ = check_voice_fields(req.ref_text, None)  # the rules of a voice upload
        x_vector_only = bool(req.x_vector_only_mode)
        if not x_vector_only and ref_text is None:
            raise InvalidInput(
                "ref_text (the transcript of ref_audio) is needed for ICL cloning; give it, or "
                "set x_vector_only_mode to true",
                param="ref_text",
            )
        return reference, ref_text, x_vector_only

    def _pieces(self, text: str, streamed: bool, options: SynthesisOptions, worker):
        """The text as pieces: split now, or as it arrives (word by word in the streaming text
        mode, whole sentences in the non-streaming one)."""
        limits = self.config.limits
        if not streamed:
            return options, split_input(text, limits.max_chunk_chars, options.language)
        kind = TextFeed if options.text_mode == "non-streaming" else LiveText
        feed = kind(limits.max_chunk_chars, options.language, limits.max_input_chars, worker.wake)
        if feed.opens_pieces:
            options = options.with_(text_mode="streaming")
        return options, feed

    # -- checks -------------------------------------------------------------------------------

    def check_input(self, text: str, param: str = "input") -> str:
        limit = self.config.limits.max_input_chars
        if not text.strip():
            raise InvalidInput(f"{param} is empty; send the text to speak", param=param)
        if len(text) > limit:
            raise InvalidInput(
                f"{param} is {len(text)} characters; the limit is {limit} (limits.max_input_chars)",
                param=param,
            )
        return text

    def _clone_mode(self, requested: bool | None, choice: VoiceChoice) -> bool:
        profile = choice.profile
        if requested is False and profile.ref_text is None:
            raise InvalidInput(
                f"voice {profile.voice_id} has no ref_text, so only x_vector_only_mode works",
                param="x_vector_only_mode",
            )
        if requested is not None:
            return requested
        if not profile.x_vector_only and profile.ref_text is None:
            log.warning("voice %s has no ref_text; cloning from the timbre alone", profile.voice_id)
            return True
        return profile.x_vector_only

    def _options(self, req: SpeechInput, default_language: str | None, engine) -> SynthesisOptions:
        asked = req.language if model_language(req.language) else default_language
        language = check_language(asked, engine.supported_languages if engine else KNOWN_LANGS)
        options = SynthesisOptions(
            language=language,
            sampling=SamplingOptions(**_sampling(req)),
            seed=req.seed,
            max_frames=req.max_frames,
            # the first chunk is one frame: a request joining a busy batch is heard after one
            # step; the rest come in chunks of optimization.streaming.emit_every_frames
            first_chunk_frames=req.first_chunk_frames or 1,
            chunk_frames=self.config.chunk_frames,
            text_mode=req.text_mode,
        )
        options.validate()
        return options

    def _decode_base64(self, data: str) -> bytes:
        limit = int(self.config.limits.max_upload_mb * 1024 * 1024)
        if data.startswith("data:"):
            data = data.partition(",")[2]
        if len(data) * 3 // 4 > limit:
            raise PayloadTooLarge(
                f"ref_audio is larger than {self.config.limits.max_upload_mb:g} MB "
                "(limits.max_upload_mb)",
                param="ref_audio",
            )
        try:
            return base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError) as e:
            raise InvalidInput(f"ref_audio is not valid base64: {e}", param="ref_audio") from e


def _check_text_fields(req: SpeechInput) -> None:
    """Every text field valid Unicode, before anything reads, logs or echoes one."""
    for f in dataclasses.fields(req):
        value = getattr(req, f.name)
        if isinstance(value, str):
            check_unicode(value, f.name)


def _sampling(req: SpeechInput) -> dict:
    fields = ("temperature", "top_k", "top_p")
    return {**req.sampling, **{k: getattr(req, k) for k in fields if getattr(req, k) is not None}}


def plan_pieces(plan: SpeechPlan, pool, library) -> Callable[[object], Iterator]:
    """What the scheduler runs: on the engine's thread, get the voice, then one Sequence per
    text piece, in order (PENDING while a streamed piece cannot begin yet)."""

    def pieces(engine) -> Iterator:
        voice = _voice(plan, engine, pool, library)
        options = plan.piece_options(engine)
        if plan.streamed:
            yield from _streamed_pieces(plan, engine, voice, options)
            return
        for piece in plan.pieces:
            yield engine.start(piece, voice=voice, instruct=plan.instruct, options=options)

    return pieces


def _streamed_pieces(plan: SpeechPlan, engine, voice, options) -> Iterator:
    """A sequence per piece of a streamed text: started on its first words (the text is read as
    it arrives) or once the piece is whole."""
    text: StreamedText = plan.pieces
    k = 0
    while (now := text.piece(k)) is not None:
        if now is PENDING:
            yield PENDING
            continue
        if not text.opens_pieces:
            yield engine.start(now.text, voice=voice, instruct=plan.instruct, options=options)
            k += 1
            continue

        def source(k=k, last=[now]):  # noqa: B006 (each piece's own last known text)
            now = text.piece(k)
            if now is None or now is PENDING:  # cannot happen once piece k has begun; if it
                return replace(last[0], final=True)  # did, end the piece where it was
            last[0] = now
            return now

        seq = engine.start_open(source, voice=voice, instruct=plan.instruct, options=options)
        while not engine.startable(seq):
            if text.piece(k) is None:  # the text ended with nothing to say
                return
            yield PENDING
        yield seq
        k += 1


def _voice(plan: SpeechPlan, engine, pool, library):
    choice = plan.choice
    if choice.role == "presets":
        return choice.speaker
    if choice.role == "design":
        return None
    if choice.prompt is not None:
        return choice.prompt
    if choice.profile is not None:
        key = pool.model_key(choice.worker)
        return library.prompt(choice.profile, engine, key, plan.x_vector_only)
    from ownvoice.errors import AudioError
    from ownvoice.service.library import load_reference

    try:
        samples, rate = load_reference(plan.reference)
    except AudioError as e:
        raise AudioError(f"ref_audio: {e.message}", param="ref_audio") from e
    return engine.make_voice(
        (samples, rate), ref_text=plan.ref_text, x_vector_only=plan.x_vector_only
    )
