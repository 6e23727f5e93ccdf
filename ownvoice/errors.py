"""Errors that ownvoice raises on purpose.

    OwnvoiceError
    ├── InvalidInput (also ValueError)     bad text, option, language, speaker, mode for this model
    │   └── AudioError                     reference audio unreadable, empty, too short, wrong format
    ├── VoiceNotFound (also KeyError)      no such voice / speaker
    ├── ModelLoadError                     checkpoint missing, malformed or unreachable
    └── EngineBusy                         the server's queue is full

Every message says what was wrong and what would be accepted, so a front-end can show it as is.
`param` names the request field at fault (the HTTP edge copies it into the OpenAI error envelope).
"""

from __future__ import annotations


class OwnvoiceError(Exception):
    def __init__(self, message: str, *, param: str | None = None):
        super().__init__(message)
        self.message = message
        self.param = param


class InvalidInput(OwnvoiceError, ValueError):
    pass


class AudioError(InvalidInput):
    pass


class VoiceNotFound(OwnvoiceError, KeyError):
    def __str__(self) -> str:  # KeyError would print the repr of the message
        return self.message


class ModelLoadError(OwnvoiceError):
    pass


class EngineBusy(OwnvoiceError):
    pass
