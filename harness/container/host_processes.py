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

PROC = Path("/proc")


@dataclass(frozen=True)
class Process:
    """A process as it was when read: its PID and its start time since boot, in clock ticks."""

    pid: int
    start: int

    def running(self) -> bool:
        """Whether this same process (not a later one given its PID) is still there, and not a zombie."""
        stat = _stat(self.pid)
        return stat is not None and stat[1] == self.start and stat[2] != "Z"


def _stat(pid: int) -> tuple[int, int, str] | None:
    """(parent PID, start time, state) of `pid`, or None where there is no such process."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # The command name is in parentheses and may hold spaces or parentheses itself: split after the last ")".
    fields = text[text.rfind(")") + 2:].split()
    try:
        return int(fields[1]), int(fields[19]), fields[0]
    except (IndexError, ValueError):
        return None


def process(pid: int) -> Process | None:
    """The process `pid` names now, or None."""
    stat = _stat(pid)
    return None if stat is None else Process(pid, stat[1])


def descendants(root: Process) -> list[Process]:
    """Every process below `root` in the process tree now (children, their children, ...), where
    `root` is still that process; none otherwise."""
    if not root.running():
        return []
    parents: dict[int, list[Process]] = {}
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        stat = _stat(int(entry.name))
        if stat is not None:
            parents.setdefault(stat[0], []).append(Process(int(entry.name), stat[1]))
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
