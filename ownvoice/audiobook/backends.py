"""Where chunk audio comes from: an OpenAI-compatible server, or an Engine in this process.

Both have the same small surface:

    backend.identity() -> dict          what makes their audio what it is (part of the chunk key)
    backend.synthesize(text, seed=, language=, max_seconds=, voice=) -> Rendered
                                        float32 mono, 24 kHz; voice None = the backend's own
    backend.batch_size() -> int         chunks in flight that keep the model's batch full
    backend.batch_steps() -> BatchSteps | None   engine steps so far and the rows they advanced

A failure worth another try raises Retryable (timeout, connection, 5xx, 429 with Retry-After);
a failure every chunk would share (bad voice, bad key, wrong URL) raises an OwnvoiceError at
once, so the book stops instead of burning retries. Knows nothing about files or loudness.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from email.utils import parsedate_to_datetime

import numpy as np

from ownvoice.errors import InvalidInput, OwnvoiceError

SAMPLE_RATE = 24000
FRAMES_PER_SECOND = 12.5


class Retryable(Exception):
    """A chunk failed in a way another attempt may fix."""

    def __init__(self, reason: str, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.reason = reason  # "timeout" | "connection" | "server_error" | "rate_limited" | ...
        self.retry_after = retry_after


@dataclass(frozen=True)
class BatchSteps:
    """Counters of an engine's steps: how many, and the rows they advanced in all."""

    steps: float
    rows: float

    def since(self, before: BatchSteps | None) -> BatchSteps:
        return self if before is None else BatchSteps(self.steps - before.steps,
                                                      self.rows - before.rows)  # fmt: skip

    @property
    def mean_rows(self) -> float | None:
        return self.rows / self.steps if self.steps > 0 else None


@dataclass(frozen=True)
class Rendered:
    audio: np.ndarray  # float32 (N,), 24 kHz
    stop_reason: str  # "eos" | "max_frames" | "server" (a server does not say)


class ServerBackend:
    """POST {url}/v1/audio/speech per chunk, asking for raw 16-bit PCM at 24 kHz."""

    DEFAULT_JOBS = 4  # when the server does not say how many requests it batches

    def __init__(
        self,
        url: str,
        *,
        voice: str | None,
        model: str | None = None,
        instructions: str | None = None,
        timeout: float = 600.0,
        connect_timeout: float = 10.0,
        api_key: str | None = None,
        transport=None,  # an httpx transport, for tests
    ):
        import httpx

        self.url = url.rstrip("/")
        if self.url.endswith("/v1"):
            self.url = self.url[: -len("/v1")]
        self.voice, self.instructions = voice, instructions
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._httpx = httpx
        self._client = httpx.Client(
            timeout=httpx.Timeout(timeout, connect=connect_timeout),
            headers=headers,
            transport=transport,
        )
        self.model = model

    def identity(self) -> dict:
        if self.model is None:
            self.model = self._first_model()
        return {
            "backend": "server",
            "model": self.model,
            "voice": self.voice,
            "instructions": self.instructions,
        }

    def _first_model(self) -> str:
        """The server's first listed model (the one it serves); "tts-1" if it lists none."""
        try:
            r = self._client.get(f"{self.url}/v1/models")
        except self._httpx.TransportError as e:
            raise InvalidInput(f"cannot reach the server at {self.url}: {e}", param="server") from e
        if r.status_code == 200:
            try:
                return str(r.json()["data"][0]["id"])
            except (ValueError, KeyError, IndexError, TypeError):
                pass
        return "tts-1"

    def batch_size(self) -> int:
        """How many requests the server runs in one batch (its /health says, per model)."""
        try:
            r = self._client.get(f"{self.url}/health")
            models = r.json()["models"]
            sizes = [m["batch"]["max"] for m in models.values() if m.get("batch")]
            chosen = models.get(self.model, {}).get("batch", {}).get("max")
            return int(chosen or max(sizes))
        except Exception:  # an older ownvoice, another server, a foreign Host: a safe default
            return self.DEFAULT_JOBS

    def batch_steps(self) -> BatchSteps | None:
        """The server's step counters for our model (its /metrics tts_batch_rows histogram; all
        of its clients count), or None when it does not publish them."""
        from prometheus_client.parser import text_string_to_metric_families

        try:
            r = self._client.get(f"{self.url}/metrics")
            if r.status_code != 200:
                return None
            values = {}
            for family in text_string_to_metric_families(r.text):
                for sample in family.samples:
                    if sample.name in ("tts_batch_rows_count", "tts_batch_rows_sum"):
                        model = sample.labels.get("model")
                        values.setdefault(model, {})[sample.name] = sample.value
        except Exception:  # another server, or metrics it does not parse: no figure
            return None
        mine = values.get(self.model) or (next(iter(values.values())) if len(values) == 1 else None)
        if not mine or "tts_batch_rows_count" not in mine:
            return None
        return BatchSteps(mine["tts_batch_rows_count"], mine.get("tts_batch_rows_sum", 0.0))

    def synthesize(
        self, text: str, *, seed: int, language: str, max_seconds: float, voice: str | None = None
    ) -> Rendered:
        body = {
            "model": self.model or "tts-1",
            "input": text,
            "response_format": "pcm",
            "seed": seed,
        }
        voice = voice or self.voice
        if voice is not None:
            body["voice"] = voice
        if self.instructions:
            body["instructions"] = self.instructions
        if language != "auto":
            body["language"] = language
        try:
            r = self._client.post(f"{self.url}/v1/audio/speech", json=body)
        except self._httpx.TimeoutException as e:
            raise Retryable("timeout", f"no answer within the timeout ({type(e).__name__})") from e
        except self._httpx.TransportError as e:
            raise Retryable("connection", f"{type(e).__name__}: {e}") from e
        if r.status_code == 200:
            return Rendered(_pcm16(r.content), "server")
        message = _error_message(r)
        if r.status_code in (429, 503):
            reason = "rate_limited" if r.status_code == 429 else "unavailable"
            raise Retryable(reason, message, _retry_after(r.headers.get("retry-after")))
        if r.status_code >= 500 or r.status_code == 408:
            raise Retryable("server_error", message)
        raise InvalidInput(f"the server refused the request: {message}", param="server")

    def close(self) -> None:
        self._client.close()


def _pcm16(data: bytes) -> np.ndarray:
    if len(data) < 2:
        raise Retryable("empty", "the server sent no audio")
    if len(data) % 2:
        raise Retryable("bad_audio", f"the server sent {len(data)} bytes, not 16-bit PCM")
    return np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768.0


def _error_message(r) -> str:
    """The OpenAI error envelope's message, else the start of the body."""
    try:
        err = r.json()["error"]
        param = f" (param {err['param']})" if err.get("param") else ""
        return f"HTTP {r.status_code}: {err['message']}{param}"
    except (ValueError, KeyError, TypeError):
        return f"HTTP {r.status_code}: {r.text[:200]}"


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:  # an HTTP date
        from datetime import UTC, datetime

        return max(0.0, (parsedate_to_datetime(value) - datetime.now(UTC)).total_seconds())
    except (TypeError, ValueError):
        return None


class EngineBackend:
    """An Engine in this process, behind the speech service (service/speech.py, as a server
    runs it): chunks sent from several threads at once run as one batch (`batch_size()` of them
    keep it full).

    `max_seconds` becomes the frame cap, so a runaway chunk costs bounded time."""

    def __init__(
        self,
        engine,
        *,
        model_id: str,
        voice=None,  # a speaker name, a VoicePrompt, or None (VoiceDesign)
        voice_id: str | None = None,  # stands for `voice` in the key (e.g. hash of a ref clip)
        instruct: str | None = None,
    ):
        from ownvoice.service.config import Limits
        from ownvoice.service.speech import SpeechService

        self.engine, self.model_id = engine, model_id
        self.voice, self.instruct = voice, instruct
        self.voice_id = voice_id if voice_id is not None else voice
        # every chunk in flight has a row or a place in the queue: nothing is refused; a chunk
        # is one piece (the book's planner cut it) and takes as long as it takes
        limits = Limits(
            max_batch=engine.max_batch,
            queue_size=64,
            max_input_chars=1 << 30,
            max_chunk_chars=1 << 30,
            request_timeout_s=math.inf,
        )
        self.service = SpeechService.local(engine, name="book", limits=limits, chunk_frames=64)
        self.scheduler = self.service.pool.workers["book"]

    def identity(self) -> dict:
        return {
            "backend": "engine",
            "model": self.model_id,
            "model_type": self.engine.model_type,
            "voice": self.voice_id,
            "instructions": self.instruct,
        }

    def batch_size(self) -> int:
        return self.scheduler.rows

    def batch_steps(self) -> BatchSteps:
        return BatchSteps(self.scheduler.steps, self.scheduler.row_steps)

    def _speaker(self, name: str) -> str:
        """A cast's voice name as one of the model's speakers."""
        speakers = self.engine.supported_speakers
        found = next((s for s in speakers if s.lower() == name.strip().lower()), None)
        if found is None:
            known = ", ".join(speakers) if speakers else "none (it is not a CustomVoice model)"
            raise InvalidInput(
                f"voice {name!r} is not a speaker of this model; speakers: {known}. For cloned "
                "voices in a cast, render through a server (--server) that has them",
                param="voice",
            )
        return found

    def synthesize(
        self, text: str, *, seed: int, language: str, max_seconds: float, voice: str | None = None
    ) -> Rendered:
        from ownvoice.service.planning import SpeechInput
        from ownvoice.service.speech import Origin

        said_by = self.voice if voice is None else self._speaker(voice)
        prompt = said_by if not isinstance(said_by, str | None) else None
        request = SpeechInput(
            input=text,
            voice="design" if said_by is None else ("" if prompt is not None else said_by),
            voice_prompt=prompt,
            instructions=self.instruct,
            language=language,
            seed=seed,
            max_frames=math.ceil(max_seconds * FRAMES_PER_SECOND) + 1,
            first_chunk_frames=64,
            response_format="pcm",
        )
        run = self.service.speak(request, Origin("book"))  # a bad voice: raised at once
        error = None
        try:
            chunks = list(run.chunks_blocking())
        except OwnvoiceError as e:
            error = e
            raise  # a bad voice or language fails every chunk alike
        except Exception as e:  # e.g. out of memory: another attempt may fit
            error = e
            raise Retryable("engine_error", f"{type(e).__name__}: {e}") from e
        except BaseException as e:  # this thread was interrupted: free the row
            error = e
            raise
        finally:
            run.finish(error)
        audio = np.concatenate([c.samples for c in chunks]).astype(np.float32).reshape(-1)
        return Rendered(audio, chunks[-1].stop_reason)

    def close(self) -> None:
        self.service.pool.close()
