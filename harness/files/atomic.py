"""Crash-safe file writes: write a temporary file beside the target, fsync, rename over it.

A reader sees either the old file or the whole new one, never a torn write, so an interrupted
run loses nothing it had finished.
"""

from __future__ import annotations

import errno
import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from harness.file_modes import plain_file_mode


def write_bytes_atomic(path: Path, data: bytes) -> None:
    write_files_atomic({path: data})


def write_files_atomic(files: dict[Path, bytes]) -> None:
    """Write each file (path: bytes), atomically: each to a temporary file beside it first, all of
    them, and only then each renamed over its path, so that a full disk or a stop while they are
    written replaces none of them (a report's two pages are both new, or both as they were). A
    path that is a folder is refused before any is replaced. An error is named by the path being
    written, never by its temporary file (which the user never named and which is gone)."""
    staged: dict[Path, str] = {}
    at: Path | None = None  # the path being written when an error comes
    try:
        for at, data in files.items():
            at.parent.mkdir(parents=True, exist_ok=True)
            staged[at] = _staged(at, data)
        for at in files:
            if at.is_dir():
                raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(at))
        for at, tmp in staged.items():
            os.replace(tmp, at)
    except OSError as exc:
        _remove(staged.values())
        # named by a file beside the path (its temporary file) or by none (a write): the path's;
        # a folder on its way (mkdir's) is named as it is
        if at is None or exc.errno is None or (exc.filename is not None and Path(exc.filename).parent != at.parent):
            raise
        raise OSError(exc.errno, exc.strerror, str(at)) from None
    except BaseException:
        _remove(staged.values())
        raise
    for folder in dict.fromkeys(path.parent for path in files):
        dir_fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def _staged(path: Path, data: bytes) -> str:
    """A temporary file beside `path` that holds `data`, fsynced; its path."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        # mkstemp makes the file 0600; a file written in place would get 0666 less the umask, as a
        # bundle's logs do: a bundle shared with another user must be readable whole.
        os.fchmod(fd, plain_file_mode())
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return tmp


def _remove(temporaries: Iterable[str]) -> None:
    for tmp in temporaries:
        Path(tmp).unlink(missing_ok=True)


def json_bytes(data: Any) -> bytes:
    """`data` as the harness writes JSON files: indented, keys sorted, strict (no NaN)."""
    return (json.dumps(data, indent=1, sort_keys=True, allow_nan=False) + "\n").encode()


def write_json_atomic(path: Path, data: Any) -> None:
    write_bytes_atomic(path, json_bytes(data))
