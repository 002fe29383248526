"""Processes and mounts on the host, read from /proc, for the engine (harness/container/engine.py): which
processes a daemon started (by parentage and start time, never by what their command line
mentions), and which mounts lie under a folder.

A PID alone does not name a process: once it ends, the kernel may give its number to another.
A process is named here by its PID and its start time (`/proc/PID/stat` field 22, clock ticks since
boot), which no later process with the same PID shares.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness import proc_stat

PROC = proc_stat.PROC


@dataclass(frozen=True)
class Process:
    """A process as it was when read: its PID and its start time since boot, in clock ticks."""

    pid: int
    start: int

    def running(self) -> bool:
        """Whether this same process (not a later one given its PID) is still there, and not a zombie."""
        stat = proc_stat.read(self.pid)
        return stat is not None and stat.start == self.start and stat.state != "Z"


def process(pid: int) -> Process | None:
    """The process `pid` names now, or None."""
    stat = proc_stat.read(pid)
    return None if stat is None else Process(pid, stat.start)


def descendants(root: Process) -> list[Process]:
    """Every process below `root` in the process tree now (children, their children, ...), where
    `root` is still that process; none otherwise."""
    if not root.running():
        return []
    parents: dict[int, list[Process]] = {}
    for pid in proc_stat.pids():
        stat = proc_stat.read(pid)
        if stat is not None:
            parents.setdefault(stat.parent, []).append(Process(pid, stat.start))
    found: list[Process] = []
    queue = [root.pid]
    while queue:
        for child in parents.get(queue.pop(), []):
            found.append(child)
            queue.append(child.pid)
    return found


def _unescaped(field: str) -> str:
    """A mountinfo path with its octal escapes (`\\040` for a space) decoded."""
    out, index = [], 0
    while index < len(field):
        if field[index] == "\\" and field[index + 1:index + 4].isdigit():
            out.append(chr(int(field[index + 1:index + 4], 8)))
            index += 4
        else:
            out.append(field[index])
            index += 1
    return "".join(out)


def mounts_under(folder: Path, mountinfo: Path = PROC / "self" / "mountinfo") -> list[Path]:
    """The mount points at or under `folder`, deepest first (the order they can be unmounted in)."""
    try:
        lines = mountinfo.read_text().splitlines()
    except OSError:
        return []
    points = {Path(_unescaped(line.split()[4])) for line in lines if len(line.split()) > 4}
    inside = [p for p in points if p == folder or p.is_relative_to(folder)]
    return sorted(inside, key=lambda p: (-len(p.parts), str(p)))
