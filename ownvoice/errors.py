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
    └── InsufficientResources              out of (GPU) memory for this request; the next may fit

Every message says what was wrong and what would be accepted, so a front-end can show it as is.
`param` names the request field at fault; `code` is a stable machine-readable name. Front ends
map the classes onto their own statuses (the HTTP edge: server/errors.py).
"""

from __future__ import annotations


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
