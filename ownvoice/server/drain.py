"""Graceful drain: once shutdown begins, finish what is running and refuse what is new.

    drain = app.state.drain          # made by create_app; runner.py calls drain.begin()
    drain.begin()                    # /ready -> 503 at once; new requests -> 503 shutting_down
    drain.idle                       # True once every request in flight has finished
    drain.abort()                    # the wait is over: stop every generation (reason "shutdown")

`DrainGuard` (ASGI middleware) counts the HTTP requests in flight (queued, generating or
streaming: a streamed response counts until its last byte is sent) and, while draining, answers
new ones with 503 `shutting_down` and `Connection: close`. The speech service counts the speech
requests of every front end (a WebSocket utterance, a Wyoming synthesize), refuses new ones
while draining, and lets those in flight end as their protocol says (audio.done and
session.done, audio-stop) before the server stops. The probes and /metrics keep answering, so a
load balancer sees /ready turn 503. When to stop waiting is the runner's decision.
"""

from __future__ import annotations

import time

from ownvoice.server.auth import drain_body
from ownvoice.server.errors import ShuttingDown, error_response

EXEMPT = ("/health", "/ready", "/metrics")


class Drain:
    def __init__(self, service) -> None:
        self.service = service  # service.speech.SpeechService
        self.draining = False
        self.since: float | None = None  # time.monotonic() when the drain began
        self.in_flight = 0  # HTTP requests inside the app now (the event loop thread only)

    def abort(self) -> None:
        """Stop every speech request between frames; each ends with `shutting_down` (queued:
        503; streaming: cut off or an SSE error event; a WebSocket utterance its error event,
        audio.done and session.done; Wyoming audio-stop)."""
        self.service.abort()

    def begin(self) -> None:
        if not self.draining:
            self.draining = True
            self.since = time.monotonic()
            self.service.begin_drain()

    @property
    def speaking(self) -> int:
        """Speech requests in flight, on every front end."""
        return self.service.in_flight

    @property
    def idle(self) -> bool:
        return self.in_flight == 0 and self.service.in_flight == 0


class DrainGuard:
    """ASGI middleware: counts requests in flight; refuses new ones while draining."""

    def __init__(self, app, drain: Drain):
        self.app = app
        self.drain = drain

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["path"] in EXEMPT:
            return await self.app(scope, receive, send)
        if self.drain.draining:
            exc = ShuttingDown("the server is shutting down; retry on another instance or later")
            await drain_body(scope, receive)  # so the 503 is not lost to a reset
            return await error_response(exc)(scope, receive, send)
        self.drain.in_flight += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.drain.in_flight -= 1
