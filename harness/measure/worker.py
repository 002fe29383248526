"""One cell, measured in a process of its own: `python -m harness.measure.worker REQUEST.json`.

The parent writes the request, starts this process in a fresh working directory with a time
limit, and reads back exactly one JSON answer. The worker dies with the process that started it,
binds itself to its slot's cores, imports torch and the backend (the `import` phase), then runs the
cell's phases (harness/measure/phases.py: every pass in a first round, the device timing alone in a
further one), each timed and recorded by its `PhaseClock` (harness/measure/phase_clock.py). A cell
that ran them all is `invalid` where its correctness, its math mode or LoadGen's run failed, else
`valid`; the warnings (harness/measure/trust.py) never change its status.

A phase that raises makes the cell `failed` with the phase named; what was measured before it
stays in the answer. The current phase is written to a small file the parent shows in its
progress bar.
"""

from __future__ import annotations

import os
import sys
import traceback
from pathlib import Path

from harness import allocator, artifact_cache, cgroup_limits, registry
from harness.bundle.cell_record import Metrics
from harness.bundle.loadgen_record import invalid_run_reason
from harness.errors import HarnessError
from harness.files.atomic import write_bytes_atomic
from harness.measure import phases, plugin_answers, protocol, start_imports, trust
from harness.measure.phase_clock import PhaseClock
from harness.measure.protocol import ProtocolError, WorkerAnswer, WorkerRequest
from harness.models import zoo
from harness.plain_text import one_line
from harness.quick_exit import quick_exit


def run_cell(request: WorkerRequest) -> WorkerAnswer:
    """Measure one cell; return the answer (never raises for a failure inside the cell)."""
    from harness.measure import machine_speed
    from harness.measure.memory import current_rss_bytes

    cell = request.cell
    answer = WorkerAnswer()
    clock = PhaseClock(Path(request.phase_file), lambda: checkpoint(answer, clock, request.answer_file))
    metrics = answer.metrics
    round_reasons: list[str] = []
    given = given_cpus()
    try:
        with clock.phase(protocol.IMPORT):
            import torch

            from harness import precision

            torch.set_grad_enabled(False)
            precision.set_torch_math("fp32")  # the eager reference is IEEE (fp32 and tf32 cells)
            backend = registry.load(cell.backend)()
            start_imports.import_modules()  # before the baseline, as a preloaded parent imported them before its fork
            start_imports.import_preload(cell.backend, backend.preload)
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
                "cpu_affinity": given,
                "cpu_quota": cgroup_limits.cpu_quota(),
                "memory_limit_bytes": cgroup_limits.memory_limit_bytes(),
                "variables": recorded_environment(),
                "allocator": allocator.record(cell.allocator, dict(os.environ)),
                "pid": os.getpid(),
            }
        if request.timing_round > 1:
            round_reasons = phases.time_a_round(cell, request, backend, clock, metrics)
        else:
            phases.measure(cell, request, backend, clock, metrics, baseline_rss, baseline_device_used)
    except HarnessError as exc:
        answer.reasons.append(f"{clock.current}: {exc}")
    except BaseException as exc:  # any other failure: a bug or a crash in a library; keep the traceback in the log
        traceback.print_exc()
        where = plugin_answers.where_raised(exc, registry.package_of(cell.backend))  # the backend's own line first
        answer.reasons.append(f"{clock.current}: {type(exc).__name__}: {exc}{where}")
    else:
        answer.reasons = invalid_reasons(metrics) if request.timing_round == 1 else round_reasons
        answer.status = "invalid" if answer.reasons else "valid"
        answer.warnings = (trust.warnings(metrics) + _compliance_warnings(metrics) + artifact_cache.repairs()
                           + allocator.warnings(answer.environment.get("allocator")))
    unset = zoo.unset_plugin_reads(cell.model.name)
    if unset:  # which of them this worker's shell had is the parent's to say (harness/run/unseen_environment.py)
        answer.environment["plugin_reads_unset"] = unset
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
        print(f"fusionbench worker: the answer so far was not kept ({clock.current}): {exc}", file=sys.stderr)


def recorded_environment() -> dict[str, str]:
    """The worker's whole environment: whitelisted by the parent (harness/run/isolation.py), so
    every variable in it was passed on on purpose, and each can move a figure."""
    return dict(sorted(os.environ.items()))


def invalid_reasons(metrics: Metrics) -> list[str]:
    """Why a cell that ran every pass is invalid (each pass ran, or `phases.measure` raised)."""
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
        reasons.append(invalid_run_reason(lg.validity, lg.invalid_reasons))
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


#: The CPUs a preloaded parent was given, read before its imports (`given_cpus`, set by
#: harness/measure/preloaded.py's `serve`); a worker it forks runs this module as __main__ and reads
#: them from the imported one.
handed_cpus: list[int] | None = None


def given_cpus() -> list[int] | None:
    """The CPUs this worker was given, as they were before `import torch`: libgomp under
    OMP_PROC_BIND, OMP_PLACES or GOMP_CPU_AFFINITY pins the main thread to its first place as it
    loads. A fresh worker reads them here, before its import; one forked from a preloaded parent,
    which imported torch before the fork, gets those its parent read before its imports."""
    handed = getattr(sys.modules.get("harness.measure.worker"), "handed_cpus", None)  # this module's, imported
    if isinstance(handed, list):
        return list(handed)
    return sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None


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
        # one line: its cell's reason quotes the worker's last (harness/run/last_words.py)
        print(f"fusionbench worker: cannot read the request: {one_line(exc)}", file=sys.stderr)
        return 2
    die_with_parent(request.parent_pid)
    bind_to_slot(os.environ.get("FUSIONBENCH_CPUS"))
    answer = run_cell(request)
    write_bytes_atomic(Path(request.answer_file), answer.to_json().encode())
    return 0



if __name__ == "__main__":
    quick_exit(main())  # without the interpreter's teardown: harness/quick_exit.py
