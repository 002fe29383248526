"""What runs beside a timed region: this process's threads, other processes, stolen time.

Read from /proc before and after a region, never inside it: for each thread of this process its
CPU time and the CPU it last ran on; the machine's CPU time by kind from /proc/stat (steal is
what a hypervisor gave other guests); this process's CPU time. The difference says which of our
threads were busy (the model's thread pool, LoadGen's, a sampler), how much CPU other processes
took and how much was stolen: the usual reasons a figure moves on a shared machine. Linux only;
elsewhere `snapshot()` returns None and nothing is recorded. Resolution: the kernel's clock tick
(10 ms), so regions of a second or more read well.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

BUSY_THREAD_SHARE = 0.01  # a thread counts as running beside the region above 1% of its wall time
_PROC = Path("/proc")


@dataclass(frozen=True)
class Snapshot:
    wall_ns: int
    threads: dict[int, tuple[str, int, int]]  # tid -> (name, CPU ticks, CPU it last ran on)
    machine_busy_ticks: int  # every CPU's non-idle time, all processes
    machine_steal_ticks: int
    process_ticks: int
    cpus: int


class BusyThread(NamedTuple):
    """A thread of this process that ran beside the region: recorded as an object of these fields."""

    tid: int
    name: str
    cpu_s: float  # CPU time it used during the region
    last_cpu: int  # the CPU it last ran on


def _stat_fields(text: str) -> tuple[str, list[str]]:
    """(comm, the fields after it) of a /proc/<pid>/stat line; comm may hold spaces and parens."""
    close = text.rindex(")")
    return text[text.index("(") + 1 : close], text[close + 2 :].split()


def snapshot(proc: Path = _PROC) -> Snapshot | None:
    try:
        threads = {}
        for task in (proc / "self" / "task").iterdir():
            try:
                name, fields = _stat_fields((task / "stat").read_text())
            except (OSError, ValueError):
                continue  # the thread ended while we listed
            # fields[0] is state (field 3): utime is field 14, stime 15, processor 39
            threads[int(task.name)] = (name, int(fields[11]) + int(fields[12]), int(fields[36]))
        _, own = _stat_fields((proc / "self" / "stat").read_text())
        cpu = (proc / "stat").read_text().splitlines()[0].split()[1:]
        user, nice, system, idle, iowait, irq, softirq, steal = (int(v) for v in cpu[:8])
    except (OSError, ValueError, IndexError):
        return None
    return Snapshot(
        wall_ns=time.monotonic_ns(),
        threads=threads,
        machine_busy_ticks=user + nice + system + irq + softirq,
        machine_steal_ticks=steal,
        process_ticks=int(own[11]) + int(own[12]),
        cpus=os.cpu_count() or 1,
    )


def compare(before: Snapshot | None, after: Snapshot | None) -> dict[str, Any]:
    """What ran during the region between two snapshots, in seconds of CPU time."""
    if before is None or after is None:
        return {"unavailable": "no /proc on this system"}
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    wall_s = (after.wall_ns - before.wall_ns) / 1e9
    busy: list[BusyThread] = []
    for tid, (name, ticks, last_cpu) in after.threads.items():
        used = (ticks - before.threads.get(tid, (name, 0, 0))[1]) / tick
        if used > BUSY_THREAD_SHARE * wall_s:
            busy.append(BusyThread(tid=tid, name=name, cpu_s=round(used, 3), last_cpu=last_cpu))
    process_s = (after.process_ticks - before.process_ticks) / tick
    machine_s = (after.machine_busy_ticks - before.machine_busy_ticks) / tick
    return {
        "wall_s": round(wall_s, 4),
        "process_cpu_s": round(process_s, 3),
        "busy_threads": [thread._asdict() for thread in sorted(busy, key=lambda t: -t.cpu_s)],
        "other_processes_cpu_s": round(max(machine_s - process_s, 0.0), 3),
        "stolen_cpu_s": round((after.machine_steal_ticks - before.machine_steal_ticks) / tick, 3),
        "cpus": after.cpus,
    }
