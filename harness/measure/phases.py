"""The phases a worker measures a cell in, after its `import` (harness/measure/worker.py), each
timed by its `PhaseClock`. A cell's first round (`measure`) runs every pass:

    build model -> eager reference (its batch held to dim 0) -> roofline costs (FLOPs, bytes) -> [tune] -> prepare -> first call ->
    correctness -> device timing (warm-up, half the repetitions) -> LoadGen scenario -> device
    timing (the other half) -> correctness after timing -> [LoadGen accuracy run] -> [compliance
    tests] -> memory -> kernel/fusion profile -> math mode and rewrites -> memory traffic (DRAM
    bytes, CUDA cells)

A further round (`time_a_round`, harness/run/rounds.py) prepares the model again and runs the
device timing alone, watching it for Dynamo's recompiles as round 1's, then the check after timing.

Correctness is checked twice: the first call on the example, and the timed callable once more after
its last timed call, on a batch of other samples (`checked_rows.later_rows`) given as LoadGen gives
its batches (a view at an offset into a larger stack), each against eager's output on the same
batch. A backend right on the example or on its first calls only, whose timed calls computed
something else, fails the second.

torch's math is IEEE fp32 for the eager reference and the cell dtype's from `prepare` on
(harness/precision.py); after the passes the flags are read back with the backend's own, and a
cell whose math is not what its dtype asked for is invalid.

Device timing runs before LoadGen because LoadGen's expected-latency hint is calibrated from it,
and again after it, so both see the same conditions (harness/measure/timing.py). The two measures are
then compared, and every figure is checked for noise (harness/measure/trust.py): a failed check is a
warning on the cell, not a change of status.
"""

from __future__ import annotations

import dataclasses
import math
import time
from pathlib import Path
from typing import Any

import pydantic

from harness import contract
from harness.bundle.cell_record import Correctness, CorrectnessCheck, Dynamo, MathMode, Metrics, Tuning
from harness.bundle.loadgen_record import Accuracy, ComplianceOutcome, LoadGenRun
from harness.bundle.passes_record import FusionReportRecord, Kernels, Memory, MemoryTraffic, TimeSplit
from harness.bundle.timing_record import BEFORE_LOADGEN, Roofline
from harness.errors import BackendFailed, HarnessError
from harness.measure import cell_model, dynamo_counts, plugin_answers, protocol, trust
from harness.measure.phase_clock import PhaseClock
from harness.measure.protocol import WorkerRequest
from harness.scenario import checked_rows
from harness.scenario.cell_config import CellConfig


def _timing_batches(torch: Any, samples: list[Any], batch: int) -> list[Any]:
    """Consecutive batches over the whole sample set (wrapping round), as LoadGen's queries walk
    it: the timing then reads inputs from memory as the LoadGen run does, not one cached batch."""
    windows = max(1, math.ceil(len(samples) / batch))
    return [torch.cat([samples[(w * batch + j) % len(samples)] for j in range(batch)]) for w in range(windows)]


def _observer(device: str) -> tuple[Any, Any]:
    """(observe, compare) for what runs beside each timed repetition: threads, other processes,
    stolen time, the machine's speed (reference loops), and on a GPU its clocks and throttle reasons."""
    from harness.measure import activity, gpu_state, machine_speed

    nvml = None
    if device == "cuda":
        try:
            import pynvml

            pynvml.nvmlInit()
            nvml = pynvml
        except Exception:  # noqa: BLE001 - no NVML: the GPU state reads as unavailable
            nvml = None

    def window() -> tuple[Any, Any]:
        return activity.snapshot(), (gpu_state.read(nvml) if device == "cuda" and nvml else None)

    def observe(after: bool) -> tuple[Any, Any, Any]:
        # the reference loops stay outside the observed window: read before it opens, after it closes
        if after:
            return *window(), machine_speed.read()
        speed = machine_speed.read()
        return *window(), speed

    def compare(before: tuple[Any, Any, Any], after: tuple[Any, Any, Any]) -> dict[str, Any]:
        beside: dict[str, Any] = {"cpu": activity.compare(before[0], after[0])}
        beside["machine_speed"] = machine_speed.around(before[2], after[2])
        if device == "cuda":
            beside["gpu_before"] = before[1] or {"unavailable": "NVML did not initialise"}
            beside["gpu_after"] = after[1] or {"unavailable": "NVML did not initialise"}
        return beside

    return observe, compare


def measure(
    cell: CellConfig,
    request: WorkerRequest,
    backend: Any,
    clock: PhaseClock,
    metrics: Metrics,
    baseline_rss: int,
    baseline_device_used: int | None,
) -> None:
    """A cell's first round: every pass, in the order above, each figure set on `metrics` as its phase ends."""
    from harness import precision
    from harness.measure import activity, correctness, loadgen, machine_speed, memory_traffic, passes, roofline
    from harness.measure.memory import memory_pass

    device, dtype, batch = cell.device, cell.dtype, cell.batch
    workdir = Path.cwd()
    artifacts = Path(request.artifact_dir)
    with clock.phase(protocol.BUILD):
        model, samples, example = cell_model.model_and_samples(cell, request)
    rows = checked_rows.later_rows(len(samples), batch)
    with clock.phase(protocol.REFERENCE):
        reference = model(example) if backend.computes_model else None
        later_reference = model(cell_model.later_batch(samples, rows)) if backend.computes_model else None
        fault = correctness.batch_fault(model, samples, example, reference, dtype) if backend.computes_model else ""
        if fault:  # every backend's cell of the model fails alike, eager's among them
            raise HarnessError(f"model {cell.model.name!r} {fault}")
    with clock.phase(protocol.ROOFLINE):
        costs = roofline.cached_costs(model, example, Path(request.cache_dir or workdir / "cache") / "roofline")
    precision.set_torch_math(dtype)
    _tune(cell, request, backend, model, example, workdir, clock, metrics)
    dynamo = dynamo_counts.Readings()
    prepared = _prepare(cell, request, backend, model, example, workdir, clock, metrics)
    try:
        with clock.phase(protocol.FIRST_CALL):
            output = prepared(example)
            prepared.synchronize()
        metrics.first_call_s = clock.durations_s[protocol.FIRST_CALL.name]
        with clock.phase(protocol.CORRECTNESS):
            if reference is None:
                metrics.correctness = Correctness(ok=True, note="not checked: the backend computes no model")
            else:
                metrics.correctness = Correctness.model_validate(
                    {**correctness.compare(output, reference, dtype), "samples": checked_rows.example_rows(len(samples), batch)})
            del output
        metrics.dynamo = _dynamo(dynamo.checked())
        timing = _device_timing(cell, prepared, samples)
        before_loadgen = max(cell.timing.repetitions // 2, 1)
        with clock.phase(protocol.TIMING):
            timing.warm_up()
            dynamo.warmed_up()
            for _ in range(before_loadgen):
                timing.repetition(BEFORE_LOADGEN)
        hint_ns = timing.result().summary.median_ns
        with clock.phase(protocol.LOADGEN):
            speed_before = machine_speed.read()
            before = activity.snapshot()
            settings = loadgen.Settings(cell, len(samples))
            run = loadgen.run_scenario(prepared, samples, cell, hint_ns, artifacts / "loadgen", settings,
                                       _seconds_left(request, clock))
            beside = activity.compare(before, activity.snapshot())
            beside["machine_speed"] = machine_speed.around(speed_before, machine_speed.read())
            metrics.loadgen = LoadGenRun.model_validate({**run, "beside": beside})
        with clock.phase(protocol.TIMING_AFTER_LOADGEN):
            for _ in range(cell.timing.repetitions - before_loadgen):
                timing.repetition("after loadgen")
        metrics.device_time = device_time = timing.result()
        metrics.dynamo = _dynamo(dynamo.timed())
        with clock.phase(protocol.CORRECTNESS_AFTER_TIMING):
            if later_reference is not None and metrics.correctness is not None:
                metrics.correctness.after_timing = CorrectnessCheck.model_validate(
                    _checked_after_timing(prepared, samples, rows, later_reference, dtype))
        folder = Path(request.input_folder) if request.input_folder else None
        _mlperf_runs(cell, prepared, samples, folder, settings, clock, metrics, artifacts / "loadgen")
        median_ns = device_time.summary.median_ns
        if backend.computes_model and median_ns > 0:
            metrics.first_call_ratio = metrics.first_call_s * 1e9 / median_ns
        metrics.latency_agreement = trust.latency_agreement(cell.scenario, batch, metrics.loadgen, device_time,
                                                            computes_model=backend.computes_model)
        metrics.roofline = Roofline.model_validate(roofline.bound(
            costs, request.peaks, dtype, median_ns if backend.computes_model else 0.0
        ))
        with clock.phase(protocol.MEMORY):
            metrics.memory = Memory.model_validate({**memory_pass(
                prepared, example, cell.passes.memory_iters, device, baseline_rss, baseline_device_used
            ), "worker_start": request.worker_start})
        with clock.phase(protocol.PROFILE):
            profile = passes.profile(prepared, example, cell.passes.profile_iters, device, workdir,
                                     median_ns if backend.computes_model else 0.0)
            metrics.fusion_report = FusionReportRecord.model_validate(profile.pop("fusion_report"))
            metrics.kernels = Kernels.model_validate(profile)
            metrics.time_split = TimeSplit.model_validate(
                passes.time_split(median_ns if backend.computes_model else 0.0, metrics.kernels, device))
        if metrics.latency_agreement is not None:
            metrics.latency_agreement = trust.overlap_explained(metrics.latency_agreement, metrics.loadgen,
                                                                metrics.time_split, device)
        metrics.math_mode = MathMode.model_validate(
            precision.math_record(dtype, device, precision.torch_math_state(), plugin_answers.asked(prepared, "math_mode", (dict,))))
        metrics.rewrites = plugin_answers.asked(prepared, "rewrites", (dict,))
    finally:
        plugin_answers.close(prepared)
    # The pass's child (CUDA cells) prepares its own copy of the model: this process's copy, its inputs,
    # the timing's batches and the allocator's cached blocks go first.
    del model, samples, example, reference, later_reference, prepared, timing
    if device == "cuda":
        _release_gpu_memory()
    with clock.phase(protocol.MEMORY_TRAFFIC):
        metrics.memory_traffic = MemoryTraffic.model_validate(
            memory_traffic.measure(request, workdir, _seconds_left(request, clock)))


def _seconds_left(request: WorkerRequest, clock: PhaseClock) -> float | None:
    """What the parent's time limit on this worker leaves, counted from the worker's start."""
    if request.time_limit_s is None:
        return None
    return request.time_limit_s - (time.monotonic() - clock.started)


def _release_gpu_memory() -> None:
    import gc

    import torch

    gc.collect()
    torch.cuda.empty_cache()


def _tune(cell: CellConfig, request: WorkerRequest, backend: Any, model: Any, example: Any, workdir: Path,
          clock: PhaseClock, metrics: Metrics) -> None:
    """The backend's search for faster code (`Backend.tune`), timed on its own before `prepare`; a
    backend with nothing to tune records nothing."""
    with clock.phase(protocol.TUNE):
        tuning = plugin_answers.returned(backend, "tune", backend.tune(
            model, example, **cell_model.backend_arguments(cell, request, backend, workdir)), (contract.Tuning, type(None)))
    if tuning is not None:
        try:
            metrics.tuning = Tuning.model_validate({**dataclasses.asdict(tuning),
                                                    "tuning_s": clock.durations_s[protocol.TUNE.name]})
        except pydantic.ValidationError as exc:  # else a pydantic dump naming no method
            raise BackendFailed(plugin_answers.refused(backend, "tune() returned a Tuning", exc)) from None


def _prepare(cell: CellConfig, request: WorkerRequest, backend: Any, model: Any, example: Any, workdir: Path,
             clock: PhaseClock, metrics: Metrics) -> Any:
    """The backend's prepared model, its artifacts in the cache's folder for the backend, timed as
    `prepare_s` less what the backend measured as its one-time work for the machine (the
    `toolchain` phase)."""
    with clock.phase(protocol.PREPARE):
        prepared = plugin_answers.returned(backend, "prepare", backend.prepare(
            model, example, **cell_model.backend_arguments(cell, request, backend, workdir)), (contract.Prepared,))
    toolchain_s = plugin_answers.attribute(prepared, "toolchain_s", (int, float))
    if not 0 <= toolchain_s <= clock.durations_s[protocol.PREPARE.name]:  # NaN too
        raise BackendFailed(f"{type(prepared).__name__}.toolchain_s is {toolchain_s!r}: the seconds of prepare() spent on "
                            f"the machine's one-time work, from 0 to the {clock.durations_s[protocol.PREPARE.name]:.3f} s "
                            f"prepare() took ({plugin_answers.CONTRACT})")
    clock.move(toolchain_s, protocol.PREPARE, protocol.TOOLCHAIN)
    metrics.prepare_s = clock.durations_s[protocol.PREPARE.name]
    try:
        metrics.prepare_cache = prepared.prepare_cache  # validated on assignment: one of the four words
    except pydantic.ValidationError as exc:
        raise BackendFailed(plugin_answers.refused(prepared, "prepare_cache is a value", exc)) from None
    return prepared


def _dynamo(found: dict[str, Any] | None) -> Dynamo | None:
    """`metrics.dynamo` from what dynamo_counts found (None: nothing compiled through torch.compile)."""
    return None if found is None else Dynamo.model_validate(found)


def _device_timing(cell: CellConfig, prepared: Any, samples: list[Any]) -> Any:
    """The cell's device timing of `prepared` over the batches of its samples, what runs beside it observed."""
    import torch

    from harness.measure.timing import DeviceTiming

    observe, compare = _observer(cell.device)
    return DeviceTiming(prepared, _timing_batches(torch, samples, cell.batch), cell.timing, cell.device,
                        observe=observe, compare=compare)


def time_a_round(cell: CellConfig, request: WorkerRequest, backend: Any, clock: PhaseClock,
                  metrics: Metrics) -> list[str]:
    """A further round (harness/run/rounds.py): in this fresh process, the model prepared again (its
    compiled artefacts from the cache the first round filled), then the same device timing as the
    first round's, warm-up and every repetition, with nothing else measured but the frames Dynamo
    compiled in its timed calls (`metrics.dynamo.recompiles_timed`, which warns as round 1's does); then
    the timed callable's output checked as round 1's is after its timing. Returns why the round's time is not
    to be taken (its prepare may have loaded another artefact than round 1's): a round that gives
    reasons gives no time."""
    from harness import precision

    workdir = Path.cwd()
    with clock.phase(protocol.BUILD):
        model, samples, example = cell_model.model_and_samples(cell, request)
    rows = checked_rows.later_rows(len(samples), cell.batch)
    with clock.phase(protocol.REFERENCE):
        later_reference = model(cell_model.later_batch(samples, rows)) if backend.computes_model else None
    precision.set_torch_math(cell.dtype)
    _tune(cell, request, backend, model, example, workdir, clock, metrics)
    dynamo = dynamo_counts.Readings()
    prepared = _prepare(cell, request, backend, model, example, workdir, clock, metrics)
    reasons = []
    try:
        with clock.phase(protocol.FIRST_CALL):
            prepared(example)
            prepared.synchronize()
        metrics.first_call_s = clock.durations_s[protocol.FIRST_CALL.name]
        dynamo.checks_done()  # its compile's graphs: its first call's, as round 1's
        timing = _device_timing(cell, prepared, samples)
        with clock.phase(protocol.TIMING):
            timing.warm_up()
            dynamo.warmed_up()
            for _ in range(cell.timing.repetitions):
                timing.repetition(f"round {request.timing_round}")
        metrics.device_time = timing.result()
        # its own recompiles in its timed calls, as round 1's (harness/run/rounds.py keeps them, and its warning)
        metrics.dynamo = _dynamo(dynamo.timed())
        with clock.phase(protocol.CORRECTNESS_AFTER_TIMING):
            if later_reference is not None:
                checked = _checked_after_timing(prepared, samples, rows, later_reference, cell.dtype)
                if not checked["ok"]:
                    reasons.append(f"correctness after timing (samples {rows}): {checked['reason']}")
    finally:
        plugin_answers.close(prepared)
    return reasons


def _checked_after_timing(prepared: Any, samples: list[Any], rows: list[int], reference: Any, dtype: str) -> dict[str, Any]:
    """The timed callable's output on the samples `rows`, given as LoadGen gives a batch, against
    eager's on them (`reference`): the check after timing of a cell's first round and of each further one."""
    from harness.measure import correctness

    output = prepared(cell_model.later_batch(samples, rows))
    prepared.synchronize()
    return {**correctness.compare(output, reference, dtype), "samples": rows}


def _mlperf_runs(cell: CellConfig, prepared: Any, samples: list[Any], folder: Path | None, settings: Any,
                 clock: PhaseClock, metrics: Metrics, outdir: Path) -> None:
    """The accuracy run and the compliance tests the cell asks for, after the performance run."""
    from harness.measure import loadgen
    from harness.models.labels import read_labels

    accuracy_dir = None
    if cell.loadgen.accuracy:
        with clock.phase(protocol.ACCURACY):
            labels_file = getattr(cell.inputs, "labels", None)
            if folder is None or not labels_file:  # the scenario schema requires both
                raise HarnessError("loadgen.accuracy needs labelled images (inputs: {source: folder, path: ..., "
                                   "labels: ...}); this cell's request names none")
            labels = [label for _, label in read_labels(folder / labels_file)][: len(samples)]
            accuracy_dir = outdir / "accuracy"
            metrics.accuracy = Accuracy.model_validate(
                loadgen.run_accuracy(prepared, samples, cell, settings, labels, accuracy_dir))
    for test in cell.loadgen.compliance:
        with clock.phase(protocol.COMPLIANCE[test]):
            if metrics.loadgen is None:
                raise HarnessError(f"{test} needs the performance run")
            outcome = loadgen.run_compliance(prepared, samples, cell, settings, test, metrics.loadgen, accuracy_dir,
                                             outdir / test)
            metrics.compliance = {**(metrics.compliance or {}), test: ComplianceOutcome.model_validate(outcome)}

