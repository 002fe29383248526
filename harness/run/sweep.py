"""The sweep: a run's cells handed to its executor and each written into the bundle as it finishes.

A cell that need not run (harness/run/skips.py) is written skipped at once; every other becomes a
`CellTask` (its worker's request, limits and deadline) and its record is made from what the worker
answered, or from why it gave no answer (`_record`). The progress bar and the line each cell ends
with (harness/run/cell_line.py) are drawn here; further rounds are kept apart until each cell's are
in (harness/run/rounds.py); the time budget's cells are written skipped or left out for --resume,
and the cells Ctrl-C or SIGTERM stops are written interrupted. The time each cell's round 1 took to
be measured, of the bundle's kept cells and of this sweep's as they finish, is what its twin (the
other fusion setting) is held to under the budget (harness/run/time_budget.py); the kept cells' times
start the pace the cells' lines estimate the rest by (harness/run/cell_line.py). A resumed cell whose
rounds the budget cut (harness/run/resumable.py `to_run`) keeps its record and folder until its round
1 starts: a budget that does not reach it leaves it as it was."""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from harness import registry
from harness.bundle.header_record import BackendReport
from harness.bundle.reader import lookup
from harness.bundle.statuses import BAD, MEASURED
from harness.bundle.writer import Bundle, utc_now
from harness.errors import OutputError, stopped_by
from harness.measure.protocol import WorkerRequest
from harness.plain_text import shell_word
from harness.run import cell_line, kept_answer, rounds, skips, time_budget, unseen_environment
from harness.run.executors import CellTask, Executor, Finished, LocalPool, Serial
from harness.run.isolation import MIB, log_tail
from harness.run.last_words import whole_log
from harness.scenario.cells import Cell, twin_id
from harness.scenario.settings import Limits

#: The bar's text while no cell runs: between one cell's end and the next one's start.
NONE_RUNNING = "no cell running"


def sweep(
    cells: list[Cell], bundle: Bundle, backends: Mapping[str, BackendReport], limits: Limits, env_names: list[str],
    input_folder: str | None, cache_dir: Path | None, console: Console, deadline: float | None = None,
    executor: Executor | None = None, keep_past_budget: bool = True,
) -> int:
    """Run `cells` on `executor` (one at a time here by default), writing each into the bundle as
    it finishes. Cells that need not run are written at once; those the time budget (`deadline`)
    leaves no time for are written skipped, or with `keep_past_budget` false left out of the bundle
    for --resume. Return how many of these were not started for their twin's time."""
    executor = executor or Serial()
    # a resume's or a rerun's scenario is the one its bundle stores, whose env: the hints cannot have edited
    stored_scenario = bool(bundle.header.get("rerun_of") or bundle.header.get("resumed"))
    kept = bundle.cells()  # a resumed bundle's records: those of cells it finished are kept
    # a resume's cells whose rounds the budget cut (harness/run/resumable.py `to_run`): their records
    # and folders kept until their round 1 starts, so that a budget that does not reach them keeps them
    kept_till_start = {cell.id for cell in cells if bundle.finished(cell.id)}
    took_s = time_budget.measured_s(kept)
    progress = Progress(
        SpinnerColumn(), TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=console, transient=False,
        refresh_per_second=2,  # the parent shares the machine with the cell it measures: redraw rarely
    )
    running: dict[str, str] = {}  # cell id -> label and phase, of the cells running now
    began: dict[str, float] = {}  # cell id -> when its first round started (time.monotonic)

    def show(task: CellTask, phase: str) -> None:
        if phase == "start":
            pace.started()
            if task.cell_id not in began:  # its first round: the cell's `started` is now, not when it was planned
                began[task.cell_id] = time.monotonic()
                bases[task.cell_id]["started"] = utc_now()
                if task.cell_id in kept_till_start:  # its rounds the budget cut: replaced from now on
                    _afresh(bundle, task.cell_id, by_id[task.cell_id].config.timing.rounds)
        running[task.cell_id] = task.label if phase == "start" else f"{task.label} {phase}"
        described()

    def described() -> None:
        """The bar's text: the cell running, or how many are and the last to move on, or that none is (an
        ended cell's label and last phase stayed until the next started: `... loadgen` while its record was
        written, the next cell waited for a Ray node, or the run ended)."""
        shown = list(running.values())
        if len(shown) > 1:
            progress.update(bar, description=f"{len(shown)} cells running: {shown[-1]}")
        else:
            progress.update(bar, description=shown[0] if shown else NONE_RUNNING)

    with progress:
        bar = progress.add_task("cells", total=len(cells))
        tasks: list[CellTask] = []
        bases: dict[str, dict[str, Any]] = {}
        with registry.held():  # a cell's skip check asks for its backend
            skip_reasons = {cell.id: skips.skip_reason(cell, backends, skips.gpu_capabilities(bundle.header.get("system")))
                            for cell in cells}
        for cell in cells:
            base = {"id": cell.id, "label": cell.label, "config": cell.config.recorded(), "started": utc_now()}
            skip = skip_reasons[cell.id]
            if skip is not None:
                skipped = {**base, "status": "skipped", "reasons": [skip], "metrics": {}, "wall_s": 0.0, "finished": utc_now()}
                _write(bundle, cell.config.shown_label, skipped, progress, bar)
                continue
            twin = twin_id(cell.config)
            tasks.append(_task(cell, bundle, input_folder, cache_dir, limits.cell_timeout_s, limits.memory_limit_mib,
                               env_names, deadline, lambda twin=twin: took_s.get(twin),  # type: ignore[misc]
                               kept_took_s=took_s.get(cell.id) if cell.id in kept_till_start else None))
            bases[cell.id] = base
        by_id = {cell.id: cell for cell in cells}
        pace = cell_line.Pace(len(tasks), kept_s=_kept_cell_s(kept, executor))  # read by show() once cells start
        state = rounds.Rounds({t.cell_id: by_id[t.cell_id].config.timing.rounds for t in tasks}, bundle.root)
        folders = {task.cell_id: task.artifacts for task in tasks}
        by_budget: set[str] = set()  # cells whose round 1 the budget kept from a result
        rounds_cut: set[str] = set()  # cells a further round of which it kept: they keep the rounds that finished
        ran_s: dict[str, float] = {}  # how long each cell's rounds ran: lost where the budget ends its round 1
        left = 0  # cells the budget left out of the bundle: through the bar, not done
        by_twin = 0  # cells not started for their twin's time
        try:
            ordered = rounds.order(tasks, by_id, state)
            for task in ordered:  # the folders of further rounds it made in a kept cell's: made again as it starts
                if task.cell_id in kept_till_start and task.request.timing_round > 1:
                    with contextlib.suppress(OSError):  # not empty: the kept round's own log
                        task.artifacts.rmdir()
            for done in executor.run(ordered, show):
                cell_id = done.task.cell_id
                running.pop(cell_id, None)
                described()  # "2 cells running" stayed on the bar with one left
                if done.outcome is not None:
                    ran_s[cell_id] = ran_s.get(cell_id, 0.0) + done.outcome.wall_s
                if done.skipped:
                    (by_budget if done.task.request.timing_round == 1 else rounds_cut).add(cell_id)
                never_started = cell_id in kept_till_start and cell_id not in began  # its kept folder stays
                first = (finished_record(bases[cell_id], done, keep_folder=never_started,
                                         stored_scenario=stored_scenario)
                         if done.task.request.timing_round == 1 else None)
                if first is not None and first["status"] in MEASURED:  # what its twin, not started yet, is held to
                    took_s[cell_id] = float(first["wall_s"])
                complete = state.finished(done, first)
                if complete is None:
                    continue
                # not started for its twin's time: kept from a result by the budget, never run, budget left
                twin_kept = (cell_id in by_budget and not ran_s.get(cell_id)
                             and complete["reasons"] != [time_budget.SPENT])
                if cell_id not in by_budget:
                    pace.finished()
                by_twin += twin_kept and not never_started  # a kept cell is counted apart, at the end
                if cell_id in by_budget and not keep_past_budget:  # left out of the bundle, with whatever it wrote: --resume runs it
                    if not never_started:  # a kept cell never started stays as it was
                        shutil.rmtree(folders[cell_id], ignore_errors=True)
                    left += 1
                    progress.advance(bar)
                    if ran_s.get(cell_id):  # it ran, and that time is lost: said, not left to the end's count
                        progress.console.print(cell_line.ended_by_budget(by_id[cell_id].config.shown_label, ran_s[cell_id],
                                                                         *_counted(progress, bar)))
                    elif twin_kept:  # said now
                        progress.console.print(cell_line.not_started(by_id[cell_id].config.shown_label,
                                                                     complete["reasons"][0], *_counted(progress, bar)))
                    continue
                if cell_id in by_budget and ran_s.get(cell_id):  # recorded skipped, but it ran: the time it took
                    complete = {**complete, "wall_s": ran_s[cell_id]}
                _write(bundle, by_id[cell_id].config.shown_label, complete, progress, bar,
                       pace.left_s() if cell_id not in by_budget else None, time_budget.left_s(deadline))
                if cell_id in rounds_cut:
                    progress.console.print(cell_line.rounds_cut(by_id[cell_id].config.shown_label, complete))
        except KeyboardInterrupt as exc:
            running.update({cell_id: "" for cell_id in state.waiting()})  # round 1 done, rounds to come
            why = stopped_by(exc)
            for cell_id in list(running):  # the cells Ctrl-C or SIGTERM stopped: --resume runs them again
                ran = time.monotonic() - began[cell_id] if cell_id in began else 0.0
                bundle.write_cell(cell_id, {**bases[cell_id], "status": "interrupted", "reasons": [why],
                                            "metrics": {}, "wall_s": round(ran, 3), "finished": utc_now()})
            for cell_id, folder in folders.items():  # never started: an empty folder beside no record
                if bundle.read_cell(cell_id) is None:
                    with contextlib.suppress(OSError):  # not empty, or gone: left as it is
                        folder.rmdir()
            raise
        finally:
            state.close()
        # a cell whose rounds the budget cut is --resume's too, where the budget leaves cells out
        cut = 0 if keep_past_budget else len(rounds_cut)
        progress.update(bar, description=_bar_end(left, cut))
    return by_twin


def _afresh(bundle: Bundle, cell_id: str, count: int) -> None:
    """Remove the record and folder of a cell whose rounds the budget cut, as its round 1 starts, and
    make its folders again, empty, for its `count` rounds."""
    bundle.drop_cell(cell_id)
    folder = bundle.fresh_artifact_dir(cell_id)
    for number in range(2, count + 1):
        (folder / rounds.ROUND_FOLDER.format(number)).mkdir()


def _bar_end(left: int, cut: int) -> str:
    """The bar's last text: the cells the budget left for --resume, and those it cut short of their
    rounds, which --resume times afresh (harness/run/resumable.py `to_run`)."""
    if not cut:
        return f"{left} cell(s) left for --resume by the time budget" if left else "cells done"
    rest = f"{cut} cut short of their rounds" if left else f"{cut} cell(s) cut short of their rounds by the time budget"
    return (f"{left} cell(s) left for --resume by the time budget, and " if left else "") + f"{rest}, for --resume to time afresh"


def _kept_cell_s(kept: list[dict[str, Any]], executor: Executor) -> list[float]:
    """The time each of a resumed bundle's cells that ran took (all its rounds), as this sweep's
    pace counts its own: N at a time under `--jobs N`. None on Ray, which runs as many at once as the
    cluster has room for, a number the run does not know before its cells are under way."""
    if not isinstance(executor, (Serial, LocalPool)):
        return []
    at_once = executor.jobs if isinstance(executor, LocalPool) else 1
    ran = [r for r in kept if r.get("status") in (*MEASURED, *BAD)]
    return [sum(float(n.get("wall_s") or 0.0) for n in (r.get("metrics") or {}).get("rounds") or [r]) / at_once
            for r in ran]


def _write(bundle: Bundle, label: str, record: dict[str, Any], progress: Progress, bar: Any,
           left_s: float | None = None, budget_left_s: float | None = None) -> None:
    try:
        bundle.write_cell(record["id"], record)
    except OSError as exc:  # disk full, quota, permissions: what is written stays intact
        raise OutputError(
            f"could not write cell {label} into {bundle.root}: {exc.strerror or exc}; the cells "
            f"finished before it are intact: make room, then run --resume {shell_word(bundle.root)}"
        ) from None
    progress.advance(bar)
    progress.console.print(cell_line.line(str(record["status"]), label, record["wall_s"], *_counted(progress, bar),
                                          record["reasons"], left_s, budget_left_s))


def _counted(progress: Progress, bar: Any) -> tuple[int, int]:
    """How many cells of the bar are done, and of how many."""
    task = next(task for task in progress.tasks if task.id == bar)
    return int(task.completed), int(task.total or 0)


def _task(cell: Cell, bundle: Bundle, input_folder: str | None, cache_dir: Path | None, timeout_s: float,
          memory_mib: int | None, env_names: list[str], deadline: float | None,
          twin_took_s: Callable[[], float | None], kept_took_s: float | None = None) -> CellTask:
    """The cell's task; `deadline` is the end of the run's budget, which the executor applies as the
    cell starts (it is not started after it, nor where less is left than `twin_took_s` says its
    twin took, or `kept_took_s` its own kept round 1, and runs at most until it). Its folder is made
    empty now, or, where it has a kept record, as it starts (`_afresh`)."""
    artifacts = bundle.artifact_dir(cell.id) if bundle.finished(cell.id) else bundle.fresh_artifact_dir(cell.id)
    request = WorkerRequest(
        cell=cell.config, artifact_dir=str(artifacts), input_folder=input_folder,
        cache_dir=str(cache_dir) if cache_dir else None, peaks=lookup(bundle.header, "system", "peaks"),
    )
    return CellTask(cell_id=cell.id, label=cell.config.shown_label, request=request, artifacts=artifacts,
                    timeout_s=timeout_s, memory_limit_bytes=memory_mib * MIB if memory_mib else None,
                    env_names=list(env_names), scratch_env=dict(registry.load(cell.config.backend).scratch_env),
                    device=cell.config.device, deadline=deadline, twin_took_s=twin_took_s, kept_took_s=kept_took_s)


def finished_record(base: dict[str, Any], done: Finished, keep_folder: bool = False,
                    stored_scenario: bool = False) -> dict[str, Any]:
    """The cell's record from what its worker (or the executor) said, and where it ran; `keep_folder`:
    the cell's folder is a kept record's, which a cell the budget did not start leaves as it is;
    `stored_scenario`: the cell is a resume's or a rerun's, whose scenario is the one its bundle stores
    (a hint names what works for it)."""
    task, outcome = done.task, done.outcome
    log_path = task.artifacts / "worker.log"
    record = {**base, "finished": utc_now(), "log": f"cells/{task.cell_id}/worker.log", "node": done.node}
    if done.skipped:  # the budget: not started, or stopped; nothing of it is a result, so no log and no folder
        if not keep_folder:
            shutil.rmtree(task.artifacts, ignore_errors=True)
        return {**base, "finished": utc_now(), "node": done.node, "status": "skipped", "reasons": [done.failure or ""],
                "metrics": {}, "wall_s": 0.0}
    if outcome is None:
        record.update(status="failed", reasons=[done.failure or "the executor lost the cell"], metrics={}, wall_s=0.0,
                      log_tail=log_tail(log_path))
        return record
    record["wall_s"] = outcome.wall_s
    ending = ""
    if outcome.answer is None:  # killed: what it measured in the phases that ended stays
        # `kept` is held to a failed record of this reason, less the worker's last words, which are read once
        # it has said in the log what it refused of the answer so far: they skip the parent's notes there
        reason = outcome.failure_reason(task.timeout_s)
        record.update(status="failed", reasons=[reason], warnings=[])
        record.update(kept_answer.kept(outcome.partial, record, log_path))
        tail = log_tail(log_path)
        quoted = outcome.quoting_last_words(reason, tail)
        ending = whole_log(record["log"]) if quoted != reason else ""  # said last, after the hint below
        record.update(reasons=[quoted], log_tail=tail)
    else:
        record.update(kept_answer.answered(outcome.answer, record, log_path))
        if record["status"] == "failed":
            record["log_tail"] = log_tail(log_path)
    if done.node.get("executor") != "ray":  # a Ray node's workers get its environment
        # a worker gets its backend's scratch folders under their variables too: env: refuses those, and a worker that
        # died before it recorded its environment was told to name one there
        named, environment = [*task.env_names, *task.scratch_env], record.get("environment") or {}
        if record["status"] == "failed":
            record["reasons"] = unseen_environment.not_passed_in(record["reasons"], os.environ, named, environment.get("variables"),
                                                                 stored_scenario, environment.get("plugin_reads_unset") or [])
        read = unseen_environment.read_by_plugin(environment, record["reasons"], os.environ, named, stored_scenario)
        if read:  # a plugin's default ran in place of this shell's value: no failure says so
            record["warnings"] = [*(record.get("warnings") or []), read]
    if ending:
        record["reasons"] = [record["reasons"][0] + ending, *record["reasons"][1:]]
    return record
