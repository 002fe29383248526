"""How the harness's helper processes end (the system probe, a preloaded parent, a cell's worker):
their output flushed, then `os._exit`, without the interpreter's teardown. Python's teardown after
importing torch and torchvision takes about 1.1 s on 2 cores, and a run waited for it in its probe,
in each preloaded parent, and in a fresh worker once a cell. Nothing these processes leave behind
is written at exit: the probe's answer is on standard output, a worker's answer file is written
atomically before it returns. A forked worker always ended so (harness/measure/preloaded.py); a
worker's own helpers (Inductor's compile workers) end when their pipe to it closes."""

from __future__ import annotations

import os
import sys
from typing import NoReturn


def quick_exit(code: int) -> NoReturn:
    """Flush standard output and error, then end the process with `code` at once."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)
