"""Which logical CPUs share a physical core (SMT siblings), as Linux lists them: what the parent
needs to cut `--jobs` slots and Ray claims by physical core, and a worker to time a hand-off
between two physical cores rather than two threads of one."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path


def siblings(cpu: int) -> set[int]:
    """The logical CPUs that share `cpu`'s physical core (its SMT siblings, itself included), as
    Linux lists them; {cpu} where it does not say."""
    try:
        text = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list").read_text().strip()
        found: set[int] = set()
        for part in text.split(","):
            low, _, high = part.partition("-")
            found.update(range(int(low), int(high or low) + 1))
        return found | {cpu}
    except (OSError, ValueError):
        return {cpu}


def physical_cores(cpus: list[int], siblings_of: Callable[[int], set[int]] = siblings) -> list[tuple[int, ...]]:
    """`cpus` grouped by physical core (the usable siblings of each), in the order of their first CPU."""
    usable, seen = set(cpus), set[int]()
    groups: list[tuple[int, ...]] = []
    for cpu in sorted(cpus):
        if cpu not in seen:
            group = tuple(sorted(siblings_of(cpu) & usable))
            seen.update(group)
            groups.append(group)
    return groups
