"""A bounded wait for processes just sent SIGKILL to end. The kernel delivers a kill after `kill`
returns, and a process still ending holds what it held: its memory, its mounts, its device files (a
GPU context among them). What runs next (an unmount, the next cell on the same GPU) waits here."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from harness import proc_stat

KILLED_WAIT_S = 5.0  # how long to wait for killed processes to end
POLL_S = 0.02


def wait_until_ended(running: Callable[[], bool], timeout_s: float = KILLED_WAIT_S) -> bool:
    """Ask `running` (whether any of the killed processes still runs) until it says no, for up to
    `timeout_s`; return whether they all ended."""
    deadline = time.monotonic() + timeout_s
    while running():
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_S)
    return True


def group_running(pgid: int, proc: Path = proc_stat.PROC) -> bool:
    """Whether a process of the process group `pgid` still runs (a zombie has ended), read from
    /proc: a group's members outlive its leader's end, reparented, and keep their group."""
    for pid in proc_stat.pids(proc):
        stat = proc_stat.read(pid, proc)
        if stat is not None and stat.group == pgid and stat.state not in ("Z", "X"):
            return True
    return False
