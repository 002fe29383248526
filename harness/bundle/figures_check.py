"""Validate's figures layer: every figure a cell computed from other figures of the bundle is
computed again, and must agree (within harness.bundle.tolerance); and every cell must belong to
its bundle (harness/bundle/belonging.py).

Re-derived, wherever the record holds the inputs (older records lack some; a check whose inputs
are absent is skipped, so every golden bundle still validates):
- device_time: `summary.noisy` from the samples' CV; each repetition's median and CV from its
  slice of the samples (the samples are the repetitions' calls, in order), their count from the
  config, `repetition_spread` from their medians; the warm-up's `calls`, `seconds` and `steady`
  by replaying the stopping rule of harness/measure/timing.py over the warm-up samples, and the
  calls per repetition from the estimate that replay ends with;
- latency_agreement: the device figure from the samples (median or mean, as the scenario's rule
  says), LoadGen's from the cell's LoadGen results, `gap` from the two, `within` from the gap,
  the limit and whether batches were in flight (harness/measure/trust.py), and the batches in
  flight from the config (harness/scenario/rules.py `batches_in_flight`);
- time_split: `wall_ns` is the samples' median (0 for a backend that computes no model, whose
  correctness names no reference), the kernel time the profile's, overhead and share from them
  (harness/measure/passes.py); roofline: the measured time, the bounds, `bound_by` and the
  fraction, from the costs and the peaks bundle.json's system measured;
- memory_traffic: the total from the reads and writes, and the reads against the roofline's
  compulsory reads (harness/bundle/traffic_check.py);
- kernels: on a GPU, `kernels_per_inference` as its kinds' calls per inference added up (one
  trace counts both; on the CPU they are two counts); on the CPU, in a cell that split its time in
  kernels between its kernels (since 2026-12-06), its kinds' times added up to that time
  (harness/bundle/kernels_check.py); each fusion-report kernel's class from its operators
  (harness/bundle/fusion_check.py);
- math_mode: the requested math from the dtype, the effective mode and whether there are
  problems from the torch and backend settings read back (harness/precision.py `math_record`; a
  cell started before 2026-12-05 01:01:22 UTC, by its start or else its bundle's making, by that
  day's rule: a backend's tf32 that is not a bool read as its truth value, a problem since);
  a `valid` cell has no problem and ran the math its dtype asks for; an `invalid` one gives each
  problem as a reason (harness/measure/worker.py);
- environment.allocator: the setting from the config, the tunables from the worker's variables,
  `in_effect` from the C library and the tunables (harness/allocator.py);
- warnings: each warning the worker's rules imply from figures in the record (noise, warm-up,
  drift, a busy or shared machine, LoadGen against device timing, the allocator, a recompile in the
  timed calls) is among the cell's; and each warning of recompiles says the count its round records
  (harness/bundle/recompiles_check.py, a further round's too);

Not re-derivable, as each is a measurement recorded once: the raw samples, what ran beside each
repetition, the profile's kernel counts and times, the roofline's costs, the device's peaks, the
math settings as read back, the C library's name. The GPU clock warning (its rule reads NVML's
reasons in harness/measure/gpu_state.py), the sentence saying why LoadGen and the device
timing disagree and the rounds' warning of a median out of line with the others (harness/run/
rounds.py, which records of schema 10 before 2026-12-01 lack though their rounds call for it) are
not re-derived. Validate may not import the measure layer (it sits above
this one): the limits of its rules come from harness/stats/thresholds.py, which both read, and the
opening words of each warning are repeated here, held equal to the worker's by
tests/unit/test_figures_check.py.
"""

from __future__ import annotations

import math
import statistics
from datetime import datetime, timezone
from typing import Any

from harness import allocator
from harness.bundle import belonging, fusion_check, kernels_check, loadgen_check, recompiles_check, rounds_check, traffic_check
from harness.bundle.files import CELLS
from harness.bundle.reader import LoadedBundle, lookup
from harness.bundle.recompiles_check import RECOMPILED  # Dynamo compiled frames during the timed calls
from harness.bundle.record_base import MAX_SAMPLES
from harness.bundle.snapshot import Snapshot
from harness.bundle.statuses import MEASURED
from harness.bundle.tolerance import close, number
from harness.precision import PRECISIONS, math_record
from harness.scenario.rules import RULES, batches_in_flight
from harness.stats import warmup
from harness.stats.summary import NOISY_CV, summarize_ns
from harness.stats.thresholds import (
    AGREEMENT_LIMIT,
    DRIFT_LIMIT,
    WARMUP_TOLERANCE,
    busy_machine,
    shared_machine,
)

# How each warning of harness/measure/trust.py begins.
NOISE, WARMUP, DRIFT = "noisy:", "the warm-up did not settle", "drift:"
BUSY, SHARED, DISAGREE = "a busy machine:", "a shared machine:", "LoadGen and device timing disagree"
#: Cells started before this read a backend's non-bool tf32 as its truth value (harness/precision.py
#: has made it a problem of the cell since).
TF32_NOT_BOOL_A_PROBLEM = datetime(2026, 12, 5, 1, 1, 22, tzinfo=timezone.utc)
_RATIO = 1e9  # a ratio (CV, gap, share) is compared at the precision of nanoseconds, as validate's CV


def problems(loaded: LoadedBundle) -> list[str]:
    """Every figure of `loaded` that disagrees with what it is computed from, and every cell that
    is not one of its bundle's: `cells/<id>.json: <what is wrong>`, one a line."""
    lines = belonging.problems(loaded) + rounds_check.pairing(loaded.header, loaded.cells)
    peaks = lookup(loaded.header, "system", "peaks")
    for cell in loaded.cells:
        raw = loaded.raw_cells.get(cell["id"])
        version = raw.get("schema_version") if isinstance(raw, dict) else None
        version = version if isinstance(version, int) else loaded.version
        created = loaded.header.get("created")
        found = (cell_problems(cell, peaks, created) + _loadgen_figure(loaded.files, cell)
                 + rounds_check.problems(cell, version, loaded.root)
                 + fusion_check.problems(cell, version, _before(cell, created, fusion_check.CLASSIFIER_CHANGED)))
        lines += [f"{CELLS}/{cell['id']}.json: {line}" for line in found]
    return lines


def cell_problems(cell: dict[str, Any], peaks: Any = None, created: Any = None) -> list[str]:
    """What in one cell record disagrees with the figures it is computed from; `peaks`: the ones
    bundle.json's system recorded, which the worker set its roofline against; `created`: when its
    bundle was made (bundle.json's), the cell's start where it records none."""
    metrics, config = cell["metrics"], cell["config"]
    timing = metrics.get("device_time") if isinstance(metrics.get("device_time"), dict) else {}
    found = timing.get("samples_ns")
    samples: list[int] = []  # unless every sample is an integer: anything else is the schema's finding
    if isinstance(found, list) and all(isinstance(s, int) and not isinstance(s, bool) for s in found):
        samples = found
    derived = summarize_ns(samples) if samples else None
    lines = []
    if derived is not None:
        lines += _noisy(timing, derived) + _repetitions(config, timing, samples) + _warmup(config, timing)
    lines += _depth(cell) + _agreement(cell, derived)
    wall = _wall_ns(metrics, derived)
    lines += _time_split(metrics, wall) + _roofline(metrics, wall, config.get("dtype"), peaks)
    lines += traffic_check.problems(metrics) + _math_mode(cell, created) + _allocator(cell) + _warnings(cell)
    lines += recompiles_check.problems(cell)
    return lines + kernels_check.problems(cell, wall)


def _differs(recorded: Any, derived: float | None, *, ratio: bool = False) -> bool:
    if derived is None or recorded is None:
        return (derived is None) != (recorded is None)
    value, scale = number(recorded), _RATIO if ratio else 1.0
    return value is None or not close(value * scale, derived * scale)


def _noisy(timing: dict[str, Any], derived: dict[str, Any]) -> list[str]:
    summary = timing.get("summary") or {}
    if "noisy" not in summary or summary.get("n") != derived["n"]:
        return []  # a summary of other samples is validate's consistency layer's finding
    if summary["noisy"] is not derived["noisy"]:
        return [f"device_time: summary noisy is {summary['noisy']} but the samples' CV is {derived['cv']:.1%} "
                f"(noisy over {NOISY_CV:.0%})"]
    return []


def _repetitions(config: dict[str, Any], timing: dict[str, Any], samples: list[int]) -> list[str]:
    repetitions = timing.get("repetitions")
    if not isinstance(repetitions, list) or not repetitions:
        return []
    lines = []
    asked = number(lookup(config, "timing", "repetitions"))
    if asked is not None and len(repetitions) != asked:
        lines.append(f"device_time: {len(repetitions)} repetitions but the config asks for {asked:g}")
    counts = [lookup(r, "n") for r in repetitions]
    if not all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in counts):
        return lines  # the schema's finding
    if sum(counts) != len(samples):
        return [*lines, f"device_time: the repetitions hold {sum(counts)} calls but there are {len(samples)} samples"]
    medians, start = [], 0
    for index, (repetition, n) in enumerate(zip(repetitions, counts, strict=True)):
        own = summarize_ns(samples[start:start + n])
        start += n
        medians.append(float(own["median_ns"]))
        for key, ratio in (("median_ns", False), ("cv", True)):
            if key in repetition and _differs(repetition[key], float(own[key]), ratio=ratio):
                lines.append(f"device_time: repetition {index + 1} {key.removesuffix('_ns')} {repetition[key]} "
                             f"but its samples' is {own[key]:.6g}")
    middle = statistics.median(medians)
    spread = (max(medians) - min(medians)) / middle if len(medians) > 1 and middle else 0.0
    if "repetition_spread" in timing and _differs(timing["repetition_spread"], spread, ratio=True):
        lines.append(f"device_time: repetition_spread {timing['repetition_spread']} but the repetitions' "
                     f"medians spread {spread:.6g}")
    return lines


def _warmup(config: dict[str, Any], timing: dict[str, Any]) -> list[str]:
    """The warm-up record against its samples, and the stopping rule replayed over them."""
    record, calls = timing.get("warmup"), timing.get("warmup_samples_ns")
    if not isinstance(record, dict) or not isinstance(calls, list) or not calls:
        return []
    if not all(isinstance(c, int) and not isinstance(c, bool) for c in calls):
        return []  # the schema's finding
    lines = []
    if "calls" in record and record["calls"] != len(calls):
        lines.append(f"device_time: warm-up calls {record['calls']} but {len(calls)} warm-up samples")
    if "seconds" in record and _differs(record["seconds"], sum(calls) / 1e9, ratio=True):
        lines.append(f"device_time: warm-up seconds {record['seconds']} but its samples add up to {sum(calls) / 1e9:.9g}")
    settings = {key: number(lookup(config, "timing", key)) for key in
                ("warmup_iters", "max_warmup_s", "repetitions", "min_time_s", "min_iters", "max_iters")}
    tolerance = number(record.get("tolerance"))
    if tolerance is None or None in settings.values():
        return lines  # a harness before the steady warm-up: a fixed count of calls
    if tolerance != WARMUP_TOLERANCE:  # the record's own tolerance would let it judge itself steady
        return [*lines, f"device_time: warm-up tolerance {record['tolerance']} but the harness's is {WARMUP_TOLERANCE}"]
    minimum, budget_ns = int(max(settings["warmup_iters"] or 0, 1)), (settings["max_warmup_s"] or 0) * 1e9
    rule = warmup.replay(calls, minimum, budget_ns, MAX_SAMPLES)
    if rule is None:
        return [*lines, f"device_time: the warm-up's stopping rule, replayed over its {len(calls)} samples, "
                        "does not stop where they end"]
    if record.get("steady") is not rule.steady:
        lines.append(f"device_time: warm-up steady is {record.get('steady')} but its samples say {rule.steady} "
                     f"(windows of {rule.window} calls, tolerance {tolerance:.0%})")
    estimate = rule.estimate_ns
    reps, low = settings["repetitions"] or 1, settings["min_iters"] or 0
    wanted_calls = (settings["min_time_s"] or 0) * 1e9 / estimate / reps
    if not math.isfinite(wanted_calls) or reps <= 0:
        return [*lines, "device_time: the config's timing settings give no count of calls"]
    wanted = math.ceil(wanted_calls)
    per_repetition = int(min(max(wanted, math.ceil(low / reps)), max((settings["max_iters"] or 0) // reps, 1)))
    counts = {lookup(r, "n") for r in timing.get("repetitions") or [] if isinstance(r, dict)}
    if counts and counts != {per_repetition}:
        lines.append(f"device_time: repetitions of {', '.join(map(str, sorted(counts, key=str)))} calls, but the "
                     f"warm-up's estimate ({estimate:.6g} ns) and the config give {per_repetition}")
    return lines


def _batch_figure(cell: dict[str, Any]) -> float | None:
    """LoadGen's time for one batch, from the cell's LoadGen results, as the scenario's rule reads it."""
    scenario_rule = RULES.get(str(cell["config"].get("scenario")))
    results = lookup(cell, "metrics", "loadgen", "results")
    if scenario_rule is None or not isinstance(results, dict):
        return None
    try:
        return scenario_rule.ns_per_batch(int(cell["config"]["batch"]), results)
    except (TypeError, ValueError, ZeroDivisionError):  # a result that is no number: the LoadGen layer's finding
        return None


def _depth(cell: dict[str, Any]) -> list[str]:
    """The batches LoadGen's system under test kept in flight, which decide whether its figure may
    run ahead of the device timing's (`_agreement`), against what the cell's config gives."""
    recorded, config = lookup(cell, "metrics", "loadgen", "sut", "batches_in_flight"), cell["config"]
    batch = config.get("batch")
    if recorded is None or config.get("scenario") not in RULES or not isinstance(batch, int):
        return []
    derived = batches_in_flight(str(config["scenario"]), config.get("device") == "cuda", batch)
    if recorded != derived:
        return [f"loadgen: sut batches_in_flight {recorded} but a {config['scenario']} cell of batch {batch} on "
                f"{config.get('device')} keeps {derived}"]
    return []


def _agreement(cell: dict[str, Any], derived: dict[str, Any] | None) -> list[str]:
    record = cell["metrics"].get("latency_agreement")
    scenario_rule = RULES.get(str(cell["config"].get("scenario")))
    if not isinstance(record, dict) or scenario_rule is None:
        return []
    statistic, gap, within = scenario_rule.device_statistic, record.get("gap"), record.get("within")
    if statistic is None:
        if gap is not None or within is not None:
            return [f"latency_agreement: a gap for a {scenario_rule.name} cell, whose LoadGen latency is not compared"]
        return []
    device = derived[f"{statistic}_ns"] if derived else None
    if gap is None:
        measured = _batch_figure(cell)
        if measured is not None and device:
            return ["latency_agreement: not compared, yet the cell records LoadGen's figure and the device time"]
        return []
    lines = []
    if record.get("device_statistic", statistic) != statistic:
        lines.append(f"latency_agreement: compared with the device time's {record.get('device_statistic')}, "
                     f"but {scenario_rule.name} compares its {statistic}")
    if "device_ns_per_batch" in record and device is not None and _differs(record["device_ns_per_batch"], device):
        lines.append(f"latency_agreement: device_ns_per_batch {record['device_ns_per_batch']} but the samples' "
                     f"{statistic} is {device:.6g}")
    limit = number(record.get("limit"))
    if "limit" in record and limit != AGREEMENT_LIMIT:
        lines.append(f"latency_agreement: limit {record['limit']} but the harness's is {AGREEMENT_LIMIT}")
    measured, reference, recorded = (number(record.get("loadgen_ns_per_batch")),
                                     number(record.get("device_ns_per_batch")), number(gap))
    if measured is not None and reference and _differs(gap, measured / reference - 1, ratio=True):
        lines.append(f"latency_agreement: gap {gap} but LoadGen's {measured:.6g} ns over the device's "
                     f"{reference:.6g} ns is {measured / reference - 1:+.6g}")
    if recorded is not None and isinstance(within, bool):
        pipelined = (number(lookup(cell, "metrics", "loadgen", "sut", "batches_in_flight")) or 1) > 1
        limit = AGREEMENT_LIMIT if limit is None else limit
        expected = recorded <= limit if pipelined else abs(recorded) <= limit
        if within is not expected:
            lines.append(f"latency_agreement: within is {within} but a gap of {recorded:+.2%} is "
                         f"{'within' if expected else 'outside'} the limit of {limit:.0%}"
                         + (" (batches in flight: only falling behind counts)" if pipelined else ""))
    return lines


def _loadgen_figure(files: Snapshot, cell: dict[str, Any]) -> list[str]:
    """LoadGen's figure in the agreement against the results it was read from. Where the results
    themselves disagree with LoadGen's logs, the LoadGen layer says so, and once is enough."""
    recorded = number(lookup(cell, "metrics", "latency_agreement", "loadgen_ns_per_batch"))
    derived = _batch_figure(cell)
    if recorded is None or derived is None or close(recorded, derived) or loadgen_check.problems(files, cell):
        return []
    return [f"latency_agreement: loadgen_ns_per_batch {recorded:.6g} but the cell's LoadGen results give {derived:.6g}"]


def _wall_ns(metrics: dict[str, Any], derived: dict[str, Any] | None) -> float | None:
    """The time the worker split and set against the roofline: the samples' median, or 0 for a
    backend that computes no model (its correctness was not checked against a reference)."""
    correctness = metrics.get("correctness")
    if derived is None or not isinstance(correctness, dict):
        return None
    return float(derived["median_ns"]) if "reference" in correctness else 0.0


def _time_split(metrics: dict[str, Any], wall: float | None) -> list[str]:
    split, kernels = metrics.get("time_split"), metrics.get("kernels")
    if not isinstance(split, dict) or wall is None:
        return []
    kernels = kernels if isinstance(kernels, dict) else {}
    kernel_ns = number(kernels.get("kernel_time_ns_per_inference"))
    share = number(kernels.get("kernel_share"))
    if kernel_ns is None and share is not None:
        kernel_ns = share * wall
    expected: dict[str, float | None] = {"wall_ns": wall, "kernel_ns": None, "overhead_ns": None, "kernel_share": None}
    if kernel_ns is not None and wall > 0:
        expected.update(kernel_ns=kernel_ns, overhead_ns=max(wall - kernel_ns, 0.0), kernel_share=min(kernel_ns / wall, 1.0))
    lines = []
    for key, value in expected.items():
        if (key in split or value is not None) and _differs(split.get(key), value, ratio=key == "kernel_share"):
            lines.append(f"time_split: {key} {split.get(key)} but the samples and the profile give "
                         f"{'none' if value is None else format(value, '.6g')}")
    return lines


def _roofline(metrics: dict[str, Any], wall: float | None, dtype: Any, peaks: Any) -> list[str]:
    figures = metrics.get("roofline")
    if not isinstance(figures, dict):
        return []
    flops, moved = number(figures.get("flops")), number(figures.get("compulsory_bytes"))
    if flops is None or moved is None:
        return []
    expected: dict[str, float | None] = {"arithmetic_intensity_flops_per_byte": flops / moved if moved else None}
    lines = []
    # the worker's ModelCosts records the three with their sum and refuses another; the DRAM check reads
    # the weights and input apart (traffic_check), so one left out must not leave the sum unchecked
    parts = {key: number(figures.get(key)) for key in ("weight_bytes", "input_bytes", "output_bytes")}
    absent = [key for key, part in parts.items() if part is None]
    together = sum(part or 0 for part in parts.values())
    if absent:
        lines.append(f"roofline: {', '.join(absent)} not a number, where compulsory_bytes is recorded")
    elif together != moved:
        lines.append(f"roofline: compulsory_bytes {figures['compulsory_bytes']} is not its weight, input and output "
                     f"bytes together ({together:.0f})")
    measured = number(figures.get("measured_ns"))
    if "measured_ns" in figures and measured:
        if wall is not None and not close(measured, wall):
            lines.append(f"roofline: measured_ns {figures['measured_ns']} but the samples' median is {wall:.6g}")
        peak_flops, peak_bytes = number(figures.get("peak_flops_per_s")), number(figures.get("peak_bytes_per_s"))
        for key, value, run in (("peak_flops_per_s", peak_flops, lookup(peaks, "flops_per_s", dtype)),
                                ("peak_bytes_per_s", peak_bytes, lookup(peaks, "bytes_per_s"))):
            if run is not None and _differs(value, number(run)):
                lines.append(f"roofline: {key} {figures.get(key)} but bundle.json's system measured {run}")
        if peak_flops and peak_bytes:
            compute, memory = flops / peak_flops * 1e9, moved / peak_bytes * 1e9
            expected.update(compute_bound_ns=compute, memory_bound_ns=memory, time_bound_ns=max(compute, memory),
                            fraction_of_bound=max(compute, memory) / measured)
            if figures.get("bound_by") != ("compute" if compute >= memory else "memory"):
                lines.append(f"roofline: bound_by {figures.get('bound_by')} but its bounds say "
                             f"{'compute' if compute >= memory else 'memory'}")
    for key, value in expected.items():
        ratio = not key.endswith("_ns")
        if key in figures and _differs(figures[key], value, ratio=ratio):
            lines.append(f"roofline: {key} {figures[key]} but its costs and peaks give "
                         f"{'none' if value is None else format(value, '.6g')}")
    return lines


def _math_mode(cell: dict[str, Any], created: Any) -> list[str]:
    record, config = cell["metrics"].get("math_mode"), cell["config"]
    precision = PRECISIONS.get(str(config.get("dtype")))
    if not isinstance(record, dict) or precision is None:
        return []
    lines = []
    requested, effective, found = record.get("requested"), record.get("effective"), record.get("problems") or []
    if requested is not None and requested != precision.math:
        lines.append(f"math_mode: requested {requested} but a {precision.name} cell asks for {precision.math}")
    torch_state, backend_state = record.get("torch"), record.get("backend")
    if isinstance(torch_state, dict) and isinstance(backend_state, dict):
        if "tf32" in backend_state and not isinstance(backend_state["tf32"], bool) and _before(cell, created, TF32_NOT_BOOL_A_PROBLEM):
            backend_state = {**backend_state, "tf32": bool(backend_state["tf32"])}  # as the harness then read it
        again = math_record(precision.name, str(config.get("device")), torch_state, backend_state)
        if effective != again["effective"]:
            lines.append(f"math_mode: effective {effective} but the settings read back say {again['effective']}")
        if again["problems"] and not found:
            lines.append(f"math_mode: no problems, yet the settings read back say: {'; '.join(again['problems'])}")
        elif found and not again["problems"]:
            lines.append("math_mode: problems that the settings read back do not give")
    if cell["status"] == "valid":
        if found:
            lines.append(f"status valid, yet its math mode has problems: {'; '.join(map(str, found))}")
        if requested in ("ieee", "tf32") and effective != requested:
            lines.append(f"status valid, yet its math ran {effective} where its dtype asks for {requested}")
    elif cell["status"] == "invalid":
        missing = [str(p) for p in found if f"math mode: {p}" not in cell["reasons"]]
        if missing:
            lines.append(f"invalid without giving its math mode's problems as reasons ({'; '.join(missing)})")
    return lines


def _before(cell: dict[str, Any], created: Any, moment: datetime) -> bool:
    """Whether the cell started before `moment`: by its start, else by its bundle's making (`created`),
    else (a record of before either was kept) it did. A time that is not one reads as not before."""
    given = cell.get("started") if cell.get("started") is not None else created
    started = belonging.instant(given)
    return given is None or (started is not None and started < moment)


def _allocator(cell: dict[str, Any]) -> list[str]:
    record = lookup(cell, "environment", "allocator")
    if not isinstance(record, dict):
        return []
    lines = []
    setting, tunables, asked = record.get("setting"), record.get("tunables"), allocator.of(cell["config"])
    if setting != asked:
        lines.append(f"environment: allocator setting {setting} but the cell asked for {asked}")
    variables = lookup(cell, "environment", "variables")
    if isinstance(variables, dict) and variables.get(allocator.VARIABLE) != tunables:
        lines.append(f"environment: allocator tunables {tunables!r} but the worker's {allocator.VARIABLE} "
                     f"was {variables.get(allocator.VARIABLE)!r}")
    libc = str(record.get("libc") or "").partition(" ")[0]
    in_effect = setting == "system" or (libc == "glibc" and tunables == allocator.STEADY_TUNABLES)
    if record.get("in_effect") is not in_effect:
        lines.append(f"environment: allocator in_effect is {record.get('in_effect')} but {setting} "
                     f"{'takes effect' if in_effect else 'cannot take effect'} under C library "
                     f"{record.get('libc')!r} with tunables {tunables!r}")
    return lines


def _implied_warnings(cell: dict[str, Any]) -> list[tuple[str, str]]:
    """(how the warning begins, why the record implies it) for each warning its figures call for."""
    metrics = cell["metrics"]
    timing = metrics.get("device_time") if isinstance(metrics.get("device_time"), dict) else {}
    implied = []
    cv = number(lookup(timing, "summary", "cv"))
    if cv is not None and cv > NOISY_CV:
        implied.append((NOISE, f"its device-time CV is {cv:.0%} (over {NOISY_CV:.0%})"))
    warmup = timing.get("warmup")
    if isinstance(warmup, dict) and warmup and warmup.get("steady", True) is False:
        implied.append((WARMUP, "its warm-up is recorded as not steady"))
    spread = number(timing.get("repetition_spread"))
    if spread is not None and spread > DRIFT_LIMIT:
        implied.append((DRIFT, f"its repetitions' medians spread {spread:.0%} (over {DRIFT_LIMIT:.0%})"))
    repetitions = timing.get("repetitions")
    beside = [lookup(r, "beside", "cpu") for r in (repetitions if isinstance(repetitions, list) else [])]
    cpu = [c if isinstance(c, dict) else {} for c in beside]
    wall = sum(number(c.get("wall_s")) or 0 for c in cpu)
    if wall > 0:
        others_s, stolen_s = (sum(number(c.get(field)) or 0 for c in cpu) for field in ("other_processes_cpu_s", "stolen_cpu_s"))
        cpus = max(int(number(cpu[0].get("cpus")) or 1), 1)
        if busy_machine(others_s, wall):
            implied.append((BUSY, f"other processes used {others_s / wall:.2f} cores during its timed calls"))
        if shared_machine(stolen_s, wall, cpus):
            implied.append((SHARED, f"the hypervisor took {stolen_s / wall / cpus:.0%} of the CPUs during its timed calls"))
    if lookup(metrics, "latency_agreement", "within") is False:
        implied.append((DISAGREE, "its LoadGen figure and device time are not within the limit"))
    recompiled = number(lookup(metrics, "dynamo", "recompiles_timed"))
    if recompiled:
        implied.append((RECOMPILED, f"Dynamo compiled {recompiled:g} frame(s) during its timed calls"))
    chosen = lookup(cell, "environment", "allocator")
    if isinstance(chosen, dict) and chosen.get("in_effect") is False:
        implied.append((f"allocator {chosen.get('setting')} asked for but not in effect",
                        "the allocator it asked for was not in effect"))
    return implied


def _warnings(cell: dict[str, Any]) -> list[str]:
    recorded = cell.get("warnings")
    if not isinstance(recorded, list) or cell["status"] not in MEASURED:
        return []  # a record from before warnings, or a cell whose worker did not finish
    return [f"warnings: none begins {stem!r}, yet {why}" for stem, why in _implied_warnings(cell)
            if not any(isinstance(line, str) and line.startswith(stem) for line in recorded)]
