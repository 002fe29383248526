"""What runs beside a timed region: this process's threads, other processes, stolen time.

Read from /proc before and after a region, never inside it: for each thread of this process its
CPU time and the CPU it last ran on; the CPU time by kind of each CPU from /proc/stat (steal is
what a hypervisor gave other guests); this process's CPU time. The difference says which of our
threads were busy (the model's thread pool, LoadGen's, a sampler), how much CPU other processes
took on the cell's own CPUs and how much was stolen there: the usual reasons a figure moves on a
shared machine. The cell's own CPUs are those its threads may run on (their affinity: a `--jobs`
slot's, a cpuset container's): counted over the whole host, a Kubernetes node's or a desktop's
busy cores that the cell never touches read as a busy machine. Where /proc/stat's per-CPU lines
cannot be read, its aggregate line and os.cpu_count() stand in (the whole machine). Linux only;
elsewhere `snapshot()` returns None and nothing is recorded. Resolution: the kernel's clock tick
(10 ms), so regions of a second or more read well.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

BUSY_THREAD_SHARE = 0.01  # a thread counts as running beside the region above 1% of its wall time
_PROC = Path("/proc")


Ticks = tuple[int, int]  # (non-idle, stolen) clock ticks of a CPU, or of all of them


@dataclass(frozen=True)
class Snapshot:
    wall_ns: int
    threads: dict[int, tuple[str, int, int]]  # tid -> (name, CPU ticks, CPU it last ran on)
    machine_ticks: Ticks  # every CPU's, all processes: /proc/stat's aggregate line
    cpu_ticks: dict[int, Ticks]  # each CPU's, all processes; empty where the per-CPU lines cannot be read
    own_cpus: frozenset[int]  # the CPUs this process's threads may run on; empty where unknown
    process_ticks: int


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


def _ticks(fields: list[str]) -> Ticks:
    user, nice, system, idle, iowait, irq, softirq, steal = (int(v) for v in fields[:8])
    return user + nice + system + irq + softirq, steal


def _per_cpu(stat_lines: list[str]) -> dict[int, Ticks]:
    """Each CPU's ticks from /proc/stat's `cpuN` lines; empty where one cannot be read."""
    found = {}
    try:
        for line in stat_lines[1:]:
            fields = line.split()
            if fields and fields[0].startswith("cpu") and fields[0][3:].isdigit():
                found[int(fields[0][3:])] = _ticks(fields[1:])
    except ValueError:
        return {}
    return found


def _allowed(tid: int) -> set[int]:
    """The CPUs thread `tid` (0: this one) may run on; empty where that cannot be read (the
    thread ended, or no CPU affinity on this system)."""
    try:
        return os.sched_getaffinity(tid) if hasattr(os, "sched_getaffinity") else set()
    except OSError:
        return set()


def snapshot(proc: Path = _PROC, allowed: Callable[[int], set[int]] = _allowed) -> Snapshot | None:
    """What has run so far, read from `proc`. The cell's own CPUs are those any of this process's
    threads may run on, by `allowed`: one thread's affinity is not the cell's where a pool pins
    each of its threads, this one among them, to a core of its own (TVM's, on the whole machine)."""
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
        stat = (proc / "stat").read_text().splitlines()
        machine = _ticks(stat[0].split()[1:])
    except (OSError, ValueError, IndexError):
        return None
    return Snapshot(
        wall_ns=time.monotonic_ns(),
        threads=threads,
        machine_ticks=machine,
        cpu_ticks=_per_cpu(stat),
        own_cpus=frozenset(allowed(0).union(*(allowed(tid) for tid in threads))),
        process_ticks=int(own[11]) + int(own[12]),
    )


def _counted(before: Snapshot, after: Snapshot) -> tuple[Ticks, int]:
    """The (non-idle, stolen) ticks during the region on the cell's own CPUs (where its threads
    could run at either end) and how many CPUs they are; the whole machine's and os.cpu_count()
    where one of them has no per-CPU line at either end."""
    cpus = before.own_cpus | after.own_cpus
    if cpus and all(cpu in before.cpu_ticks and cpu in after.cpu_ticks for cpu in cpus):
        start, end, count = [before.cpu_ticks[cpu] for cpu in cpus], [after.cpu_ticks[cpu] for cpu in cpus], len(cpus)
    else:
        start, end, count = [before.machine_ticks], [after.machine_ticks], os.cpu_count() or 1
    return (sum(t[0] for t in end) - sum(t[0] for t in start), sum(t[1] for t in end) - sum(t[1] for t in start)), count


def compare(before: Snapshot | None, after: Snapshot | None) -> dict[str, Any]:
    """What ran during the region between two snapshots, in seconds of CPU time: other processes'
    and the hypervisor's on the cell's own CPUs (`cpus` of them)."""
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
    (busy_ticks, steal_ticks), cpus = _counted(before, after)
    machine_s = busy_ticks / tick
    return {
        "wall_s": round(wall_s, 4),
        "process_cpu_s": round(process_s, 3),
        "busy_threads": [thread._asdict() for thread in sorted(busy, key=lambda t: -t.cpu_s)],
        "other_processes_cpu_s": round(max(machine_s - process_s, 0.0), 3),
        "stolen_cpu_s": round(steal_ticks / tick, 3),
        "cpus": cpus,
    }
