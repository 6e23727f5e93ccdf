"""Run `ownvoice book FILE --dry-run` on each file named on the command line, each in a process of
its own, and print one JSON line per file: the exit code, what it wrote to stderr, and its peak
resident memory.

Started by test_hostile_inputs.py in a fresh interpreter. The CLI is imported once here and each
file is read in a child forked from this process: one interpreter start (importing ownvoice
imports torch, two seconds or more) serves every file, and each child's peak (ru_maxrss from
wait4) is its own, starting from what the child shares with this process -- the interpreter and
the imports `ownvoice book` itself starts with. A child gets a ceiling on its address space and
CPU time, so a reader that regresses fails (MemoryError, killed) instead of swapping the machine.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import tempfile
import time
import traceback

import docx  # noqa: F401  (the readers import these lazily; here once, not in every child)
import pypdf  # noqa: F401

from ownvoice.cli import main

ADDRESS_SPACE_HEADROOM = 3 * 2**30  # bytes a child may map past what it starts with
CPU_SECONDS = 60
# nothing listens on port 9: a file that reads cleanly fails later, at the server
ARGS = ["--dry-run", "--server", "http://127.0.0.1:9"]


def _in_child(path: str, err_fd: int) -> None:
    os.dup2(err_fd, 2)
    os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
    mapped = int(open("/proc/self/statm").read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    limit = mapped + ADDRESS_SPACE_HEADROOM
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_SECONDS, CPU_SECONDS))
    code = 1
    try:
        main(["book", path, *ARGS])
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except BaseException:
        traceback.print_exc()  # what the real command would print
    finally:
        sys.stderr.flush()
        os._exit(code)


def run(path: str) -> dict:
    with tempfile.TemporaryFile() as err:
        start = time.monotonic()
        pid = os.fork()
        if pid == 0:
            _in_child(path, err.fileno())
        _, status, usage = os.wait4(pid, 0)
        err.seek(0)
        return {
            "path": path,
            "exit": os.waitstatus_to_exitcode(status),
            "stderr": err.read().decode("utf-8", "replace"),
            "peak_bytes": usage.ru_maxrss * 1024,  # Linux reports KiB
            "seconds": round(time.monotonic() - start, 2),
        }


if __name__ == "__main__":
    for path in sys.argv[1:]:
        print(json.dumps(run(path)), flush=True)
