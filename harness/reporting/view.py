"""A bundle as a report sees it: one `Row` per cell with the figures it shows, the analyses (speedup
over the scenario's baseline, fusion on against off, where the time goes, one latency truth) and
every table as a head and rows of plain text, which `markdown` and `html` render.

Latency here is the device-timing median per batch (docs/metrics.md); "speedup" is a ratio of
medians of cells that differ only in backend or variant (same model, scenario, batch, dtype).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

from harness import metric_table
from harness.bundle.cell_record import CellRecord, Metrics
from harness.bundle.figures_check import BUSY as BUSY_WARNING
from harness.bundle.passes_record import TopKernel
from harness.bundle.reader import LoadedBundle, lookup
from harness.bundle.record_base import read_as
from harness.bundle.timing_record import Roofline
from harness.metric_table import format_times, format_value
from harness.plain_text import one_line
from harness.reporting import class_moves, kind_moves
from harness.reporting.plots import Series
from harness.reporting.run_facts import apart
from harness.scenario.cell_config import CellConfig
from harness.stats.intervals import (
    SLOWER,
    SLOWER_UNCLEAR,
    SMALLEST_EFFECT,
    Interval,
    Speedup,
    median_interval,
    paired_speedup,
    unpaired_speedup,
)
from harness.stats.summary import NOISY_CV, median

FUSED_KERNELS_SHOWN = 8
SLOWEST_KERNELS_SHOWN = 3
ROOFLINE_NOTE = (
    "Bound: the least time one batch could take at the device's measured peaks (the run's probe, shown beside "
    "each cell), max(FLOPs / peak FLOP/s, compulsory bytes / peak bytes/s); measured: the cell's median batch "
    "time, over its rounds where it has several, as the fusion tables give it; fraction of bound = bound / "
    "measured (1 is the roofline). A fraction above 1 (marked *above roof*) means the cell beat a measured peak: "
    "the copy peak is main memory's, and a small working set stays in cache between batches; on GPU, TF32 "
    "convolutions beat the fp32 matmul peak; and the peaks are probed once, as the run starts, so a probe that "
    "met other work reads them low. The kernel floor is 1: one kernel could run the whole model."
)


TIME_SPLIT_NOTE = (
    "Per batch: the time inside kernels (GPU: the union of the CUDA kernels' intervals; CPU: the backend's own "
    "profiler) against the device-timing median; the rest is launch and host overhead on a GPU, dispatch overhead "
    "on a CPU. Compare fusion on and off, and graphs on and off, of one backend: fewer launches shrink the "
    "overhead, less memory traffic shrinks the kernels (docs/metrics.md)."
)
SLOWER_NOTE = (
    f"The fusion pairs fusion made slower: slower by their verdict over rounds, or, of one round, a speedup below "
    f"{1 / (1 + SMALLEST_EFFECT):.3f} (a smaller slowdown in one round is within what a rerun moves). `fusionbench "
    "findings` counts them alike. Their speedups carry the fusion table's marks (`noisy`, `busy`, cores busy). Each "
    "says where its kernel time moved kind by kind, where both its cells list kinds, each side's kinds at its time over "
    "its rounds (the slowest kernels are at round 1's)."
)
SPEEDUP_NOTE = (
    "Speedup = fusion off over fusion on (below 1: fusion made it slower), the geometric mean over the rounds both "
    "cells ran (`timing: {rounds: N}`: fresh processes, on and off alternating, so round i of both met the same "
    "stretch of the machine). In brackets its confidence interval from those paired rounds (Student's t on their "
    "logs) and the verdict: faster or slower where the whole interval is above or below 1 and the speedup is at "
    "least 5% (1.05x, or 1/1.05 = 0.952x), under 5% where the whole interval lies between 1 and 5%, `size "
    "unclear` where it is on one side of 1 and the speedup is under 5% but the interval reaches past it, else no "
    "effect seen. `rounds not paired`: the two cells ran in different starts of a resumed run, so no round of one "
    "met the stretch of the machine a round of the other met; the interval is then the two samples' (Student's t "
    "on the difference of their mean logs, the variance pooled), wider for the same spread. "
    "A cell of one round has no interval: its process's placement and the machine's phase are in its figure "
    "unseen. On and off: each cell's median over its rounds, in brackets that median's interval from the order "
    "of the rounds' medians and the coverage so few rounds give it (2 rounds: 50%, 3: 75%, 6: 97%) "
    "(docs/metrics.md, Speedups). `noisy` and `busy`: either cell's timing samples spread beyond 10% of their "
    "mean, or other processes took CPU during its timed calls (its warnings say which). `(cores busy A against "
    "B)`: the two CPU cells kept cores busy half a core apart or more, so the speedup holds how far each spread "
    "its work (or a thread pool's size) beside fusion's effect."
)
APART_NOTE = (
    "Not set side by side: cells that ran on another share of the machine, on other hardware or on another start "
    "of the machine than their counterpart (a 1-core slot's time beside the whole machine's is no speedup, nor is "
    "one of a VM started again, which may run slower as a whole); each cell's `node` says where it ran, and its "
    "own figures stand in the cells table."
)
AGREEMENT_NOTE = (
    "LoadGen's figure per batch (SingleStream and MultiStream: median query latency, against the device-timing "
    "median; Offline: batch / samples per second, a mean, against the device-timing mean) of the same cell; beyond "
    "5% the cell says why. Offline on a GPU "
    "keeps batches in flight and may beat the sequential timing. Server is not compared (queueing)."
)


@dataclass(frozen=True)
class Row:
    """The figures of one cell that the report uses, read from its typed record, and its start: 0 where
    it ran in the run's first start, i in its i-th `--resume` (`rows_of`); None where its record does
    not say when it started."""

    record: CellRecord
    start: int | None = None

    @property
    def config(self) -> CellConfig:
        return self.record.config

    @property
    def metrics(self) -> Metrics:
        return self.record.metrics

    @property
    def model(self) -> str:
        return self.config.model.name

    @property
    def backend(self) -> str:
        return self.config.backend

    @property
    def fusion(self) -> str:
        return self.config.variant.fusion

    @property
    def graphs(self) -> str:
        return self.config.variant.graphs

    @property
    def options(self) -> str:
        """The backend's options as the tables show them: ` key=value` each, sorted."""
        return self.config.options_label

    @property
    def variant(self) -> str:
        return f"{self.config.variant_label}{self.options}"

    @property
    def setting(self) -> str:
        """What makes two cells of different backends comparable: scenario, batch, dtype, device, and
        the input size where it is not the model's own (`input 32`) and pretrained weights where the cell
        loaded them, so no two settings read alike."""
        c = self.config
        return f"{c.scenario} b{c.batch} {c.dtype} {c.device}{c.model_detail}"

    @property
    def pair_key(self) -> str:
        """The same for two cells that differ in fusion alone: their whole config, fusion aside."""
        config = self.config
        either = config.model_copy(update={"variant": config.variant.model_copy(update={"fusion": "on"})})
        return json.dumps(either.recorded(), sort_keys=True)

    @property
    def status(self) -> str:
        return self.record.status

    @property
    def median_ns(self) -> float | None:
        timing = self.metrics.device_time
        return timing.summary.median_ns if timing is not None and timing.summary.median_ns > 0 else None

    @property
    def round_medians(self) -> dict[int, float]:
        """The device-time median of each valid round (harness/run/rounds.py) by round number; a cell
        of one round (or of a bundle from before rounds) has its own median as round 1."""
        rounds = self.metrics.rounds
        if not rounds:
            return {1: self.median_ns} if self.median_ns is not None else {}
        return {r.round: r.median_ns for r in rounds
                if r.status == "valid" and r.median_ns is not None and math.isfinite(r.median_ns) and r.median_ns > 0}

    @property
    def over_rounds(self) -> tuple[float, Interval] | None:
        """The median of the valid rounds' medians and that median's order-statistics interval
        (harness/stats/intervals.py), where two or more rounds are valid; else None."""
        values = list(self.round_medians.values())
        if len(values) < 2:
            return None
        return median(values), median_interval(values)

    @property
    def time_ns(self) -> float | None:
        """The cell's device time as the tables show it: the median over its valid rounds where it has
        two or more, else its median (`fmt_time_over_rounds`)."""
        over = self.over_rounds
        return over[0] if over is not None else self.median_ns

    @property
    def checked_against_eager(self) -> bool:
        """Whether the cell's output was compared with eager's: only then does it compute the same
        thing, and only then is its speed a speedup (a backend that computes nothing is not)."""
        return self.metrics.correctness is not None and self.metrics.correctness.max_abs_error is not None

    @property
    def kernels(self) -> float | None:
        return metric_table.value("kernels_per_inference", self.record)

    def figure(self, column: str | tuple[str, ...]) -> str:
        """A figure of the cell as every table shows it (harness/metric_table.py)."""
        return metric_table.figure(column, self.record)


def valid_rows(rows: list[Row]) -> list[Row]:
    return [r for r in rows if r.status == "valid" and r.median_ns is not None]


def baseline_of(loaded: LoadedBundle) -> str:
    """The backend speedups are measured against: the scenario's `baseline` (eager by default)."""
    return str(lookup(loaded.header, "scenario", "baseline") or "eager")


def times_faster(row: Row, base: Row) -> float | None:
    """How many times faster `row` ran than `base`: base's time over row's, each the median over its
    rounds (`Row.time_ns`), as the tables show them. One estimate, no interval (`over_baseline` gives
    one where the rounds pair)."""
    mine, theirs = row.time_ns, base.time_ns
    return None if mine is None or theirs is None else theirs / mine


def is_slower(result: Speedup) -> bool:
    """Slower by the verdict where the speedup has an interval, else by more than the smallest effect
    (one estimate at 0.99x is no finding)."""
    return result.verdict in (SLOWER, SLOWER_UNCLEAR) if result.interval is not None else slower_beyond_noise(result.value)


def rows_of(records: list[CellRecord], resumed: list[Any] | None) -> list[Row]:
    """A row for each cell, with its start: its record's `started` against the times the run was
    resumed (bundle.json's `resumed`, as the header holds it). A resume runs the cells left, apart
    from those finished before it, so the rounds of two cells paired only where both ran in one start."""
    times = [str(when) for when in resumed or []]
    return [Row(record, None if record.started is None else sum(1 for when in times if when <= record.started))
            for record in records]


def bundle_rows(loaded: LoadedBundle) -> list[Row]:
    """`rows_of` a bundle's cells."""
    return rows_of(loaded.records, lookup(loaded.header, "resumed"))


def setting_paired(loaded: LoadedBundle) -> bool:
    """Whether the rounds of every cell of one setting took turns (bundle.json's `rounds_paired`: a
    run of one cell at a time since 2026-12-01); before, only a fusion pair's did, and `--jobs` above 1
    and Ray fill the time between one cell's rounds with other cells."""
    return bool(lookup(loaded.header, "rounds_paired") == "setting")


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
SPEEDUP_OVER_NOTE = ("{baseline}'s median batch time over the cell's, each over its rounds where it has several "
                     "(same model and setting; cells whose output was checked against eager's; the baseline's cell "
                     "is its fusion-on cell). Where the cells of a setting took turns round by round (runs since "
                     "2026-12-01) and both have two rounds or more, the geometric mean over their paired rounds with "
                     "its interval and verdict, as a fusion speedup's; else one estimate, no verdict. `noisy` where "
                     "either cell's timing samples spread beyond 10% of their mean (its warnings say why): a guess, "
                     "not a figure. `busy` where either cell warned of a busy machine (other processes took CPU "
                     "during its timed calls): the figure holds their work too. `(cores busy A against B)` where "
                     "the two CPU cells kept cores busy half a core apart or more: unequal terms (a thread pool "
                     "smaller than the cores, or work that does not spread over them), said beside the figure. "
                     "Kernel time by operator class: the cell's kernel time per inference less the baseline's, in "
                     "all and for the four classes that differ most (each side's kinds of kernel summed by class, a "
                     "fused kernel in its anchor's class: docs/metrics.md, \"Operator classes\"); `-` where either "
                     "cell lists no kinds.")


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


def baselines(rows: list[Row], baseline: str) -> dict[tuple[str, str], Row]:
    """The valid cells of `baseline` (fusion on) whose output was checked against eager's, by model and setting."""
    return {(r.model, r.setting): r for r in valid_rows(rows)
            if r.backend == baseline and r.fusion == "on" and r.checked_against_eager}


def _beside_baseline(rows: list[Row], baseline: str) -> list[tuple[Row, Row]]:
    """Each valid cell of another backend checked against eager, with the baseline's cell of its
    model and setting, where there is one (whether or not the two ran where they can be set side by side)."""
    base = baselines(rows, baseline)
    return [(r, base[(r.model, r.setting)]) for r in valid_rows(rows)
            if r.backend != baseline and r.checked_against_eager and (r.model, r.setting) in base]


def speedup_table(rows: list[Row], baseline: str, paired: bool) -> tuple[list[str], list[Series], list[list[str]]]:
    """Each cell's speedup over the baseline's cell of its model and setting (`over_baseline` where the
    rounds pair, else `times_faster`): the bar chart's groups and series, and the table's rows (each
    with where its kernel time differs from the baseline's by operator class, `classes_against`)."""
    others = [(r, base) for r, base in _beside_baseline(rows, baseline) if not apart(r.record, base.record)]
    groups = list(dict.fromkeys(f"{r.model} {r.setting}" for r, _ in others))
    variants = list(dict.fromkeys(r.variant for r, _ in others))
    values: dict[tuple[str, str], float] = {}
    texts: dict[tuple[str, str], str] = {}
    by_class: dict[tuple[str, str], str] = {}
    for r, base in others:
        key = (f"{r.model} {r.setting}", r.variant)
        result = over_baseline(r, base, paired)
        values[key] = result.value if result is not None else times_faster(r, base) or 0.0
        texts[key] = (result.text() if result is not None else format_times(values[key])) + speedup_marks(r, base)
        by_class[key] = "; ".join(classes_against(r, base)) or "-"
    series = [Series(v, tuple(values.get((g, v)) for g in groups)) for v in variants]
    table = [[g, v, texts[(g, v)], by_class[(g, v)]] for g in groups for v in variants if (g, v) in values]
    return groups, series, table


@dataclass(frozen=True)
class FusionPair:
    on: Row
    off: Row

    @property
    def result(self) -> Speedup:
        """The speedup of fusion on over off (off over on) from the rounds both cells have, with its
        interval and verdict (harness/stats/intervals.py); one round gives the ratio of the two medians.
        Where the two cells ran in different starts of a resumed run, their rounds did not pair: the
        interval is the two samples' (`unpaired_speedup`)."""
        on, off = self.on.round_medians, self.off.round_medians
        if None not in (self.on.start, self.off.start) and self.on.start != self.off.start:
            return unpaired_speedup(list(on.values()), list(off.values()))
        paired = sorted(set(on) & set(off))
        return paired_speedup([on[r] for r in paired], [off[r] for r in paired])

    @property
    def speedup(self) -> float:
        return self.result.value

    @property
    def made_slower(self) -> bool:
        """Fusion made the pair slower: by its verdict where it has rounds, else by more than the
        smallest effect (a pair of one round at 0.99x is no finding)."""
        return is_slower(self.result)

    @property
    def name(self) -> str:
        graphs = " graphs" if self.on.graphs == "on" else ""
        return f"{self.on.model} {self.on.backend}{graphs}{self.on.options} {self.on.setting}"


def fusion_pairs(rows: list[Row]) -> list[FusionPair]:
    """Valid cells that differ only in fusion on/off (the whole config alike but fusion) and ran where
    their times can be set side by side (`run_facts.apart`; `not_side_by_side` names the others)."""
    return [pair for pair in _alike_in_all_but_fusion(rows) if not apart(pair.on.record, pair.off.record)]


def _alike_in_all_but_fusion(rows: list[Row]) -> list[FusionPair]:
    on = {r.pair_key: r for r in valid_rows(rows) if r.fusion == "on"}
    return [FusionPair(on[r.pair_key], r) for r in valid_rows(rows) if r.fusion == "off" and r.pair_key in on]


def pairs_apart(rows: list[Row]) -> list[tuple[FusionPair, str]]:
    """The fusion pairs whose cells ran apart (`run_facts.apart`), each with why."""
    return [(pair, why) for pair in _alike_in_all_but_fusion(rows) if (why := apart(pair.on.record, pair.off.record))]


def fusion_pairs_apart(rows: list[Row]) -> list[str]:
    """The fusion pairs whose cells ran apart, each with why, in words."""
    return [f"{pair.name}: fusion on and off not set side by side: {why}" for pair, why in pairs_apart(rows)]


def not_side_by_side(rows: list[Row], baseline: str) -> list[str]:
    """The fusion pairs, and the cells beside their baseline, whose cells ran on other shares of the
    machine (a serial resume of a `--jobs` run, in a bundle from before such a resume was refused) or
    on other hardware (a Ray run over unlike machines): no speedup is taken from them, and this says
    which and why."""
    return fusion_pairs_apart(rows) + [f"{r.model} {r.variant} {r.setting}: not set beside {baseline}: {why}"
                                       for r, its_base in _beside_baseline(rows, baseline)
                                       if (why := apart(r.record, its_base.record))]


def fmt_time_over_rounds(row: Row) -> str:
    """A cell's device time: the median over its rounds with its interval and the coverage that
    interval has (`4.95 ms [4.90-5.10, 75%] over 3 rounds`), or its one median."""
    over = row.over_rounds
    if over is None:
        return format_value(row.median_ns, "ns")
    middle, interval = over
    return (f"{format_value(middle, 'ns')} [{format_value(interval.low, 'ns')}-{format_value(interval.high, 'ns')}, "
            f"{interval.coverage:.0%}] over {len(row.round_medians)} rounds")


def fmt_speedup(pair: FusionPair) -> str:
    """The fusion speedup, its interval over the paired rounds and the verdict: `1.18x [1.09-1.28,
    95%] faster`, or `1.18x (one round)`."""
    return pair.result.text()


def fused_kernels(row: Row) -> list[str]:
    """The fused kernels of a cell, each once (a kernel an unrolled loop runs many times gets its
    count): those the profile timed first, the costliest first, each with its time per inference,
    then the others in the order they first run; past FUSED_KERNELS_SHOWN, how many more there are."""
    report = row.metrics.fusion_report
    counts: dict[str, int] = {}
    named: dict[str, str] = {}
    for k in report.kernels if report else []:
        if k.fusion_class != "single":
            text = f"{k.kernel} ({' + '.join(k.ops)})"
            counts[text] = counts.get(text, 0) + 1
            named[text] = k.kernel
    # A kernel name several groups share (Inductor's oneDNN calls) has one time for them all: none is shown.
    groups_named = Counter(named.values())
    timed = {k.name: ns for k, ns in _timed_kernels(row) if groups_named[k.name] == 1}
    ordered = sorted(counts, key=lambda text: -timed.get(named[text], -1.0))  # stable: the untimed keep their order
    shown = [(text if counts[text] == 1 else f"{text} x{counts[text]}")
             + (f", {format_value(timed[named[text]], 'ns')}" if named[text] in timed else "")
             for text in ordered[:FUSED_KERNELS_SHOWN]]
    left = len(ordered) - len(shown)
    return shown + ([f"and {left} more (the cell's fusion_report)"] if left else [])


def _timed_kernels(row: Row) -> list[tuple[TopKernel, float]]:
    """The kernels the cell's profile lists with their time per inference (`kernels.top_kernels`), each
    with that time; empty for bundles from before each kernel's time was kept."""
    kernels = row.metrics.kernels
    listed = [read_as(TopKernel, entry) for entry in (kernels.top_kernels if kernels else [])]
    return [(k, k.ns_per_inference) for k in listed if k is not None and k.ns_per_inference is not None]


def slowest_kernels(row: Row) -> list[str]:
    """The kernels a cell spends the most time in, with their time and calls per inference:
    `fused_conv2d_kernel 18.2 ms (3 calls)`. Empty for bundles written before each kernel's time
    was kept (`ns_per_inference`: GPU cells first, CPU cells later) and for a backend whose
    profiler cannot tell."""
    timed = sorted(_timed_kernels(row), key=lambda kernel_ns: -kernel_ns[1])
    return [f"{k.name} {format_value(ns, 'ns')} ({k.calls_per_inference:g} call{'' if k.calls_per_inference == 1 else 's'})"
            for k, ns in timed[:SLOWEST_KERNELS_SHOWN]]


def time_moved(pair: FusionPair) -> list[str]:
    """Where the pair's kernel time moved, kind by kind (harness/reporting/kind_moves.py), each
    side's kinds applied to its time over rounds (`Row.time_ns`), as the profile applied them to
    round 1's median."""
    return kind_moves.moves(pair.on.metrics.kernels, pair.off.metrics.kernels, (_over_round_one(pair.on), _over_round_one(pair.off)))


def classes_against(row: Row, base: Row) -> list[str]:
    """Where `row`'s kernel time differs from its baseline's cell (eager's), by operator class
    (harness/reporting/class_moves.py), each side's kinds applied to its time over rounds; empty
    where either lists no kinds."""
    return class_moves.against(row.metrics.kernels, base.metrics.kernels, (row.backend, base.backend),
                               (_over_round_one(row), _over_round_one(base)))


def _over_round_one(row: Row) -> float:
    """A cell's time over its rounds over its round 1 median (1 with one round, or with no median)."""
    return row.time_ns / row.median_ns if row.time_ns and row.median_ns else 1.0


def slowest_kernels_by_side(pair: FusionPair) -> list[tuple[str, list[str]]]:
    """("on", ...) and ("off", ...): each side of `pair` that lists its slowest kernels, with them."""
    return [(side, slowest) for side, row in (("on", pair.on), ("off", pair.off)) if (slowest := slowest_kernels(row))]


def fmt_fraction(fraction: float | None) -> str:
    if fraction is None:
        return "-"
    return f"{fraction:.3f} above roof" if fraction > 1 else f"{fraction:.3f}"


def fusions_by_class(row: Row) -> str:
    report = row.metrics.fusion_report
    if report is None:
        return "0"
    if not report.fusions_by_class:  # bundles written before fusions were counted by class
        return str(report.fusion_count)
    return ", ".join(f"{count} {cls}" for cls, count in report.fusions_by_class.items() if count) or "0"


def fusion_table(pairs: list[FusionPair]) -> tuple[list[str], list[list[str]]]:
    """Fusion on vs off per model, backend and setting: latency, speedup, kernels, memory, fusions."""
    columns = metric_table.present(metric_table.REPORT_FUSION, [r.record for p in pairs for r in (p.on, p.off)])
    head = ["model backend setting", "on", "off", "speedup", *(f"{metric_table.label(c)} on / off" for c in columns),
            "fusions on (by class)"]
    body = [[p.name, fmt_time_over_rounds(p.on), fmt_time_over_rounds(p.off),
             fmt_speedup(p) + speedup_marks(p.on, p.off),
             *(f"{p.on.figure(c)} / {p.off.figure(c)}" for c in columns),
             fusions_by_class(p.on)] for p in pairs]
    return head, body


KERNELS_BY_PAIR_NOTE = (
    "Every fusion pair, slower or not: the fused kernels of its fusion-on cell (each once, with its count; those the "
    "profile timed first, the costliest first, with their time per inference; the whole list is the cell's "
    "`fusion_report`) and the kernels each side spends the most time in. On the CPU a kernel's time is its median "
    "share of the profiled inferences applied to the timed median (docs/metrics.md, Where the time goes), and the "
    "time moved is each kind of kernel's time with fusion on less its time with fusion off (its share applied to "
    "the cell's time over its rounds), in all and then the kinds that moved most: a fused kind's time on one side, "
    "the kinds it replaced giving theirs back on the other. "
    "The speedups carry the fusion table's marks (`noisy`, `busy`, cores busy)."
)


def kernels_by_pair(pairs: list[FusionPair]) -> tuple[list[str], list[list[str]]]:
    """Per fusion pair: its speedup, its fused kernels, each side's slowest kernels, where its kernel
    time moved kind by kind (`time_moved`) and what each side's fusion report notes (a backend's word
    on what its kernels are not: folded weights, an operator run as several kernels)."""
    head = ["cell", "speedup", "fused kernels (the costliest first)", "most time with fusion on", "most time with fusion off",
            "time moved by kind (on less off)", "fusion report notes"]
    body = [[p.name, fmt_speedup(p) + speedup_marks(p.on, p.off), "; ".join(fused_kernels(p.on)) or "none reported",
             "; ".join(slowest_kernels(p.on)) or "-", "; ".join(slowest_kernels(p.off)) or "-",
             "; ".join(time_moved(p)) or "-", _notes(p)] for p in pairs]
    return head, body


def _notes(pair: FusionPair) -> str:
    said = [(side, report.notes) for side, row in (("on", pair.on), ("off", pair.off))
            if (report := row.metrics.fusion_report) is not None and report.notes]
    if len(said) == 2 and said[0][1] == said[1][1]:
        return said[0][1] or "-"
    return "; ".join(f"{side}: {notes}" for side, notes in said) or "-"


def roofline_table(rows: list[Row]) -> tuple[list[str], list[list[str]]]:
    """Each valid cell's costs, bound and how close it came. Its time is the cell's time over its rounds
    (`Row.time_ns`), as every other table of the report gives it: the record's `fraction_of_bound` is
    round 1's alone, and a round 1 the machine slowed set a fusion pair's sides 1.6x apart here where
    their rounds put them 7% apart (BERT base on ONNX Runtime, 134 against 82.3 ms in round 1)."""
    head = ["model", "backend / variant", "setting", "GFLOP/batch", "compulsory MB", "peaks", "bound", "bound by",
            "measured", "fraction of bound", "kernels/inf (floor 1)"]
    body = []
    for r in valid_rows(rows):
        roof = r.metrics.roofline
        if roof is None:
            continue
        fraction = roof.time_bound_ns / r.time_ns if roof.time_bound_ns and r.time_ns else roof.fraction_of_bound
        body.append([r.model, r.variant, r.setting, f"{roof.flops / 1e9:.3g}", f"{roof.compulsory_bytes / 1e6:.3g}",
                     _peaks(roof), format_value(roof.time_bound_ns, "ns"), roof.bound_by or "-",
                     format_value(r.time_ns, "ns"), fmt_fraction(fraction), r.figure("kernels_per_inference")])
    return head, body


def _peaks(roof: Roofline) -> str:
    """The probe's peaks a cell's bound was taken at: `159 GFLOP/s, 55.6 GB/s`."""
    flops = f"{roof.peak_flops_per_s / 1e9:.3g} GFLOP/s" if roof.peak_flops_per_s else None
    copy = f"{roof.peak_bytes_per_s / 1e9:.3g} GB/s" if roof.peak_bytes_per_s else None
    return ", ".join(part for part in (flops, copy) if part) or "-"


def agreement_table(rows: list[Row]) -> tuple[list[str], list[list[str]]]:
    """LoadGen's figure against the device timing, per measured cell (one latency truth)."""
    head = ["model", "backend / variant", "setting", "LoadGen per batch", "device timing", "gap", "why"]
    body = []
    for r in rows:
        agreement = r.metrics.latency_agreement
        if agreement is None:
            continue
        device = agreement.device_ns_per_batch
        body.append([r.model, r.variant, r.setting, format_value(agreement.loadgen_ns_per_batch, "ns"),
                     "-" if device is None else f"{format_value(device, 'ns')} ({agreement.device_statistic})",
                     r.figure("latency_gap"), agreement.why or ("within the limit" if agreement.within else "")])
    return head, body


def warnings_table(rows: list[Row]) -> tuple[list[str], list[list[str]]]:
    head = ["model", "backend / variant", "setting", "warning"]
    return head, [[r.model, r.variant, r.setting, w] for r in rows for w in r.record.warnings]


def time_split_series(rows: list[Row], backend: str) -> tuple[list[str], list[Series]]:
    """Per valid cell of `backend` with a measured split: kernel time and the rest, in ms."""
    split = [(r, t.kernel_ns, t.overhead_ns) for r in valid_rows(rows) if r.backend == backend
             for t in (r.metrics.time_split,) if t is not None and t.kernel_ns is not None and t.overhead_ns is not None]
    groups = [f"{r.model} {r.variant.removeprefix(backend + ' ')} {r.setting}" for r, _, _ in split]
    return groups, [Series("in kernels", tuple((kernel or 0) / 1e6 for _, kernel, _ in split)),
                    Series("overhead (dispatch, launch, host)", tuple((rest or 0) / 1e6 for _, _, rest in split))]


def cells_table(rows: list[Row]) -> tuple[list[str], list[list[str]]]:
    """Every cell's figures, under the labels and in the words of the console summary."""
    columns = metric_table.present(metric_table.REPORT_CELLS, [r.record for r in rows])
    head = ["model", "backend / variant", "setting", "status", "math", *(metric_table.label(c) for c in columns),
            "fusions"]
    body = [[r.model, r.variant, r.setting, r.status, r.metrics.math_mode.effective if r.metrics.math_mode else "-",
             *(r.figure(c) for c in columns),
             str(r.metrics.fusion_report.fusion_count) if r.metrics.fusion_report else "-"] for r in rows]
    return head, body


def validity_grid(loaded: LoadedBundle, rows: list[Row]) -> tuple[list[str], list[list[str]]]:
    settings = list(dict.fromkeys(r.setting for r in rows))
    lines = list(dict.fromkeys(f"{r.model} · {r.variant}" for r in rows))
    grid = {(f"{r.model} · {r.variant}", r.setting): r.status for r in rows}
    body = [[line, *[grid.get((line, s), "") for s in settings]] for line in lines]
    columns = settings or ["status"]  # no cell recorded (a run stopped by its budget): the missing row's own column
    for label in loaded.missing_labels:  # listed, never recorded: each named, as --resume will run it
        body.append([f"{label} (listed)", "not run", *[""] * (len(columns) - 1)])
    return ["model · variant", *columns], body


def listed(value: Any) -> list[Any]:
    """`value` where it is a list, else no items (a bundle is read, never trusted to have its shape)."""
    return value if isinstance(value, list) else []


def problems(rows: list[Row]) -> list[list[str]]:
    return [[r.model, r.variant, r.setting, r.status, "; ".join(map(one_line, r.record.reasons))]
            for r in rows if r.status != "valid"]


# --- Markdown ---------------------------------------------------------------------------------
