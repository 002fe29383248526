"""A bounded wait for processes just sent SIGKILL to end. The kernel delivers a kill after `kill`
returns, and a process still ending holds what it held: its memory, its mounts, its device files (a
GPU context among them). What runs next (an unmount, the next cell on the same GPU) waits here."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

KILLED_WAIT_S = 5.0  # how long to wait for killed processes to end
POLL_S = 0.02
PROC = Path("/proc")


def wait_until_ended(running: Callable[[], bool], timeout_s: float = KILLED_WAIT_S) -> bool:
    """Ask `running` (whether any of the killed processes still runs) until it says no, for up to
    `timeout_s`; return whether they all ended."""
    deadline = time.monotonic() + timeout_s
    while running():
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_S)
    return True


def group_running(pgid: int, proc: Path = PROC) -> bool:
    """Whether a process of the process group `pgid` still runs (a zombie has ended), read from
    /proc: a group's members outlive its leader's end, reparented, and keep their group."""
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:
            continue
        # the command name is in parentheses and may hold either: state, parent, group come after the last ")"
        fields = text[text.rfind(")") + 2:].split()
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
            return True
    return False
