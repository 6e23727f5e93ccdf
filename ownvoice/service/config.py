"""The service's configuration, in plain frozen dataclasses (front ends translate their own
settings into these; the HTTP server's YAML/env settings do so in server/settings.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ownvoice.engine.options import EngineConfig


@dataclass(frozen=True)
class ModelSpec:
    name: str  # what requests call it
    source: str  # hub id or local checkpoint folder
    type: str | None = None  # custom_voice | voice_design | base; None = read from the checkpoint


@dataclass(frozen=True)
class Limits:
    max_input_chars: int = 4096  # the OpenAI limit
    queue_size: int = 8  # requests waiting beyond the running batch, per model; more are refused
    # rows one engine advances per step; None = by device (see default_max_batch)
    max_batch: int | None = None
    request_timeout_s: float = 600  # queue wait + generation; then stopped
    max_chunk_chars: int = 300  # long input is split at sentences into pieces this long
    max_upload_mb: float = 20  # uploaded and base64 references
    send_timeout_s: float = 30  # a client that reads nothing this long is dropped
    # a connection with nothing to say this long is closed; an utterance whose streamed text
    # stops arriving this long ends (its row freed)
    idle_timeout_s: float = 60
    max_queued_utterances: int = 16  # per WebSocket or Wyoming connection


def default_max_batch(device: str) -> int:
    """Rows per step when the config does not say: a GPU step costs about the same for 16 rows
    as for one; on the CPU, 4 rows roughly double throughput while each stream stays near the
    speed of one alone (see `ownvoice bench --batch`)."""
    if device.startswith("cuda"):
        return 16
    if device == "auto":
        try:
            import torch

            return 16 if torch.cuda.is_available() else 4
        except ImportError:
            return 4
    return 4


@dataclass(frozen=True)
class ServiceConfig:
    models: tuple[ModelSpec, ...]
    roles: dict[str, str] = field(default_factory=dict)  # role -> model name, as configured
    engine: EngineConfig = EngineConfig()
    limits: Limits = Limits()
    lazy_load: bool = False  # load each model on its first request instead of at start
    voices_dir: Path = Path("./voices")
    chunk_frames: int = 8  # frames per streamed audio chunk
    voice_aliases: dict[str, str] = field(default_factory=dict)  # extra OpenAI-name mappings
    keepalive_s: float = 0.0  # >0: a tiny GPU op when idle, so clocks stay up (AMD DPM)
    log_text: bool = False  # the input text in each request's log line

    @property
    def max_batch(self) -> int:
        return self.limits.max_batch or default_max_batch(self.engine.device)
