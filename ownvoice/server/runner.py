"""Run the app under uvicorn until a signal, with a graceful drain (what `ownvoice serve` runs).

    code = run_server(app, settings)    # blocks; 0 after a clean stop, 1 when start-up failed

The first SIGTERM or SIGINT begins the drain (drain.py). The listening socket stays open, so a
probe sees /ready 503 and a new request gets 503 `shutting_down` instead of a refused
connection. Requests in flight get up to server.shutdown_timeout_s; then their generations are
stopped between frames (streams end cut off), and uvicorn closes the connections and runs the
app's shutdown. A second signal skips the wait; a third skips the clean-up. A model that
cannot load (app.state.on_fatal) stops the server with exit code 1.
"""

from __future__ import annotations

import logging
import signal
import sys
import time

import uvicorn

from ownvoice.server.malformed import enveloped_http
from ownvoice.server.streaming import QuietCuts

log = logging.getLogger("ownvoice.server")

CLOSE_WAIT_S = 5.0  # uvicorn's wait for connections to close once nothing runs any more
ABORT_GRACE_S = 2.0  # after stopping the generations, the time their responses get to end


class DrainingServer(uvicorn.Server):
    """uvicorn.Server whose signals start a drain instead of closing the listener at once."""

    def __init__(self, config: uvicorn.Config, drain, shutdown_timeout_s: float):
        super().__init__(config)
        self.drain = drain
        self.shutdown_timeout_s = shutdown_timeout_s
        self.signals = 0
        self._aborted_at: float | None = None

    def handle_exit(self, sig, frame) -> None:
        # a signal handler: only count here; on_tick (every 0.1 s on the event loop) acts
        self.signals += 1
        if self.signals >= 3:
            self.force_exit = True
            self.should_exit = True

    async def on_tick(self, counter: int) -> bool:
        if self.signals and not self.should_exit:
            self._drain_step()
        return await super().on_tick(counter)

    def _drain_step(self) -> None:
        drain = self.drain
        now = time.monotonic()
        if not drain.draining:
            drain.begin()
            log.info(
                "shutting down: %d request(s) in flight (HTTP; %d speaking, on any front end) "
                "get up to %g s (server.shutdown_timeout_s); new requests get 503",
                drain.in_flight,
                drain.speaking,
                self.shutdown_timeout_s,
            )
        if drain.idle:
            self._exit(CLOSE_WAIT_S)
        elif self._aborted_at is None:
            if now - drain.since >= self.shutdown_timeout_s or self.signals >= 2:
                log.warning("stopping %d request(s) still running", drain.speaking)
                drain.abort()
                self._aborted_at = now
        elif now - self._aborted_at >= ABORT_GRACE_S:  # an engine that does not stop
            self._exit(0.1)

    def _exit(self, close_wait_s: float) -> None:
        self.config.timeout_graceful_shutdown = close_wait_s
        self.should_exit = True


def run_server(app, settings) -> int:
    """Serve `app` on settings.server.host:port until SIGTERM/SIGINT; the exit code."""
    config = uvicorn.Config(
        app,
        host=settings.server.host,
        port=settings.server.port,
        access_log=False,  # the server logs one line per speech request itself
        log_config=None,  # keep the caller's logging set-up
        timeout_graceful_shutdown=CLOSE_WAIT_S,
        http=enveloped_http(),  # a request too broken to parse is refused in the envelope too
    )
    server = DrainingServer(config, app.state.drain, settings.server.shutdown_timeout_s)
    logging.getLogger("uvicorn.error").addFilter(QuietCuts())
    fatal: list[BaseException] = []

    def stop(exc: BaseException) -> None:
        fatal.append(exc)
        server.should_exit = True

    app.state.on_fatal = stop
    # a signal before uvicorn installs its handlers (while starting) also ends cleanly
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    try:
        server.run()
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
    if fatal:
        print(f"ownvoice serve: error: {fatal[0]}", file=sys.stderr)
        return 1
    return 0 if server.started else 1
