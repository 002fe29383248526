"""harness/quick_exit.py: a helper process's output reaches its reader, its code is its own, and
the interpreter's teardown (atexit, freeing the modules) does not run, in the function and in each
helper that ends by it: the system probe, a preloaded parent and a cell's worker."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
#: Registers a teardown that would say it ran, then runs the module as `python -m module ARGS` would.
AS_MAIN = ("import atexit, runpy, sys\n"
           "atexit.register(sys.stderr.write, 'teardown ran')\n"
           "sys.argv = [sys.argv[1], *sys.argv[2:]]\n"
           "runpy.run_module(sys.argv[0], run_name='__main__', alter_sys=True)\n")


def test_the_output_is_flushed_the_code_kept_and_the_teardown_skipped() -> None:
    code = ("import atexit, sys\n"
            "from harness.quick_exit import quick_exit\n"
            "atexit.register(print, 'teardown ran')\n"
            "print('the answer', end='')\n"  # buffered, no newline: only a flush sends it down the pipe
            "sys.stderr.write('a note')\n"
            "quick_exit(3)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (3, "the answer", "a note")


def test_the_c_librarys_output_is_flushed_and_a_failed_flush_is_not_success() -> None:
    """A native library's printf into a pipe sits in the C library's buffer until it is flushed;
    standard output closed under the process makes the flush fail: exit 120, as Python's exit."""
    printf = ("import ctypes\n"
              "from harness.quick_exit import quick_exit\n"
              "ctypes.CDLL(None).printf(b'from C')\n"
              "quick_exit(0)\n")
    done = subprocess.run([sys.executable, "-c", printf], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (0, "from C")
    closed = ("import io, os, sys\n"
              "from harness.quick_exit import quick_exit\n"
              "sys.stdout = io.TextIOWrapper(io.BufferedWriter(io.FileIO(1, 'w', closefd=False)))  # buffered, whatever -u says\n"
              "print('lost')\n"
              "os.close(1)\n"
              "quick_exit(0)\n")
    done = subprocess.run([sys.executable, "-c", closed], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 120


@pytest.mark.slow  # each imports torch
@pytest.mark.parametrize(("module", "args", "code"), [
    # no backends, no system: the probe's answer alone
    ("harness.run.probe", ['{"device": "cpu", "backends": [], "with_system": false, "noise_s": null}'], 0),
    ("harness.measure.preloaded", [str(os.getpid())], 0),  # its input ends at once: it is done
    ("harness.measure.worker", ["no-such-request.json"], 2),  # refused before it measures anything
])
def test_each_helper_ends_by_it(module: str, args: list[str], code: int) -> None:
    done = subprocess.run([sys.executable, "-c", AS_MAIN, module, *args], cwd=REPO, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=120)
    assert done.returncode == code, done.stderr[-2000:]
    assert "teardown ran" not in done.stderr
    if module == "harness.run.probe":
        assert '"device": "cpu"' in done.stdout  # its answer reached the pipe
