"""A speedup of one cell over another: one estimate (`times_faster`) or, where their rounds pair, a
verdict over them (`over_baseline`); when it counts as slower; and the marks it carries beside it
(`noisy`, `busy`, the cores each side kept busy), the report's and `findings`' speedups alike."""

from __future__ import annotations

from harness import metric_table
from harness.bundle.figures_check import BUSY as BUSY_WARNING
from harness.metric_table import format_times, format_value
from harness.reporting.cell_rows import Row
from harness.stats.intervals import ONE_ROUND, SLOWER, SLOWER_UNCLEAR, SMALLEST_EFFECT, UNPAIRED, Speedup, paired_speedup
from harness.stats.summary import NOISY_CV


def times_faster(row: Row, base: Row) -> float | None:
    """How many times faster `row` ran than `base`: base's time over row's, each the median over its
    rounds (`Row.time_ns`), as the tables show them. One estimate, no interval (`over_baseline` gives
    one where the rounds pair)."""
    mine, theirs = row.time_ns, base.time_ns
    return None if mine is None or theirs is None else theirs / mine


def one_estimate_text(row: Row, base: Row) -> str | None:
    """`times_faster` as the tables give it, saying that it is one estimate and why it has no interval:
    `0.94x (one round)`, or `1.05x (one estimate, rounds not paired)` where both cells have rounds that
    did not take turns. A fusion speedup of one round says so; a speedup over eager stood bare, as if
    measured as well as one with its interval (Inductor's resnet18 on the H200, `0.94x`)."""
    faster = times_faster(row, base)
    if faster is None:
        return None
    rounds = min(len(row.round_medians), len(base.round_medians))
    return f"{format_times(faster)} ({ONE_ROUND if rounds < 2 else f'one estimate, {UNPAIRED}'})"


def is_slower(result: Speedup) -> bool:
    """Slower by the verdict where the speedup has an interval, else by more than the smallest effect
    (one estimate at 0.99x is no finding)."""
    return result.verdict in (SLOWER, SLOWER_UNCLEAR) if result.interval is not None else slower_beyond_noise(result.value)


def over_baseline(row: Row, base: Row, paired: bool) -> Speedup | None:
    """`row`'s speedup over `base` (base's time over row's) from their paired rounds, with its
    interval and verdict, as a fusion pair's: where the rounds of the setting took turns (`paired`,
    from `setting_paired`), both cells ran in one start, and the two share two rounds or more. None
    otherwise: then the rounds of the two ran at different times, and `times_faster` is one
    estimate."""
    mine, theirs = row.round_medians, base.round_medians
    common = sorted(set(mine) & set(theirs))
    if not paired or len(common) < 2 or row.start is None or row.start != base.start:
        return None
    return paired_speedup([mine[r] for r in common], [theirs[r] for r in common])


def slower_beyond_noise(value: float) -> bool:
    """A speedup below 1 by more than the smallest effect: a slowdown one estimate can name."""
    return value < 1 / (1 + SMALLEST_EFFECT)


#: What a speedup from a noisy cell carries, and what it means.
NOISY = " noisy"


def noisy_mark(*rows: Row) -> str:
    """`NOISY` where a cell's timing samples spread too far to trust as they are (the device time's
    `noisy`: a CV above 10%, in round 1 or in any further valid round a speedup over rounds takes):
    a speedup taken from it says so beside it, not only in the warnings."""
    return NOISY if any(_noisy(r) for r in rows) else ""


#: What a speedup from a cell timed beside other processes' work carries.
BUSY = " busy"


def busy_mark(*rows: Row) -> str:
    """`BUSY` where a cell warned that other processes took CPU during its timed calls (`a busy
    machine`, in round 1 or a further round): a speedup taken from it says so beside it, not only in
    the warnings. resnet50's TVM pair read 0.84x [0.76-0.94], slower, beside a test run at the lowest
    priority, and 0.94x [0.80-1.12] with the machine idle."""
    return BUSY if any(BUSY_WARNING in line for row in rows for line in row.record.warnings) else ""


def cores_mark(row: Row, other: Row) -> str:
    """Beside a figure that sets two CPU cells against each other: the cores each kept busy, where they
    differ by the metric's floor (half a core) or more. A speedup of one thread against two says so
    beside it; every TVM CPU cell once ran one thread of two beside eager's two, unsaid."""
    row_cores = metric_table.value("cpu_cores", row.record)
    other_cores = metric_table.value("cpu_cores", other.record)
    if row_cores is None or other_cores is None or abs(row_cores - other_cores) < metric_table.metric("cpu_cores").floor:
        return ""
    return f" (cores busy {format_value(row_cores, 'count')} against {format_value(other_cores, 'count')})"


def speedup_marks(row: Row, other: Row) -> str:
    """What a speedup that sets `row` against `other` carries beside it: `noisy`, `busy` and the cores
    each kept busy, where they apply (the report's and `findings`' speedups alike)."""
    return noisy_mark(row, other) + busy_mark(row, other) + cores_mark(row, other)


def _noisy(row: Row) -> bool:
    timing = row.metrics.device_time
    if timing is not None and timing.summary.noisy:
        return True
    return any(r.status == "valid" and r.cv is not None and r.cv > NOISY_CV for r in (row.metrics.rounds or [])[1:])
