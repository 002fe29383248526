"""`fusionbench compare A B`: which cells got faster, slower, broke or were fixed from A to B.

Cells pair by id (the hash of their config), so only identical configurations are compared.
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

Labels: improved, regressed, not significant, not comparable (with why), new failure (valid in A,
failed or invalid in B), fixed (the other way). Two valid cells whose math modes differ (IEEE fp32
against TF32, or one that did not record it) or that ran on different hardware (or another share of
it: a `--jobs` slot against the whole machine) are not comparable,
whatever their ids say, and are listed as unpaired with the valid cells whose counterpart is
missing, skipped or interrupted: none was judged, so the exit code cannot pass on them. A cell
only one bundle has says what the other never ran (`B ran no cell on cpu`: the first of device,
model, input size, backend, scenario, dtype and batch it lacks), or that the other listed it and
has no record (its run was stopped). Per backend, the geometric mean of B/A over its compared
pairs. The systems' differences (CPU, GPU, driver, library versions, container) come first, since
a difference between machines explains a difference between figures.

Fusion verdicts: each fusion pair (the same cell with fusion on and off, both valid) of either
bundle, with its speedup, interval and verdict in A and in B (harness/stats/intervals.py), whether the two
verdicts agree and whether the two intervals overlap. A pair of one round has no verdict: it agrees
with nothing. They inform, as the other figures do.

This module judges; harness/reporting/compare_output.py writes the judgement as JSON or Markdown.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from harness import metric_table
from harness.bundle.cell_record import CellRecord
from harness.bundle.header_record import BundleHeader, Container, Cpu, Gpus, Node, OperatingSystem, Python, Torch
from harness.bundle.reader import LoadedBundle, lookup
from harness.bundle.record_base import read_as
from harness.bundle.statuses import BAD
from harness.metric_table import Metric, format_value
from harness.plain_text import one_line
from harness.reporting.cell_rows import Row, bundle_rows, fmt_time_over_rounds
from harness.reporting.fusion_pairs import FusionPair, fusion_pairs, pairs_apart
from harness.reporting.run_facts import hardware, machine_noise, machine_share, other_cpus
from harness.reporting.speedups import noisy_mark
from harness.scenario.cells import LEFT_OUT_OF_ID, cell_id
from harness.scenario.differences import differences
from harness.stats.intervals import ONE_ROUND, Interval, Speedup, rounds_t_test
from harness.stats.summary import geometric_mean, mann_whitney_u, median, u_test_method

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
    figures: list[Figure] = field(default_factory=list)  # every figure judged, device time first
    noisy: bool = False  # a side's timing samples spread beyond 10% of their mean (speedups.noisy_mark)
    machine_moved: bool = False  # the machine's reference loops moved enough to account for a change


@dataclass
class FusionVerdict:
    """One fusion pair in both bundles: its speedup in each, None where the pair is not valid there or
    its cells ran apart there (`apart_a`/`apart_b` say why: `run_facts.apart`)."""

    name: str
    a: Speedup | None
    b: Speedup | None
    apart_a: str = ""
    apart_b: str = ""

    @property
    def judged(self) -> bool:
        """Both bundles gave the pair a verdict (more than one round each)."""
        return self.a is not None and self.b is not None and ONE_ROUND not in (self.a.verdict, self.b.verdict)

    @property
    def agree(self) -> bool:
        return self.judged and self.a is not None and self.b is not None and self.a.verdict == self.b.verdict

    @property
    def intervals(self) -> tuple[Interval, Interval] | None:
        """Both bundles' intervals, where both have one (more than one round each)."""
        a, b = (self.a.interval if self.a else None), (self.b.interval if self.b else None)
        return None if a is None or b is None else (a, b)

    @property
    def overlap(self) -> bool:
        both = self.intervals
        return both is not None and both[0].overlaps(both[1])

    def shown(self) -> tuple[str, str, str, str]:
        """A, B, whether the verdicts agree and whether the intervals overlap, as the tables write
        them: `ran apart` for a side where its cells ran apart, `-` where the pair is not valid, or a
        question one round cannot answer."""
        a, b = (s.text() if s is not None else "ran apart" if why else "-"
                for s, why in ((self.a, self.apart_a), (self.b, self.apart_b)))
        agree = "yes" if self.agree else "no" if self.judged else "-"
        overlap = "yes" if self.overlap else "no" if self.intervals else "-"
        return a, b, agree, overlap

    def recorded(self) -> dict[str, Any]:
        def side(speedup: Speedup | None) -> dict[str, Any] | None:
            if speedup is None:
                return None
            interval = speedup.interval
            return {"speedup": speedup.value, "rounds": speedup.rounds, "verdict": speedup.verdict, "shown": speedup.text(),
                    "paired": speedup.paired,
                    "interval": None if interval is None else {"low": interval.low, "high": interval.high,
                                                                 "coverage": interval.coverage}}
        return {"pair": self.name, "a": side(self.a), "b": side(self.b), "agree": self.agree, "overlap": self.overlap,
                "ran_apart": {"a": self.apart_a or None, "b": self.apart_b or None}}


def fusion_verdicts(a: LoadedBundle, b: LoadedBundle) -> list[FusionVerdict]:
    """Every fusion pair valid in A or B, in A's order, then B's others; a side where the pair's cells
    ran apart says so."""
    def pairs(loaded: LoadedBundle) -> tuple[dict[str, FusionPair], dict[str, str]]:
        rows = bundle_rows(loaded)
        return ({_pair_id(pair): pair for pair in fusion_pairs(rows)},
                {_pair_id(pair): why for pair, why in pairs_apart(rows)})

    (in_a, apart_a), (in_b, apart_b) = pairs(a), pairs(b)
    verdicts = []
    for key in [*in_a, *(key for key in in_b if key not in in_a)]:
        pair_a, pair_b = in_a.get(key), in_b.get(key)
        either = pair_a or pair_b
        assert either is not None  # the key came from one of them
        verdicts.append(FusionVerdict(either.name, pair_a.result if pair_a else None, pair_b.result if pair_b else None,
                                      apart_a.get(key, ""), apart_b.get(key, "")))
    return verdicts


def _pair_id(pair: FusionPair) -> str:
    """The same in both bundles for the same pair: the pairing keys of its two cells."""
    return f"{pairing_key(pair.on.record)}/{pairing_key(pair.off.record)}"


def verdict_line(verdicts: list[FusionVerdict]) -> str:
    """`verdicts agree: K of N pairs; intervals overlap: M of N`, N the pairs valid in both bundles."""
    both = [v for v in verdicts if v.a is not None and v.b is not None]
    unjudged = sum(1 for v in both if not v.judged)
    line = (f"verdicts agree: {sum(v.agree for v in both)} of {len(both)} pairs; "
            f"intervals overlap: {sum(v.overlap for v in both)} of {len(both)}")
    return line + (f" ({unjudged} with one round in a bundle: no verdict)" if unjudged else "")


@dataclass(frozen=True)
class Geomean:
    """One backend's geometric mean of B/A over its compared pairs."""

    pairs: int
    geomean_ratio: float


@dataclass
class Comparison:
    a: str
    b: str
    threshold: float
    alpha: float
    systems: list[tuple[str, str, str]] = field(default_factory=list)  # (what, A, B)
    pairs: list[Pair] = field(default_factory=list)
    #: Cells valid in one bundle with no counterpart in the other to judge them by (missing,
    #: skipped or interrupted there, or valid but of another math mode or hardware): the CLI does
    #: not exit 0 for them unless asked to (`--allow-missing`).
    unpaired: list[str] = field(default_factory=list)
    fusion: list[FusionVerdict] = field(default_factory=list)
    machines: tuple[str, str] = ("", "")  # (A, B): CPU and GPUs, as each run's system record says
    noise: tuple[str, str] = ("", "")  # (A, B): each run's machine-noise floor, in words (run_facts)

    def counts(self) -> dict[str, int]:
        return {label: sum(1 for p in self.pairs if p.verdict == label) for label in LABELS}

    def figure_counts(self) -> dict[str, dict[str, int]]:
        """Per figure of the metric table that some pair has: how many pairs got each verdict."""
        counts = {m.name: dict.fromkeys(VERDICTS, 0) for m in metric_table.compared()}
        for pair in self.pairs:
            for figure in pair.figures:
                counts[figure.metric][figure.verdict] += 1
        return {name: by_verdict for name, by_verdict in counts.items() if any(by_verdict.values())}

    def geomeans(self) -> dict[str, Geomean]:
        by_backend: dict[str, list[float]] = {}
        for pair in self.pairs:
            if pair.ratio is not None:
                by_backend.setdefault(pair.backend, []).append(pair.ratio)
        return {name: Geomean(len(r), geometric_mean(r)) for name, r in sorted(by_backend.items())}

    @property
    def worse(self) -> bool:
        """True when B regressed or newly failed somewhere: CI should stop."""
        return any(p.verdict in WORSE for p in self.pairs)


def _samples(cell: CellRecord) -> list[int]:
    """The cell's device-timing samples: round 1's, and those of each further valid round it kept
    (`timing: {rounds: N}`, schema 8 on). The rank test takes them only where neither cell has two
    valid rounds: samples of several processes are no sample of one distribution."""
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


def math_mode(cell: CellRecord) -> str:
    """The math a cell ran with, as recorded (harness/precision.py), or "unrecorded"."""
    recorded = cell.metrics.math_mode
    return recorded.effective if recorded else "unrecorded"


def _first_reason(cell: CellRecord) -> str:
    return f"{cell.status}: {one_line(cell.reasons[0])}" if cell.reasons else cell.status


def settings_apart(cell: CellRecord, other: CellRecord, side: str, other_side: str) -> str:
    """What two cells of one name were measured with apart (`inputs.samples 8 in A, 16 in B`): every
    setting of their recorded configs that differs (the first three and "and 5 more" hid the
    LoadGen profile behind the inputs)."""
    found = [f"{path} {json.dumps(mine)} in {side}, {json.dumps(theirs)} in {other_side}"
             for path, mine, theirs in differences(cell.config.recorded(), other.config.recorded())]
    unpaired_by = tuple(f"{part}.{key} " for part, key in LEFT_OUT_OF_ID)  # cells apart in these still pair (pairing_key)
    return "; ".join(f for f in found if not f.startswith(unpaired_by))


def percent(fraction: float) -> str:
    """A threshold as the user gave it, in percent: 5%, 2.5%, 0.1% (never rounded to 0% or 3%)."""
    return f"{fraction * 100:.6g}%"


def unlike_runs(cell_a: CellRecord, cell_b: CellRecord) -> str:
    """Why two cells of one config cannot be set side by side however they ended ("" when they
    can): their math modes differ or are unrecorded, or they ran on different hardware."""
    mode_a, mode_b = math_mode(cell_a), math_mode(cell_b)
    if mode_a != mode_b or "unrecorded" in (mode_a, mode_b):
        return (f"math modes differ: A {mode_a}, B {mode_b}" if mode_a != mode_b
                else "neither cell recorded its math mode (TF32 may have been on)")
    where_a, where_b = hardware(read_as(Node, cell_a.node)), hardware(read_as(Node, cell_b.node))
    if where_a and where_b and where_a != where_b:
        return f"ran on different hardware: A {where_a}, B {where_b}"
    cpus = other_cpus(read_as(Node, cell_a.node), read_as(Node, cell_b.node))
    if cpus is not None:
        return f"ran on different hardware: A {cpus[0]}, B {cpus[1]}"
    share_a, share_b = machine_share(cell_a), machine_share(cell_b)
    if share_a != share_b:
        return f"ran on different shares of the machine: A {share_a}, B {share_b}"
    return ""


def compare_cells(cell_a: CellRecord, cell_b: CellRecord, threshold: float, alpha: float) -> Pair:
    """The verdict for one cell present in both bundles."""
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
    unlike = unlike_runs(cell_a, cell_b)
    if unlike:
        pair.why = unlike
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
    tested = rounds_t_test(rounds_a, rounds_b)
    if tested is not None:  # the variation between processes is in the test
        difference, pair.p_value = tested
        pair.test = f"t test on {len(rounds_a)} and {len(rounds_b)} round(s)' medians"
        same_way = (difference > 0) == (pair.ratio > 1)
    else:  # one process a side: its samples are all there is
        u_a, pair.p_value = mann_whitney_u(samples_a, samples_b)
        pair.test = u_test_method(samples_a, samples_b)
        same_way = (u_a < len(samples_a) * len(samples_b) / 2) == (pair.ratio > 1)  # A's samples rank low: B slower
    beyond = pair.ratio > 1 + threshold or pair.ratio < 1 / (1 + threshold)
    pair.noisy = bool(noisy_mark(row_a, row_b))
    if beyond and pair.p_value < alpha and same_way:
        pair.verdict = "regressed" if pair.ratio > 1 else "improved"
        if pair.noisy:  # the verdict stands, said with its caveat: a CI gate may not trust it alone
            sides = " and ".join(side for side, row in (("A", row_a), ("B", row_b)) if noisy_mark(row))
            rounds = "" if max(len(rounds_a), len(rounds_b)) > 1 else ", or time over rounds (--rounds)"
            pair.why = (f"noisy: {sides}'s timing samples spread beyond 10% of their mean (the cell's warnings say "
                        f"why); rerun on a quieter machine{rounds}")
        said, pair.machine_moved = _machine(cell_a, cell_b, pair.ratio)
        pair.why = "; ".join(part for part in (pair.why, said) if part)
    else:
        pair.verdict = "not significant"
        if not beyond:
            pair.why = f"within {percent(threshold)} (B/A {pair.ratio:.3f})"
        elif pair.p_value >= alpha:
            pair.why = f"p = {pair.p_value:.3g} (needs < {alpha:g})"
        else:
            pair.why = (f"the test points the other way from the medians (p = {pair.p_value:.3g}, B/A "
                        f"{pair.ratio:.3f}): the two cells' samples differ in shape, not plainly in speed")


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
    for setting in metric.same_in_both:
        setting_a, setting_b = metric_table.at(cell_a, setting), metric_table.at(cell_b, setting)
        if setting_a != setting_b:
            figure.why = f"{setting[-1]} differs: A {setting_a}, B {setting_b}"
            return figure
    limit = 0.0 if metric.rule == "exact" else threshold
    figure.ratio = b / a if a > 0 and b > 0 else None
    if a == b or (figure.ratio is not None and 1 / (1 + limit) <= figure.ratio <= 1 + limit):  # 5% either way, as times go
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


def _gpus(header: BundleHeader) -> str | None:
    gpus = (header.system.gpu or Gpus()).gpus
    return ", ".join(str(g.name) for g in gpus) if gpus else None


def _layer_differences(a: list[str] | None, b: list[str] | None) -> list[tuple[str, str, str]]:
    """Which of two images' layers differ (by position, base first), when both recorded them."""
    if a is None or b is None:
        return []
    rows = []
    for index in range(max(len(a), len(b))):
        left, right = (a[index] if index < len(a) else "-"), (b[index] if index < len(b) else "-")
        if left != right:
            rows.append((f"container layer {index + 1} of {max(len(a), len(b))}", str(left), str(right)))
    return rows


def _facts(header: BundleHeader) -> list[tuple[str, object]]:
    """(what, value) of each fact of a run's system and software that `system_differences` compares;
    None where the run did not record it."""
    system = header.system
    cpu, opsys, python, torch = system.cpu or Cpu(), system.os or OperatingSystem(), system.python or Python(), system.torch or Torch()
    gpu, container = system.gpu or Gpus(), system.container or Container()
    return [
        ("harness version", header.harness.version), ("harness git sha", header.harness.git_sha),
        ("device", header.device), ("CPU", cpu.model), ("CPU identity", cpu.identity),
        ("CPU vector extensions", " ".join(cpu.vector_extensions) if cpu.vector_extensions is not None else None),
        ("logical cores", cpu.logical_cores),
        ("memory bytes", cpu.memory_bytes), ("OS kernel", opsys.kernel),
        ("Python", python.version), ("torch", torch.version),
        ("CUDA (torch build)", torch.cuda_build), ("cuDNN", torch.cudnn),
        ("GPU driver", gpu.driver), ("in a container", container.in_container),
        ("container image", container.image), ("container image id", container.image_id),
        ("container digest", container.image_digest), ("container base", container.base),
        # the images an input folder held (its path is the cells' config): a resume refuses others,
        # and two runs on other images under the same names are told apart here
        ("input images (SHA-256)", header.inputs_sha256[:12] if header.inputs_sha256 else None),
        # how the cells shared the machine (--jobs, Ray): cells of other shares are never paired
        ("executor", _executor(header.executor)),
    ]


#: How a row of `system_differences` names an installed package.
PACKAGE = "package "
#: What a cell's counterpart is looked for by, in the order `_not_in` names the first the other run lacks.
_SETTINGS = (("device", "on"), ("model", "of"), ("input_size", "at input size"), ("backend", "on"), ("scenario", "in"),
             ("dtype", "in"), ("batch", "at batch"))


def _setting(cell: CellRecord, name: str) -> str:
    config = cell.config
    return str(config.model.name if name == "model" else getattr(config, name))  # input_size: the size it ran at


def _settings_ran(cells: list[CellRecord]) -> dict[str, set[str]]:
    """Each of `_SETTINGS` with every value a bundle's cells ran it at: read once per bundle."""
    return {name: {_setting(cell, name) for cell in cells} for name, _ in _SETTINGS}


def _not_in(cell: CellRecord, ran: dict[str, set[str]], other_side: str) -> str:
    """Why `cell` has no counterpart in the bundle that ran `ran` (`_settings_ran`): the first of its
    settings no cell there has (`B ran no cell on cpu`), else only that B did not run this combination."""
    for name, word in _SETTINGS:
        value = _setting(cell, name)
        if value not in ran[name]:
            return f"{other_side} ran no cell {word} {value}"
    return f"{other_side} ran no cell of these settings together"


def _executor(executor: dict[str, Any] | None) -> str | None:
    """The last start's executor in a few words (`local, 2 jobs`, `ray, 1 CPU(s) a cell`), or None
    where the header recorded none (bundles before --jobs)."""
    if not isinstance(executor, dict):
        return None
    name = str(executor.get("name", "?"))
    if isinstance(executor.get("jobs"), int) and executor["jobs"] > 1:
        return f"{name}, {executor['jobs']} jobs"
    if isinstance(executor.get("cpus_per_cell"), int):
        return f"{name}, {executor['cpus_per_cell']} CPU(s) a cell"
    return name


def system_differences(a: BundleHeader, b: BundleHeader) -> list[tuple[str, str, str]]:
    """(what, A, B) for each fact of the two runs' systems and software that differs."""
    rows = []
    for (what, left), (_, right) in zip(_facts(a), _facts(b)):
        if left != right:  # a fact one run did not record (synthetic inputs have no digest) is "-", never "None"
            rows.append((what, "-" if left is None else str(left), "-" if right is None else str(right)))
    if _gpus(a) != _gpus(b):
        rows.append(("GPUs", str(_gpus(a)), str(_gpus(b))))
    rows += _layer_differences((a.system.container or Container()).layers, (b.system.container or Container()).layers)
    backends_a, backends_b = _backends(a), _backends(b)  # a plugin one run had and the other not, or other versions
    for name in sorted(set(backends_a) | set(backends_b)):
        if backends_a.get(name) != backends_b.get(name):
            rows.append((f"backend {name}", backends_a.get(name, "-"), backends_b.get(name, "-")))
    packages_a, packages_b = a.system.packages or {}, b.system.packages or {}
    for name in sorted(set(packages_a) | set(packages_b)):  # last: two machines can differ in hundreds
        if packages_a.get(name) != packages_b.get(name):
            rows.append((f"{PACKAGE}{name}", str(packages_a.get(name, "-")), str(packages_b.get(name, "-"))))
    return rows


def _run_machine(header: BundleHeader) -> str:
    """A run's machine in words: its CPU and logical cores, its GPUs or none."""
    cpu, gpus = header.system.cpu or Cpu(), (header.system.gpu or Gpus()).gpus
    cores = f" x{cpu.logical_cores}" if cpu.logical_cores else ""
    named = [str(g.name) for g in gpus if g.name]
    return f"{cpu.model or 'an unrecorded CPU'}{cores}, " + (", ".join(named) or (f"{len(gpus)} GPU(s)" if gpus else "no GPU"))


def _backends(header: BundleHeader) -> dict[str, str]:
    """Each backend a run's probe recorded, as a line: available or why not, and its libraries' versions."""
    lines: dict[str, str] = {}
    for name, entry in header.backends.items():
        state = "available" if entry.available else f"not available ({one_line(entry.reason or '')})"
        lines[name] = state + "".join(f", {k} {v}" for k, v in sorted((entry.versions or {}).items()))
    return lines


def pairing_key(record: CellRecord) -> str:
    """What pairs a cell with its counterpart in another bundle: its config's hash without the
    rounds it was timed over (harness/scenario/cells.py `cell_id`, as schema 8 on computes ids), so
    cells of a run of three rounds and of one, or of a bundle of any version that recorded no
    rounds, pair; the rounds are noted in each pair's figures, not what the cell is."""
    return cell_id(record.config.recorded())


def compare(a: LoadedBundle, b: LoadedBundle, *, threshold: float = 0.05, alpha: float = ALPHA) -> Comparison:
    """Pair the cells of `a` (the baseline) and `b` by `pairing_key`, and label each pair."""
    result = Comparison(a=a.name, b=b.name, threshold=threshold, alpha=alpha,
                        systems=system_differences(a.header_record, b.header_record), fusion=fusion_verdicts(a, b),
                        machines=(_run_machine(a.header_record), _run_machine(b.header_record)),
                        noise=(machine_noise(lookup(a.header, "system", "machine_noise")),
                               machine_noise(lookup(b.header, "system", "machine_noise"))))
    cells_a = {pairing_key(cell): cell for cell in a.records}
    cells_b = {pairing_key(cell): cell for cell in b.records}
    listed = {"A": set(a.missing), "B": set(b.missing)}  # planned, with no record
    ran = {"A": _settings_ran(a.records), "B": _settings_ran(b.records)}
    named = {"A": {cell.config.shown_label: cell for cell in a.records},  # a cell of each name, per bundle
             "B": {cell.config.shown_label: cell for cell in b.records}}
    for ours, theirs, side, other_side in ((cells_a, cells_b, "A", "B"), (cells_b, cells_a, "B", "A")):
        alike = named[other_side]
        for key, cell in ours.items():
            counterpart = theirs.get(key)
            if cell.status != "valid":
                continue
            if counterpart is None and cell.config.shown_label in alike:  # a cell of its name, measured otherwise
                apart = settings_apart(cell, alike[cell.config.shown_label], side, other_side)
                result.unpaired.append(f"{cell.config.shown_label}: valid in {side}; {other_side} ran it with other "
                                       f"settings ({apart})")
            elif counterpart is None and key in listed[other_side]:
                result.unpaired.append(f"{cell.config.shown_label}: valid in {side}, not run in {other_side} (listed there, "
                                       "no record: its run was stopped)")
            elif counterpart is None:
                result.unpaired.append(f"{cell.config.shown_label}: valid in {side}; "
                                       f"{_not_in(cell, ran[other_side], other_side)}")
            elif counterpart.status in ("skipped", "interrupted"):
                result.unpaired.append(f"{cell.config.shown_label}: valid in {side}, {counterpart.status} in {other_side}")
            elif side == "A" and counterpart.status == "valid" and (unlike := unlike_runs(cell, counterpart)):
                result.unpaired.append(f"{cell.config.shown_label}: valid in both, but {unlike}")
    def only_in(cell: CellRecord, side: str, other_side: str) -> str:
        """Why a cell of one bundle is in no pair: the other ran one of its name with other settings
        (each named: the two rows read alike), or what the other never ran."""
        alike = named[other_side].get(cell.config.shown_label)
        if alike is not None:
            return f"only in {side}: {other_side} ran it with other settings ({settings_apart(cell, alike, side, other_side)})"
        return f"only in {side}: {_not_in(cell, ran[other_side], other_side)}"

    seen = set()
    for cell in a.records:
        seen.add(pairing_key(cell))
        other = cells_b.get(pairing_key(cell))
        if other is None:
            result.pairs.append(Pair(id=cell.id, label=cell.config.shown_label, backend=cell.config.backend,
                                     verdict="not comparable", why=only_in(cell, "A", "B")))
        else:
            pair = compare_cells(cell, other, threshold, alpha)
            rounds = (cell.config.timing.rounds, other.config.timing.rounds)
            if rounds[0] != rounds[1]:
                pair.why = "; ".join(filter(None, (pair.why, f"timed over {rounds[0]} round(s) in A, {rounds[1]} in B")))
            result.pairs.append(pair)
    for cell in b.records:
        if pairing_key(cell) not in seen:
            result.pairs.append(Pair(id=cell.id, label=cell.config.shown_label, backend=cell.config.backend,
                                     verdict="not comparable", why=only_in(cell, "B", "A")))
    _scored_on_other_images(result.pairs, a.header_record.inputs_sha256, b.header_record.inputs_sha256)
    return result


def _scored_on_other_images(pairs: list[Pair], digest_a: str | None, digest_b: str | None) -> None:
    """Accuracy is not compared between runs that read other images from their input folders (the
    same path and names, another content): the digests differ. Their times still are: the images'
    shape is the cells' config."""
    if digest_a is None or digest_b is None or digest_a == digest_b:
        return
    for figure in (f for pair in pairs for f in pair.figures if f.metric == "accuracy"):
        figure.verdict, figure.ratio = "not comparable", None
        figure.why = f"the runs read other images (inputs_sha256 A {digest_a[:12]}, B {digest_b[:12]})"
