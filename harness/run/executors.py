"""Where a run's cells execute: one after another here (the default), N at a time here
(`--jobs N`), or as tasks on a Ray cluster (`--executor ray`, harness/run/ray_executor.py).

An executor takes the cells to run and a function that runs one cell's worker on a slot and
returns its outcome (the `CellTask`), and hands back each cell's outcome as it finishes, always to
the main thread: the sweep (harness/run/sweep.py) writes the bundle and the progress bar from there, so a parallel run
writes the same bundle, in the same way, as a serial one. Ctrl-C (which only the main thread
receives) stops every running worker; their cells come back as interrupted.
"""

from __future__ import annotations

import functools
import queue
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from harness.bundle.passes_record import WorkerStart
from harness.measure.protocol import WorkerRequest
from harness.run import time_budget
from harness.run.isolation import WorkerOutcome, run_worker
from harness.run.preloaded_parents import PreloadedParents
from harness.run.slots import Slot


@dataclass
class CellTask:
    """Everything a cell's worker needs, wherever it runs; `artifacts` is the bundle's folder for
    the cell (an executor on another machine sends the files back into it)."""

    cell_id: str
    label: str  # as the run shows it: the cell's label with its variant's options
    request: WorkerRequest
    artifacts: Path
    timeout_s: float
    memory_limit_bytes: int | None
    env_names: list[str]
    scratch_env: dict[str, str]
    device: str
    #: Where the backend's scratch folders (`Backend.scratch_env`) are made: None, in the worker's own
    #: scratch folder (fresh for every worker); a folder, there: a cell's rounds share one
    #: (harness/run/rounds.py), so round 1 finds them empty and each further round finds them as the
    #: rounds before it left them (a compiler's cache: the compile of a further round is warm).
    scratch_home: Path | None = None
    #: Asked just before the task starts, where the executor runs tasks in order (Serial, LocalPool):
    #: a reason not to run it (a further round of a cell whose first round was not valid), or None.
    skip: Callable[[], str | None] | None = field(default=None, repr=False, compare=False)
    #: Set when the task may start, where executors run tasks side by side (LocalPool): a further
    #: round waits for its cell's round 1 to be finished, so that `skip` can know how it went.
    after: threading.Event | None = field(default=None, repr=False, compare=False)

    #: The end of the run's time budget (harness/run/time_budget.py), where it has one: a task that
    #: would start after it is not started, and one that starts before it runs at most until then.
    deadline: float | None = None
    budget_cut: bool = False  # its time limit is what was left of the budget when it started
    #: Asked just before round 1 starts under a budget: how long the cell's twin (its other fusion
    #: setting) took to be measured, where it has been (this run or the bundle it resumes), else None.
    twin_took_s: Callable[[], float | None] | None = field(default=None, repr=False, compare=False)
    #: How long round 1 of a cell whose rounds the budget cut took, where a resume times it afresh: a
    #: record it replaces as it starts, so it is held to that time rather than its twin's.
    kept_took_s: float | None = None
    #: Asked just before a further round starts under a budget: how long it is expected to take, from
    #: the cell's rounds that finished (time_budget.RoundGuess), else None.
    round_guess: Callable[[], time_budget.RoundGuess | None] | None = field(default=None, repr=False, compare=False)

    def skip_reason(self) -> str | None:
        return self.skip() if self.skip is not None else None


@dataclass
class Finished:
    task: CellTask
    outcome: WorkerOutcome | None  # None: interrupted before it ended, or not started
    node: dict[str, Any] = field(default_factory=dict)  # where it ran (hostname, slot, ...)
    failure: str | None = None  # the executor lost it (a Ray worker that died twice), or why it has no result
    #: The run's time budget is why it has no result (`failure` says how): not started, or stopped.
    skipped: bool = False


def _within_budget(task: CellTask) -> CellTask | str:
    """`task` with its time limit cut to what is left of the run's budget as it starts; else why it
    is not started: nothing is left, or less than its twin took (round 1) or than its cell's rounds
    say a further round takes."""
    limit_s = time_budget.limit_s(task.deadline, task.timeout_s)
    if limit_s is None:
        return time_budget.SPENT
    short = None
    if task.request.timing_round == 1 and task.kept_took_s is not None:  # its own time: a better guess than its twin's
        short = time_budget.shorter_than_its_kept(task.deadline, task.kept_took_s)
    elif task.request.timing_round == 1 and task.twin_took_s is not None:
        short = time_budget.shorter_than_twin(task.deadline, task.twin_took_s(), task.request.cell.variant.fusion)
    elif task.request.timing_round > 1 and task.round_guess is not None:
        short = time_budget.shorter_than_a_round(task.deadline, task.round_guess())
    if short is not None:
        return short
    if limit_s == task.timeout_s:
        return task
    return replace(task, timeout_s=limit_s, budget_cut=True)


def _ran(task: CellTask, outcome: WorkerOutcome, node: dict[str, Any]) -> Finished:
    if task.budget_cut and outcome.timed_out:  # the budget ended, not the cell's own time limit
        return Finished(task, outcome, node, failure=time_budget.ENDED, skipped=True)
    return Finished(task, outcome, node)


# Called with "start" when a cell's worker starts, then with each phase it reports.
OnPhase = Callable[[CellTask, str], None]


class Executor(Protocol):
    def run(self, tasks: list[CellTask], on_phase: OnPhase) -> Iterator[Finished]: ...

    def record(self) -> dict[str, Any]:
        """What the bundle header says of it (`executor`)."""
        ...


@functools.cache
def _machine() -> dict[str, Any]:
    from harness.run.system import boot_id, cpu_info, gpu_info

    cpu = cpu_info()
    return {"cpu": {k: cpu.get(k) for k in ("model", "identity", "vector_extensions", "logical_cores", "memory_bytes")},
            "gpus": [g.get("name") for g in gpu_info().get("gpus") or []], "boot_id": boot_id()}


def node_info(slot: Slot | None, executor: str = "local") -> dict[str, Any]:
    """Where a cell ran: the machine (hostname, CPU, GPUs, this start of it) and the slot it was given."""
    import socket

    return {"hostname": socket.gethostname(), "executor": executor, "slot": slot.record() if slot else None,
            **_machine()}


def run_here(task: CellTask, slot: Slot | None, on_phase: Callable[[str], None],
             stop: threading.Event | None = None, parents: PreloadedParents | None = None) -> WorkerOutcome:
    return run_worker(task.request, timeout_s=task.timeout_s, log_path=task.artifacts / "worker.log",
                      memory_limit_bytes=task.memory_limit_bytes, on_phase=on_phase, env_names=task.env_names,
                      scratch_env=task.scratch_env, scratch_home=task.scratch_home, slot=slot, stop=stop, parents=parents)


def _worker_start(parents: PreloadedParents | None) -> WorkerStart:
    return "fresh" if parents is None else "preloaded"


class Serial:
    """One cell after the other, with the whole machine: a plain run. With `parents`, each cell's
    worker is forked by a preloaded parent (harness/run/preloaded_parents.py), else started fresh."""

    def __init__(self, parents: PreloadedParents | None = None) -> None:
        self.parents = parents

    def record(self) -> dict[str, Any]:
        return {"name": "local", "worker_start": _worker_start(self.parents)}

    def run(self, tasks: list[CellTask], on_phase: OnPhase) -> Iterator[Finished]:
        for planned in tasks:
            reason = planned.skip_reason()
            if reason is not None:
                yield Finished(planned, None, node_info(None), failure=reason)
                continue
            task = _within_budget(planned)
            if isinstance(task, str):
                yield Finished(planned, None, node_info(None), failure=task, skipped=True)
                continue
            on_phase(task, "start")
            outcome = run_here(task, None, lambda phase, task=task: on_phase(task, phase),  # type: ignore[misc]
                               parents=self.parents)
            yield _ran(task, outcome, node_info(None))


class LocalPool:
    """`jobs` cells at a time on this machine, each in a slot of its own (harness/run/slots.py)."""

    def __init__(self, slots: list[Slot], parents: PreloadedParents | None = None) -> None:
        self.slots = slots
        self.jobs = len(slots)
        self.parents = parents

    def record(self) -> dict[str, Any]:
        return {"name": "local", "jobs": self.jobs, "slots": [slot.record() for slot in self.slots],
                "worker_start": _worker_start(self.parents)}

    def run(self, tasks: list[CellTask], on_phase: OnPhase) -> Iterator[Finished]:
        free: queue.Queue[Slot] = queue.Queue()
        for slot in self.slots:
            free.put(slot)
        stop = threading.Event()

        def one(planned: CellTask) -> Finished:
            task = planned
            while task.after is not None and not task.after.wait(0.1):  # a further round: its round 1 first
                if stop.is_set():
                    return Finished(task, None, node_info(None))
            slot = free.get()
            try:
                if stop.is_set():
                    raise KeyboardInterrupt
                reason = task.skip_reason()
                if reason is not None:
                    return Finished(task, None, node_info(slot), failure=reason)
                fitted = _within_budget(planned)
                if isinstance(fitted, str):
                    return Finished(planned, None, node_info(slot), failure=fitted, skipped=True)
                task = fitted
                on_phase(task, "start")
                outcome = run_here(task, slot, lambda phase: on_phase(task, phase), stop, self.parents)
                return _ran(task, outcome, node_info(slot))
            except KeyboardInterrupt:
                return Finished(task, None, node_info(slot))
            finally:
                free.put(slot)

        pool = ThreadPoolExecutor(max_workers=self.jobs, thread_name_prefix="fusionbench-cell")
        # A further round is submitted once the round before it has ended (its `after`): waiting in
        # the pool, it held one of its `jobs` threads, and the cells after it could not start.
        deferred = list(tasks)
        pending: set[Future[Finished]] = set()

        def submit_ready() -> None:
            ready = [task for task in deferred if task.after is None or task.after.is_set()]
            if not ready and not pending and deferred:
                ready = deferred[:1]  # nothing else can set its event: let it wait in the pool, as it did
            for task in ready:
                deferred.remove(task)
                pending.add(pool.submit(one, task))

        try:
            submit_ready()
            while pending:
                done, _ = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
                pending.difference_update(done)
                for future in done:
                    yield future.result()
                submit_ready()
        except BaseException:  # Ctrl-C, SIGTERM or a failed write: stop every worker, keep nothing running
            stop.set()
            for future in pending:
                future.cancel()
            pool.shutdown(wait=True)
            raise
        pool.shutdown(wait=True)
