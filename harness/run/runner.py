"""A run: validate, expand cells, run each in its own worker, write the bundle as cells finish.

Everything that can be wrong with the input is checked before the bundle directory is made,
so a bad scenario file or option leaves nothing behind; so is the Ray cluster a run asks for
(harness/run/ray_executor.py). Each finished cell is written at once (atomically), so an
interrupted run loses nothing finished and `--resume` completes the rest. The report comes last:
a run stopped while it is written leaves a bundle that is valid without it, and says how to add it.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.text import Text

from harness import allocator, registry
from harness.bundle.header_record import BackendReport
from harness.bundle.manifest import MANIFEST
from harness.bundle.reader import load, lookup
from harness.bundle.statuses import BAD, nothing_measured
from harness.bundle.writer import Bundle, new_run_id, utc_now
from harness.errors import EXIT_NOTHING_MEASURED, ConfigError, OutputError, interrupted_exit_code, stopped_by
from harness.measure.protocol import WorkerRequest
from harness.plain_text import one_line, visible
from harness.reporting.report import REPORT_HTML, REPORT_MD, render
from harness.reporting.run_facts import share
from harness.run import cell_line, kept_answer, preflight, resumable, resume_refusals, rounds, skips, slots, time_budget
from harness.run.executors import CellTask, Executor, Finished, LocalPool, Serial
from harness.run.isolation import MIB, log_tail
from harness.run.preloaded_parents import PreloadedParents
from harness.run.probe import run_probe
from harness.run.probe_answer import ProbeAnswer
from harness.run.summary import fusion_summary, skipped_lines, summary_table, time_line
from harness.run.system import boot_id, container_info, harness_info
from harness.scenario import advice
from harness.scenario import loading as scenario_file
from harness.scenario.cells import Cell, check_values, expand, only_text, select
from harness.scenario.differences import differences
from harness.scenario.schema import ScenarioFile
from harness.scenario.settings import Limits

if TYPE_CHECKING:
    from harness.run.ray_executor import RayExecutor


@dataclass(frozen=True)
class RunRequest:
    scenario_path: Path | None
    device: str | None = None
    #: Overrides the scenario's `timing.rounds` (harness/run/rounds.py); None: the file's.
    rounds: int | None = None
    only: dict[str, set[str]] | None = None
    out_dir: Path = Path("results")
    resume: Path | None = None
    #: Backends' persistent artifact cache (exported graphs, compiled libraries); None: a fresh
    #: one per cell, so every prepare is cold.
    cache_dir: Path | None = None
    #: Seconds the sweep may take (harness/run/time_budget.py): a cell that would start after it is
    #: not started, and one that starts before it gets at most what is left; the local executors
    #: only. None: no budget.
    budget_s: float | None = None
    #: What becomes of the cells the budget keeps from a result: "skipped" (recorded so, with the
    #: reason: gpu-check, whose verdict names every cell) or "missing" (not recorded, and any files
    #: of theirs removed: the bundle is left interrupted, and --resume runs them; `run --budget-s`).
    past_budget: Literal["skipped", "missing"] = "skipped"
    #: Where cells run (harness/run/executors.py): "local" (`jobs` at a time) or "ray".
    executor: str = "local"
    jobs: int = 1
    address: str | None = None  # ray: the cluster; None starts a local instance
    cpus_per_cell: int = 1  # ray: cores a CPU cell reserves
    ray_connect_timeout_s: float | None = None  # ray: seconds the cluster has to answer; None: 30
    #: local: start each cell's worker as a fresh Python instead of forking it from a preloaded
    #: parent that has imported torch once (harness/measure/preloaded.py).
    fresh_workers: bool = False
    #: The command as given, recorded in the bundle: `fusionbench` and its arguments (`./run.sh`
    #: runs the same, and a path to the module that started Python says nothing to a reader).
    command: tuple[str, ...] = ("fusionbench", "run")


def run(request: RunRequest, console: Console) -> int:
    """Run a scenario (or resume a bundle); return the process exit code. The bundle is locked
    against other writers from the moment it is opened or made until this returns or raises."""
    with ExitStack() as closing:
        return _run(request, console, closing)


def warn_of(scenario: ScenarioFile, console: Console, executor: str = "local") -> None:
    """Print what the file sets and will not get (harness/scenario/advice.py, `slots.env_warnings`;
    under Ray the cells' cores are the cluster's, not this machine's)."""
    cores = len(slots.usable_cores()) if executor == "local" else None
    for line in advice.warnings(scenario, scenario.device) + slots.env_warnings(scenario.env, os.environ, cores):
        console.print(Text(f"fusionbench: warning: {line}", style="yellow"))


def checked_inputs(scenario: ScenarioFile, path: Path) -> tuple[str | None, str | None]:
    """The scenario's input folder and the digest of what its cells will read (None, None for
    synthetic inputs); ConfigError, named by the scenario file, where the folder would fail them."""
    try:
        folder = preflight.input_folder(scenario, path.parent)
        return folder, preflight.inputs_sha256(scenario, folder)
    except ConfigError as exc:  # named by the file that asks for the folder, as its other errors are
        raise ConfigError(f"{path}: {exc}") from None


def _refuse_an_empty_selection(resolved: dict[str, Any], device: str, only: dict[str, set[str]],
                               bundle: Bundle | None) -> None:
    """Raise select's ConfigError when `only` matches no cell on `device` (either device for auto),
    check_values's when one of its values matches none, and one when it matches no cell a resumed
    bundle planned (a run of its own --only)."""
    cells = [*expand(resolved, "cuda"), *expand(resolved, "cpu")] if device == "auto" else expand(resolved, device)
    check_values(cells, only)
    chosen = select(cells, only)
    if bundle is not None and not set(bundle.cell_ids) & {c.id for c in chosen}:
        raise ConfigError(f"--only {only_text(only)} matches no cell of {bundle.root}, whose run chose only "
                          f"{only_text(bundle.header.get('only') or {})}")


def check_selection(request: RunRequest) -> None:
    """Refuse an `--only` that matches no cell of the scenario (or of the bundle to resume) before
    anything starts: `--container` asks it on the host, before an engine is asked or an image built."""
    if not request.only:
        return
    with ExitStack() as closing:
        bundle, resolved, scenario = _open_or_plan(request, closing)
        _refuse_an_empty_selection(resolved, bundle.device if bundle else scenario.device, request.only, bundle)


def _run(request: RunRequest, console: Console, closing: ExitStack) -> int:
    bundle, resolved, scenario = _open_or_plan(request, closing)
    names = sorted({b.name for b in scenario.backends})
    all_finished = bundle is not None and _all_finished(bundle, resolved, request)
    if bundle is not None and all_finished and _left_complete(bundle):
        if request.only:  # a typo in --only is refused here too, as on any resume
            _refuse_an_empty_selection(resolved, bundle.device, request.only, bundle)
        kept = [record.status for record in bundle.records()]
        failed = sum(1 for status in kept if status in BAD)
        console.print(Text(f"fusionbench: {visible(bundle.root)} is complete: every cell has its record and the "
                           "report is written; nothing to resume (the bundle is left as it was)"
                           + (f"; {failed} cell(s) failed or invalid, as its report says" if failed else "")
                           + ("; it measured nothing: every cell was skipped" if nothing_measured(kept) else "")))
        return _exit_code(kept)  # the run's own exit code
    if bundle is None:  # a resume's stored scenario names every field: it was said when the run began
        warn_of(scenario, console, request.executor)
    # The inputs first: a refusal then leaves nothing behind (no cache folder, no Ray, no probe).
    if bundle is None:
        assert request.scenario_path is not None  # _open_or_plan refused a new run without one
        input_folder, inputs_sha256 = checked_inputs(scenario, request.scenario_path)
    else:
        input_folder = bundle.header.get("input_folder")
        if input_folder and not all_finished:  # it may have changed since the run began
            preflight.check_inputs(scenario, Path(input_folder))
            resume_refusals.other_inputs(bundle, scenario, input_folder)
        if not all_finished:
            resume_refusals.another_stack(bundle, container_info())
    # before the probe and the folders, as the other refusals here
    slots.check_jobs(request.jobs, scenario.env, bundle.device if bundle else scenario.device)
    if request.executor == "local":
        slots.check_jobs_fit_here(request.jobs)
    if request.only:  # a filter no cell matches on any device this run could pick: refused before the probe
        _refuse_an_empty_selection(resolved, bundle.device if bundle else scenario.device, request.only,
                                   bundle)
    ray_executor = _reach_ray(request, bundle, scenario.device, all_finished)
    # Where the cache and the bundle go, and room for the cells where the device is known: a
    # refusal costs no probe (seconds) and leaves no bundle.
    # A refusal from here to the bundle's making (the probe's, a device the machine lacks) leaves no
    # folder it made either.
    made = preflight.MadeFolders()
    refused = closing.enter_context(ExitStack())
    refused.callback(made.remove_left_empty)
    if request.cache_dir is not None:  # a read-only cache would fail every cell, one by one
        preflight.writable(request.cache_dir, "--cache-dir", made)
    if bundle is None:
        preflight.writable(request.out_dir, made=made)
        if scenario.device != "auto":
            preflight.check_room(request.out_dir, len(select(expand(resolved, scenario.device), request.only or {})))
        console.print(f"[bold]fusionbench[/]: probing the system and {len(names)} backend(s) ...")
    # A resumed run stays on the device it started on, whatever `auto` would pick today.
    if all_finished:
        assert bundle is not None
        probe = ProbeAnswer(device=bundle.device)  # nothing will run: no need to ask the machine
    else:
        probe = run_probe(bundle.device if bundle else scenario.device, names, with_system=bundle is None,
                          cache_dir=request.cache_dir)
    device = probe.device
    if not all_finished and device == "cuda" and not probe.cuda_available:
        # every cell would be skipped here and the bundle marked complete (exit 0), and a later
        # --resume on a GPU would find nothing left to run
        if bundle is not None:
            raise ConfigError(f"--resume {bundle.root}: the bundle was run on cuda and torch sees no CUDA device on "
                              "this machine; resume it on a machine with a GPU")
        raise ConfigError(f"device cuda: torch sees no CUDA device on this machine; run {request.scenario_path} on a "
                          "machine with a GPU, or here with --device cpu")
    cells = select(expand(resolved, device), request.only or {})
    if ray_executor is not None and not all_finished:
        ray_executor.join(device)
    # The backends that will run here (a resume's missing cells; none the probe found unavailable): a
    # preloaded parent imports what they name once for the run.
    running = sorted({c.config.backend for c in cells if (bundle is None or not bundle.finished(c.id))
                      and probe.available(c.config.backend)})
    executor = ray_executor if ray_executor is not None else _executor(request, device, probe, running, closing)
    if isinstance(executor, LocalPool) and executor.slots[0].cpus:  # the smallest slot (a hybrid CPU's differ)
        slots.check_thread_counts(min(len(slot.cpus) for slot in executor.slots), scenario.env, f"--jobs {request.jobs}")
    elif request.executor == "ray":  # a CPU cell's claimed cores, a GPU cell's one
        slots.check_thread_counts(_ray_cores(device, request), scenario.env,
                                  "--executor ray (a GPU cell claims one core)" if device == "cuda"
                                  else f"--cpus-per-cell {request.cpus_per_cell}")
    other_boot = ""
    if bundle is not None and not all_finished:
        timed = resume_refusals.measured(bundle)
        resume_refusals.another_share(bundle, timed, _shares_given(executor, request, device))
        if request.executor != "ray":  # the probe is the driver's, and the cells ran on the cluster's nodes
            resume_refusals.other_versions(bundle, timed, probe)
            other_boot = resume_refusals.another_boot(timed, boot_id())
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
                "scenario_file": str(request.scenario_path),
                "input_folder": input_folder,
                "inputs_sha256": inputs_sha256,
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
            },
        )
        closing.callback(bundle.close)
    else:
        planned = set(bundle.cell_ids)
        cells = [c for c in cells if c.id in planned]
        preflight.check_room(bundle.root, sum(1 for c in cells if not bundle.finished(c.id)), resuming=True)
        bundle.drop_manifest()
        bundle.update_header(resumed=[*bundle.header.get("resumed", []), utc_now()], state="running")
    refused.pop_all()  # the run is under way: what it made is its own now, kept however it ends
    todo = [c for c in cells if not bundle.finished(c.id)]
    console.print(Text(f"fusionbench: {len(cells)} cell(s) on {device}, {len(todo)} to run -> {visible(bundle.root)}"))
    noise_warning = lookup(bundle.header, "system", "machine_noise", "warning")
    if noise_warning and bundle.header.get("resumed"):  # measured once, at the first start: not this machine now
        noise_warning = f"when the run started ({bundle.header.get('created')}), {noise_warning}"
    if noise_warning:
        console.print(Text(f"fusionbench: warning: {noise_warning}", style="yellow"))
    if other_boot:
        console.print(Text(f"fusionbench: warning: {other_boot}", style="yellow"))
    try:
        deadline = time_budget.deadline_in(request.budget_s)
        bundle.update_header(executor=executor.record())
        env_names = allocator.environment(allocator.of(resolved)) + (resolved.get("env") or [])  # older bundles: none
        _sweep(todo, bundle, probe.backends, scenario.limits, env_names, input_folder, request.cache_dir, console, deadline,
               executor, keep_past_budget=request.past_budget == "skipped")
    except KeyboardInterrupt as stop:
        _close(bundle, "interrupted", console)
        console.print(Text(f"interrupted: finished cells are kept; complete with --resume {visible(bundle.root)}", style="yellow"))
        return interrupted_exit_code(stop)
    except ConfigError:  # refused once the bundle was made (an executor's late check): resumable, never `running`
        _close(bundle, "interrupted", console)
        raise
    missing = [cell for cell in bundle.cell_ids if not bundle.finished(cell)]
    _close(bundle, "interrupted" if missing else "complete", console)  # `--resume --only` may leave cells for later
    records = bundle.records()
    console.print(summary_table(records))
    ablation = fusion_summary(records, bundle.header.get("resumed"))
    if ablation is not None:
        console.print(ablation)
    console.print(Text(time_line(records)))
    if noise_warning:
        console.print(Text(f"warning: {noise_warning}", style="yellow"))
    warned = [r for r in records if r.warnings]
    if warned:
        console.print(Text(f"{len(warned)} cell(s) have warnings (noise, drift, LoadGen against device timing, a busy "
                           "machine): see report.md, section Warnings", style="yellow"))
    bad = [r for r in records if r.status in BAD]
    console.print(Text(f"bundle: {visible(bundle.root)} (report: {visible(bundle.root / REPORT_HTML)})"))
    if missing:
        causes = [c for c, applies in (("outside --only", bool(request.only)),
                                        ("the time budget was spent", request.budget_s and request.past_budget == "missing"))
                  if applies]
        why = ", or ".join(causes) or "outside --only"
        console.print(Text(f"{len(missing)} cell(s) of the bundle not run yet ({why}): "
                           f"complete them with --resume {visible(bundle.root)}", style="yellow"))
    for line in skipped_lines(records, SHOWN_REASONS):
        console.print(Text(line, style="dim"), soft_wrap=True)  # one line each, whole, to grep and to copy
    if bad:
        console.print(Text(f"{len(bad)} cell(s) failed or invalid:", style="red"))
        for record in bad[:SHOWN_REASONS]:  # each cell's first reason; its record has them all
            log = bundle.root / record.log if record.log else None  # a failure's traceback is there, not in the reason
            console.print(Text(f"  {visible(record.config.shown_label)}: {record.status}: "
                               f"{one_line(record.reasons[0]) if record.reasons else 'no reason recorded'}"
                               + (f" (its log: {visible(log)})" if record.status == "failed" and log and log.is_file()
                                  else "")),
                          soft_wrap=True)  # one line each, whole, to grep and to copy
        more = f"{len(bad) - SHOWN_REASONS} more, and " if len(bad) > SHOWN_REASONS else ""
        console.print(Text(f"  ({more}every reason in each cell's JSON and report.md)", style="red"))
    statuses = [r.status for r in records]
    if not bad and nothing_measured(statuses):
        console.print(Text(f"nothing measured: every cell run ({len(records)}) was skipped, each for its reason above",
                           style="red"))
    if not records:  # `--budget-s` spent before any cell had a result: not a pass either
        console.print(Text("nothing measured: no cell of the bundle has a result yet", style="red"))
        return EXIT_NOTHING_MEASURED
    return _exit_code(statuses)


def _exit_code(statuses: Sequence[str]) -> int:
    """A run's exit code by its cells' statuses (a run and a resume of its complete bundle alike): 1
    where one failed or is invalid, 4 where every one was skipped, else 0."""
    if any(status in BAD for status in statuses):
        return 1
    return EXIT_NOTHING_MEASURED if nothing_measured(statuses) else 0


def _ray_cores(device: str, request: RunRequest) -> int:
    """The cores a Ray task claims for a cell: `--cpus-per-cell`, one beside a GPU."""
    from harness.run.ray_executor import cell_needs

    return cell_needs(device, request.cpus_per_cell)[0]


def _shares_given(executor: Executor, request: RunRequest, device: str) -> set[str]:
    """The shares of the machine the cells of this start get, as a cell's record says one
    (`machine_share`): each `--jobs` slot's cores (equal in physical cores, not always in logical
    CPUs), Ray's claimed cores, or the whole machine."""
    if isinstance(executor, LocalPool):
        return {share(len(slot.cpus)) for slot in executor.slots}
    if request.executor == "ray":
        return {share(_ray_cores(device, request))}
    return {share(None)}


def _reach_ray(request: RunRequest, bundle: Bundle | None, device: str, all_finished: bool) -> RayExecutor | None:
    """With `--executor ray`, its executor, once the cluster has answered and could run the cells
    (when the device is known yet): checked before the machine is probed and before the bundle is
    made, so a cluster that cannot run them costs seconds and leaves nothing behind."""
    if request.executor != "ray":
        return None
    from harness.run.ray_executor import RayExecutor

    executor = RayExecutor(request.address, request.cpus_per_cell, request.ray_connect_timeout_s)
    if not all_finished:  # nothing to run: the cluster is not needed
        executor.reach(bundle.device if bundle is not None else device)
    return executor


def _executor(request: RunRequest, device: str, probe: ProbeAnswer, backends: list[str],
              closing: ExitStack) -> Executor:
    parents = None
    if not request.fresh_workers:
        parents = PreloadedParents(backends)
        closing.callback(parents.close)
    if request.jobs == 1:
        return Serial(parents)
    return LocalPool(slots.plan(request.jobs, device, slots.usable_cores(), slot_gpus(probe, device, os.environ),
                                quota=slots.cpu_quota(), gpu_order=slot_gpu_order(os.environ)), parents)


def slot_gpus(probe: ProbeAnswer, device: str, environ: Mapping[str, str]) -> list[str]:
    """The GPUs `--jobs` hands out, one to a slot, as CUDA_VISIBLE_DEVICES takes them: the ones this
    process was given where CUDA_VISIBLE_DEVICES restricts it (a slot's value replaces it), else
    those the system description lists, else as many as torch counted (a resume has no system
    description: it counted them as one)."""
    given = _given_gpus(environ)
    if given:
        return given
    gpus = probe.gpu_indices() or [str(index) for index in range(probe.cuda_devices)]
    if device == "cuda" and not gpus:
        return ["0"]  # nothing asked of the machine: a resume with nothing left to run
    return gpus


def slot_gpu_order(environ: Mapping[str, str]) -> str | None:
    """The CUDA_DEVICE_ORDER the indices of `slot_gpus` are in: PCI_BUS_ID where they are NVML's
    (the system description's, which NVML numbers by PCI address; CUDA numbers the fastest first by
    default, so on a machine of mixed GPUs a slot ran on another GPU than the one recorded), None
    where they are the ones this process was given (read in its own CUDA_DEVICE_ORDER)."""
    return None if _given_gpus(environ) else "PCI_BUS_ID"


def _given_gpus(environ: Mapping[str, str]) -> list[str]:
    return [part.strip() for part in environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if part.strip()]


def nodes(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Every machine the bundle's cells ran on, by hostname, with its CPU and GPUs as the cell saw them."""
    seen: dict[str, Any] = {}
    for record in records:
        node = record.get("node") or {}
        if node.get("hostname"):
            seen.setdefault(node["hostname"], {k: node[k] for k in ("cpu", "gpus") if k in node})
    return seen


def _close(bundle: Bundle, state: str, console: Console) -> None:
    """Record how the run ended, checksum the bundle, then add its report (and checksum again:
    the bundle is complete and valid even if rendering the report fails). A report of an earlier
    close goes first, and one cut short by Ctrl-C or SIGTERM is removed, so that the checksums
    cover every file either way; the run then says how to write it."""
    reports = [bundle.root / REPORT_MD, bundle.root / REPORT_HTML]
    for path in reports:
        path.unlink(missing_ok=True)
    bundle.update_header(state=state, nodes=nodes(bundle.cells()))
    bundle.write_manifest()
    try:
        render(load(bundle.root), bundle.root)
    except KeyboardInterrupt:
        for path in reports:
            path.unlink(missing_ok=True)
        console.print(Text(f"interrupted while writing the report: the bundle is {state} and valid without "
                           f"{REPORT_MD} and {REPORT_HTML}; write them with `fusionbench report "
                           f"{visible(bundle.root)}` (or `fusionbench run --resume {visible(bundle.root)}`)",
                           style="yellow"))
        raise
    bundle.write_manifest()


#: Failed or invalid cells whose first reason the run's last lines give.
SHOWN_REASONS = 10


def _left_complete(bundle: Bundle) -> bool:
    """A bundle whose run ended complete, its manifest and report written: a resume has nothing to
    add (it appended a resume date and wrote the manifest again)."""
    return (bundle.header.get("state") == "complete" and all(bundle.finished(cell_id) for cell_id in bundle.cell_ids)
            and all((bundle.root / name).is_file() for name in (REPORT_MD, REPORT_HTML, MANIFEST)))


def _all_finished(bundle: Bundle, resolved: dict[str, Any], request: RunRequest) -> bool:
    planned = set(bundle.cell_ids)
    cells = select(expand(resolved, bundle.device), request.only or {})
    return all(bundle.finished(c.id) for c in cells if c.id in planned)


def _open_or_plan(request: RunRequest, closing: ExitStack) -> tuple[Bundle | None, dict[str, Any], ScenarioFile]:
    """The bundle to resume (None for a new run), the resolved scenario as the bundle stores it,
    and the same scenario typed, which the run reads."""
    if request.resume is not None:
        bundle = Bundle.open(request.resume)
        closing.callback(bundle.close)
        scenario = resumable.check(bundle)
        if request.device not in (None, "auto", bundle.device):  # auto: the device it runs on, as a resume does
            raise ConfigError(f"--device {request.device}: {request.resume} was run on {bundle.device}")
        if request.rounds is not None and request.rounds != scenario.timing.rounds:
            raise ConfigError(
                f"--rounds {request.rounds}: {request.resume} was run with {scenario.timing.rounds} round(s)"
            )
        if bundle.header.get("artifact_cache") is None and request.cache_dir is not None:
            # its header says every cell was prepared cold; cells taken from a cache would be warm
            raise ConfigError(f"{request.resume} was run with --no-cache (every cell prepared cold); "
                              "resume it with --no-cache")
        if request.scenario_path is not None:
            _check_the_file_is_the_stored_one(request, bundle, scenario)
        return bundle, bundle.stored_scenario, scenario
    if request.scenario_path is None:
        raise ConfigError("run needs a scenario file (or --resume RUN_DIR)")
    scenario = with_overrides(scenario_file.load(request.scenario_path), request)
    named = scenario.model_copy(update={"name": scenario.name or request.scenario_path.stem})  # as resolved names it
    return None, scenario_file.resolved(scenario, request.scenario_path.stem), named


def _check_the_file_is_the_stored_one(request: RunRequest, bundle: Bundle, stored: ScenarioFile) -> None:
    """A scenario file given with --resume must be the one the bundle stores, with what the command
    line overrode then (the device was checked before this; a file whose only difference is the
    rounds `--rounds` set, or its name, is named so)."""
    path = request.scenario_path
    assert path is not None
    given = with_overrides(scenario_file.load(path), request).model_copy(update={"device": stored.device})

    def same(scenario: ScenarioFile) -> bool:
        return scenario_file.sha256(scenario_file.resolved(scenario, path.stem)) == bundle.scenario_sha256

    if same(given):
        return
    rounds = stored.timing.rounds
    if same(given.model_copy(update={"timing": given.timing.model_copy(update={"rounds": rounds})})):
        raise ConfigError(f"{path} differs from the scenario stored in {request.resume} only in its "
                          f"rounds: the run had {rounds}; resume with --rounds {rounds}, or without the file")
    if same(given.model_copy(update={"name": stored.name})):  # a file's name is its stem unless it names itself
        raise ConfigError(f"{path} differs from the scenario stored in {request.resume} only in its name "
                          f"({given.name or path.stem!r} against {stored.name!r}); resume without the file")
    apart = [setting or "(the whole file)"
             for setting, _, _ in differences(scenario_file.resolved(given, path.stem), bundle.stored_scenario)]
    shown = ", ".join(apart[:5]) + (f" and {len(apart) - 5} more" if len(apart) > 5 else "")
    raise ConfigError(f"{path} differs from the scenario stored in {request.resume}" + (f" in {shown}" if shown else "")
                      + "; resume without the file to finish the stored one")


def with_overrides(scenario: ScenarioFile, request: RunRequest) -> ScenarioFile:
    """The scenario with what the command line overrides (`--device`, `--rounds`): the bundle
    stores it so, and a resume runs it so."""
    if request.device:
        scenario = scenario.model_copy(update={"device": request.device})
    if request.rounds is not None:
        scenario = scenario.model_copy(update={"timing": scenario.timing.model_copy(update={"rounds": request.rounds})})
    return scenario


def _sweep(
    cells: list[Cell], bundle: Bundle, backends: Mapping[str, BackendReport], limits: Limits, env_names: list[str],
    input_folder: str | None, cache_dir: Path | None, console: Console, deadline: float | None = None,
    executor: Executor | None = None, keep_past_budget: bool = True,
) -> None:
    """Run `cells` on `executor` (one at a time here by default), writing each into the bundle as
    it finishes. Cells that need not run are written at once; those the time budget (`deadline`)
    leaves no time for are written skipped, or with `keep_past_budget` false left out of the bundle
    for --resume."""
    executor = executor or Serial()
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
        running[task.cell_id] = task.label if phase == "start" else f"{task.label} {phase}"
        shown = list(running.values())
        progress.update(bar, description=shown[0] if len(shown) == 1 else f"{len(shown)} cells running: {shown[-1]}")

    with progress:
        bar = progress.add_task("cells", total=len(cells))
        tasks: list[CellTask] = []
        bases: dict[str, dict[str, Any]] = {}
        for cell in cells:
            base = {"id": cell.id, "label": cell.label, "config": cell.config.recorded(), "started": utc_now()}
            skip = skips.skip_reason(cell, backends, skips.gpu_capabilities(bundle.header.get("system")))
            if skip is not None:
                skipped = {**base, "status": "skipped", "reasons": [skip], "metrics": {}, "wall_s": 0.0, "finished": utc_now()}
                _write(bundle, cell.config.shown_label, skipped, progress, bar)
                continue
            tasks.append(_task(cell, bundle, input_folder, cache_dir, limits.cell_timeout_s, limits.memory_limit_mib,
                               env_names, deadline))
            bases[cell.id] = base
        by_id = {cell.id: cell for cell in cells}
        pace = cell_line.Pace(len(tasks))  # read by show() once the executor starts cells
        state = rounds.Rounds({t.cell_id: by_id[t.cell_id].config.timing.rounds for t in tasks}, bundle.root)
        folders = {task.cell_id: task.artifacts for task in tasks}
        by_budget: set[str] = set()  # cells whose round 1 the budget kept from a result
        rounds_cut: set[str] = set()  # cells a further round of which it kept: they keep the rounds that finished
        ran_s: dict[str, float] = {}  # how long each cell's rounds ran: lost where the budget ends its round 1
        try:
            for done in executor.run(rounds.order(tasks, by_id, state), show):
                cell_id = done.task.cell_id
                running.pop(cell_id, None)
                if done.outcome is not None:
                    ran_s[cell_id] = ran_s.get(cell_id, 0.0) + done.outcome.wall_s
                if done.skipped:
                    (by_budget if done.task.request.timing_round == 1 else rounds_cut).add(cell_id)
                first = _record(bases[cell_id], done) if done.task.request.timing_round == 1 else None
                complete = state.finished(done, first)
                if complete is None:
                    continue
                if cell_id not in by_budget:
                    pace.finished()
                elif not keep_past_budget:  # left out of the bundle, with whatever it wrote: --resume runs it
                    shutil.rmtree(folders[cell_id], ignore_errors=True)
                    progress.advance(bar)
                    if ran_s.get(cell_id):  # it ran, and that time is lost: said, not left to the end's count
                        progress.console.print(cell_line.ended_by_budget(by_id[cell_id].config.shown_label, ran_s[cell_id],
                                                                         *_counted(progress, bar)))
                    continue
                if cell_id in by_budget and ran_s.get(cell_id):  # recorded skipped, but it ran: the time it took
                    complete = {**complete, "wall_s": ran_s[cell_id]}
                _write(bundle, by_id[cell_id].config.shown_label, complete, progress, bar,
                       pace.left_s() if cell_id not in by_budget else None)
                if cell_id in rounds_cut:
                    progress.console.print(cell_line.rounds_cut(by_id[cell_id].config.shown_label, complete))
        except KeyboardInterrupt as exc:
            running.update({cell_id: "" for cell_id in state.waiting()})  # round 1 done, rounds to come
            why = stopped_by(exc)
            for cell_id in list(running):  # the cells Ctrl-C or SIGTERM stopped: --resume runs them again
                ran = time.monotonic() - began[cell_id] if cell_id in began else 0.0
                bundle.write_cell(cell_id, {**bases[cell_id], "status": "interrupted", "reasons": [why],
                                            "metrics": {}, "wall_s": round(ran, 3), "finished": utc_now()})
            raise
        finally:
            state.close()
        progress.update(bar, description="cells done")


def _write(bundle: Bundle, label: str, record: dict[str, Any], progress: Progress, bar: Any,
           left_s: float | None = None) -> None:
    try:
        bundle.write_cell(record["id"], record)
    except OSError as exc:  # disk full, quota, permissions: what is written stays intact
        raise OutputError(
            f"could not write cell {label} into {bundle.root}: {exc.strerror or exc}; the cells "
            f"finished before it are intact: make room, then run --resume {bundle.root}"
        ) from None
    progress.advance(bar)
    progress.console.print(cell_line.line(str(record["status"]), label, record["wall_s"], *_counted(progress, bar),
                                          record["reasons"], left_s))


def _counted(progress: Progress, bar: Any) -> tuple[int, int]:
    """How many cells of the bar are done, and of how many."""
    task = next(task for task in progress.tasks if task.id == bar)
    return int(task.completed), int(task.total or 0)


def _task(cell: Cell, bundle: Bundle, input_folder: str | None, cache_dir: Path | None, timeout_s: float,
          memory_mib: int | None, env_names: list[str], deadline: float | None) -> CellTask:
    """The cell's task; `deadline` is the end of the run's budget, which the executor applies as the
    cell starts (it is not started after it, and runs at most until it)."""
    artifacts = bundle.fresh_artifact_dir(cell.id)
    request = WorkerRequest(
        cell=cell.config, artifact_dir=str(artifacts), input_folder=input_folder,
        cache_dir=str(cache_dir) if cache_dir else None, peaks=lookup(bundle.header, "system", "peaks"),
    )
    return CellTask(cell_id=cell.id, label=cell.config.shown_label, request=request, artifacts=artifacts,
                    timeout_s=timeout_s, memory_limit_bytes=memory_mib * MIB if memory_mib else None,
                    env_names=list(env_names), scratch_env=dict(registry.load(cell.config.backend).scratch_env),
                    device=cell.config.device, deadline=deadline)


def _record(base: dict[str, Any], done: Finished) -> dict[str, Any]:
    """The cell's record from what its worker (or the executor) said, and where it ran."""
    task, outcome = done.task, done.outcome
    log_path = task.artifacts / "worker.log"
    record = {**base, "finished": utc_now(), "log": f"cells/{task.cell_id}/worker.log", "node": done.node}
    if done.skipped:  # the budget: not started, or stopped; nothing of it is a result, so no log and no folder
        shutil.rmtree(task.artifacts, ignore_errors=True)
        return {**base, "finished": utc_now(), "node": done.node, "status": "skipped", "reasons": [done.failure or ""],
                "metrics": {}, "wall_s": 0.0}
    if outcome is None:
        record.update(status="failed", reasons=[done.failure or "the executor lost the cell"], metrics={}, wall_s=0.0,
                      log_tail=log_tail(log_path))
        return record
    record["wall_s"] = outcome.wall_s
    if outcome.answer is None:  # killed: what it measured in the phases that ended stays
        record.update(status="failed", reasons=[outcome.failure_reason(task.timeout_s)], warnings=[])
        record.update({**kept_answer.kept(outcome.partial, record, log_path), "log_tail": log_tail(log_path)})
    else:
        record.update(kept_answer.answered(outcome.answer, record, log_path))
        if record["status"] == "failed":
            record["log_tail"] = log_tail(log_path)
    return record
