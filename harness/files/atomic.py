"""Crash-safe file writes: write a temporary file beside the target, fsync, rename over it.

A reader sees either the old file or the whole new one, never a torn write, so an interrupted
run loses nothing it had finished.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from harness.file_modes import plain_file_mode


def write_bytes_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        # mkstemp makes the file 0600; a file written in place would get 0666 less the umask, as a
        # bundle's logs do: a bundle shared with another user must be readable whole.
        os.fchmod(fd, plain_file_mode())
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def json_bytes(data: Any) -> bytes:
    """`data` as the harness writes JSON files: indented, keys sorted, strict (no NaN)."""
    return (json.dumps(data, indent=1, sort_keys=True, allow_nan=False) + "\n").encode()


def write_json_atomic(path: Path, data: Any) -> None:
    write_bytes_atomic(path, json_bytes(data))
