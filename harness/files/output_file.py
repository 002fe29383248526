"""The one file a command writes where its `--out` names it (`compare --out`, `schema --out`): a
file already there is replaced only where it is empty or one the command itself wrote (how such a
file begins), since any other was replaced without a word (a scenario file given as `--out` by a
slip of the shell's completion was lost); a new file is written atomically, one there in place; a
device or a pipe (`/dev/stdout`, a process substitution) is written as named, where its link leads
nowhere a file could be made. A failed write is named by the path."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from harness.errors import ConfigError
from harness.files.atomic import write_bytes_atomic
from harness.plain_text import visible

#: How much of a file already at `--out` is read to tell whether the command wrote it.
MAX_READ_BYTES = 16 << 20


def check_replaceable(out: Path, command: str, ours: Callable[[bytes], bool]) -> None:
    """ConfigError unless `out` is free for `command`'s file: absent, not a regular file, empty
    (`mktemp`'s), or one `ours` knows by its first bytes (up to MAX_READ_BYTES; the command wrote
    it, and writes it again)."""
    if out.is_dir():
        raise ConfigError(f"--out {visible(out)}: a directory; give the path of the file to write")
    if not out.is_file():  # absent, or a device or pipe (/dev/stdout), which holds nothing to lose
        return
    with out.open("rb") as existing:
        start = existing.read(MAX_READ_BYTES)
    if start and not ours(start):  # an empty file holds nothing to lose
        raise ConfigError(f"--out {visible(out)}: a file {command} did not write is there, and would be replaced; give "
                          "another path, or remove it first")


def write_output(given: Path, resolved: Path, text: str) -> None:
    """Write `text` to `--out` (`given` as the user gave it, `resolved` as confine.output_path
    resolved it): a new file atomically; a file there already in place, as itself (its mode, its
    hard links, a folder this user may not write in around a file it may); a device or a pipe
    through the name given (`/dev/stdout` resolves to a pipe's name under /proc, which no open
    finds)."""
    data = text.encode("utf-8")
    if not given.exists():
        write_bytes_atomic(resolved, data)
        return
    target = resolved if given.is_file() else given
    try:
        with target.open("wb") as stream:
            stream.write(data)
    except OSError as exc:
        if exc.filename is not None or exc.errno is None:
            raise
        raise OSError(exc.errno, exc.strerror, str(given)) from None  # a write that failed once open names no file
