"""A process's fields in /proc/PID/stat: its state, parent, process group and start time. Read by
the engine's process tree (harness/container/host_processes.py) and by the wait for a killed
worker's process group (harness/killed_wait.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")


@dataclass(frozen=True)
class Stat:
    """Of one process: `state` (`R`, `S`, `Z` for a zombie...), its `parent`'s PID, its process
    `group`, and its `start` time since boot in clock ticks (field 22)."""

    state: str
    parent: int
    group: int
    start: int


def read(pid: int, proc: Path = PROC) -> Stat | None:
    """`pid`'s fields, or None where there is no such process (or its stat cannot be read)."""
    try:
        text = (proc / str(pid) / "stat").read_text()
    except OSError:
        return None
    # The command name is in parentheses and may hold spaces or parentheses itself: split after the last ")".
    fields = text[text.rfind(")") + 2:].split()
    try:
        return Stat(fields[0], int(fields[1]), int(fields[2]), int(fields[19]))
    except (IndexError, ValueError):
        return None


def pids(proc: Path = PROC) -> list[int]:
    """The PIDs /proc lists now."""
    return [int(entry.name) for entry in proc.iterdir() if entry.name.isdigit()]
