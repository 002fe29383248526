"""How fast the machine is right now, seen by the worker: three fixed reference loops read before
and after each timed repetition and around LoadGen's run, never inside them.

On a shared host the machine's speed steps for seconds at a time: a core at a time (a fixed loop
at 3.7 or 6.4 ms), the distance between two cores (a round trip of about 50 or 330 ns; both in
docs/results/cpu-2core-amd-2026-11-25.md), or the memory system it shares with its neighbours.
The loops do the same work every time, so a change in their time is the
machine's, not the model's: they tell a drift of the machine from a drift of the model.
- cores: a pure-Python loop of `LOOP` additions (about half a millisecond on the 2-core VMs)
  pinned to each of the worker's cores in turn (this thread only; its affinity is given back),
  `CHUNKS` times, each core's fastest chunk. The fastest, not the median: a thread of the model
  still spinning on that core right after its calls (ONNX Runtime's, OpenMP's) takes slices of
  some chunks, while a slow core slows them all. Linux only (CPU affinity).
- memory: a sum over `MEMORY_BYTES` (beyond the caches a core has to itself), `CHUNKS` times,
  the fastest. Its buffer is made by `prepare()`, before the worker reads its baseline memory.
- cross-core: the round trip of a cache line between the first two usable physical cores
  (harness/measure/core_latency.py), which a thread pool pays on every operator it splits.

A drift is put down to the machine only when one loop moved the same way as the figures, by at
least `EXPLAINS` of their change and by more than the loop's own jitter (the difference between
its two reads around either region): the per-core loop alone moves by 5-30% from read to read on
a noisy host.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from harness.measure import core_latency

LOOP = 40_000
CHUNKS = 5
MEMORY_BYTES = 32 << 20
EXPLAINS = 0.5
MAX_CORES = 8  # the first cores the worker may use: a read stays under ~30 ms on a large machine
CACHE_FOLDER = "machine"  # the artifact cache's folder of the compiled cross-core loop (cells and the run's noise probe share it)

_sweep: Any = None
_ping_pong: Any = None


def prepare(cache_dir: Path) -> None:
    """Make the memory loop's buffer (pages touched), so reads allocate nothing, and load the
    cross-core ping-pong (built into `cache_dir` the first time)."""
    global _sweep, _ping_pong
    import numpy as np

    _sweep = np.ones(MEMORY_BYTES // 4, dtype=np.float32)
    _ping_pong = core_latency.load(cache_dir)


def _fastest_ns(work: Any) -> int:
    chunks = []
    for _ in range(CHUNKS):
        start = time.perf_counter_ns()
        work()
        chunks.append(time.perf_counter_ns() - start)
    return min(chunks)


@contextmanager
def pinned(core: int) -> Iterator[None]:
    """Run this thread on `core` alone for the block; its affinity is given back after (Linux)."""
    allowed = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {core})
    try:
        yield
    finally:
        os.sched_setaffinity(0, allowed)


def _cores() -> dict[str, float] | None:
    if not hasattr(os, "sched_setaffinity"):
        return None
    times: dict[str, float] = {}
    for core in sorted(os.sched_getaffinity(0))[:MAX_CORES]:
        with pinned(core):
            times[str(core)] = _fastest_ns(lambda: sum(range(LOOP))) / 1e6
    return times


def read() -> dict[str, Any]:
    """`cores_ms`: each core's fastest chunk by core number (None without CPU affinity);
    `memory_ms`: the memory loop's fastest (None before `prepare()`); `cross_core_ns`: the round
    trip between the first two physical cores (None before `prepare()`, without a C compiler or a second core)."""
    sweep = _sweep
    return {"cores_ms": _cores(), "memory_ms": _fastest_ns(sweep.sum) / 1e6 if sweep is not None else None,
            "cross_core_ns": core_latency.measure(_ping_pong)}


def around(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """What a region's `beside` records: both reads."""
    return {"before": before, "after": after}


def _number(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0:
        return float(value)
    return None


LOOPS = ("cores", "memory", "cross-core")
Loop = tuple[float, float]  # (mean over the region's two reads, their difference over that mean)


def _read_figures(read: dict[str, Any]) -> dict[str, float | None]:
    per_core = read.get("cores_ms")
    cores = [_number(ms) for ms in per_core.values()] if isinstance(per_core, dict) and per_core else [None]
    return {"cores": statistics.mean(c for c in cores if c) if all(cores) else None,
            "memory": _number(read.get("memory_ms")), "cross-core": _number(read.get("cross_core_ns"))}


def indexes(recorded: Any) -> dict[str, Loop | None]:
    """Per loop for a region: the mean over its two reads (and over the cores; higher is slower)
    and the loop's own jitter there, |after - before| over that mean; None where a read is missing
    or unusable."""
    found = [recorded.get(when) for when in ("before", "after")] if isinstance(recorded, dict) else []
    reads = [_read_figures(r) for r in found if isinstance(r, dict)]
    result: dict[str, Loop | None] = dict.fromkeys(LOOPS)
    if len(reads) == 2:
        for name in LOOPS:
            before, after = reads[0][name], reads[1][name]
            if before is not None and after is not None:
                mean = (before + after) / 2
                result[name] = (mean, abs(after - before) / mean)
    return result


def pooled(regions: list[dict[str, Loop | None]]) -> dict[str, Loop | None]:
    """Several regions as one: the mean of their means, the largest jitter; None unless every
    region has the loop."""
    result: dict[str, Loop | None] = dict.fromkeys(LOOPS)
    for name in LOOPS:
        loops = [region.get(name) for region in regions]
        usable = [loop for loop in loops if loop is not None]
        if usable and len(usable) == len(loops):
            result[name] = (statistics.mean(mean for mean, _ in usable), max(jitter for _, jitter in usable))
    return result


def explains(machine: float, figures: float) -> bool:
    """Whether a loop's relative change accounts for the figures' (same sign, at least EXPLAINS of it)."""
    return figures != 0 and machine / figures >= EXPLAINS


def moves(slow: dict[str, Loop | None], fast: dict[str, Loop | None], figures: float) -> dict[str, tuple[float, bool]]:
    """Per loop read in both regions: its change from `fast` to `slow`, and whether that accounts
    for the figures' change (`figures`: slow over fast, - 1): beyond its own jitter in either
    region, the same way as the figures and by at least EXPLAINS of their change."""
    moved: dict[str, tuple[float, bool]] = {}
    for name in LOOPS:
        now, base = slow.get(name), fast.get(name)
        if now is not None and base is not None:
            change = now[0] / base[0] - 1
            moved[name] = (change, abs(change) > max(now[1], base[1]) and explains(change, figures))
    return moved


def accounts_for(moved: dict[str, tuple[float, bool]]) -> bool:
    """Whether some loop of `moves` moved enough to account for the figures' change (`describe` says which)."""
    return any(counts for _, counts in moved.values())


def compare(slow: dict[str, Loop | None], fast: dict[str, Loop | None], figures: float, where: str) -> str:
    """How the loops moved from the `fast` region to the `slow` one (`where` names the two), and
    whether that accounts for the figures' change (`moves`). "" where no loop was read in both."""
    return describe(moves(slow, fast, figures), where)


def describe(moved: dict[str, tuple[float, bool]], where: str) -> str:
    """`moves` in words, as `compare` gives them."""
    if not moved:
        return ""
    parts = [f"{abs(change):.{0 if abs(change) >= 0.1 else 1}%} {'slower' if change >= 0 else 'faster'} ({name})"
             for name, (change, _) in moved.items()]
    said = " and ".join([", ".join(parts[:-1]), parts[-1]] if len(parts) > 1 else parts)
    counted = [name for name, (_, counts) in moved.items() if counts]
    if counted:
        return f"{where}, the reference loops were {said}: the machine's speed moved ({', '.join(counted)})"
    return (f"{where}, the reference loops were {said}, none beyond its own jitter and half the figures' change: "
            "the machine's own speed does not explain it")
