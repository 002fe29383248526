"""Which cells of several bundles ran slower, and which faster, than eager on their model and
setting, and why: beside each cell's speedup over eager, where its kernel time differs from
eager's by operator class (harness/reporting/class_moves.py), the largest difference first.

A cell is slower (or faster) by its verdict over the rounds where the bundle's rounds took turns by
setting (`over_baseline`), else by more than the smallest effect, 5% (its time over rounds against
eager's: one estimate, no verdict); a cell within that is in neither table.
"""

from __future__ import annotations

from collections.abc import Callable

from harness.reporting.findings import BASELINE, Group, against_eager, is_valid
from harness.reporting.kernels import classes_against, slowest_kernels
from harness.reporting.speedups import is_slower, over_baseline, slower_beyond_noise, times_faster
from harness.stats.intervals import FASTER, FASTER_UNCLEAR, SMALLEST_EFFECT, Speedup

HEAD = ["model and setting", "backend", "vs eager (fusion on)", "vs eager (fusion off)",
        "time against eager: in kernels, outside them, by operator class (fusion on)",
        "most time with the backend (fusion on)", "most time with eager"]


def _is_faster(result: Speedup) -> bool:
    """Faster by the verdict where the speedup has an interval, else by more than the smallest effect."""
    return result.verdict in (FASTER, FASTER_UNCLEAR) if result.interval is not None else result.value > 1 + SMALLEST_EFFECT


def _beside_eager(all_groups: list[Group], paired_test: Callable[[Speedup], bool],
                  one_estimate_test: Callable[[float], bool]) -> tuple[list[str], list[list[str]]]:
    """Every valid cell (fusion on) checked against eager whose speedup over eager passes the test:
    `paired_test` on the paired rounds' speedup where there is one, else `one_estimate_test` on the
    ratio of the two times over rounds. Each row ends with where its time differs from eager's, inside
    kernels, outside them and by operator class (`-` where either cell lists no kinds), and the kernels
    each side spends the most time in (`-` where its profile timed none)."""
    body = []
    for group in all_groups:
        eager = group.eager
        if eager is None:
            continue
        for line in group.lines:
            on = line.on
            if line.backend == BASELINE or on is None or not is_valid(on) or not on.checked_against_eager:
                continue
            paired = over_baseline(on, eager, group.paired and eager is group.own_eager)
            faster = times_faster(on, eager)
            if paired_test(paired) if paired is not None else faster is not None and one_estimate_test(faster):
                title = group.title + (f" (eager from {group.borrowed[1]})" if group.own_eager is None and group.borrowed else "")
                body.append([title, line.backend, against_eager(group, on), against_eager(group, line.off),
                             "; ".join(classes_against(on, eager)) or "-", "; ".join(slowest_kernels(on)) or "-",
                             "; ".join(slowest_kernels(eager)) or "-"])
    return HEAD, body


def slower_than_eager(all_groups: list[Group]) -> tuple[list[str], list[list[str]]]:
    """Every valid cell (fusion on) that ran slower than eager on its model and setting, with where its
    kernel time differs from eager's by operator class."""
    return _beside_eager(all_groups, is_slower, slower_beyond_noise)


def faster_than_eager(all_groups: list[Group]) -> tuple[list[str], list[list[str]]]:
    """Every valid cell (fusion on) that ran faster than eager on its model and setting, with where its
    kernel time differs from eager's by operator class."""
    return _beside_eager(all_groups, _is_faster, lambda value: value > 1 + SMALLEST_EFFECT)
