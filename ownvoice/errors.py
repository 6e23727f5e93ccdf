"""Errors that ownvoice raises on purpose.

    OwnvoiceError
    ├── InvalidInput (also ValueError)     bad text, option, language, speaker, mode for this model
    │   ├── AudioError                     reference audio unreadable, empty, too short, wrong format
    │   ├── ModelNotFound                  a model name this server does not serve
    │   └── PayloadTooLarge                an upload or reference past the size limit
    ├── VoiceNotFound (also KeyError)      no such voice / speaker
    ├── ModelLoadError                     checkpoint missing, malformed or unreachable
    ├── EngineBusy                         too many requests at once
    │   └── QueueFull                      ... with the seconds after which a retry may be admitted
    ├── QueueTimeout                       waited in line past the request's time limit
    ├── ShuttingDown                       the service is stopping; try elsewhere or later
    ├── ServiceUnavailable                 a model could not be loaded
    ├── InsufficientResources              out of (GPU) memory for this request; the next may fit
    └── ClientStalled                      the client stopped reading (limits.send_timeout_s)

Every message says what was wrong and what would be accepted, so a front-end can show it as is.
`param` names the request field at fault; `code` is a stable machine-readable name. `describe`
gives each error its status and OpenAI error type: the HTTP edge answers with them, and every
front end's request record counts a refusal under the same status (a WebSocket utterance refused
for a full queue is a 429 in the metrics as an HTTP request is), so one dashboard reads them all.
"""

from __future__ import annotations

from dataclasses import dataclass


class OwnvoiceError(Exception):
    code: str | None = None

    def __init__(self, message: str, *, param: str | None = None):
        super().__init__(message)
        self.message = message
        self.param = param


class InvalidInput(OwnvoiceError, ValueError):
    pass


class AudioError(InvalidInput):
    pass


class ModelNotFound(InvalidInput):
    code = "model_not_found"


class PayloadTooLarge(InvalidInput):
    code = "payload_too_large"


class VoiceNotFound(OwnvoiceError, KeyError):
    code = "voice_not_found"

    def __str__(self) -> str:  # KeyError would print the repr of the message
        return self.message


class ModelLoadError(OwnvoiceError):
    code = "model_unavailable"


class EngineBusy(OwnvoiceError):
    code = "queue_full"


class QueueFull(EngineBusy):
    """EngineBusy with the number of seconds after which a retry is likely to be admitted."""

    def __init__(self, message: str, retry_after: float):
        super().__init__(message)
        self.retry_after = retry_after


class QueueTimeout(OwnvoiceError):
    code = "queue_timeout"


class ShuttingDown(OwnvoiceError):
    code = "shutting_down"


class ServiceUnavailable(OwnvoiceError):
    code = "model_unavailable"


class InsufficientResources(OwnvoiceError):
    """Out of GPU memory for one request: not fatal, the next request may fit."""

    code = "insufficient_resources"

    def __init__(self, message: str = "out of GPU memory for this request; retry, or send "
                 "shorter input"):  # fmt: skip
        super().__init__(message)


def is_out_of_memory(exc: BaseException) -> bool:
    """torch.OutOfMemoryError (CUDA/ROCm), recognised without importing torch."""
    return type(exc).__name__ == "OutOfMemoryError"


def free_device_memory() -> None:
    """After an out-of-memory error, hand the device's cached blocks back so that what runs next
    can fit (torch is loaded by then: only it raises that error)."""
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except Exception:  # freeing memory must never fail the request a second time
        pass


class ClientStalled(OwnvoiceError):
    """The client read nothing for limits.send_timeout_s: its buffers are full, a send would wait
    forever; the connection is dropped and its generation stopped."""

    code = "client_stalled"


# error class -> (status, OpenAI error type, default code); the most specific first
_KINDS: list[tuple[type[Exception], int, str, str | None]] = [
    (EngineBusy, 429, "rate_limit_error", "queue_full"),
    (VoiceNotFound, 404, "invalid_request_error", "voice_not_found"),
    (ModelNotFound, 404, "invalid_request_error", "model_not_found"),
    (PayloadTooLarge, 413, "invalid_request_error", "payload_too_large"),
    (InvalidInput, 400, "invalid_request_error", None),
    (ModelLoadError, 503, "server_error", "model_unavailable"),
    (QueueTimeout, 503, "server_error", "queue_timeout"),
    (ShuttingDown, 503, "server_error", "shutting_down"),
    (ServiceUnavailable, 503, "server_error", "model_unavailable"),
    (InsufficientResources, 503, "server_error", "insufficient_resources"),
    (ClientStalled, 408, "invalid_request_error", "client_stalled"),
    (OwnvoiceError, 500, "server_error", None),
]


@dataclass(frozen=True)
class ErrorInfo:
    status: int  # HTTP's, also the status a front end's request record counts
    type: str  # OpenAI's error type
    code: str | None
    message: str
    param: str | None

    def envelope(self) -> dict:
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }


def describe(exc: BaseException) -> ErrorInfo:
    """What to tell the client about `exc`: an error class's own `status`/`type` attributes
    win (the HTTP edge's Unauthorized); out of memory is InsufficientResources; anything
    else unexpected is a 500."""
    if is_out_of_memory(exc):
        exc = InsufficientResources()
    status, type_, code = 500, "server_error", None
    for cls, s, t, c in _KINDS:
        if isinstance(exc, cls):
            status, type_, code = s, t, c
            break
    message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return ErrorInfo(
        status=getattr(exc, "status", status),
        type=getattr(exc, "type", type_),
        code=getattr(exc, "code", None) or code,
        message=message,
        param=getattr(exc, "param", None),
    )
