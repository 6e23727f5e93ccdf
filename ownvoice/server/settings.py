"""Server settings: one YAML file plus environment overrides (pydantic-settings).

    settings = load_settings("config.yaml")     # or None: built-in defaults
    OWNVOICE_SERVER__PORT=9000 OWNVOICE_LIMITS__QUEUE_SIZE=4 ownvoice serve   # env wins over YAML

Environment variables use the prefix OWNVOICE_ and `__` between nesting levels. See
config.example.yaml at the repository root for every key with a comment. Knows nothing about
engines or HTTP; `engine_config()` and `chunk_frames` translate the optimization block into the
engine's vocabulary.

The config of the Qwen3-TTS OpenAI server (groxaxo's, and the forks its write-ups use) loads as
it is: `hf_id` for `source`, `type: customvoice | voicedesign | base`, `default_model`, and its
optimization keys, each mapped onto ours or accepted with a note (`compat_notes()`) saying it
has no effect here and why. Keys neither server knows are errors with a "did you mean".
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from ownvoice.engine.options import EngineConfig
from ownvoice.errors import InvalidInput
from ownvoice.server.hosts import origin_key, split_authority
from ownvoice.server.settings_problems import describe
from ownvoice.service.config import Limits, ModelSpec, ServiceConfig
from ownvoice.service.designs import DesignedVoice, check_design
from ownvoice.service.roles import ROLE_TYPES
from ownvoice.service.roles import model_type_hint as _type_hint
from ownvoice.service.roles import resolve_roles as _resolve_roles

DEFAULT_MODEL = "Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice"
ModelType = Literal["custom_voice", "voice_design", "base"]


class _Block(BaseModel):
    model_config = ConfigDict(extra="forbid")  # a typo in the YAML is an error, not ignored


class ServerBlock(_Block):
    host: str = "127.0.0.1"  # loopback only; set 0.0.0.0 (with an api_key) to serve a network
    port: int = Field(8880, ge=1, le=65535)
    api_key: SecretStr | None = None  # Bearer key for the API; None = no auth
    # Host headers accepted besides localhost, 127.0.0.1, [::1] and a concrete `host`; "*" = any
    # (see hosts.py: bound to 0.0.0.0 or :: with this empty, any host is accepted, with a warning)
    allowed_hosts: list[str] = []
    # browser origins (scheme://host[:port]) allowed to POST/DELETE; "*" = any
    allowed_origins: list[str] = []
    shutdown_timeout_s: float = Field(30, ge=0)  # SIGTERM/SIGINT: in-flight requests get this long

    @field_validator("allowed_hosts")
    @classmethod
    def check_hosts(cls, hosts: list[str]) -> list[str]:
        for h in hosts:
            name = h.strip()[2:] if h.strip().startswith("*.") else h.strip()
            if _is_ip(name):  # a bare IPv6 address ('fe80::1') is a host, not host:port
                name = f"[{name}]"
            # parsed by the same code that later reads Host headers, so what passes can match
            parsed = split_authority(name) if h.strip() != "*" else ("*", None)
            if parsed is None or parsed[1] is not None or "*" in name:
                raise ValueError(
                    f"{h!r} is not a host pattern; give a name or address without scheme, port "
                    "or path ('tts.lan', '192.168.1.20'), '*.domain' for its subdomains, or '*'"
                )
        return [h.strip().lower() for h in hosts]

    @field_validator("allowed_origins")
    @classmethod
    def check_origins(cls, origins: list[str]) -> list[str]:
        for o in origins:
            if o != "*" and (origin_key(o) is None or o.strip().rstrip("/").count("/") != 2):
                raise ValueError(
                    f"{o!r} is not an origin; write scheme://host[:port] without a path "
                    "('http://localhost:3000'), or '*' for any origin"
                )
        return [o.strip().lower().rstrip("/") for o in origins]


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


# the Qwen3-TTS OpenAI server's spellings of the model types, and ours
MODEL_TYPE_SPELLINGS = {
    "customvoice": "custom_voice",
    "voicedesign": "voice_design",
    "base": "base",
}


class ModelEntry(_Block):
    source: str  # hub id or local checkpoint folder (`hf_id` in the Qwen3-TTS OpenAI server)
    type: ModelType | None = None  # None: read from the checkpoint's config.json

    @model_validator(mode="before")
    @classmethod
    def hf_id_is_source(cls, data: Any) -> Any:
        if isinstance(data, dict) and "hf_id" in data:
            data = dict(data)
            hf_id = data.pop("hf_id")
            if data.setdefault("source", hf_id) != hf_id:
                raise ValueError("give `source` or `hf_id` (the same thing), not both")
        return data

    @field_validator("type", mode="before")
    @classmethod
    def either_spelling(cls, value: Any) -> Any:
        # customvoice, custom_voice, CustomVoice, custom-voice: all the same type
        if isinstance(value, str):
            key = value.lower().replace("_", "").replace("-", "").replace(" ", "")
            return MODEL_TYPE_SPELLINGS.get(key, value)
        return value


class Roles(_Block):
    """Which model serves what. Unset roles are filled only when exactly one model has the type."""

    presets: str | None = None  # CustomVoice: named speakers and the OpenAI voice names
    design: str | None = None  # VoiceDesign: a voice described in `instructions`
    clone: str | None = None  # Base: `clone:<name>` library voices and /v1/audio/voice-clone

    def explicit(self) -> dict[str, str]:
        return {r: getattr(self, r) for r in ROLE_TYPES if getattr(self, r) is not None}


class StreamingBlock(_Block):
    decode_window_frames: int | None = Field(None, ge=1)  # None = exact incremental decoder
    emit_every_frames: int = Field(8, ge=1)  # audio is sent every N frames (80 ms each)


class OptimizationBlock(_Block):
    # flash_attention_2 (the Qwen3-TTS OpenAI server's default) runs as sdpa: see compat_notes
    attention: Literal["sdpa", "eager", "flash_attention_2"] = "sdpa"
    use_compile: bool = False
    use_cuda_graphs: bool = True
    quantize: Literal["int8", "int4"] | None = None  # integer weights on the CPU fast path
    # the speech decoder's precision (None = dtype); bfloat16 on CPUs with AVX512-BF16 / AMX
    decoder_dtype: Literal["float32", "bfloat16", "float16"] | None = None
    num_threads: int | None = Field(None, ge=1)  # CPU threads; None = torch's default
    # decode audio on a worker thread beside the generation (CPU); None = where it pays:
    # int8/int4 always, float32 while two or more rows play
    overlap_decoder: bool | None = None
    streaming: StreamingBlock = StreamingBlock()
    # accepted from the Qwen3-TTS OpenAI server's config; no effect here (see compat_notes)
    compile_mode: str | None = None
    use_fast_codebook: bool | None = None
    compile_codebook_predictor: bool | None = None


class LimitsBlock(_Block):
    max_input_chars: int = Field(4096, ge=1)  # the OpenAI limit
    queue_size: int = Field(8, ge=0)  # requests waiting beyond the batch, per model; more: 429
    # requests one model generates at once, in one batch (each step advances all of them by
    # a frame); None = 16 on a GPU, 4 on a CPU. 1 = one request at a time.
    max_batch: int | None = Field(None, ge=1, le=64)
    concurrency: int | None = Field(None, ge=1)  # the former name of max_batch
    request_timeout_s: float = Field(600, gt=0)  # queue wait + generation; then stopped
    max_chunk_chars: int = Field(
        300, ge=20
    )  # long input is split at sentences into pieces this long
    max_upload_mb: float = Field(20, gt=0)  # request body cap (voice uploads, base64 references)
    send_timeout_s: float = Field(30, gt=0)  # a client that stops reading this long is dropped
    # no message for this long closes an idle WebSocket or Wyoming connection, and ends an
    # utterance whose streamed text stopped arriving (its row is freed)
    idle_timeout_s: float = Field(60, gt=0)
    # utterances one WebSocket or Wyoming connection may have waiting to be spoken; more are
    # refused with an error
    max_queued_utterances: int = Field(16, ge=1)


class WyomingBlock(_Block):
    """Home Assistant's Wyoming protocol beside the HTTP API (ownvoice/wyoming); off by default."""

    uri: str | None = None  # tcp://127.0.0.1:10200 (or unix:///path); None = off
    voice: str | None = None  # for requests that name no voice; None = the first listed
    seed: int | None = None  # fixed: the same sentence sounds the same each time
    zeroconf: bool = False  # announce it on the LAN (mDNS) for Home Assistant's discovery
    max_connections: int = Field(64, ge=1)  # more are closed at once

    @field_validator("uri")
    @classmethod
    def check_uri(cls, uri: str | None) -> str | None:
        if uri is not None:
            from ownvoice.wyoming.listener import parse_uri

            try:
                parse_uri(uri)
            except InvalidInput as e:
                raise ValueError(e.message) from None
        return uri


class DesignEntry(_Block):
    """A designed voice, `design:<name>` (see ownvoice/service/designs.py)."""

    instructions: str  # the voice, described
    language: str | None = None
    seed: int | None = None  # fixed: the same voice every time


class ServerSettings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="OWNVOICE_", env_nested_delimiter="__", extra="forbid"
    )

    server: ServerBlock = ServerBlock()
    models: dict[str, ModelEntry] = {"cv": ModelEntry(source=DEFAULT_MODEL, type="custom_voice")}
    roles: Roles = Roles()
    device: str = "auto"  # auto | cpu | cuda | cuda:N
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    require_gpu: bool = False  # refuse to start without a usable GPU
    lazy_load: bool = False  # load each model on its first request instead of at start
    voices_dir: Path = Path("./voices")
    optimization: OptimizationBlock = OptimizationBlock()
    limits: LimitsBlock = LimitsBlock()
    wyoming: WyomingBlock = WyomingBlock()
    gpu_keepalive_interval_s: float = Field(0, ge=0)  # >0: tiny GPU op when idle (AMD DPM)
    log_text: bool = False  # put the input text in the request log line
    # OpenAI voice name -> preset speaker, merged over the built-in map (see service/voicemap.py)
    voice_aliases: dict[str, str] = {}
    # designed voices by name: `design:<name>` for clients that cannot send instructions;
    # a plain string is the description
    designs: dict[str, DesignEntry | str] = {}
    # from the Qwen3-TTS OpenAI server's config: the model for requests that are not clones
    # (becomes roles.presets or roles.design), and its voice list (ours comes from the models)
    default_model: str | None = None
    voices: list[Any] | None = None

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # the YAML file arrives as init values; the environment overrides it
        return env_settings, init_settings

    @model_validator(mode="after")
    def check_roles(self) -> ServerSettings:
        """Every role names a configured model (also called after command-line overrides)."""
        if not self.models:
            raise ValueError("models: at least one model is needed")
        for role in ROLE_TYPES:
            name = getattr(self.roles, role)
            if name is not None and name not in self.models:
                raise ValueError(
                    f"roles.{role} names model {name!r}, which is not in models "
                    f"(configured: {', '.join(self.models)})"
                )
        if self.default_model is not None and self.default_model not in self.models:
            raise ValueError(
                f"default_model names {self.default_model!r}, which is not in models "
                f"(configured: {', '.join(self.models)})"
            )
        return self

    @field_validator("designs")
    @classmethod
    def check_designs(cls, designs: dict) -> dict:
        for name, entry in designs.items():
            text = entry if isinstance(entry, str) else entry.instructions
            check_design(name, text)
        return designs

    def designed_voices(self) -> dict[str, DesignedVoice]:
        out = {}
        for name, entry in self.designs.items():
            if isinstance(entry, str):
                entry = DesignEntry(instructions=entry)
            out[name] = DesignedVoice(
                name, entry.instructions.strip(), entry.language, entry.seed, source="config"
            )
        return out

    def explicit_roles(self) -> dict[str, str]:
        """The roles block, plus default_model as the role its type serves (if that is unset)."""
        roles = self.roles.explicit()
        if self.default_model is not None:
            kind = model_type_hint(self.models[self.default_model])
            role = next((r for r, t in ROLE_TYPES.items() if t == kind), None)
            if role is not None and role != "clone":
                roles.setdefault(role, self.default_model)
        return roles

    def compat_notes(self) -> list[str]:
        """One line per key from the Qwen3-TTS OpenAI server's config that means something else,
        or nothing, here (logged at start)."""
        opt, notes = self.optimization, []
        if opt.attention == "flash_attention_2":
            notes.append(
                "optimization.attention flash_attention_2 runs as sdpa: ownvoice does not use the "
                "flash-attn package; PyTorch's sdpa picks a flash kernel on the GPU by itself"
            )
        window = opt.streaming.decode_window_frames
        if window is not None:
            notes.append(
                f"optimization.streaming.decode_window_frames {window}: each chunk re-decodes the "
                f"last {window} frames, as the Qwen3-TTS OpenAI server does; remove it for "
                "ownvoice's exact incremental decoder (same audio as decoding it all at once, "
                "less work per chunk)"
            )
        for key in ("compile_mode", "use_fast_codebook", "compile_codebook_predictor"):
            if getattr(opt, key) is not None:
                notes.append(
                    f"optimization.{key} has no effect here: ownvoice's own decode loop is always "
                    "the fast one (static KV cache, CUDA graphs with use_cuda_graphs)"
                )
        if self.voices is not None:
            notes.append(
                "voices: the list has no effect here; the voices are the models' own speakers, "
                "the OpenAI names and the voice library (GET /v1/voices)"
            )
        if self.default_model is not None:
            roles = self.explicit_roles()
            served = [r for r, m in roles.items() if m == self.default_model]
            notes.append(
                f"default_model {self.default_model} serves the "
                + (f"{served[0]} role" if served else "requests that name it")
                + "; other voices go to the model of their kind (roles)"
            )
        return notes

    def service_config(self) -> ServiceConfig:
        """These settings in the serving core's terms (no pydantic past this point)."""
        lim = self.limits
        return ServiceConfig(
            models=tuple(
                ModelSpec(name, entry.source, entry.type) for name, entry in self.models.items()
            ),
            roles=self.explicit_roles(),
            engine=self.engine_config(),
            limits=Limits(
                max_input_chars=lim.max_input_chars,
                queue_size=lim.queue_size,
                max_batch=lim.max_batch or lim.concurrency,
                request_timeout_s=lim.request_timeout_s,
                max_chunk_chars=lim.max_chunk_chars,
                max_upload_mb=lim.max_upload_mb,
                send_timeout_s=lim.send_timeout_s,
                idle_timeout_s=lim.idle_timeout_s,
                max_queued_utterances=lim.max_queued_utterances,
            ),
            lazy_load=self.lazy_load,
            log_text=self.log_text,
            voices_dir=self.voices_dir,
            chunk_frames=self.chunk_frames,
            voice_aliases=dict(self.voice_aliases),
            keepalive_s=self.gpu_keepalive_interval_s,
        )

    def engine_config(self) -> EngineConfig:
        """The optimization block in the engine's terms."""
        opt = self.optimization
        return EngineConfig(
            device=self.device,
            dtype=self.dtype,
            attention="sdpa" if opt.attention == "flash_attention_2" else opt.attention,
            use_compile=opt.use_compile,
            use_cuda_graphs=opt.use_cuda_graphs,
            decode_window_frames=opt.streaming.decode_window_frames,
            quantize=opt.quantize,
            decoder_dtype=opt.decoder_dtype,
            num_threads=opt.num_threads,
            overlap_decoder=opt.overlap_decoder,
        )

    @property
    def chunk_frames(self) -> int:
        """SynthesisOptions.chunk_frames: frames per streamed chunk."""
        return self.optimization.streaming.emit_every_frames


def load_settings(path: str | os.PathLike | None = None, **overrides) -> ServerSettings:
    """Read a YAML config (None = defaults only), apply OWNVOICE_* env vars, then `overrides`.

    `overrides` are top-level keys (e.g. `models=...`) from the command line; they replace the
    file's value for that key. Raises InvalidInput naming the file and the bad key.
    """
    data: dict = {}
    if path is not None:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as e:
            raise InvalidInput(f"cannot read config file {str(path)!r}: {e}", param="config") from e
        try:
            data = yaml.safe_load(text) or {}
        except yaml.YAMLError as e:
            raise InvalidInput(
                f"config file {str(path)!r} is not valid YAML: {e}", param="config"
            ) from e
        if not isinstance(data, dict):
            raise InvalidInput(
                f"config file {str(path)!r} must hold a mapping of keys", param="config"
            )
    data.update(overrides)
    try:
        return ServerSettings(**data)
    except ValidationError as e:
        where = f"config file {str(path)!r}" if path is not None else "settings"
        # models.<name> also accepts the seed server's hf_id for source
        aliases = {ModelEntry: ["hf_id"]}
        problems = "; ".join(describe(err, ServerSettings, aliases) for err in e.errors())
        raise InvalidInput(f"{where}: {problems}", param="config") from e


def model_type_hint(entry: ModelEntry) -> str | None:
    """The model type of a config entry (declared, from its config.json, or from the hub id)."""
    return _type_hint(entry.source, entry.type)


def resolve_roles(
    settings: ServerSettings, types: dict[str, str | None], sizes: dict | None = None
) -> dict[str, str]:
    """role -> model name, from the roles block, the model types and sizes (service/roles.py)."""
    return _resolve_roles(settings.explicit_roles(), types, sizes)
