"""Every figure FusionBench shows, one row each, and the one function that turns a figure into text.

pyperf's `_metadata.py` and `_formatter.py` are the model: a row says where the figure lies in a cell
record, its unit, which way is better, how `compare` judges it and the label it is shown under; each
unit has one formatting function. The console summary (harness/run/summary.py), the report
(harness/reporting/), `gpu-check` and `compare` all go through `figure` and `format_value`, so a
figure reads the same wherever it is shown: same precision, same statistic, same definition.

Paths lead into a cell record, attribute by attribute: the typed record every reader has
(harness/bundle/cell_record.py, a bundle's cells upgraded to the current schema), and on into its
free-form parts by key. A figure a record lacks (an older schema, a pass that did not run, a cell
that failed) reads as None and shows as "-".
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, get_args

Unit = Literal["ns", "s", "bytes", "count", "samples/s", "percent", "signed fraction", "error", "times"]
Better = Literal["lower", "higher"]
# How `compare` judges a figure of two cells:
# - "rank test": raw samples on both sides; the ratio of medians beyond the threshold and a test
#   agreeing: t on the logs of the rounds' medians where a cell has several, else the Mann-Whitney U test on the
#   samples (harness/reporting/judging.py; the name is kept: it is the rule's key in compare's JSON);
# - "ratio": one figure a side, no spread to test: B/A beyond the threshold (a cell's round 1's: a further
#   round times the model alone, so a cell of several rounds has one memory reading, one compile, ...);
# - "exact": one figure a side that a rerun reproduces (a count): any change counts;
# - "no": not compared (a check of the cell, not a figure to be better in).
Rule = Literal["rank test", "ratio", "exact", "no"]
MISSING = "-"
# A cell record: harness/bundle/cell_record.py's CellRecord, which this bottom layer reads by path
# without importing it.
Record = Any


def _three_figures(value: float) -> str:
    """At least three significant figures, never dropping digits before the point; the decimals
    follow the figure as it rounds (99.96 is 100, not 100.0; 99.6 stays 99.6)."""
    size = abs(value)
    if round(size, 1) >= 100:
        return f"{value:,.0f}"
    return f"{value:.1f}" if round(size, 2) >= 10 else f"{value:.2f}"


def _takes_unit(value: float, step: int) -> bool:
    """`value` (in a unit `step` times the one below) is written in this unit: it is 1 or more, or
    the unit below would write it as `step` or more (999,960 ns is 1.00 ms, not 1,000 us)."""
    return abs(value) >= 1 or round(abs(value) * step) >= step


def format_per_core(chunk_ms: Mapping[str, float]) -> str:
    """`core 0 1.2 ms, core 1 1.3 ms, ..., core 10 ...`: in the cores' order (JSON keeps them as
    text, which put core 10 before core 2)."""
    def order(core: str) -> tuple[bool, int, str]:
        return (not core.isdigit(), int(core) if core.isdigit() else 0, core)

    ordered = sorted(chunk_ms.items(), key=lambda item: order(str(item[0])))
    return ", ".join(f"core {core} {ms:.1f} ms" for core, ms in ordered)


def format_duration_ns(ns: float) -> str:
    """A duration in the unit that puts 1 to 999 before the point: 3.34 us, 3.20 ms, 207 ms, 21.3 s
    (999,960 ns is 1.00 ms)."""
    for scale, unit in ((1e9, "s"), (1e6, "ms"), (1e3, "us")):
        if _takes_unit(ns / scale, 1000):
            return f"{_three_figures(ns / scale)} {unit}"
    return f"{_three_figures(ns)} ns"


def format_duration_s(seconds: float) -> str:
    return format_duration_ns(seconds * 1e9)


def format_bytes(count: float) -> str:
    """Binary units: 858 MiB, 1.21 GiB."""
    for scale, unit in ((2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if _takes_unit(count / scale, 1024):
            return f"{_three_figures(count / scale)} {unit}"
    return f"{count:.0f} B"


def format_count(count: float) -> str:
    """A whole count as it is (1,234); a mean count with one decimal (31.5)."""
    return f"{count:,.0f}" if float(count).is_integer() else f"{count:,.1f}"


def format_rate(per_s: float) -> str:
    return f"{_three_figures(per_s)} samples/s"


def format_percent(percent: float) -> str:
    """A figure already in percent (top-1 accuracy)."""
    return f"{percent:.2f}%"


def format_signed_fraction(fraction: float) -> str:
    return f"{fraction:+.1%}"


def format_error(error: float) -> str:
    return f"{error:.1e}"


def format_ratio(ratio: float) -> str:
    """A ratio as a bare number, for the bounds of a speedup's interval: 0.98, 12.3, 1,520, and
    below 0.01 three significant figures in plain decimals (0.0000748), never an exponent whose
    minus sign would read as the interval's dash."""
    size = abs(ratio)
    if 0 < size < 0.01:
        return f"{ratio:.{2 - math.floor(math.log10(size))}f}"
    return _three_figures(ratio)


#: The decimal prefixes a rate is written with (FLOP/s, B/s): the one that puts 1 to 999 before the point.
_SI_PREFIXES = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def si_scale(value: float) -> tuple[float, str]:
    """The decimal prefix (its factor and letter) that writes `value` with 1 to 999 before the point:
    50.5e12 FLOP/s is 50.5 TFLOP/s, not 5.05e+04 GFLOP/s; below 1,000, no prefix."""
    for scale, prefix in _SI_PREFIXES:
        if _takes_unit(value / scale, 1000):
            return scale, prefix
    return 1.0, ""


def format_si(value: float, unit: str) -> str:
    """A rate or an amount in a decimal unit, three significant figures under the prefix that fits:
    173 GFLOP/s, 50.5 TFLOP/s, 4.06 TB/s, 33.8 GB/s; never an exponent."""
    scale, prefix = si_scale(value)
    return f"{format_ratio(value / scale)} {prefix}{unit}"


def format_times(ratio: float) -> str:
    """How many times another figure: 1.04x, 12.3x, 1,520x (a speedup, wherever it is shown)."""
    return f"{format_ratio(ratio)}x"


FORMATS: dict[Unit, Callable[[float], str]] = {
    "ns": format_duration_ns, "s": format_duration_s, "bytes": format_bytes, "count": format_count,
    "samples/s": format_rate, "percent": format_percent, "signed fraction": format_signed_fraction,
    "error": format_error, "times": format_times,
}
if set(FORMATS) != set(get_args(Unit)):  # a unit named but not written would fail where it is first shown
    raise ValueError(f"harness/metric_table.py: the units {sorted(set(get_args(Unit)) ^ set(FORMATS))} lack a format or a name")


def format_value(value: Any, unit: Unit) -> str:
    """The one way a figure of `unit` is written; "-" for none (or for what is not a finite number:
    a record is read, never trusted)."""
    number = _number(value)
    return MISSING if number is None else FORMATS[unit](number)


def format_spread(cv: float) -> str:
    """A coefficient of variation beside its figure: ±0.4%, ±5%, ±14%."""
    return f"±{cv:.1%}" if cv < 0.01 else f"±{cv:.0%}"


def at(record: Any, path: tuple[str, ...]) -> Any:
    """The value at `path` in a cell record: an attribute of a typed part, a key of a free-form one;
    None where a level is missing."""
    for key in path:
        record = record.get(key) if isinstance(record, dict) else getattr(record, key, None)
    return record


def unlike_setting(metric: Metric, cell_a: Record, cell_b: Record) -> tuple[str, Any, Any] | None:
    """The first setting the figure of `metric` depends on (`same_in_both`) in which the two cells
    differ, its name and each cell's value (`("prepare_cache", "cold", "warm")`); None where they agree."""
    for setting in metric.same_in_both:
        value_a, value_b = at(cell_a, setting), at(cell_b, setting)
        if value_a != value_b:
            return setting[-1], value_a, value_b
    return None


def _number(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


# --- what a figure carries beside its value ------------------------------------------------------

_PERCENTILE = re.compile(r"(?:^|_)(p\d+)(?:_|$)")


def percentile_of(metric_name: str) -> str | None:
    """The percentile a LoadGen metric's recorded name names (`latency_p90_early_stopping_ns`: p90)."""
    found = _PERCENTILE.search(metric_name)
    return found.group(1) if found else None


def _loadgen(cell: Record, text: str) -> str:
    """LoadGen's latency names its percentile (read from the metric's recorded name, which the
    scenario's rule in harness/scenario/rules.py chose); a run LoadGen did not call VALID says so."""
    name = str(at(cell, ("metrics", "loadgen", "metric", "name")) or "")
    percentile = percentile_of(name)
    if percentile and at(cell, ("metrics", "loadgen", "metric", "unit")) == "ns":
        # LoadGen's early-stopping estimate, not the percentile its summary's first lines give
        text = f"{percentile}{' (early stopping)' if 'early_stopping' in name else ''} {text}"
    p99, bound = (_number(at(cell, ("metrics", "loadgen", "metric", key))) for key in ("latency_p99_ns", "target_latency_ns"))
    if p99 is not None and bound:  # Server: the rate counts only with its p99 within the bound
        text += f", p99 {format_duration_ns(p99)} {'within' if p99 <= bound else 'over'} {format_duration_ns(bound)}"
    validity = at(cell, ("metrics", "loadgen", "validity"))
    return text if validity in (None, "VALID") else f"{text} ({validity})"


def _spread(cell: Record, text: str) -> str:
    """The CV of the samples; a cell timed over several rounds says that the figure is its first's
    (the report's fusion tables and `compare` give the median over them)."""
    summary = at(cell, ("metrics", "device_time", "summary"))
    cv = _number(at(summary, ("cv",)))
    if cv is not None:
        text += f" {format_spread(cv)}"
    text += " noisy" if at(summary, ("noisy",)) is True else ""
    rounds = at(cell, ("metrics", "rounds"))
    return text + (f" (round 1 of {len(rounds)})" if isinstance(rounds, list) and len(rounds) > 1 else "")


def _gap(cell: Record, text: str) -> str:
    """The gap names the device-timing figure it was taken against where that is not the median the
    table shows beside it (Offline and Server: the mean)."""
    return f"{text} vs mean" if at(cell, ("metrics", "latency_agreement", "device_statistic")) == "mean" else text


def _checks(correctness: Any) -> list[tuple[str, Any]]:
    """A cell's correctness checks, named: the first call's, and the timed callable's after its timing
    where the record has it (since 2026-12-04)."""
    if correctness is None:
        return []
    after = at(correctness, ("after_timing",))
    return [("first call", correctness), *([("after timing", after)] if after is not None else [])]


def _failed(correctness: Any) -> list[str]:
    return [name for name, check in _checks(correctness) if at(check, ("ok",)) is False]


def _shown_error(correctness: Any) -> float | None:
    """The error the column shows: the larger of the failed checks' (a check that failed after timing
    showed the first call's 0.0 beside its FAIL), else the larger of the two."""
    checks = _checks(correctness)
    failed = _failed(correctness)
    errors = [_number(at(check, ("max_abs_error",))) for name, check in checks if not failed or name in failed]
    return max((e for e in errors if e is not None), default=None)


def _correctness(cell: Record, text: str) -> str:
    """FAIL beside an error outside the tolerance, naming the check that failed where the cell has two
    (first call, after timing, both); without an error figure, n/a where the output was not compared
    (the null backend) and FAIL where it could not be (NaN, a wrong shape)."""
    correctness = at(cell, ("metrics", "correctness"))
    ok = at(correctness, ("ok",))
    failed = _failed(correctness)
    if not failed:
        return text if text != MISSING else (MISSING if ok is None else "n/a")
    which = "both" if len(failed) == 2 else failed[0]
    verdict = f"FAIL ({which})" if len(_checks(correctness)) == 2 else "FAIL"
    return verdict if text == MISSING else f"{text} {verdict}"


@dataclass(frozen=True)
class Metric:
    """One figure of a cell: where it lies, how it reads and how two cells' figures compare."""

    name: str
    path: tuple[str, ...]  # into the cell record
    unit: Unit
    better: Better | None  # None: a check of the cell, neither way is better
    rule: Rule  # how `compare` judges it (above)
    label: str  # the column head in the console summary, the report and gpu-check alike
    definition: str  # what it is: compare and docs/metrics.md say it
    only_if: tuple[tuple[str, ...], Any] | None = None  # the row holds where the record has this value there
    same_in_both: tuple[tuple[str, ...], ...] = ()  # settings the figure depends on: cells must agree on each to compare
    # The part of the figure that is not the cell's (what the worker held before the model was built): cells whose
    # parts differ beyond the threshold are not compared, as their figures would differ by it whatever the cells did.
    baseline: tuple[str, ...] | None = None
    samples: tuple[str, ...] = ()  # the raw samples of a "rank test" figure
    floor: float = 0.0  # a difference below this (in `unit`) is no change, whatever the ratio
    decorate: Callable[[Record, str], str] | None = None  # what the figure carries beside its value
    decorate_missing: bool = False  # `decorate` also speaks for a missing value
    derive: Callable[[Any], Any] | None = None  # a figure made from what lies at `path`, not read as it is
    # where `path` is a whole part of the record: the fields below it that `derive` reads (through a list's items)
    sources: tuple[tuple[str, ...], ...] = ()

    def value(self, cell: Record) -> float | None:
        if self.only_if is not None and at(cell, self.only_if[0]) != self.only_if[1]:
            return None
        found = at(cell, self.path)
        return _number(found if self.derive is None else self.derive(found))

    def figure(self, cell: Record) -> str:
        """The figure of `cell` as every table shows it, or "-"."""
        value = self.value(cell)
        text = format_value(value, self.unit)
        if self.decorate is None or (value is None and not self.decorate_missing):
            return text
        return self.decorate(cell, text)


#: The timed repetitions' wall time, in all, under which `cpu_cores` is none, and a busy or shared machine
#: is not judged (harness/stats/thresholds.py): at the kernel's 10 ms tick a region of 50 ms reads 0 or 8
#: cores alike.
CORES_MIN_WALL_S = 1.0


def _cores_busy(repetitions: Any) -> float | None:
    """The cores the worker kept busy, on average, over the timed repetitions: its CPU time over their
    wall time, both summed from what ran beside each (`beside.cpu`, harness/measure/activity.py). A
    thread pool smaller than the cores shows here (one of two busy, where another backend keeps two).
    In tenths, as the tick allows. A record is read, never trusted: a repetition without both
    figures is left out of both sums."""
    wall = cpu = 0.0
    for repetition in repetitions if isinstance(repetitions, list) else []:
        region_wall = _number(at(repetition, ("beside", "cpu", "wall_s")))
        region_cpu = _number(at(repetition, ("beside", "cpu", "process_cpu_s")))
        if region_wall is not None and region_cpu is not None and region_wall >= 0 and region_cpu >= 0:
            wall += region_wall
            cpu += region_cpu
    return round(cpu / wall, 1) if wall >= CORES_MIN_WALL_S else None


_FIRST_RECOMPILES, _ROUNDS, _ROUND_RECOMPILES = ("dynamo", "recompiles_timed"), ("rounds",), ("recompiles_timed",)


def _timed_recompiles(metrics: Any) -> int | None:
    """Round 1's timed recompiles (`dynamo.recompiles_timed`) and each further round's (`rounds[].recompiles_timed`):
    every round's median enters a cell's time, so a round that recompiled is in it. None without round 1's
    record, which every torch.compile cell has; a further round without one (before 2026-12-06) adds none."""
    first = at(metrics, _FIRST_RECOMPILES)
    if _number(first) is None:
        return None
    rounds = at(metrics, _ROUNDS)
    further = [at(r, _ROUND_RECOMPILES) for r in (rounds if isinstance(rounds, list) else []) if at(r, ("round",)) != 1]
    return int(first) + sum(int(count) for count in further if _number(count) is not None)


_LOADGEN_UNIT = ("metrics", "loadgen", "metric", "unit")
_LOADGEN_VALUE = ("metrics", "loadgen", "metric", "value")

def _by_name(rows: tuple[Metric, ...]) -> dict[str, Metric]:
    """The rows by name; two of one name, or a unit no format writes, stop the import (one row
    silently replaced the other, and a unit without its format ended each run with a traceback)."""
    named: dict[str, Metric] = {}
    for row in rows:
        if row.name in named:
            raise ValueError(f"harness/metric_table.py: two rows named {row.name!r}")
        if row.unit not in FORMATS:
            raise ValueError(f"harness/metric_table.py: row {row.name!r}'s unit {row.unit!r} has no format in FORMATS")
        named[row.name] = row
    return named


METRICS: dict[str, Metric] = _by_name((
    Metric("loadgen_latency", _LOADGEN_VALUE, "ns", "lower", "ratio", "LoadGen latency",
           "LoadGen's headline latency (SingleStream p90, MultiStream p99 per query: the percentile is shown)",
           only_if=(_LOADGEN_UNIT, "ns"), decorate=_loadgen),
    Metric("loadgen_throughput", _LOADGEN_VALUE, "samples/s", "higher", "ratio", "LoadGen throughput",
           "LoadGen's headline throughput (Offline samples/s, Server completed samples/s)",
           only_if=(_LOADGEN_UNIT, "samples/s"), decorate=_loadgen),
    Metric("device_time", ("metrics", "device_time", "summary", "median_ns"), "ns", "lower", "rank test",
           "device time (median ±CV)", "median batch time of the device-timing pass, ± its CV",
           samples=("metrics", "device_time", "samples_ns"), decorate=_spread),
    Metric("latency_gap", ("metrics", "latency_agreement", "gap"), "signed fraction", None, "no", "gap",
           "LoadGen's time per batch over the device timing's, - 1 (one latency truth): LoadGen's median query "
           "latency against the timing's median (SingleStream, MultiStream), or batch over samples per second "
           "against the timing's mean (Offline, Server), which the figure names (`vs mean`); not the LoadGen "
           "percentile or the median shown beside it", decorate=_gap),
    # Half a core apart or less is the tick's and the machine's noise, not another thread pool.
    Metric("cpu_cores", ("metrics", "device_time", "repetitions"), "count", None, "ratio", "CPU cores busy",
           "the cores the worker kept busy during the timed calls, on average: its CPU time over their wall time, "
           "from /proc (a thread pool smaller than the cores, or work that does not spread, shows here); CPU cells "
           "timed a second or more in all",
           only_if=(("config", "device"), "cpu"), floor=0.5, derive=_cores_busy),
    Metric("kernels_per_inference", ("metrics", "kernels", "kernels_per_inference"), "count", "lower", "exact",
           "kernels/inf", "kernels (GPU) or compute dispatches (CPU) per inference"),
    Metric("fusions", ("metrics", "fusion_report", "fusion_count"), "count", None, "exact", "fusions",
           "kernels that run two computing operators or more (the fusion report's fusion_count): another count is "
           "another fusion decision, neither better nor worse (`compare` names the fused groups each side lacks)"),
    Metric("peak_rss", ("metrics", "memory", "peak_rss_bytes"), "bytes", "lower", "ratio", "peak RSS",
           "the worker's peak resident host memory over its life, on every device: its imports before the model was "
           "built (`rss_baseline_bytes`) and what ran before the memory pass (the eager reference, the backend's "
           "compile or session) beside the inference's own, one reading a cell",
           same_in_both=(("metrics", "memory", "worker_start"), ("metrics", "prepare_cache"), ("metrics", "tuning", "cache")),
           baseline=("metrics", "memory", "rss_baseline_bytes")),
    # A backend's own allocator, where its profiler reports it: the one memory figure that moves with
    # what fusion does to a model's intermediates, unlike the process's peaks beside it.
    Metric("arena_peak", ("metrics", "kernels", "backend_figures", "arena_peak_in_use_bytes"), "bytes", "lower",
           "ratio", "arena peak",
           "the backend's allocator arena at its fullest, as its profiler reports it in the profile pass (ONNX "
           "Runtime's `mem_in_use_peak`, in a second session of the same graph and options): the weights it repacked "
           "for its kernels as the session was made (a Gemm's or MatMul's packed operand) and a run's planned "
           "activations and scratch; not the weights it keeps as loaded, nor what other allocators hold (none "
           "where a backend reports no arena)"),
    Metric("gpu_peak", ("metrics", "memory", "nvml_process_peak_bytes"), "bytes", "lower", "ratio", "GPU peak",
           "the worker's peak GPU memory as NVML sees the process during the memory pass: all the process holds, "
           "its CUDA context and what each backend's allocator keeps (torch's cached blocks, ONNX Runtime's arena, "
           "TVM's pool) with the inference's own, so one backend against another sets their allocators side by "
           "side as much as their models (none where NVML does not list the process)"),
    Metric("dram_bytes", ("metrics", "memory_traffic", "dram_bytes_per_inference"), "bytes", "lower", "ratio",
           "DRAM/inf", "DRAM bytes one inference reads and writes, from the GPU's hardware counters (Nsight Compute, "
           "the caches flushed before each kernel); none on a CPU or where the counters cannot be read",
           same_in_both=(("metrics", "memory_traffic", "caches_flushed"),)),
    # What TorchDynamo counted (torch.compile cells): a new break or a recompile in the timed calls is
    # another graph, or a timing that compiled, whatever the kernels did.
    Metric("graph_breaks", ("metrics", "dynamo", "graph_breaks"), "count", "lower", "exact", "graph breaks",
           "the breaks TorchDynamo split the model's graph at, from before prepare to the end of the correctness "
           "check (torch.compile cells; none for the backends that do not compile through it)"),
    Metric("recompiles", ("metrics",), "count", "lower", "exact", "timed recompiles",
           "the frames TorchDynamo compiled again from the end of the warm-up to the last timed call (torch.compile "
           "cells), in every round of a cell timed over rounds: above 0, the timing measured compiles too, and the "
           "cell warns", derive=_timed_recompiles,
           sources=(("metrics", *_FIRST_RECOMPILES), ("metrics", *_ROUNDS, *_ROUND_RECOMPILES))),
    # A prepare under 0.1 s compiles nothing (eager, null): its changes are noise.
    Metric("compile_time", ("metrics", "prepare_s"), "s", "lower", "ratio", "compile time",
           "Backend.prepare: export and compile (Inductor's first call included), less the backend's one-time "
           "work for the machine (the toolchain phase)",
           same_in_both=(("metrics", "prepare_cache"),), floor=0.1),
    # Tuning under 0.1 s searched nothing (a database reused): its changes are noise.
    Metric("tuning_time", ("metrics", "tuning", "tuning_s"), "s", "lower", "ratio", "tuning time",
           "Backend.tune: the search for faster code before prepare (TVM's MetaSchedule), apart from the compile "
           "time", same_in_both=(("metrics", "tuning", "cache"),), floor=0.1),
    Metric("first_call_ratio", ("metrics", "first_call_ratio"), "times", "lower", "ratio", "first call",
           "the first call's time over the steady median per batch: what the first inference costs beyond a warm "
           "one (lazy initialisation, allocation, cold caches)"),
    Metric("accuracy", ("metrics", "accuracy", "top1_percent"), "percent", "higher", "exact", "top-1",
           "top-1 accuracy of LoadGen's accuracy run", same_in_both=(("metrics", "accuracy", "total"),)),
    Metric("max_abs_error", ("metrics", "correctness"), "error", "lower", "no", "max abs err",
           "largest absolute difference from eager's output over the correctness checks, or the failed check's "
           "(FAIL: outside the tolerance, naming the check: first call, after timing or both)",
           decorate=_correctness, decorate_missing=True, derive=_shown_error),
))

# The LoadGen rows are one column: a cell has the one its scenario gives.
LOADGEN: tuple[str, ...] = ("loadgen_latency", "loadgen_throughput")
COLUMN_LABELS: dict[tuple[str, ...], str] = {LOADGEN: "LoadGen"}

# The columns of each table, here beside the rows, so that a new figure is shown where it belongs by
# this file alone (an optional column only where a cell has it: `present`). `compare` judges every
# row whose rule is not "no".
Columns = tuple[str | tuple[str, ...], ...]
CONSOLE: Columns = (LOADGEN, "device_time", "latency_gap", "cpu_cores", "kernels_per_inference", "peak_rss",
                    "gpu_peak", "max_abs_error")  # the run's summary (harness/run/summary.py)
REPORT_CELLS: Columns = (LOADGEN, "device_time", "cpu_cores", "kernels_per_inference", "peak_rss", "arena_peak", "gpu_peak",
                         "dram_bytes",
                         "tuning_time", "compile_time", "first_call_ratio")  # the report's Cells table
# fusion on / off, side by side
REPORT_FUSION: tuple[str, ...] = ("kernels_per_inference", "peak_rss", "arena_peak", "gpu_peak", "dram_bytes")
GPU_CHECK: Columns = ("kernels_per_inference", "dram_bytes", LOADGEN, "device_time", "latency_gap")  # gpu-check's verdicts


def metric(name: str) -> Metric:
    return METRICS[name]


def figure(names: str | tuple[str, ...], cell: Record) -> str:
    """The figure of `cell` under a column: of the row `names`, or of the first of the rows that has one."""
    for name in (names,) if isinstance(names, str) else names:
        text = METRICS[name].figure(cell)
        if text != MISSING:
            return text
    return MISSING


def value(name: str, cell: Record) -> float | None:
    return METRICS[name].value(cell)


def label(names: str | tuple[str, ...]) -> str:
    """The head of a column: its row's label, or the name of a column of several rows."""
    return METRICS[names].label if isinstance(names, str) else COLUMN_LABELS[names]


Column = TypeVar("Column", str, tuple[str, ...], str | tuple[str, ...])


def present(names: Iterable[Column], cells: Iterable[Record],
            optional: tuple[str, ...] = ("arena_peak", "gpu_peak", "dram_bytes", "tuning_time")) -> list[Column]:
    """The columns `names` to show for `cells`: every one, but an optional one only where a cell has it
    (no empty GPU or DRAM column for a CPU run, no tuning column where nothing was tuned)."""
    cells = list(cells)
    return [n for n in names if n not in optional or any(figure(n, c) != MISSING for c in cells)]


def compared() -> list[Metric]:
    """The rows `compare` judges, in table order."""
    return [m for m in METRICS.values() if m.rule != "no"]
