"""How the harness's helper processes end (the system probe, a preloaded parent, a cell's worker):
their output flushed, then `os._exit`, without the interpreter's teardown. Python's teardown after
importing torch and torchvision takes about 1.1 s on 2 cores, and a run waited for it in its probe,
in each preloaded parent, and in a fresh worker once a cell. Nothing these processes leave behind
is written at exit: the probe's answer is on standard output, a worker's answer file is written
atomically before it returns. A forked worker always ended so (harness/measure/preloaded.py); a
worker's own helpers (Inductor's compile workers) end when their pipe to it closes.

What the teardown would have done and matters is done here: Python's standard streams are flushed,
and so are the C library's (a native library's `printf` into a worker's log, which `os._exit`
would drop); where a flush fails, the code is 120, as Python's own exit gives."""

from __future__ import annotations

import ctypes
import os
import sys
from typing import NoReturn

#: Python's exit code where flushing the standard streams at exit failed.
FLUSH_FAILED = 120


def quick_exit(code: int) -> NoReturn:
    """Flush standard output and error (Python's and the C library's), then end the process with
    `code` at once, or with FLUSH_FAILED where `code` is 0 and a flush failed."""
    try:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except (OSError, ValueError):  # a closed or broken stream
            code = code or FLUSH_FAILED
        try:
            ctypes.CDLL(None).fflush(None)
        except (OSError, AttributeError):  # no C library to ask (not a POSIX system)
            pass
    finally:
        os._exit(code)
