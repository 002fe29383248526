"""Whether a cell's figures can be trusted, in pyperf's spirit: the checks, and the words a user
reads when one fails. A failed check is a warning on the cell (its `warnings`, shown in the
summary and the report), not a change of status: the figure stands, with its caveat.

One latency truth: LoadGen's figure and the device timing measure the same batch, so they must
agree, compared like with like. SingleStream and MultiStream: LoadGen's median query latency
against the timing median. Offline: LoadGen's throughput turned into time per batch is a mean
(total time over batches), so against the timing mean. The gap is LoadGen's figure over the
timing's, minus one. Beyond `AGREEMENT_LIMIT` the cell says why, from what the system under test
measured of itself (harness/measure/sut.py): a padded batch (the query's samples not a multiple
of the batch, which the Offline hint avoids), the model ran slower inside LoadGen's run than in the
timing pass (something ran beside it, or the machine was slower then: the reference loops of
harness/measure/machine_speed.py around each say which), or the harness's own work per batch was
too large, or else LoadGen's accounting around the calls. Offline on a GPU keeps batches in
flight, so LoadGen's throughput may beat the sequential timing; only falling behind it counts there.
How far it beats it is said too (`overlap_explained`): the timing synchronises after each batch,
so the host's work outside the kernels (launches, a compiler's wrapper, idle gaps: the profile's
time split) counts there, where LoadGen's overlapping batches hide it.
Server's latency includes queueing at its target rate by design: no gap is computed.

Noise: a CV over 10% (pyperf's threshold), a warm-up that did not settle, repetitions whose
medians drifted apart (with whether the machine's reference loops moved as well: the machine,
not the model), other processes or the hypervisor taking CPU during the timed calls, and
a GPU that throttled.
"""

from __future__ import annotations

from typing import Any

from harness.bundle.cell_record import Metrics
from harness.bundle.figures_check import BUSY, DISAGREE, SHARED  # the words validate and the reports look for
from harness.bundle.loadgen_record import LoadGenRun, SutFigures
from harness.bundle.passes_record import TimeSplit
from harness.bundle.recompiles_check import RECOMPILED
from harness.bundle.timing_record import DeviceTime, LatencyAgreement, Repetition
from harness.measure import machine_speed
from harness.measure.gpu_state import slowdowns
from harness.metric_table import format_duration_ns as duration  # one format for every duration shown
from harness.metric_table import percentile_of
from harness.scenario.rules import rule
from harness.stats.summary import NOISY_CV
from harness.stats.thresholds import AGREEMENT_LIMIT, DRIFT_LIMIT, busy_machine, shared_machine

MODEL_SLOWER_LIMIT = 0.03


def latency_agreement(scenario: str, batch: int, loadgen: LoadGenRun | None, device_time: DeviceTime, *,
                      computes_model: bool = True) -> LatencyAgreement:
    """LoadGen's figure against the device timing (its summary; its timed repetitions, whose
    reference loop readings are set against those around LoadGen's run), and why they differ.
    `computes_model` False (the null backend): the call is next to nothing, and the gap is the
    harness's and LoadGen's own work per batch, which is what such a cell measures."""
    scenario_rule = rule(scenario)
    statistic = scenario_rule.device_statistic
    if statistic is None:
        return LatencyAgreement(gap=None, within=None, why=scenario_rule.not_compared_why)
    measured = scenario_rule.ns_per_batch(batch, loadgen.results) if loadgen is not None else None
    summary = device_time.summary
    reference = float((summary.median_ns if statistic == "median" else summary.mean_ns) or 0)
    if measured is None or reference <= 0 or loadgen is None:
        return LatencyAgreement(gap=None, within=None, why="not compared: no LoadGen figure or no device time")
    gap = measured / reference - 1
    sut = loadgen.sut or SutFigures()
    pipelined = (sut.batches_in_flight or 1) > 1
    within = gap <= AGREEMENT_LIMIT if pipelined else abs(gap) <= AGREEMENT_LIMIT
    why = ""
    if not within and not computes_model:
        why = (f"the backend computes nothing: the device timing is the bare call ({duration(reference)}), and LoadGen's "
               f"{duration(measured)} a batch is LoadGen's and the system under test's own work around it, the "
               "overhead this cell exists to measure")
    elif not within:
        call = sut.call_median_ns if statistic == "median" else sut.call_mean_ns
        machine = _machine_around_loadgen(loadgen, device_time.repetitions, call / reference - 1) if call else ""
        why = _why(gap, reference, call, sut, pipelined, batch, machine)
    return LatencyAgreement(loadgen_ns_per_batch=measured, device_ns_per_batch=reference, device_statistic=statistic,
                            gap=gap, limit=AGREEMENT_LIMIT, within=within, why=why)


#: A gap this far below the timing, with batches in flight, is said with where it goes.
OVERLAP_NOTE = 0.01


def overlap_explained(agreement: LatencyAgreement, loadgen: LoadGenRun | None, split: TimeSplit | None,
                      device: str) -> LatencyAgreement:
    """A GPU cell whose LoadGen run beat the device timing with batches in flight, with the share of
    a batch the profile puts outside the kernels: what the synchronised timing counts and the
    overlapping batches hide. The agreement as it was where that does not apply."""
    in_flight = (loadgen.sut.batches_in_flight or 1) if loadgen is not None and loadgen.sut is not None else 1
    gap = agreement.gap
    if (device != "cuda" or in_flight <= 1 or gap is None or gap > -OVERLAP_NOTE or agreement.why
            or split is None or split.kernel_share is None):
        return agreement
    outside = 1 - split.kernel_share
    why = (f"LoadGen {-gap:.1%} faster than the device timing with {in_flight} batches in flight: the timing "
           f"synchronises after each batch, so the host's work outside the kernels ({outside:.1%} of a batch by the "
           f"profile: launches, the compiled wrapper, idle gaps) counts there, and overlapping batches hide it")
    if -gap > outside + OVERLAP_NOTE:
        why += f"; {-gap - outside:.1%} of the gap is beyond that share, unexplained"
    return agreement.model_copy(update={"why": why})


def _machine_around_loadgen(loadgen: LoadGenRun, repetitions: list[Repetition], model_change: float) -> str:
    """How the reference loops around LoadGen's run compare with their mean around the repetitions,
    and whether that accounts for the model's own change (`model_change`: call time over timed, - 1)."""
    during = machine_speed.indexes((loadgen.beside or {}).get("machine_speed"))
    timed = machine_speed.pooled([machine_speed.indexes((r.beside or {}).get("machine_speed")) for r in repetitions])
    said = machine_speed.compare(during, timed, model_change, "around LoadGen's run against the repetitions")
    return f"; {said}" if said else ""


def _why(gap: float, device_ns: float, call: float | None, sut: SutFigures, pipelined: bool, batch: int,
         machine: str = "") -> str:
    own = (sut.gather_median_ns or 0) + (sut.respond_median_ns or 0)
    direction = "slower" if gap > 0 else "faster"
    padded = (sut.batches or 0) * batch / sut.samples - 1 if sut.samples else 0.0
    if padded > MODEL_SLOWER_LIMIT:
        return (f"a padded batch: the query's {sut.samples} samples ran as {sut.batches} batches of {batch}, and "
                f"LoadGen's rate counts the samples, not the {padded:.0%} more that were computed (without it the "
                f"gap is {(1 + gap) / (1 + padded) - 1:+.0%})")
    if call and not pipelined and abs(call / device_ns - 1) > MODEL_SLOWER_LIMIT:
        ran = "slower" if call > device_ns else "faster"
        return (f"the model itself ran {abs(call / device_ns - 1):.0%} {ran} inside LoadGen's run than in the "
                f"timing pass ({duration(call)} a call against {duration(device_ns)}): the machine's speed changed, or something "
                f"ran beside it (the cell's other warnings, and `beside` in its record, say what ran){machine}")
    if own > MODEL_SLOWER_LIMIT * device_ns:
        return (f"the system under test's own work per batch (gathering inputs and answering: {duration(own)}, "
                f"{own / device_ns:.0%} of a batch)")
    if pipelined:
        return f"LoadGen's Offline throughput fell {gap:.0%} behind the device timing with batches in flight"
    return (f"LoadGen's accounting around the calls ({direction} by {abs(gap):.0%}; the calls themselves took "
            f"{duration(call) if call else 'an unknown time'} against {duration(device_ns)} timed alone)")


def warnings(metrics: Metrics) -> list[str]:
    """Every failed check of a measured cell, one sentence each."""
    found = []
    timing = metrics.device_time
    if timing is not None:
        cv = timing.summary.cv or 0
        if cv > NOISY_CV:
            found.append(f"noisy: device-time CV {cv:.0%} (over {NOISY_CV:.0%})")
        warmup = timing.warmup
        if warmup is not None and not warmup.steady:
            found.append(f"the warm-up did not settle within {warmup.seconds or 0:.1f} s "
                         f"({warmup.calls} calls; windows kept differing by over {warmup.tolerance or 0:.0%})")
        spread = timing.repetition_spread or 0
        if spread > DRIFT_LIMIT:
            medians = ", ".join(f"{r.when} {duration(r.median_ns)}" for r in timing.repetitions)
            found.append(f"drift: the timed repetitions' medians spread {spread:.0%} ({medians})"
                         + _machine_drift(timing.repetitions))
        found += _machine(timing.repetitions)
    recompiled = metrics.dynamo.recompiles_timed if metrics.dynamo is not None else None
    if recompiled:
        found.append(f"{RECOMPILED} Dynamo compiled {recompiled} frame{'s' if recompiled != 1 else ''} again during the "
                     "timed calls, after the warm-up (a guard that failed there, or a path first taken there): the "
                     "compile's time is in the timed figures")
    agreement = metrics.latency_agreement
    found += _tail(metrics.loadgen, agreement.within if agreement is not None else None)
    if agreement is not None and agreement.within is False:
        found.append(f"{DISAGREE} by {agreement.gap or 0:+.0%} (limit "
                     f"{agreement.limit or 0:.0%}): {agreement.why}")
    return found


#: LoadGen's headline latency (its p90 or p99, early-stopping estimate) this many times its own median:
#: a few slow queries decide the figure (a steady run's p90 is within 1.2x of its median).
TAIL_LIMIT = 2.0


def _tail(loadgen: LoadGenRun | None, medians_agree: bool | None = None) -> list[str]:
    """The headline latency far above LoadGen's own median (p90 524 ms beside a median of 3.95 ms,
    with no word said); what `medians_agree` says of the median against the device timing (the
    latency check compares medians) is said beside it, where there is such a check."""
    if loadgen is None or loadgen.metric.unit != "ns" or not loadgen.metric.value:
        return []
    key = rule(loadgen.scenario).batch_figure
    median = loadgen.results.get(key) if key else None
    if not isinstance(median, (int, float)) or isinstance(median, bool) or median <= 0:
        return []
    ratio = loadgen.metric.value / median
    if ratio <= TAIL_LIMIT:
        return []
    percentile = percentile_of(loadgen.metric.name)
    medians = {True: "; the median agrees with the device timing, this figure does not",
               False: "; the median does not agree with the device timing either (below)", None: ""}[medians_agree]
    return [f"a heavy tail: LoadGen's {percentile or 'headline'} {duration(loadgen.metric.value)} is {ratio:.0f}x its "
            f"median {duration(median)}: a few slow queries decide the figure (what ran beside them: `beside` in "
            f"the LoadGen record){medians}"]


def _machine_drift(repetitions: list[Repetition]) -> str:
    """Whether the machine's reference loops moved with the repetitions' medians, from the fastest
    repetition to the slowest."""
    timed = [(r.median_ns, r) for r in repetitions if r.median_ns > 0]
    if len(timed) < 2 or len(timed) < len(repetitions):
        return ""
    (fastest, fast), (slowest, slow) = min(timed, key=lambda t: t[0]), max(timed, key=lambda t: t[0])
    said = machine_speed.compare(machine_speed.indexes((slow.beside or {}).get("machine_speed")),
                                 machine_speed.indexes((fast.beside or {}).get("machine_speed")),
                                 slowest / fastest - 1,
                                 f"around the slowest repetition ({slowest / fastest - 1:.0%} slower) against the fastest")
    return f"; {said}" if said else ""


def _threads_wait(cpu: list[dict[str, Any]]) -> str:
    """Why a busy machine costs a cell that runs its calls on several threads more than its share:
    each operator ends when its slowest thread does, and one thread held up by another process holds
    up the call (a resnet18 call of two threads took 121 ms on cores the test suite kept busy, 5 ms
    alone). The threads counted are those busy in the timed calls (harness/measure/activity.py): the
    model's and any other of the process's (none beside the device timing's calls but the worker's)."""
    threads = max((len(c.get("busy_threads") or []) for c in cpu), default=0)
    if threads < 2:
        return ""
    return (f"; {threads} of its threads were busy during the calls, and an operator run on several waits for the "
            "slowest of them, so a thread held up by another process holds up the call: one thread a cell (env: "
            "[OMP_NUM_THREADS=1] for torch and TVM, a backend's own option for its library, as onnxruntime's "
            "intra_op_threads: 1) or idle cores measure the model, not the machine's other work")


def _machine(repetitions: list[Repetition]) -> list[str]:
    found = []
    beside = [r.beside or {} for r in repetitions]
    cpu = [b.get("cpu") or {} for b in beside]
    wall = sum(c.get("wall_s", 0) for c in cpu)
    if wall > 0:
        others_s, stolen_s = (sum(c.get(field, 0) for c in cpu) for field in ("other_processes_cpu_s", "stolen_cpu_s"))
        cpus = max(cpu[0].get("cpus", 1), 1)
        if busy_machine(others_s, wall):
            found.append(f"{BUSY} other processes used {others_s / wall:.2f} cores during the timed calls"
                         f"{_threads_wait(cpu)}")
        if shared_machine(stolen_s, wall, cpus):
            found.append(f"{SHARED} the hypervisor took {stolen_s / wall / cpus:.0%} of the CPUs during the "
                         "timed calls")
    gpu = [state for b in beside for state in (b.get("gpu_before"), b.get("gpu_after")) if state]
    slowed = slowdowns(gpu)
    if slowed:
        found.append(f"the GPU held its clocks down during the timed calls ({', '.join(slowed)})")
    return found
