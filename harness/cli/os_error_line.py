"""The one line a command's OSError is said in: a path it reads or writes, the environment's
doing, not a bug (harness/cli/main.py)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from harness.plain_text import visible


def os_error_line(exc: OSError, out: Any) -> str:
    """What went wrong with which path; `out`: the command's `--out`, if it has one. Where making
    `--out` or writing a file into it was refused, or `--out` is a folder where a file is written,
    the line names the option and what to do, not only the path. Paths are compared with their
    links followed: a command writes where `--out` resolves to, and a user may give a link."""
    written_in = bool(out) and _written_in(exc.filename, Path(out))
    if isinstance(exc, PermissionError) and out and (written_in or _on_the_way_to(exc.filename, Path(out))):
        at = out if written_in else exc.filename  # not a temporary file of its own
        return (f"--out {visible(out)}: this user may not write there ({visible(exc.strerror)} at "
                f"{visible(at)}); give a folder of your own")
    if isinstance(exc, IsADirectoryError) and out and _on_the_way_to(exc.filename, Path(out)):
        return f"--out {visible(out)}: a directory; give the path of the file to write"
    # a write that failed after its file opened names no file: the output's (harness/files/output_file.py names it)
    where = (f"--out {out}" if out and exc.filename in (None, str(out)) else exc.filename if exc.filename is not None
             else "writing the output")
    return f"{visible(where)}: {visible(exc.strerror or exc)}"


def _on_the_way_to(filename: Any, out: Path) -> bool:
    """Whether `filename` (an OSError's) is `out` or a folder above it: where making `out` failed."""
    if not isinstance(filename, str):
        return False
    failed, wanted = Path(os.path.realpath(filename)), Path(os.path.realpath(out))
    return failed == wanted or failed in wanted.parents


def _written_in(filename: Any, out: Path) -> bool:
    """Whether `filename` (an OSError's) is a file in the folder `out`, as the report's (or its
    temporary file) is: where writing into an `--out` folder that exists failed."""
    if not isinstance(filename, str):
        return False
    return Path(os.path.realpath(filename)).parent == Path(os.path.realpath(out))
