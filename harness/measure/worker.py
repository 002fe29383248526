"""One cell, measured in a process of its own: `python -m harness.measure.worker REQUEST.json`.

The parent writes the request, starts this process in a fresh working directory with a time
limit, and reads back exactly one JSON answer. Phases, each timed and recorded:

    build model -> eager reference -> roofline costs (FLOPs, bytes) -> [tune] -> prepare -> first call ->
    correctness -> device timing (warm-up, half the repetitions) -> LoadGen scenario -> device
    timing (the other half) -> correctness after timing -> [LoadGen accuracy run] -> [compliance
    tests] -> memory -> kernel/fusion profile -> math mode and rewrites -> memory traffic (DRAM
    bytes, CUDA cells)

Correctness is checked twice: the first call on the example, and the timed callable once more after
its last timed call, on a batch of other samples (`cell_model.later_rows`) given as LoadGen gives
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
A phase that raises makes the cell `failed` with the phase named; what was measured before it
stays in the answer. The current phase is written to a small file the parent shows in its
progress bar.
"""

from __future__ import annotations

import dataclasses
import math
import os
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from harness import allocator, artifact_cache, contract, registry
from harness.bundle.cell_record import Correctness, CorrectnessCheck, MathMode, Metrics, Tuning
from harness.bundle.loadgen_record import Accuracy, ComplianceOutcome, LoadGenRun
from harness.bundle.passes_record import FusionReportRecord, Kernels, Memory, MemoryTraffic, TimeSplit
from harness.bundle.timing_record import Roofline
from harness.errors import HarnessError
from harness.files.atomic import write_bytes_atomic
from harness.measure import cell_model, plugin_answers, protocol, trust
from harness.measure.protocol import Phase, ProtocolError, WorkerAnswer, WorkerRequest
from harness.quick_exit import quick_exit
from harness.scenario.cell_config import CellConfig


class PhaseClock:
    """Times each phase and tells the parent which one is running; `keep` is called as each phase
    begins and as it ends, outside its timed region (the worker keeps its answer so far:
    `checkpoint`). As it begins, for the figures worked out between phases from those that ended
    (the compile time less the toolchain's, the first call's time, the device timing once both its
    halves ended, the roofline, the math mode): a worker killed in the next phase keeps them too."""

    def __init__(self, phase_file: Path, keep: Callable[[], None] = lambda: None) -> None:
        self.phase_file = phase_file
        self.started = time.monotonic()  # the worker's start, on the clock of the parent's time limit
        self.durations_s: dict[str, float] = {}
        self.current = "start"
        self.keep = keep

    @contextmanager
    def phase(self, phase: Phase) -> Iterator[None]:
        """Time `phase`, one of `protocol.PHASES` (the parent groups them by kind)."""
        self.keep()
        self.current = phase.name
        try:
            self.phase_file.write_text(phase.name)
        except OSError:
            pass  # the progress display is a convenience; measurement goes on
        start = time.perf_counter()
        try:
            yield
        finally:
            self.durations_s[phase.name] = time.perf_counter() - start
            self.keep()

    def move(self, seconds: float, source: Phase, target: Phase) -> None:
        """Record `seconds` of the ended phase `source` as `target`'s instead (none: nothing recorded)."""
        if not 0 <= seconds <= self.durations_s[source.name]:
            raise HarnessError(f"{seconds:.3f} s of {source.name} reported as {target.name}: outside its "
                               f"{self.durations_s[source.name]:.3f} s")
        if seconds:
            self.durations_s[source.name] -= seconds
            self.durations_s[target.name] = seconds


def run_cell(request: WorkerRequest) -> WorkerAnswer:
    """Measure one cell; return the answer (never raises for a failure inside the cell)."""
    from harness.measure import machine_speed
    from harness.measure.memory import current_rss_bytes

    cell = request.cell
    answer = WorkerAnswer()
    clock = PhaseClock(Path(request.phase_file), lambda: checkpoint(answer, clock, request.answer_file))
    metrics = answer.metrics
    round_reasons: list[str] = []
    try:
        with clock.phase(protocol.IMPORT):
            import torch

            from harness import precision

            torch.set_grad_enabled(False)
            precision.set_torch_math("fp32")  # the eager reference is IEEE (fp32 and tf32 cells)
            backend = registry.load(cell.backend)()
            machine_speed.prepare(Path(request.cache_dir or Path.cwd() / "cache") / machine_speed.CACHE_FOLDER)
            baseline_rss = current_rss_bytes()
            baseline_device_used = None
            if cell.device == "cuda":
                from harness.measure.memory import device_used_bytes

                baseline_device_used = device_used_bytes()
            answer.environment = {
                # as the probe records them (harness/run/probe.py): a version a plugin gives as a tuple is text
                "backend_versions": {str(name): str(version) for name, version in backend.versions().items()},
                "torch_threads": torch.get_num_threads(),
                "torch_interop_threads": torch.get_num_interop_threads(),
                "cpu_affinity": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
                "variables": recorded_environment(),
                "allocator": allocator.record(cell.allocator, dict(os.environ)),
                "pid": os.getpid(),
            }
        if request.timing_round > 1:
            round_reasons = _time_a_round(cell, request, backend, clock, metrics)
        else:
            _measure(cell, request, backend, clock, metrics, baseline_rss, baseline_device_used)
    except HarnessError as exc:
        answer.reasons.append(f"{clock.current}: {exc}")
    except BaseException as exc:  # any other failure: a bug or a crash in a library; keep the traceback in the log
        traceback.print_exc()
        where = plugin_answers.where_raised(exc, registry.package_of(cell.backend))  # the backend's own line first
        answer.reasons.append(f"{clock.current}: {type(exc).__name__}: {exc}{where}")
    else:
        answer.reasons = _invalid_reasons(metrics) if request.timing_round == 1 else round_reasons
        answer.status = "invalid" if answer.reasons else "valid"
        answer.warnings = (trust.warnings(metrics) + _compliance_warnings(metrics) + artifact_cache.repairs()
                           + allocator.warnings(answer.environment.get("allocator")))
    answer.phases_s = clock.durations_s
    return answer


def checkpoint(answer: WorkerAnswer, clock: PhaseClock, answer_file: str) -> None:
    """Keep the answer as it stands, the phases that ended with it, where the parent finds it
    should the worker be killed before it answers (`protocol.partial_answer_path`): a cell stopped
    by its memory limit in the memory pass keeps its device timing. The device timing is kept once
    both its halves ended: one stopped in LoadGen keeps its compile and first-call times and its
    correctness, not half a device timing. Between phases, never inside a timed one."""
    if not answer_file:
        return
    answer.phases_s = dict(clock.durations_s)
    try:
        write_bytes_atomic(protocol.partial_answer_path(answer_file), answer.to_json().encode())
    except (OSError, ValueError, TypeError) as exc:  # a record of the way: the measurement goes on
        print(f"fusionbench worker: the answer so far was not kept after {clock.current}: {exc}", file=sys.stderr)


def _timing_batches(torch: Any, samples: list[Any], batch: int) -> list[Any]:
    """Consecutive batches over the whole sample set (wrapping round), as LoadGen's queries walk
    it: the timing then reads inputs from memory as the LoadGen run does, not one cached batch."""
    windows = max(1, math.ceil(len(samples) / batch))
    return [torch.cat([samples[(w * batch + j) % len(samples)] for j in range(batch)]) for w in range(windows)]


def recorded_environment() -> dict[str, str]:
    """The worker's whole environment: whitelisted by the parent (harness/run/isolation.py), so
    every variable in it was passed on on purpose, and each can move a figure."""
    return dict(sorted(os.environ.items()))


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


def _measure(
    cell: CellConfig,
    request: WorkerRequest,
    backend: Any,
    clock: PhaseClock,
    metrics: Metrics,
    baseline_rss: int,
    baseline_device_used: int | None,
) -> None:
    from harness import precision
    from harness.measure import activity, correctness, loadgen, machine_speed, memory_traffic, passes, roofline
    from harness.measure.memory import memory_pass

    device, dtype, batch = cell.device, cell.dtype, cell.batch
    workdir = Path.cwd()
    artifacts = Path(request.artifact_dir)
    with clock.phase(protocol.BUILD):
        model, samples, example = cell_model.model_and_samples(cell, request)
    rows = cell_model.later_rows(len(samples), batch)
    with clock.phase(protocol.REFERENCE):
        reference = model(example) if backend.computes_model else None
        later_reference = model(cell_model.later_batch(samples, rows)) if backend.computes_model else None
    with clock.phase(protocol.ROOFLINE):
        costs = roofline.cached_costs(model, example, Path(request.cache_dir or workdir / "cache") / "roofline")
    precision.set_torch_math(dtype)
    _tune(cell, request, backend, model, example, workdir, clock, metrics)
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
                    {**correctness.compare(output, reference, dtype), "samples": cell_model.example_rows(len(samples), batch)})
            del output
        timing = _device_timing(cell, prepared, samples)
        before_loadgen = max(cell.timing.repetitions // 2, 1)
        with clock.phase(protocol.TIMING):
            timing.warm_up()
            for _ in range(before_loadgen):
                timing.repetition("before loadgen")
        hint_ns = timing.result().summary.median_ns
        with clock.phase(protocol.LOADGEN):
            speed_before = machine_speed.read()
            before = activity.snapshot()
            settings = loadgen.Settings(cell, len(samples))
            run = loadgen.run_scenario(prepared, samples, cell, hint_ns, artifacts / "loadgen", settings)
            beside = activity.compare(before, activity.snapshot())
            beside["machine_speed"] = machine_speed.around(speed_before, machine_speed.read())
            metrics.loadgen = LoadGenRun.model_validate({**run, "beside": beside})
        with clock.phase(protocol.TIMING_AFTER_LOADGEN):
            for _ in range(cell.timing.repetitions - before_loadgen):
                timing.repetition("after loadgen")
        metrics.device_time = device_time = timing.result()
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
        prepared.close()
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
        metrics.tuning = Tuning.model_validate({**dataclasses.asdict(tuning),
                                                "tuning_s": clock.durations_s[protocol.TUNE.name]})


def _prepare(cell: CellConfig, request: WorkerRequest, backend: Any, model: Any, example: Any, workdir: Path,
             clock: PhaseClock, metrics: Metrics) -> Any:
    """The backend's prepared model, its artifacts in the cache's folder for the backend, timed as
    `prepare_s` less what the backend measured as its one-time work for the machine (the
    `toolchain` phase)."""
    with clock.phase(protocol.PREPARE):
        prepared = plugin_answers.returned(backend, "prepare", backend.prepare(
            model, example, **cell_model.backend_arguments(cell, request, backend, workdir)), (contract.Prepared,))
    clock.move(prepared.toolchain_s, protocol.PREPARE, protocol.TOOLCHAIN)
    metrics.prepare_s = clock.durations_s[protocol.PREPARE.name]
    metrics.prepare_cache = prepared.prepare_cache  # validated on assignment: one of the four words
    return prepared


def _device_timing(cell: CellConfig, prepared: Any, samples: list[Any]) -> Any:
    """The cell's device timing of `prepared` over the batches of its samples, what runs beside it observed."""
    import torch

    from harness.measure.timing import DeviceTiming

    observe, compare = _observer(cell.device)
    return DeviceTiming(prepared, _timing_batches(torch, samples, cell.batch), cell.timing, cell.device,
                        observe=observe, compare=compare)


def _time_a_round(cell: CellConfig, request: WorkerRequest, backend: Any, clock: PhaseClock,
                  metrics: Metrics) -> list[str]:
    """A further round (harness/run/rounds.py): in this fresh process, the model prepared again (its
    compiled artefacts from the cache the first round filled), then the same device timing as the
    first round's, warm-up and every repetition, with nothing else measured; then the timed
    callable's output checked as round 1's is after its timing. Returns why the round's time is not
    to be taken (its prepare may have loaded another artefact than round 1's): a round that gives
    reasons gives no time."""
    from harness import precision

    workdir = Path.cwd()
    with clock.phase(protocol.BUILD):
        model, samples, example = cell_model.model_and_samples(cell, request)
    rows = cell_model.later_rows(len(samples), cell.batch)
    with clock.phase(protocol.REFERENCE):
        later_reference = model(cell_model.later_batch(samples, rows)) if backend.computes_model else None
    precision.set_torch_math(cell.dtype)
    _tune(cell, request, backend, model, example, workdir, clock, metrics)
    prepared = _prepare(cell, request, backend, model, example, workdir, clock, metrics)
    reasons = []
    try:
        with clock.phase(protocol.FIRST_CALL):
            prepared(example)
            prepared.synchronize()
        metrics.first_call_s = clock.durations_s[protocol.FIRST_CALL.name]
        timing = _device_timing(cell, prepared, samples)
        with clock.phase(protocol.TIMING):
            timing.warm_up()
            for _ in range(cell.timing.repetitions):
                timing.repetition(f"round {request.timing_round}")
        metrics.device_time = timing.result()
        with clock.phase(protocol.CORRECTNESS_AFTER_TIMING):
            if later_reference is not None:
                checked = _checked_after_timing(prepared, samples, rows, later_reference, cell.dtype)
                if not checked["ok"]:
                    reasons.append(f"correctness after timing (samples {rows}): {checked['reason']}")
    finally:
        prepared.close()
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


def _invalid_reasons(metrics: Metrics) -> list[str]:
    """Why a cell that ran every pass is invalid (each pass ran, or `_measure` raised)."""
    correctness, math_mode, lg = metrics.correctness, metrics.math_mode, metrics.loadgen
    if correctness is None or math_mode is None or lg is None:
        raise HarnessError("the cell finished without its correctness, math mode or LoadGen record")
    reasons = []
    if not correctness.ok:
        reasons.append(f"correctness: {correctness.reason}")
    if correctness.after_timing is not None and not correctness.after_timing.ok:
        reasons.append(f"correctness after timing: {correctness.after_timing.reason}")
    reasons += [f"math mode: {problem}" for problem in math_mode.problems]
    if lg.validity != "VALID":
        detail = "; ".join(lg.invalid_reasons) or "no reason given"
        reasons.append(f"loadgen: {lg.validity} ({detail})")
    elif lg.invalid_reasons:  # LoadGen said VALID and logged an error: MLPerf's checker refuses such a run
        reasons.append(f"loadgen: VALID, yet LoadGen logged an error ({'; '.join(lg.invalid_reasons)})")
    return reasons


def _compliance_warnings(metrics: Metrics) -> list[str]:
    """A failed compliance test is a finding about the system, not a broken measurement: the cell
    stays valid and says so (`pack` refuses it for the closed division)."""
    warnings = []
    for test, outcome in (metrics.compliance or {}).items():
        if not outcome.passed:
            checks = outcome.checks
            failed = ", ".join(name for name, ok in (("performance", checks.performance), ("accuracy", checks.accuracy))
                               if ok is False)
            warnings.append(f"compliance {test}: TEST FAIL ({failed}; see its verify_*.txt)")
    return warnings


def die_with_parent(parent_pid: int | None) -> None:
    """Ask Linux to SIGKILL this worker when the harness process that started it dies
    (PR_SET_PDEATHSIG), so a killed run leaves no worker computing on. Elsewhere a no-op."""
    if parent_pid is None or not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent_pid:  # the parent died before the request took effect
        os._exit(1)


def bind_to_slot(cpus: str | None) -> None:
    """Run on the cores of the slot a parallel run gave this cell (harness/run/slots.py), set
    before torch starts its thread pool."""
    if cpus and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {int(cpu) for cpu in cpus.split(",")})


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        request = WorkerRequest.from_json(Path(argv[0]).read_text())
    except (OSError, ProtocolError) as exc:
        print(f"fusionbench worker: cannot read the request: {exc}", file=sys.stderr)
        return 2
    die_with_parent(request.parent_pid)
    bind_to_slot(os.environ.get("FUSIONBENCH_CPUS"))
    answer = run_cell(request)
    write_bytes_atomic(Path(request.answer_file), answer.to_json().encode())
    return 0


if __name__ == "__main__":
    quick_exit(main())  # without the interpreter's teardown: harness/quick_exit.py
