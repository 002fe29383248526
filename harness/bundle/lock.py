"""One process at a time writes a bundle: the run that made it, or the one resuming it.

Two `--resume` of one bundle would run the same cells at once and race on its files. The writer
takes an exclusive `flock` on the bundle's directory itself (no lock file, so the bundle holds
nothing validate would have to explain) and keeps it until the process ends; the kernel lets it
go when the process dies, however it dies, so a killed run never leaves a stale lock. A second
writer is refused at once, naming the holder's pid, read from /proc/locks.
"""

from __future__ import annotations

import os
from pathlib import Path

from harness import dirlock
from harness.errors import ConfigError

_PROC_LOCKS = Path("/proc/locks")


def hold(root: Path, then: str = "resume") -> int:
    """Lock the bundle directory `root` for this process; its file descriptor, kept open while the
    lock is needed. ConfigError naming the holder when another process has it, and what to do
    once it is gone (`then`)."""
    fd = dirlock.try_lock(root)
    if fd is None:
        holder = holder_pid(root)
        who = f"pid {holder}" if holder else "another process"
        raise ConfigError(f"{root}: {who} is running or resuming this bundle; wait for it to end, or stop it, "
                          f"then {then}")
    return fd


def holder_pid(root: Path) -> int | None:
    """The pid holding a flock on `root`, as /proc/locks lists it, or None where it cannot be told."""
    try:
        stat = os.stat(root)
        lines = _PROC_LOCKS.read_text().splitlines()
    except OSError:
        return None
    # the device's major and minor in hex, then the inode: another file system's inode of that number is not it
    where = f"{os.major(stat.st_dev):02x}:{os.minor(stat.st_dev):02x}:{stat.st_ino}"
    for line in lines:
        fields = line.split()
        # "1: FLOCK  ADVISORY  WRITE 4242 00:2e:131077 0 EOF"; a blocked waiter's line has "->" after the number
        if "->" in fields or len(fields) < 6 or fields[1] != "FLOCK" or fields[3] != "WRITE":
            continue
        if fields[5] == where and fields[4].isdigit() and int(fields[4]) > 0:  # 0: a holder outside this pid namespace
            return int(fields[4])
    return None


def writer_pid(root: Path) -> int | None:
    """The pid of another process writing the bundle at `root` (a run, a resume, a report into it),
    or None where none holds its lock, the holder cannot be told, or `root` is no folder this user
    can open (missing, a file)."""
    try:
        fd = dirlock.try_lock(root)
    except OSError:
        return None
    if fd is not None:  # free: no writer
        os.close(fd)
        return None
    holder = holder_pid(root)
    return holder if holder != os.getpid() else None
