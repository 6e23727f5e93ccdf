"""A server process for the shutdown tests: the real runner (ownvoice.server.runner) with a
FakeEngine instead of a model, so it starts in seconds.

    python -m tests.server.drain_server PORT FRAME_DELAY SHUTDOWN_TIMEOUT_S VOICES_DIR [WYOMING]

WYOMING: a port for the Wyoming listener beside the HTTP API.
"""

from __future__ import annotations

import logging
import sys

from ownvoice.server import create_app
from ownvoice.server.runner import run_server
from tests.server.fakes import FakeEngine
from tests.server.helpers import make_settings


def main(
    port: str, frame_delay: str, shutdown_timeout_s: str, voices_dir: str, wyoming: str = ""
) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    settings = make_settings(
        voices_dir,
        device="cpu",
        server={"port": int(port), "shutdown_timeout_s": float(shutdown_timeout_s)},
        **({"wyoming": {"uri": f"tcp://127.0.0.1:{wyoming}"}} if wyoming else {}),
    )
    engine = FakeEngine("custom_voice", frame_delay=float(frame_delay))
    app = create_app(settings, engines={"cv": engine}, run_doctor=False)
    return run_server(app, settings)


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
