"""An exclusive `flock` on a directory, held through an open file descriptor of it.

The kernel lets the lock go when the descriptor is closed or its process dies, however it dies,
so a lock never outlives its holder. Used for the bundle a run writes (harness/bundle/lock.py), a
cell's scratch folder (harness/run/scratch.py), an artifact cache entry being built
(harness/artifact_cache.py) and the folder of Inductor's vector instruction set record while a
cell adds to it (backends/inductor_isa.py, which waits a bounded time: `lock_within`).
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

#: How often `lock_within` tries again while another process holds the lock.
POLL_S = 0.05


def lock(folder: Path) -> int:
    """Lock `folder` for this process, waiting while another process holds it; the descriptor to
    keep open while the lock is needed. OSError when the folder cannot be opened."""
    fd = _open(folder, follow_symlink=True)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    except BaseException:
        os.close(fd)
        raise
    return fd


def lock_within(folder: Path, wait_s: float) -> int | None:
    """`lock`, waiting at most `wait_s` seconds: None where another process still holds it then (a
    holder suspended or hung holds it until it ends, and a plain `lock` waits as long). OSError
    when the folder cannot be opened."""
    deadline = time.monotonic() + wait_s
    while (fd := try_lock(folder)) is None and time.monotonic() < deadline:
        time.sleep(POLL_S)
    return fd


def try_lock(folder: Path, *, follow_symlink: bool = True) -> int | None:
    """Lock `folder` for this process; the descriptor to keep open while the lock is needed, or
    None when another process holds it. OSError when the folder cannot be opened (missing, not a
    directory, a symlink refused)."""
    fd = _open(folder, follow_symlink=follow_symlink)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open(folder: Path, *, follow_symlink: bool) -> int:
    return os.open(folder, os.O_RDONLY | os.O_DIRECTORY | (0 if follow_symlink else os.O_NOFOLLOW))
