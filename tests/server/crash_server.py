"""A server process that kills itself (SIGKILL: no clean-up of any kind) at a chosen moment of
a voice upload or delete, for the crash test (tests/server/test_crash.py). The real runner and
library, with FakeEngines instead of models so that it starts in seconds.

    python -m tests.server.crash_server PORT VOICES_DIR MOMENT

MOMENT: one of MOMENTS, or "none" to serve normally.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import sys

import ownvoice.service.library
from ownvoice.server import create_app
from ownvoice.server.runner import run_server
from tests.server.fakes import FakeEngine
from tests.server.helpers import make_settings

MOMENTS = (
    "upload: folder made, no audio yet",
    "upload: audio written, no meta.json",
    "upload: complete, not yet renamed into place",
    "upload: renamed into place, not yet answered",
    "delete: renamed to the trash",
    "delete: half of the trash removed",
)


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def arm(moment: str) -> None:
    real_write_wav, real_rename, real_rmtree = (
        ownvoice.service.library.write_wav,
        os.rename,
        shutil.rmtree,
    )

    def write_wav(path, *args, **kwargs):
        if moment == MOMENTS[0]:
            die()
        real_write_wav(path, *args, **kwargs)
        if moment == MOMENTS[1]:
            die()

    def rename(src, dst):
        src_name, dst_name = os.path.basename(str(src)), os.path.basename(str(dst))
        if src_name.startswith(".tmp-") and moment == MOMENTS[2]:
            die()
        real_rename(src, dst)
        if src_name.startswith(".tmp-") and moment == MOMENTS[3]:
            die()
        if dst_name.startswith(".trash-") and moment == MOMENTS[4]:
            die()

    def rmtree(path, *args, **kwargs):
        # this process's own delete (not the start-up clean-up of an earlier one's trash)
        mine = os.path.basename(str(path)).startswith(f".trash-{os.getpid()}-")
        if mine and moment == MOMENTS[5]:
            os.remove(os.path.join(path, "reference.wav"))
            die()
        real_rmtree(path, *args, **kwargs)

    ownvoice.service.library.write_wav = write_wav
    ownvoice.service.library.os.rename = rename
    ownvoice.service.library.shutil.rmtree = rmtree


def main(port: str, voices_dir: str, moment: str) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if moment != "none":
        arm(moment)
    settings = make_settings(voices_dir, device="cpu", server={"port": int(port)})
    engines = {"cv": FakeEngine("custom_voice"), "clone": FakeEngine("base")}
    app = create_app(settings, engines=engines, run_doctor=False)
    return run_server(app, settings)


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
