"""A run: validate, expand cells, run each in its own worker, write the bundle as cells finish.

This module keeps the order of a run's steps; each step's work is a module of its own: what the
run starts from and the checks before anything is written, in the order its dry run meets them too
(harness/run/start_checks.py: opening.py, preflight.py, resume_refusals.py), where the cells run
(executor_choice.py), the cells run and written (sweep.py) and how the run ends (ending.py).

Everything that can be wrong with the input is checked before the bundle directory is made,
so a bad scenario file or option leaves nothing behind; so is the Ray cluster a run asks for
(harness/run/ray_executor.py). Each finished cell is written at once (atomically), so an
interrupted run loses nothing finished and `--resume` completes the rest. The report comes last:
a run stopped while it is written leaves a bundle that is valid without it, and says how to add it.
"""

from __future__ import annotations

import os
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.text import Text

from harness import allocator
from harness.bundle.files import HEADER
from harness.bundle.reader import lookup
from harness.bundle.statuses import BAD, nothing_measured
from harness.bundle.writer import Bundle, new_run_id, utc_now
from harness.errors import ConfigError, OutputError, interrupted_exit_code, stopped_by
from harness.measure.machine_speed import CACHE_FOLDER
from harness.models import plugins as model_plugins
from harness.models.catalog import plugin_records
from harness.plain_text import shell_word, visible
from harness.run import (
    ending,
    executor_choice,
    machine_noise,
    opening,
    preflight,
    resumable,
    resume_refusals,
    rounds,
    start_checks,
    sweep,
    time_budget,
    unseen_environment,
)
from harness.run.executors import Executor, LocalPool
from harness.run.probe import run_probe
from harness.run.probe_answer import ProbeAnswer
from harness.run.run_request import RunRequest
from harness.run.system import boot_id, harness_info
from harness.scenario import loading as scenario_file
from harness.scenario.cells import Cell, expand, select

if TYPE_CHECKING:
    from harness.run.ray_executor import RayExecutor


def run(request: RunRequest, console: Console) -> int:
    """Run a scenario (or resume a bundle); return the process exit code. The bundle is locked
    against other writers from the moment it is opened or made until this returns or raises."""
    with ExitStack() as closing:
        return _run(request, console, closing)


def _run(request: RunRequest, console: Console, closing: ExitStack) -> int:
    start = start_checks.open_start(request, closing, console)
    request, bundle, resolved, scenario = start.request, start.bundle, start.resolved, start.scenario
    all_finished = start.all_finished
    if start.complete:
        assert bundle is not None
        kept = [record.status for record in bundle.records()]
        failed = sum(1 for status in kept if status in BAD)
        console.print(Text(f"fusionbench: {visible(bundle.root)} is complete: every cell has its record and the "
                           "report is written; nothing to resume (the bundle is left as it was)"
                           + (f"; {failed} cell(s) failed or invalid, as its report says" if failed else "")
                           + ("; it measured nothing: every cell was skipped" if nothing_measured(kept) else "")))
        return ending.exit_code(kept)  # the run's own exit code
    if bundle is None:  # a resume's stored scenario names every field: it was said when the run began
        opening.warn_of(scenario, console, request.executor, request.jobs)
    elif request.scenario_path is None and not all_finished:
        edited = opening.file_edited_since(bundle, scenario)
        if edited:
            console.print(Text(f"fusionbench: warning: {edited}", style="yellow"))
    between = _Between(request, console, closing)
    checked = start_checks.refuse(start, between)  # its dry run's refusals too, in the same order
    probe, executor, input_folder = checked.probe, checked.executor, checked.input_folder
    assert executor is not None  # the run's own
    device, cells = probe.device, between.cells
    other_boot = other_harness = ""
    # a resume's or a rerun's scenario is the one its bundle stores, whose env: the hints cannot have edited
    stored_scenario = bundle is not None or request.rerun is not None
    if bundle is not None and not all_finished:
        if checked.timed is not None:  # a local resume's: a Ray resume's cells ran on the cluster's nodes
            other_boot = resume_refusals.another_boot(checked.timed, boot_id())
        other_harness = resume_refusals.another_harness(bundle.header, harness_info())
    if bundle is None:
        if scenario.device == "auto":  # the cells are known now
            preflight.check_room(request.out_dir, len(cells))
        bundle = Bundle.create(
            request.out_dir,
            new_run_id(str(scenario.name)),
            {
                "created": utc_now(),
                "harness": harness_info(),
                "command": list(request.command),
                # a rerun's scenario is the one the original's bundle.json stores
                "scenario_file": str(request.rerun.root / HEADER if request.rerun else request.scenario_path),
                "input_folder": input_folder,
                "inputs_sha256": checked.inputs_sha256,
                "scenario": resolved,
                "scenario_sha256": scenario_file.sha256(resolved),
                "device": device,
                "only": {k: sorted(v) for k, v in (request.only or {}).items()},
                "artifact_cache": str(request.cache_dir) if request.cache_dir else None,
                "system": probe.system,
                "backends": probe.recorded_backends(),
                "cells": [{"id": c.id, "label": c.label} for c in cells],
                "resumed": [],
                # one cell at a time: round i of each cell of a setting meets the same stretch of the machine
                "rounds_paired": rounds.ROUNDS_PAIRED if request.executor == "local" and request.jobs == 1 else None,
                **({"rerun_of": request.rerun.rerun_of} if request.rerun else {}),
                **({"model_plugins": plugins} if (plugins := plugin_records([m["name"] for m in resolved["models"]])) else {}),
            },
        )
        closing.callback(bundle.close)
    else:
        planned = set(bundle.cell_ids)
        cells = [c for c in cells if c.id in planned]
        # `running` first: a stop between the two leaves a stale manifest, which a killed run's state forgives
        bundle.header.pop("interruption", None)  # the last close's; this resume's close says its own
        bundle.update_header(resumed=[*bundle.header.get("resumed", []), utc_now()], state="running", ended=None)
        bundle.drop_manifest()
    between.refused.pop_all()  # the run is under way: what it made is its own now, kept however it ends
    closing.enter_context(ending.said_if_stopped(bundle, console))  # a stop the sweep's handling does not catch
    todo = [c for c in cells if resumable.to_run(bundle, c.id)]
    console.print(Text(f"fusionbench: {len(cells)} cell(s) on {device}, {len(todo)} to run -> {visible(bundle.root)}"))
    for cell, kept_rounds, asked in resumable.cut_cells(bundle, todo):
        console.print(Text(f"fusionbench: {visible(cell.config.shown_label)}: the time budget kept it with {kept_rounds} of "
                           f"its {asked} rounds; this resume times its {asked} rounds afresh, its record and folder "
                           "replaced as its round 1 starts (rounds of two sessions are not pooled: round i of each cell "
                           "of its setting is to meet the same stretch of the machine, and its rounds' compiler caches "
                           "are gone)", style="yellow"))
    noise_warning = lookup(bundle.header, "system", "machine_noise", "warning")
    if noise_warning and bundle.header.get("resumed"):  # measured once, at the first start: not this machine now
        noise_warning = f"when the run started ({bundle.header.get('created')}), {noise_warning}"
    if noise_warning:
        console.print(Text(f"fusionbench: warning: {noise_warning}", style="yellow"))
    for warning in (other_boot, other_harness):
        if warning:
            console.print(Text(f"fusionbench: warning: {warning}", style="yellow"))
    unequal = machine_noise.unequal_slots([slot.cpus for slot in executor.slots] if isinstance(executor, LocalPool)
                                          else [], lookup(bundle.header, "system", "machine_noise", "core_chunk_ms"))
    if unequal:
        console.print(Text(f"fusionbench: warning: {unequal}", style="yellow"))
    env_names = allocator.environment(allocator.of(resolved)) + (resolved.get("env") or [])  # older bundles: none
    left_behind = unseen_environment.unseen(os.environ, env_names)
    if todo and left_behind:
        console.print(Text(f"fusionbench: warning: {unseen_environment.warning(left_behind, stored_scenario=stored_scenario)}",
                           style="yellow"),
                      soft_wrap=True)
    model_names = list(dict.fromkeys(cell.config.model.name for cell in todo))  # a resume's done models: no warning
    for name in model_names:
        shadowed = model_plugins.found().shadowed.get(name)  # another copy of its package, which the user may think runs
        if shadowed:
            console.print(Text(f"fusionbench: warning: {visible(shadowed)}", style="yellow"), soft_wrap=True)
    # a variable a package's modules read as they loaded, which each worker will not have: once a package
    for read in unseen_environment.read_as_loaded(model_names, os.environ, env_names, stored_scenario):
        console.print(Text(f"fusionbench: warning: {visible(read)}", style="yellow"), soft_wrap=True)
    try:
        deadline = time_budget.deadline_in(request.budget_s)
        # a resume in slots or on Ray (allowed where no cell was timed yet) runs other cells between one
        # cell's rounds: the flag the first start set one cell at a time no longer holds
        paired = {} if request.executor == "local" and request.jobs == 1 else {"rounds_paired": None}
        bundle.update_header(executor=executor.record(), **paired)
        by_twin = sweep.sweep(todo, bundle, probe.backends, scenario.limits, env_names, input_folder, request.cache_dir,
                              console, deadline, executor, keep_past_budget=request.past_budget == "skipped")
    except KeyboardInterrupt as stop:
        ending.close(bundle, "interrupted", console, stopped_by(stop))
        console.print(Text(f"interrupted: finished cells are kept; complete with --resume {shell_word(bundle.root)}", style="yellow"))
        return interrupted_exit_code(stop)
    except ConfigError as refusal:  # refused once the bundle was made (an executor's late check): resumable, never `running`
        try:
            ending.close(bundle, "interrupted", console, f"refused once the bundle was made: {refusal}")
        except OutputError as closing:  # both said: the refusal is what to fix, the close what it left
            raise OutputError(f"{refusal}; then {closing}") from None
        raise
    # a cell whose rounds the budget cut is left for --resume too, where the budget leaves cells out
    # (`run`); gpu-check's, which records what the budget kept, keeps it as it is
    missing = [cell for cell in bundle.cell_ids if not bundle.finished(cell)
               or (request.past_budget == "missing" and resumable.to_run(bundle, cell))]
    left_s = time_budget.left_s(deadline)
    budget_cause = (time_budget.why_left(by_twin, left_s <= 0)
                    if left_s is not None and request.past_budget == "missing" else None)
    why = ending.why_left(request, budget_cause, any(bundle.finished(cell) for cell in missing))
    ending.close(bundle, "interrupted" if missing else "complete", console, why)  # `--resume --only` may leave cells for later
    return ending.last_lines(bundle, request, missing, noise_warning, budget_cause, console)



class _Between:
    """What the run does between its refusals (harness/run/start_checks.py): Ray reached, the folders
    made, the machine probed and the executor started, and what it made kept in `refused` until the
    bundle is made, so that a refusal before that leaves no folder it made (the probe's, a device
    the machine lacks)."""

    def __init__(self, request: RunRequest, console: Console, closing: ExitStack) -> None:
        self.request, self.console, self.closing = request, console, closing
        self.made = preflight.MadeFolders()
        self.refused = closing.enter_context(ExitStack())
        self.refused.callback(self.made.remove_left_empty)
        self.ray: RayExecutor | None = None
        self.cells: list[Cell] = []  # the run's on the probed device, `--only` applied

    def reach(self, start: start_checks.Start) -> None:
        self.ray = executor_choice.reach_ray(self.request, start.bundle, start.scenario.device, start.all_finished)

    def writable(self, folder: Path, option: str, way_out: str) -> None:
        preflight.writable(folder, option, self.made, way_out)
        if folder == self.request.cache_dir:
            self.made.fills(folder / CACHE_FOLDER)  # the noise probe's loop, built there

    def probe(self, start: start_checks.Start) -> ProbeAnswer:
        request, scenario = self.request, start.scenario
        names = sorted({b.name for b in scenario.backends})
        if start.bundle is None:
            if scenario.device != "auto":  # in the --out made now: its dry run makes none to measure
                preflight.check_room(request.out_dir, len(select(expand(start.resolved, scenario.device),
                                                                 request.only or {})))
            self.console.print(f"[bold]fusionbench[/]: probing the system and {len(names)} backend(s) ...")
        # A resumed run stays on the device it started on, whatever `auto` would pick today.
        if start.all_finished:
            assert start.bundle is not None
            return ProbeAnswer(device=start.bundle.device)  # nothing will run: no need to ask the machine
        return run_probe(start.device, names, with_system=start.bundle is None, cache_dir=request.cache_dir)

    def executor(self, start: start_checks.Start, probe: ProbeAnswer) -> Executor:
        bundle, device = start.bundle, probe.device
        recorded = bundle.header.get("model_plugins") if bundle else None  # a resume's, as it ran them
        self.cells = select(expand(start.resolved, device, recorded), self.request.only or {})
        if self.ray is not None and not start.all_finished:
            self.ray.join(device)
        if self.ray is not None:
            return self.ray
        # The backends that will run here (a resume's missing cells; none the probe found unavailable): a
        # preloaded parent imports what they name once for the run.
        running = sorted({c.config.backend for c in self.cells if (bundle is None or resumable.to_run(bundle, c.id))
                          and probe.available(c.config.backend)})
        return executor_choice.local_executor(self.request, device, probe, running, self.closing)
