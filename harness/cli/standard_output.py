"""Standard output as the commands write it. A reader that went away (`| head`) ends a command with
141 and nothing more printed; a write that fails otherwise (a full disk behind `> log`) is said as
standard output's (`Failed`), never as a file's the command wrote (an OSError with no file name was
taken for its `--out`); a closed standard output (`>&-`) takes what is printed without a word, as
Python's print does. A run goes on in either case, its output discarded: stopping it would leave its
bundle `running`, and the bundle is what it is for."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import Any, TextIO

from rich.console import Console
from rich.text import Text


class Failed(Exception):
    """Standard output could not be written (not a BrokenPipeError: its reader is still there)."""

    def __init__(self, exc: OSError) -> None:
        super().__init__(f"standard output: {exc.strerror or exc}; what the command printed is cut short (the "
                         "files it wrote before are whole)")


class OutputConsole(Console):
    def __init__(self, *args: Any, keep_going: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.keep_going = keep_going

    def on_broken_pipe(self) -> None:
        """Rich's own answer is exit 1, which says a cell failed. A run goes on with its output
        discarded (stopping it would leave its bundle `running`); any other command stops, and
        `main` answers 141."""
        if not self.keep_going:
            raise BrokenPipeError
        self.quiet = True
        discard()


def discard() -> None:
    """Standard output from here on goes nowhere: its reader went away, and nothing left to print
    or flush at exit may fail on it again."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


class _Guarded:
    """`stream` (standard output), whose writes raise `Failed` for any OSError but a broken pipe,
    or where `keep_going`, say so once on standard error and go on with the output discarded."""

    def __init__(self, stream: TextIO, keep_going: bool) -> None:
        self._stream = stream
        self._keep_going = keep_going
        self._discarded = False

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            raise
        except OSError as exc:
            return self._failed(exc, len(text))

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            raise
        except OSError as exc:
            self._failed(exc, 0)

    def _failed(self, exc: OSError, written: int) -> int:
        if not self._keep_going:
            raise Failed(exc) from None
        if not self._discarded:
            self._discarded = True
            Console(stderr=True, highlight=False).print(
                Text(f"fusionbench: warning: standard output: {exc.strerror or exc}; the run goes on, its output "
                     "discarded (the bundle holds every result)", style="yellow"), soft_wrap=True)
            discard()
        return written

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, encoding: the stream's own
        return getattr(self._stream, name)


@contextmanager
def guarded(keep_going: bool) -> Iterator[None]:
    """Standard output guarded as `_Guarded` says while a command runs (an open sink where it is
    closed), flushed before the command's exit code is given, so that a write held in its buffer
    fails where it is caught."""
    given = sys.stdout
    with open(os.devnull, "w") if given is None else nullcontext(given) as stream:
        sys.stdout = _Guarded(stream, keep_going)
        try:
            yield
            sys.stdout.flush()
        finally:
            sys.stdout = given
