"""Reading a file someone else named: a regular file only, bounded in size. A FIFO, a device, a
socket or a directory is refused at once (the file is opened without blocking, so a FIFO with no
writer never holds the reader), and a symbolic link as the last part of the path is refused too unless the caller follows links."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO

from harness.errors import HarnessError

#: What the system answers when it will not, or cannot, read a file for this user (its permissions,
#: a failing disk): nothing about what the file holds.
_REFUSALS = frozenset({errno.EACCES, errno.EPERM, errno.EIO})


def refused(exc: OSError) -> bool:
    """Whether `exc` says the system would not or could not read a path for this user, rather than
    anything about the path (missing, a link, not a folder)."""
    return exc.errno in _REFUSALS


def open_regular(path: Path, where: str, *, error: type[HarnessError] = HarnessError,
                 unreadable: type[HarnessError] | None = None, follow_links: bool = False) -> BinaryIO:
    """The regular file at `path`, open for reading; `error` naming `where` for a missing file, a
    link (unless `follow_links`: a file the user names may be one), or a FIFO or other special file
    (refused at once, never waited on). `unreadable` (default: `error`) for one the system will not
    let this user read, or fails to read (`refused`)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow_links else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise error(f"{where}: missing") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise error(f"{where}: is a symbolic link; only regular files are read") from None
        raise _unreadable(exc, error, unreadable)(f"{where}: unreadable ({exc.strerror})") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # before fdopen, which refuses a directory in words of its own
        os.close(fd)
        raise error(f"{where}: not a regular file (a FIFO, device, socket or directory); refused")
    return os.fdopen(fd, "rb")


def read_regular(path: Path, where: str, *, max_bytes: int, error: type[HarnessError] = HarnessError,
                 unreadable: type[HarnessError] | None = None, follow_links: bool = False) -> bytes:
    """The bytes of the regular file at `path`; `error` naming `where` for a missing file, a link
    (unless `follow_links`: a file the user names may be one), a FIFO or other special file, or one
    over `max_bytes`; `unreadable` (default: `error`) as `open_regular` says."""
    with open_regular(path, where, error=error, unreadable=unreadable, follow_links=follow_links) as handle:
        size = os.fstat(handle.fileno()).st_size
        if size > max_bytes:
            raise error(f"{where}: {size} bytes, over the {max_bytes}-byte limit for this file")
        try:
            data = handle.read(max_bytes + 1)
        except OSError as exc:
            raise _unreadable(exc, error, unreadable)(f"{where}: unreadable ({exc.strerror})") from None
    if len(data) > max_bytes:
        raise error(f"{where}: over the {max_bytes}-byte limit for this file")
    return data


def _unreadable(exc: OSError, error: type[HarnessError], unreadable: type[HarnessError] | None) -> type[HarnessError]:
    """The error to raise for `exc`, met opening or reading a file."""
    return unreadable if unreadable is not None and refused(exc) else error
