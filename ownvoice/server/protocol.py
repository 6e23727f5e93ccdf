"""Wire types of the HTTP API: OpenAI's speech request plus ownvoice's Qwen3-TTS extensions.

Field order and names follow the OpenAI API reference (audio/createSpeech); extensions follow
vLLM-Omni's names where they exist (language, x_vector_only_mode, max_new_tokens). Unknown
fields are accepted and ignored (clients pass extras through `extra_body`); they are logged at
debug level. pydantic lives here and in the routes, nowhere else.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AliasChoices, BaseModel, BeforeValidator, ConfigDict, Field, model_validator
from pydantic.json_schema import SkipJsonSchema

from ownvoice.engine.options import MAX_TEMPERATURE, TALKER_VOCAB
from ownvoice.service.library import MAX_REF_TEXT_CHARS, NAME_PATTERN
from ownvoice.service.planning import SpeechInput
from ownvoice.service.tasks import MAX_EMBEDDING_VALUES

ResponseFormat = Literal["mp3", "opus", "aac", "flac", "wav", "pcm"]
StreamFormat = Literal["audio", "sse"]
MIN_SEED, MAX_SEED = -(2**63), 2**64 - 1  # what torch.Generator.manual_seed takes

# At least one character that str.strip() keeps: the server strips text and refuses what is left
# blank. Spelled out, not `\S`: JSON Schema's (ECMA-262) `\s` misses U+001C-U+001F and U+0085
# and takes U+FEFF, which strip() treats the other way round.
NOT_BLANK = r"[^\t-\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"


def _integer(value):
    """JSON Schema's integer: 3 and 3.0, not true, "3" or 3.5 (pydantic's lax mode takes the
    first two, strict mode refuses 3.0)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("Input should be an integer")
    if isinstance(value, float):
        if not value.is_integer():
            raise ValueError("Input should be an integer")
        return int(value)
    return value


def integer(**limits) -> type:
    """An integer field with JSON Schema's meaning and these limits (ge=, le=)."""
    return Annotated[int, Field(**limits), BeforeValidator(_integer)]


class OpenAIBaseModel(BaseModel):
    # strict: `"seed": true` or `"speed": "1"` is refused, not read as 1 (JSON numbers still
    # fill float fields)
    model_config = ConfigDict(extra="allow", strict=True)


class VoiceRef(OpenAIBaseModel):
    """A custom voice by id, as in OpenAI's `"voice": {"id": "voice_1234"}`."""

    id: str


class SpeechOptions(OpenAIBaseModel):
    response_format: ResponseFormat = "mp3"
    """mp3, opus (Ogg), aac (ADTS), flac, wav (streaming header) or pcm (24 kHz s16le mono)."""
    speed: float = Field(1.0, ge=0.25, le=4.0)
    """0.25-4.0; pitch is kept (time-stretch after generation)."""
    stream_format: StreamFormat = "audio"
    """`audio`: the file's bytes as they are made; `sse`: speech.audio.delta/done events."""

    # ownvoice extensions (Qwen3-TTS)
    # `ssml`: the input is an SSML document; `text`: plain text; default: SSML when the input
    # starts with <speak>; pause tags ([pause:1.5]) are read in both (docs/ssml.md). Left out
    # of the OpenAPI document, which cannot say that the input must then be well-formed SSML
    input_format: SkipJsonSchema[Literal["text", "ssml"] | None] = None
    language: str | None = None
    """Language name or code (English, en, Chinese, zh, ...); default: auto, or the voice's."""
    seed: integer(ge=MIN_SEED, le=MAX_SEED) | None = None
    """Sampling seed; the same seed, text and voice give the same audio."""
    # the bounds are engine/options.py's, which every front end applies; the descriptions go
    # into the OpenAPI document
    temperature: float | None = Field(
        None, gt=0, le=MAX_TEMPERATURE,
        description="Sampling temperature of the first codebook; default: the checkpoint's (0.9)",
    )  # fmt: skip
    top_k: integer(ge=0, le=TALKER_VOCAB) | None = Field(
        None,
        description="Draw from the k most likely codes; 0 = off (all of them); default: the "
        "checkpoint's (50)",
    )
    top_p: float | None = Field(
        None, gt=0, le=1,
        description="Draw from the most likely codes that together hold this probability; "
        "1 = off (the default)",
    )  # fmt: skip
    max_frames: integer(ge=1) | None = Field(
        None, validation_alias=AliasChoices("max_frames", "max_new_tokens")
    )
    """Cap on codec frames per text piece (12.5 per second of audio); default: about three times
    the piece's spoken length, so a missed end of speech stops early."""
    x_vector_only_mode: bool | None = None
    """Clone from the speaker embedding only (true) or with the reference transcript (ICL)."""
    non_streaming_mode: bool | None = None
    """vLLM-Omni: the whole text in the prompt (true) or one text token per frame (false);
    default: non-streaming for presets and designed voices, streaming for clones."""
    initial_codec_chunk_frames: integer(ge=0, le=256) | None = None
    """vLLM-Omni: frames in the first streamed chunk (0 or unset: 1)."""

    def _input(self, **fields) -> SpeechInput:
        return SpeechInput(
            input_format=self.input_format,
            response_format=self.response_format,
            speed=self.speed,
            stream_format=self.stream_format,
            language=self.language,
            seed=self.seed,
            temperature=self.temperature,
            top_k=self.top_k,
            top_p=self.top_p,
            max_frames=self.max_frames,
            x_vector_only_mode=self.x_vector_only_mode,
            text_mode=None
            if self.non_streaming_mode is None
            else ("non-streaming" if self.non_streaming_mode else "streaming"),
            first_chunk_frames=self.initial_codec_chunk_frames or None,
            **fields,
        )


class SpeechRequest(SpeechOptions):
    """POST /v1/audio/speech. Ordered as the OpenAI API reference."""

    model: str | None = None
    """tts-1, tts-1-hd, gpt-4o-mini-tts (any voice), or a configured model name."""
    input: str
    """The text; at most limits.max_input_chars (4096) characters."""
    voice: str | VoiceRef | None = Field(None, validation_alias=AliasChoices("voice", "speaker"))
    """OpenAI voice name, preset speaker, `clone:<name>`, `design`, or {"id": ...}; needed
    unless `ref_audio` is given or `task_type` is VoiceDesign."""
    instructions: str | None = Field(None, max_length=4096)
    """Style for CustomVoice models that support it; the voice description for VoiceDesign."""
    # seed-server spelling of `instructions`
    instruct: str | None = Field(None, max_length=4096)
    # vLLM-Omni's Qwen3-TTS fields
    task_type: Literal["CustomVoice", "VoiceDesign", "Base"] | None = None
    """Which kind of model must speak: presets, a described voice, or a clone."""
    # a clip to clone (Base), as base64 or a `data:` URL (URLs and paths are never fetched),
    # and its transcript: accepted, documented in docs/clients.md, and left out of the OpenAPI
    # document, which cannot say that the clip must decode as 3-30 s of speech (as for
    # /v1/audio/voice-clone, whose document says the same fields)
    ref_audio: SkipJsonSchema[str | None] = None
    ref_text: SkipJsonSchema[str | None] = Field(None, max_length=MAX_REF_TEXT_CHARS)
    # vLLM-Omni's: a speaker's x-vector as numbers, cloned in x-vector-only mode (Base); left out
    # of the document too: its length must be the model's (1024 or 2048)
    speaker_embedding: SkipJsonSchema[list[float] | None] = Field(
        None, max_length=MAX_EMBEDDING_VALUES
    )

    @property
    def voice_name(self) -> str:
        if self.voice is None:
            return ""
        return self.voice.id if isinstance(self.voice, VoiceRef) else self.voice

    @property
    def style(self) -> str | None:
        """`instructions`, or `instruct` when they are missing or blank (as the document says:
        either one may carry the description)."""
        said = self.instructions is not None and self.instructions.strip()
        return self.instructions if said else self.instruct

    def to_input(self) -> SpeechInput:
        return self._input(
            input=self.input, voice=self.voice_name, model=self.model, instructions=self.style,
            task_type=self.task_type, ref_audio=self.ref_audio, ref_text=self.ref_text,
            speaker_embedding=_embedding(self.speaker_embedding),
        )  # fmt: skip


def _embedding(values: list[float] | None) -> tuple[float, ...] | None:
    return None if values is None else tuple(values)


class SpeechSessionConfig(SpeechOptions):
    """The `session.config` message of WS /v1/audio/speech/stream: every field of a speech
    request but `input` (the text comes in pieces), and how the audio goes out."""

    response_format: ResponseFormat = "wav"  # vLLM-Omni's default for this endpoint
    model: str | None = None
    voice: str | VoiceRef | None = Field(None, validation_alias=AliasChoices("voice", "speaker"))
    instructions: str | None = Field(None, max_length=4096)
    task_type: Literal["CustomVoice", "VoiceDesign", "Base"] | None = None
    ref_audio: str | None = None
    ref_text: str | None = Field(None, max_length=MAX_REF_TEXT_CHARS)
    speaker_embedding: list[float] | None = Field(None, max_length=MAX_EMBEDDING_VALUES)
    stream_audio: bool = False
    """Send the audio as it is made (raw PCM: needs response_format pcm), else whole at the end."""
    split_granularity: Literal["none", "sentence", "clause"] | None = None
    """vLLM-Omni's; accepted: here each whole sentence is spoken as soon as it is known."""

    @model_validator(mode="after")
    def _streamed_audio_is_pcm(self) -> SpeechSessionConfig:
        if self.stream_audio and self.response_format != "pcm":
            raise ValueError("stream_audio needs response_format pcm (raw audio as it is made)")
        return self

    def to_input(self) -> SpeechInput:
        voice = self.voice.id if isinstance(self.voice, VoiceRef) else (self.voice or "")
        return self._input(
            input="", voice=voice, model=self.model, instructions=self.instructions,
            task_type=self.task_type, ref_audio=self.ref_audio, ref_text=self.ref_text,
            speaker_embedding=_embedding(self.speaker_embedding),
        )  # fmt: skip


class VoiceCloneRequest(SpeechOptions):
    """POST /v1/audio/voice-clone: one-shot cloning from a base64 clip (the seed server's API)."""

    input: str
    ref_audio: str
    """Base64 of a WAV/FLAC/OGG/MP3 file (a `data:audio/...;base64,` prefix is allowed)."""
    ref_text: str | None = Field(None, max_length=MAX_REF_TEXT_CHARS)
    """Transcript of the clip; needed unless x_vector_only_mode is true."""

    def to_input(self) -> SpeechInput:
        return self._input(input=self.input, ref_audio=self.ref_audio, ref_text=self.ref_text)


class SpeechBatchRequest(OpenAIBaseModel):
    """POST /v1/audio/speech/batch: 1-32 speech requests; any other top-level field of a speech
    request is every item's default."""

    items: list[dict[str, Any]] = Field(min_length=1, max_length=32)


class SpeechBatchResult(BaseModel):
    """vLLM-Omni's item result, plus ownvoice's format, duration and error envelope."""

    index: int
    status: Literal["success", "error"]
    audio_data: str | None = None  # base64 of the file
    media_type: str | None = None
    error: str | None = None  # the error's message
    response_format: str | None = None
    duration: float | None = None  # seconds
    error_detail: ErrorInfo | None = None  # the whole error (type, param, code)


class SpeechBatchResponse(BaseModel):
    id: str
    object: Literal["audio.speech.batch"] = "audio.speech.batch"
    total: int
    succeeded: int
    failed: int
    results: list[SpeechBatchResult]


class ErrorInfo(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: str | None = None
    request_id: str | None = None  # as in the x-request-id header and the server's log


class ErrorResponse(BaseModel):
    error: ErrorInfo


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int = 0
    owned_by: str = "ownvoice"


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


class AudioModel(BaseModel):
    id: str


class AudioModelList(BaseModel):
    models: list[AudioModel]


class VoiceEntry(BaseModel):
    id: str
    name: str
    kind: str  # preset | alias | clone | design
    language: str | None = None


class UploadedVoice(BaseModel):
    """A library voice as vLLM-Omni lists its uploaded voices."""

    name: str
    consent: str | None = None
    created_at: int
    file_size: int
    mime_type: str
    ref_text: str | None = None
    speaker_description: str | None = None  # as uploaded; it does not change the voice


class SecondsRange(BaseModel):
    min: float
    max: float


class VoiceListResponse(BaseModel):
    voices: list[VoiceEntry]
    languages: list[str] = []
    uploaded_voices: list[UploadedVoice] = []  # vLLM-Omni's clients read this key
    # how long a clip added to the library may be, so a page can say so before uploading
    reference_seconds: SecondsRange


class DesignRequest(BaseModel):
    """POST /v1/audio/designs: a VoiceDesign description saved as `design:<name>`."""

    model_config = ConfigDict(strict=True)

    name: str = Field(pattern=NAME_PATTERN)
    instructions: str = Field(min_length=1, max_length=4096, pattern=NOT_BLANK)
    language: str | None = None
    seed: integer(ge=0, le=2**32 - 1) | None = None


class DesignResource(BaseModel):
    object: Literal["audio.design"] = "audio.design"
    id: str  # design:<name>
    name: str
    instructions: str
    language: str | None = None
    seed: int | None = None
    source: str  # config | api


class DesignList(BaseModel):
    designs: list[DesignResource]


class CloneCapabilities(BaseModel):
    """GET /v1/audio/voice-clone/capabilities, the Qwen3-TTS OpenAI server's shape plus the
    model's name and the number of library voices."""

    supported: bool
    model_type: str | None
    model: str | None
    icl_mode_available: bool
    x_vector_mode_available: bool
    voices: int


class VoiceResource(BaseModel):
    """What POST /v1/audio/voices returns (OpenAI's VoiceResource plus the profile's fields)."""

    object: Literal["audio.voice"] = "audio.voice"
    id: str
    name: str
    created_at: int
    profile_id: str | None = None
    x_vector_only_mode: bool
    language: str | None = None


ERROR_RESPONSES = {s: {"model": ErrorResponse} for s in (400, 401, 404, 409, 413, 429, 500, 503)}
