"""How `fusionbench compare` judges one pair of cells (a config valid in both bundles): the label of
the pair, by device time, and the verdict on each figure of the metric table.

For two valid cells the figure is the median of the device-timing samples (per batch, lower is
better; of a cell timed over several rounds, the median of its rounds' medians, as the report shows
it) and the ratio B/A. A difference counts only when two tests agree (asv's rule):
- the ratio is beyond the threshold (default 5%) either way: B/A > 1 + t is slower, B/A < 1 / (1 + t)
  faster;
- a two-sided test gives p < alpha (0.01), pointing the same way: where either cell was timed over
  several rounds, Student's t on the logs of the two cells' rounds' medians (each round a fresh
  process: the variation between processes is in it; `rounds_t_test`); else the Mann-Whitney U
  test on the two raw sample sets of one process each, whose samples are consecutive calls, not
  independent draws of a process's speed, so that p is a guide rather than an exact error rate.
A change from a noisy cell (timing CV over 10%) keeps its label and says so (`noisy`).

Every other figure `compare` judges (harness/metric_table.py: LoadGen's figure, kernels per
inference, fusions, peak memory, compile time, accuracy) is one number a side, with no samples for a
rank test: B/A beyond the threshold decides ("ratio"), or any change for a count a rerun reproduces
("exact"). Each gets better, worse or same by its row's direction, changed where neither way is
better (the fusions: its why names the fused groups each side lacks), or not comparable with why (one
cell lacks it, or the cells differ in a setting it depends on: a cold against a warm compile;
accuracy between runs whose input folders held other images, by bundle.json's `inputs_sha256`).
They inform; the label of a pair and the exit code follow device time and failures as before.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from harness import metric_table
from harness.bundle.cell_record import CellRecord
from harness.bundle.statuses import BAD
from harness.metric_table import Metric, format_value
from harness.plain_text import one_line
from harness.reporting.cell_rows import Row, fmt_time_over_rounds
from harness.reporting.pairing import RunsApart, runs_apart
from harness.reporting.speedups import noisy_mark
from harness.stats.intervals import rounds_t_test
from harness.stats.summary import mann_whitney_u, median, u_test_method

LABELS = ("regressed", "new failure", "improved", "fixed", "not significant", "not comparable")
WORSE = ("regressed", "new failure")  # the labels that stop CI
VERDICTS = ("worse", "better", "changed", "same", "not comparable")  # of one figure of a pair; changed: of a row neither way better
_DEVICE_TIME = {"regressed": "worse", "improved": "better", "not significant": "same", "not comparable": "not comparable"}
ALPHA = 0.01


@dataclass
class Figure:
    """One figure of a pair of valid cells, judged by its row of the metric table."""

    metric: str
    better: str  # "lower", "higher" or "None" (neither way is better)
    rule: str  # "rank test", "ratio" or "exact" (harness/metric_table.py)
    a: float | None
    b: float | None
    a_shown: str  # as the console summary and the report show it (harness/metric_table.py)
    b_shown: str
    verdict: str = "not comparable"
    ratio: float | None = None  # B/A where both are positive
    why: str = ""


@dataclass
class Pair:
    id: str
    label: str
    backend: str
    verdict: str
    why: str = ""
    median_a_ns: float | None = None
    median_b_ns: float | None = None
    ratio: float | None = None  # B/A of the medians; < 1 is faster
    p_value: float | None = None
    test: str | None = None  # how p was found: a t test on rounds' medians, or the rank test's "exact" or "normal approximation"
    valid_rounds: tuple[int, int] = (0, 0)  # (A, B): the valid rounds each side's device time was taken over
    figures: list[Figure] = field(default_factory=list)  # every figure judged, device time first
    noisy: bool = False  # a side's timing samples spread beyond 10% of their mean (speedups.noisy_mark)
    #: Where the cells ran on different hardware: `other hardware (A's vs B's)`. Their figures are set
    #: side by side (medians, `figures`), each judged not at all: the verdict stays not comparable.
    not_judged: str = ""
    #: B/A of the medians of cells on different hardware: information, never a verdict (`ratio` and
    #: the geometric means hold judged pairs only).
    ratio_not_judged: float | None = None
    machine_moved: bool = False  # the machine's reference loops moved enough to account for a change


def compare_cells(cell_a: CellRecord, cell_b: CellRecord, threshold: float, alpha: float,
                  passed: frozenset[str] = frozenset()) -> Pair:
    """The verdict for one cell present in both bundles; `passed` names the variables either run's
    scenario passed to its cells (`env:`), whose values the two must share to be judged."""
    pair = Pair(id=cell_a.id, label=cell_a.config.shown_label, backend=cell_a.config.backend, verdict="not comparable")
    a, b = cell_a.status, cell_b.status
    if a == "valid" and b in BAD:
        pair.verdict, pair.why = "new failure", f"B {_first_reason(cell_b)}"
        return pair
    if a in BAD and b == "valid":
        pair.verdict, pair.why = "fixed", f"A {_first_reason(cell_a)}"
        return pair
    if a != "valid" or b != "valid":
        reason_a, reason_b = _first_reason(cell_a), _first_reason(cell_b)
        pair.why = f"both {reason_a}" if reason_a == reason_b else f"A {reason_a}; B {reason_b}"
        return pair
    apart = runs_apart(cell_a, cell_b, passed)
    if apart.words():
        pair.why = apart.words()
        if apart.hardware is not None and not apart.math:  # the hardware is what sets them apart first
            _side_by_side(pair, cell_a, cell_b, apart)
        return pair
    _device_time(pair, cell_a, cell_b, threshold, alpha)
    device = metric_table.metric("device_time")
    pair.figures = [Figure(device.name, str(device.better), device.rule,
                           pair.median_a_ns if pair.median_a_ns is not None else device.value(cell_a),
                           pair.median_b_ns if pair.median_b_ns is not None else device.value(cell_b),
                           _shown_time(cell_a), _shown_time(cell_b), _DEVICE_TIME[pair.verdict], pair.ratio, pair.why)]
    pair.figures += [judge(m, cell_a, cell_b, threshold) for m in metric_table.compared()
                     if m.rule != "rank test" and (m.value(cell_a) is not None or m.value(cell_b) is not None)]
    return pair


def _side_by_side(pair: Pair, cell_a: CellRecord, cell_b: CellRecord, apart: RunsApart) -> None:
    """Set two cells of one config that ran on different hardware side by side, judging nothing: a lab
    reproducing a run on its own machine reads each figure beside the original's, where the pair showed
    none, and B/A of the medians as information (`ratio_not_judged`). Another machine's speed is no
    regression or improvement of the code, so no figure gets a verdict. Another share of the machines
    (a `taskset`, a `--jobs` slot), threads or `env:` values that differ too are named: they move the
    figures as much as the machine does."""
    assert apart.hardware is not None  # set side by side for their hardware
    machines = apart.hardware
    besides = [f"other shares of the machines ({apart.share[0]} vs {apart.share[1]})" if apart.share else "",
               f"other threads or variables ({apart.threads})" if apart.threads else ""]
    pair.not_judged = f"other hardware ({machines[0]} vs {machines[1]})" + "".join(f", and {b}" for b in besides if b)
    samples_a, samples_b = _samples(cell_a), _samples(cell_b)
    pair.median_a_ns = _median_ns(cell_a, samples_a) if samples_a else None
    pair.median_b_ns = _median_ns(cell_b, samples_b) if samples_b else None
    if pair.median_a_ns and pair.median_b_ns and pair.median_a_ns > 0 and pair.median_b_ns > 0:
        pair.ratio_not_judged = pair.median_b_ns / pair.median_a_ns
    why = f"not judged: {pair.not_judged}"
    device = metric_table.metric("device_time")
    pair.figures = [Figure(device.name, str(device.better), device.rule, pair.median_a_ns, pair.median_b_ns,
                           _shown_time(cell_a), _shown_time(cell_b), why=why)]
    pair.figures += [Figure(m.name, str(m.better), m.rule, m.value(cell_a), m.value(cell_b), m.figure(cell_a),
                            m.figure(cell_b), why=why) for m in metric_table.compared()
                     if m.rule != "rank test" and (m.value(cell_a) is not None or m.value(cell_b) is not None)]


def _device_time(pair: Pair, cell_a: CellRecord, cell_b: CellRecord, threshold: float, alpha: float) -> None:
    """Label `pair` by its device time: the ratio of the medians (over the rounds where a cell has
    several) and a test pointing the same way: t on the logs of the rounds' medians where either cell has two
    rounds or more (`rounds_t_test`), else the rank test on the samples of one process a side."""
    samples_a, samples_b = _samples(cell_a), _samples(cell_b)
    if not samples_a or not samples_b:  # the rank test takes any sizes (exact when small) but not none
        pair.why = f"no timing samples for the rank test ({len(samples_a)} and {len(samples_b)})"
        return
    pair.median_a_ns, pair.median_b_ns = _median_ns(cell_a, samples_a), _median_ns(cell_b, samples_b)
    if pair.median_a_ns <= 0 or pair.median_b_ns <= 0:
        pair.why = "a median batch time of 0 ns (the null backend computes nothing)"
        return
    pair.ratio = pair.median_b_ns / pair.median_a_ns
    row_a, row_b = Row(cell_a), Row(cell_b)
    rounds_a, rounds_b = list(row_a.round_medians.values()), list(row_b.round_medians.values())
    pair.valid_rounds = len(rounds_a), len(rounds_b)
    tested = rounds_t_test(rounds_a, rounds_b)
    if tested is not None:  # the variation between processes is in the test
        difference, pair.p_value = tested
        pair.test = f"t test on {len(rounds_a)} and {len(rounds_b)} round(s)' medians"
        same_way = (difference > 0) == (pair.ratio > 1)
    else:  # one process a side: its samples are all there is
        u_a, pair.p_value = mann_whitney_u(samples_a, samples_b)
        pair.test = u_test_method(samples_a, samples_b)
        same_way = (u_a < len(samples_a) * len(samples_b) / 2) == (pair.ratio > 1)  # A's samples rank low: B slower
    beyond = not within(pair.ratio, threshold)
    pair.noisy = bool(noisy_mark(row_a, row_b))
    if beyond and pair.p_value < alpha and same_way:
        pair.verdict = "regressed" if pair.ratio > 1 else "improved"
        if pair.noisy:  # the verdict stands, said with its caveat: a CI gate may not trust it alone
            sides = " and ".join(side for side, row in (("A", row_a), ("B", row_b)) if noisy_mark(row))
            rounds = "" if max(pair.valid_rounds) > 1 else ", or time over rounds (--rounds)"
            pair.why = (f"noisy: {sides}'s timing samples spread beyond 10% of their mean (the cell's warnings say "
                        f"why); rerun on a quieter machine{rounds}")
        said, pair.machine_moved = _machine(cell_a, cell_b, pair.ratio)
        pair.why = "; ".join(part for part in (pair.why, said) if part)
    else:
        pair.verdict = "not significant"
        if not beyond:
            pair.why = f"within {percent(threshold)} (B/A {pair.ratio:.3f})"
        elif pair.p_value >= alpha:
            # in words: compare prints Markdown, where a `<` is written `&lt;` (a cell's text may hold a tag)
            pair.why = f"p = {pair.p_value:.3g}, not below {alpha:g}"
        else:
            pair.why = (f"the test points the other way from the medians (p = {pair.p_value:.3g}, B/A "
                        f"{pair.ratio:.3f}): the two cells' samples differ in shape, not plainly in speed")


def _samples(cell: CellRecord) -> list[int]:
    """The cell's device-timing samples: round 1's, and those of each further valid round it kept
    (`timing: {rounds: N}`, schema 8 on). The rank test takes them only where neither cell has two
    valid rounds, or where every round of each side gave one median (`rounds_t_test` has no spread
    to test against): else samples of several processes are no sample of one distribution."""
    samples = metric_table.at(cell, metric_table.metric("device_time").samples)
    pooled = list(samples) if isinstance(samples, list) else []
    for further in (cell.metrics.rounds or [])[1:]:
        if further.status == "valid" and further.samples_ns:
            pooled += further.samples_ns
    return pooled


def _median_ns(cell: CellRecord, samples: list[int]) -> float:
    """The cell's device time as the report shows it: the median of its valid rounds' medians where
    it has two or more, else the median of its samples."""
    over = Row(cell).over_rounds
    return over[0] if over is not None else median(samples)


def _shown_time(cell: CellRecord) -> str:
    """Device time as written beside the verdict: over the rounds where the cell has several."""
    row = Row(cell)
    return fmt_time_over_rounds(row) if row.over_rounds is not None else metric_table.metric("device_time").figure(cell)


def _first_reason(cell: CellRecord) -> str:
    return f"{cell.status}: {one_line(cell.reasons[0])}" if cell.reasons else cell.status


def within(ratio: float, threshold: float) -> bool:
    """Whether a ratio B/A is inside the band `threshold` either way, as times go: from 1 / (1 + t)
    to 1 + t, so that a 5% slowdown and the speedup that undoes it are judged alike."""
    return 1 / (1 + threshold) <= ratio <= 1 + threshold


def percent(fraction: float) -> str:
    """A threshold as the user gave it, in percent: 5%, 2.5%, 0.1% (never rounded to 0% or 3%)."""
    return f"{fraction * 100:.6g}%"


def _machine(cell_a: CellRecord, cell_b: CellRecord, ratio: float) -> tuple[str, bool]:
    """How the machine's reference loops (read around each timed repetition, harness/measure/
    machine_speed.py) moved from the faster cell's run to the slower one's, and whether that accounts
    for the change: three runs of one file a minute apart on the 2-core VM differed by 6-29% while
    the round trip between its cores grew 4x (docs/results/cpu-2core-amd-2026-12-01-compare.md).
    ("", False) where a side read no loops."""
    from harness.measure import machine_speed

    def loops(cell: CellRecord) -> dict[str, Any]:
        timing = cell.metrics.device_time
        reps = timing.repetitions if timing is not None else []
        return machine_speed.pooled([machine_speed.indexes((r.beside or {}).get("machine_speed")) for r in reps])

    (slow, fast, where) = (loops(cell_b), loops(cell_a), "in B against A") if ratio > 1 else (
        loops(cell_a), loops(cell_b), "in A against B")
    change = ratio - 1 if ratio > 1 else 1 / ratio - 1
    moved = machine_speed.moves(slow, fast, change)
    return machine_speed.describe(moved, where), machine_speed.accounts_for(moved)


def judge(metric: Metric, cell_a: CellRecord, cell_b: CellRecord, threshold: float) -> Figure:
    """A single figure a side (rule "ratio" or "exact"): no spread, so no rank test. "ratio": B/A
    beyond `threshold` is a change; "exact": any difference is."""
    a, b = metric.value(cell_a), metric.value(cell_b)
    figure = Figure(metric.name, str(metric.better), metric.rule, a, b, metric.figure(cell_a), metric.figure(cell_b))
    if a is None or b is None:
        figure.why = f"only {'A' if b is None else 'B'} has it"
        return figure
    differing = metric_table.unlike_setting(metric, cell_a, cell_b)
    if differing is not None:
        name, setting_a, setting_b = differing
        figure.why = f"{name} differs: A {setting_a}, B {setting_b}"
        return figure
    unlike = _unlike_baselines(metric, cell_a, cell_b, threshold)
    if unlike:
        figure.why = unlike
        return figure
    limit = 0.0 if metric.rule == "exact" else threshold
    figure.ratio = b / a if a > 0 and b > 0 else None
    if a == b or (figure.ratio is not None and within(figure.ratio, limit)):
        figure.verdict = "same"
        figure.why = "" if a == b else f"within {percent(limit)} (B/A {figure.ratio:.3f})"
        return figure
    if abs(b - a) < metric.floor:
        figure.verdict, figure.why = "same", f"a difference under {format_value(metric.floor, metric.unit)}"
        return figure
    if metric.better is None:
        figure.verdict, figure.why = "changed", (_fusion_difference(cell_a, cell_b) if metric.name == "fusions"
                                                 else "any change counts" if metric.rule == "exact"
                                                 else f"beyond {percent(limit)}")
        return figure
    figure.verdict = "worse" if (b > a) == (metric.better == "lower") else "better"
    figure.why = ("any change counts" if metric.rule == "exact"
                  else f"beyond {percent(limit)}" if figure.ratio is not None else "from or to 0")
    return figure


def _unlike_baselines(metric: Metric, cell_a: CellRecord, cell_b: CellRecord, threshold: float) -> str:
    """Why two cells' figures are not set against each other where the parts of them that are not the
    cells' own differ beyond `threshold` (a worker forked from a parent that had imported more backends
    held more before its model was built: one eager cell's peak RSS read 528 and 695 MiB, its baseline
    424 and 590), else ""."""
    if metric.baseline is None:
        return ""
    base_a, base_b = metric_table.at(cell_a, metric.baseline), metric_table.at(cell_b, metric.baseline)
    if not all(isinstance(base, int) and base > 0 for base in (base_a, base_b)):
        return ""
    if within(base_b / base_a, threshold):
        return ""
    return (f"{metric.baseline[-1]} differs beyond {percent(threshold)}: A {format_value(base_a, metric.unit)}, "
            f"B {format_value(base_b, metric.unit)} (what the worker held before the model was built: the modules "
            "its preloaded parent imported for the run's other backends, or the harness's own)")


#: The fused groups a `fusions` change names on each side, at most.
FUSION_GROUPS_SHOWN = 5


def _fusion_difference(cell_a: CellRecord, cell_b: CellRecord) -> str:
    """The fused groups (their operators, in order) one side runs more times than the other:
    `B lacks: conv2d + batch_norm + relu x2; B adds: ...`."""
    def fused(cell: CellRecord) -> Counter[str]:
        report = cell.metrics.fusion_report
        return Counter(" + ".join(k.ops) for k in (report.kernels if report else []) if k.fusion_class != "single")

    a, b = fused(cell_a), fused(cell_b)
    parts = []
    for side, extra in (("B lacks", a - b), ("B adds", b - a)):
        if extra:
            listed = [f"{ops}{'' if n == 1 else f' x{n}'}" for ops, n in extra.most_common(FUSION_GROUPS_SHOWN)]
            more = len(extra) - len(listed)
            parts.append(f"{side}: {'; '.join(listed)}" + (f"; and {more} more" if more else ""))
    return ". ".join(parts) or "the same fused groups, counted apart"
