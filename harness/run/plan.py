"""`run --dry-run`: what a scenario file would run here, and nothing run or written.

The file is read and checked as a run reads it, `--device`, `--rounds` and `--only` applied, and the
options as a run checks them before its probe (`--jobs` against the cores; `--out` and `--cache-dir`
writable, nothing left made) and once its probe has answered (the slots `--jobs` cuts, an `env:`
thread count above a cell's cores); a Ray cluster is not reached. The backends are asked whether
they can run here by the same probe a run starts with (without the system description and the noise
probe: seconds, not a minute), which also resolves `device: auto`; each cell is listed with whether
it would run, or why it would be skipped. The time is a floor, said as one: LoadGen's minimum
duration for each cell that would run (`--jobs N` of them at once); preparing (compiling, tuning), the other passes and any
further rounds come on top, and vary by backend and model from seconds to many minutes. With
`--budget-s`, a last line says whether the budget is below that floor (cells left for --resume for
certain, and at most how many can finish) or not (whether they all finish depends on preparing, and
on each cell's further rounds, which the line counts: they run no LoadGen, so the floor is round 1's).

`run --dry-run --resume RUN_DIR` lists the cells the resume would run (those of the bundle without a
record, `--only` applied), from the scenario the bundle stores, with the floor and the budget line
alike; under `--budget-s` a cell whose twin the bundle kept took longer than the whole budget is
listed as left for --resume, as the resume leaves it (harness/run/time_budget.py
`shorter_than_twin`); a cell the budget kept from some of its rounds is listed as run, all its
rounds afresh, as the resume runs it (harness/run/resumable.py `to_run`). The bundle is opened
and checked as a resume opens it (locked while it is read, so a bundle another process writes is
refused, naming it), and refused for what the resume
would be refused for (harness/run/resume_refusals.py: a backend the run had and this machine lacks,
other inputs, stack, share of the machine, library versions or `env:` values; a disk too full, a
`--cache-dir` or build folder it could not use), at the first the resume would meet; nothing in it
is written. Each dry run meets the run's refusals in the run's order, by the same function
(harness/run/start_checks.py `refuse`).

`rerun BUNDLE --dry-run` lists the cells the rerun would run (harness/run/rerun.py: the bundle's
planned cells, `--only` applied, from the scenario it stores, on the device they ran on), refused
where the rerun is refused before its cells run."""

from __future__ import annotations

import math
from collections.abc import Mapping
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from harness import registry
from harness.bundle.writer import Bundle
from harness.metric_table import format_duration_s
from harness.mlperf.benchmarks import MLPERF_MIN_DURATION_S
from harness.plain_text import visible
from harness.run import (
    executor_choice,
    preflight,
    resumable,
    skips,
    start_checks,
    time_budget,
)
from harness.run.executors import LocalPool
from harness.run.opening import warn_of
from harness.run.probe import run_probe
from harness.run.probe_answer import ProbeAnswer
from harness.run.run_request import RunRequest
from harness.scenario.cells import Cell, check_values, expand, select, twin_id
from harness.scenario.schema import ScenarioFile


def dry_run(request: RunRequest, console: Console) -> int:
    """List the cells the request's scenario file (its overrides applied), the resume of its bundle,
    or its rerun of a bundle, would run on this machine; exit code 0. What the run would be refused
    for, it is refused for, in the run's order (harness/run/start_checks.py)."""
    with ExitStack() as closing:
        start = start_checks.open_start(request, closing, console)
        request, bundle, scenario = start.request, start.bundle, start.scenario
        if bundle is None:  # a resume's stored scenario names every field: it was said when the run began
            warn_of(scenario, console, request.executor, request.jobs)
        elif start.complete:
            return _none_to_run(bundle, start.resolved, request, console)
        probe = start_checks.refuse(start, _Checking(request, console)).probe
        if bundle is not None:
            return _dry_resume(start, probe, console)
        every = expand(start.resolved, probe.device)
        if request.only:
            check_values(every, request.only)
        cells = select(every, request.only or {})
        return _listed(cells, probe, scenario, request, console, f"{len(cells)} cell(s) on {probe.device}"
                       + (f" (device auto: {probe.device} here)" if scenario.device == "auto" else ""))


class _Checking:
    """What the dry run does between the run's refusals (harness/run/start_checks.py): the folders
    checked and nothing left made, Ray not asked, the backends asked whether they can run here
    (without the system description and the noise probe), the `--jobs` slots cut, no worker started."""

    def __init__(self, request: RunRequest, console: Console) -> None:
        self.request, self.console = request, console

    def reach(self, start: start_checks.Start) -> None:
        """A dry run asks no Ray cluster."""

    def writable(self, folder: Path, option: str, way_out: str) -> None:
        preflight.could_write(folder, option, way_out)

    def probe(self, start: start_checks.Start) -> ProbeAnswer:
        if start.all_finished:
            assert start.bundle is not None
            return ProbeAnswer(device=start.bundle.device)  # nothing would run: the run asks no machine
        names = sorted({b.name for b in start.scenario.backends})  # each, for the versions its timed cells ran on
        self.console.print(f"[bold]fusionbench[/]: asking {len(names)} backend(s) whether they can run here ...")
        return run_probe(start.device, names, with_system=False)

    def executor(self, start: start_checks.Start, probe: ProbeAnswer) -> LocalPool | None:
        request = self.request
        cut = (executor_choice.local_slots(request, probe.device, probe)
               if request.executor == "local" and request.jobs > 1 else [])
        return LocalPool(cut) if cut else None


def _dry_resume(start: start_checks.Start, probe: ProbeAnswer, console: Console) -> int:
    """`--dry-run --resume`: the bundle's cells without a record (`--only` applied), as the resume
    would find them, listed as a scenario file's are."""
    bundle, request = start.bundle, start.request
    assert bundle is not None  # a resume's
    cells = resumable.planned_cells(bundle, start.resolved, request.only)
    todo = [c for c in cells if resumable.to_run(bundle, c.id)]
    if not todo:
        return _none_to_run(bundle, start.resolved, request, console)
    title = f"{len(todo)} of the {len(cells)} cell(s) of {visible(bundle.root)} to run on {bundle.device}"
    # a cell the budget kept from some of its rounds runs them all again (resumable.to_run)
    afresh = {c.id: _afresh_row(bundle.read_cell(c.id), c.config.timing.rounds) for c in todo if bundle.finished(c.id)}
    # the time each cell the bundle keeps took: a twin's is what its cell is held to under --budget-s
    # (a cell the resume times afresh too: its round 1's, as the resume's sweep reads it)
    return _listed(todo, probe, start.scenario, request, console, title, time_budget.measured_s(bundle.cells()), afresh)


def _none_to_run(bundle: Bundle, resolved: dict[str, Any], request: RunRequest, console: Console) -> int:
    """What a dry run of a resume with no cell to run says; exit code 0."""
    cells = resumable.planned_cells(bundle, resolved, request.only)
    console.print(Text(f"fusionbench: each of the {len(cells)} cell(s) of {visible(bundle.root)} has its record: "
                       "a resume would run none; nothing was run or written"))
    return 0


def _afresh_row(record: Mapping[str, Any] | None, asked: int) -> str:
    """What the resume does with a cell whose further rounds the budget kept from it, in its row."""
    return f" all {asked} rounds afresh (the time budget kept it with {time_budget.rounds_kept(record)} of {asked})"


def _listed(cells: list[Cell], probe: ProbeAnswer, scenario: ScenarioFile, request: RunRequest, console: Console,
            title: str, took_s: Mapping[str, float] | None = None, afresh: Mapping[str, str] | None = None) -> int:
    """The table of `cells`, each to run or be skipped (with why), or, under `--budget-s`, left for
    --resume where its twin took longer (`took_s`: a resumed bundle's cells' times, by id) than the
    whole budget, as the run would leave it; the floor on the time of the others and the budget's
    line; exit code 0."""
    table = Table(title=title)
    for column in ("cell", "would"):
        table.add_column(column)
    running = 0
    deadline = time_budget.deadline_in(request.budget_s)
    with registry.held():  # a cell's skip check asks for its backend
        for cell in cells:
            why = skips.skip_reason(cell, probe.backends, [])
            short = (None if why is not None
                     # held to its own kept round 1 where the resume times it afresh, as the resume holds it
                     else time_budget.shorter_than_its_kept(deadline, (took_s or {}).get(cell.id)) if cell.id in (afresh or {})
                     else time_budget.shorter_than_twin(deadline, (took_s or {}).get(twin_id(cell.config)),
                                                        cell.config.variant.fusion))
            running += why is None and short is None
            table.add_row(visible(cell.config.shown_label), "run" + (afresh or {}).get(cell.id, "")
                          if why is None and short is None
                          else f"be skipped: {why}" if why is not None else f"be left for --resume ({short})")
    console.print(table)
    loadgen = scenario.loadgen
    official = loadgen.profile == "mlperf" and "min_duration_s" not in loadgen.user_conf()
    duration_s = MLPERF_MIN_DURATION_S if official else loadgen.min_duration_s  # mlperf.conf's 600 s
    rounds = scenario.timing.rounds
    # `--jobs N` runs N cells at once, so the run's floor is its rounds of N; Ray's room is the
    # cluster's, which a dry run does not ask: its floor is said in cell time
    at_once = request.jobs if request.executor == "local" else 1
    spread = (f", {at_once} at a time" if at_once > 1 else "") + (
        "; cell time, which the cells Ray runs at once divide" if request.executor != "local" else "")
    console.print(Text(
        f"{running} of {len(cells)} cell(s) would run: at least {_duration(floor_s(running, duration_s, at_once))} of "
        f"LoadGen's minimum duration ({running} x {format_duration_s(duration_s)}{spread}), plus preparing (compiling, "
        "tuning) and the other passes, from seconds to many minutes a cell by backend and model"
        + (f", and {rounds - 1} further round(s) a cell, each preparing and timing it again" if rounds > 1 else "")
        + ("; a dtype the GPU's compute capability lacks is found as the run starts (this asks no GPU)"
           if probe.device == "cuda" else "")
        + "; nothing was run or written"))
    if request.budget_s is not None:
        console.print(Text(budget_line(request.budget_s, running, duration_s, at_once, rounds)))
    return 0


def floor_s(running: int, duration_s: float, at_once: int) -> float:
    """The least wall time `running` cells of LoadGen's minimum `duration_s` take, `at_once` at a time."""
    return math.ceil(running / at_once) * duration_s


def budget_line(budget_s: float, running: int, duration_s: float, at_once: int = 1, rounds: int = 1) -> str:
    """What `--budget-s` makes of the floor: a run starts cells while the budget lasts, so a budget
    below the floor leaves cells for --resume for certain; one above it may still, by preparing and
    by the further rounds of `rounds` (which run no LoadGen: the floor is round 1's alone)."""
    budget = f"--budget-s {budget_s:g} ({_duration(budget_s)}) is"
    if floor_s(running, duration_s, at_once) <= budget_s:
        further = (f" and on each cell's {rounds - 1} further round(s), which prepare and time it again but run no "
                   "LoadGen (the floor is round 1's)" if rounds > 1 else "")
        return (f"{budget} at least this floor: whether every cell finishes within it depends on preparing (compiling, "
                f"tuning){further}, which a dry run cannot tell; a cell still running when it ends is left for --resume"
                + (", as is one whose further round it keeps from it, to be timed afresh" if rounds > 1 else ""))
    fit = min(int(budget_s // duration_s) * at_once, running)
    return (f"{budget} less than this floor: at most {fit} of the {running} cell(s) can finish within it (LoadGen's "
            "minimum alone), the others are left for --resume, and the cell running when it ends is run again "
            "from its start")


def _duration(seconds: float) -> str:
    """As the pages write a duration (1.55556 s read "at least 2 s"); past two minutes in minutes,
    whole from 100 on (`:.3g` wrote 1,000 minutes "1e+03 min")."""
    if seconds < 120:
        return format_duration_s(seconds)
    minutes = seconds / 60
    return f"{minutes:.3g} min" if round(minutes, 1) < 100 else f"{minutes:,.0f} min"
