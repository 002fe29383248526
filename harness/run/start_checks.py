"""A run's start, opened and refused in one order, for the run (harness/run/runner.py) and its dry
run (harness/run/plan.py) alike: a new run's scenario file, a rerun's bundle, or the bundle a
`--resume` opens (harness/run/opening.py, `open_start`), then every refusal a run meets before its
cells run, in the order the run meets them (`refuse`).

The run and its dry run differ only in what they do between the refusals (`Between`): the run
reaches Ray, makes its folders, probes the whole system and starts its executor; the dry run
checks the folders without making them, asks the backends alone and cuts the `--jobs` slots. A
refusal added to `refuse` is met by both, at the same place; one added to either caller alone
would let the dry run list cells the run refuses to run, or the other way round."""

from __future__ import annotations

import os
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from rich.console import Console

from harness.bundle.cell_record import CellRecord
from harness.bundle.writer import Bundle
from harness.errors import ConfigError
from harness.models.catalog import clash
from harness.run import executor_choice, opening, preflight, rerun, resumable, resume_refusals, skips, slots, worker_path
from harness.run.executors import Executor, LocalPool
from harness.run.probe_answer import ProbeAnswer
from harness.run.run_request import RunRequest
from harness.scenario.cells import Cell, expand, select
from harness.scenario.schema import ScenarioFile


@dataclass(frozen=True)
class Start:
    """What a run starts from: the request as its run's (`opening.as_its_run`), the bundle to resume
    (None for a new run, a rerun's among them), its scenario as the bundle stores it (`resolved`)
    and typed, whether the bundle has no cell left to run (`all_finished`) and whether its run ended
    complete as well (`complete`: a resume has nothing to add)."""

    request: RunRequest
    bundle: Bundle | None
    resolved: dict[str, Any]
    scenario: ScenarioFile
    all_finished: bool = False
    complete: bool = False

    @property
    def resuming(self) -> bool:
        """A resume with cells to run: the one the resume's own refusals are for."""
        return self.bundle is not None and not self.all_finished

    @property
    def device(self) -> str:
        """The device the run is on before the probe: a resume's, the one it started on."""
        return self.bundle.device if self.bundle is not None else self.scenario.device

    def left(self) -> list[Cell]:
        """A resume's cells to run: its plan's unfinished ones, `--only` applied, on its device."""
        assert self.bundle is not None
        return [c for c in resumable.planned_cells(self.bundle, self.resolved, self.request.only)
                if resumable.to_run(self.bundle, c.id)]


@dataclass(frozen=True)
class Checked:
    """What the refusals leave: the probe's answer (a plugin the bundle recorded and this machine
    lacks named with its package), the executor (None in a dry run, or one cell at a time there),
    the input folder the cells read and its digest (a new run's), and a local resume's timed cells,
    read for its refusals (None otherwise)."""

    probe: ProbeAnswer
    executor: Executor | None
    input_folder: str | None
    inputs_sha256: str | None
    timed: list[CellRecord] | None


class Between(Protocol):
    """What the run, or its dry run, does between the refusals of `refuse`."""

    def reach(self, start: Start) -> None:
        """Before the folders are checked: the run reaches Ray (`executor_choice.reach_ray`)."""
        ...

    def writable(self, folder: Path, option: str, way_out: str) -> None:
        """Refuse `folder` (named `option`) where a run could not write in it: the run makes it, its
        dry run leaves nothing made."""
        ...

    def probe(self, start: Start) -> ProbeAnswer:
        """The machine's answer: the probe, or what a bundle with nothing left to run says."""
        ...

    def executor(self, start: Start, probe: ProbeAnswer) -> Executor | None:
        """Once the GPU is seen: the executor (the run's), or the `--jobs` slots cut (its dry run's)."""
        ...


def open_start(request: RunRequest, closing: ExitStack, console: Console) -> Start:
    """The run's start (`opening.open_or_plan`; the bundle locked until `closing` closes), with an
    `--only` that matches nothing in a complete bundle refused, as on any resume; a resume of a
    rerun's bundle with cells to run sets the values of `env:`'s variables its rerun set, until
    `closing` closes (`rerun.variables_resumed`), before its refusals read this shell's."""
    bundle, resolved, scenario = opening.open_or_plan(request, closing)
    request = opening.as_its_run(request, bundle)
    if bundle is None:
        return Start(request, None, resolved, scenario)
    all_finished = opening.all_finished(bundle, resolved, request)
    complete = all_finished and opening.left_complete(bundle)
    if complete and request.only:  # a typo in --only is refused here too, as on any resume
        opening.refuse_an_empty_selection(resolved, bundle.device, request.only, bundle)
    if not all_finished:
        closing.enter_context(rerun.variables_resumed(bundle.header, console))
    return Start(request, bundle, resolved, scenario, all_finished, complete)


def refuse_a_clash(resolved: dict[str, Any]) -> None:
    """ConfigError where a new run's file names a built-in model that an installed plugin registers
    too: the file might mean either. A file's reading, and a bundle's, take the built-in (the zoo
    builds it), so that the bundles that ran it stay readable; a resume or a rerun runs what its
    bundle records it ran (a plugin's model is in bundle.json `model_plugins`)."""
    for name in dict.fromkeys(str(model["name"]) for model in resolved["models"]):
        clashed = clash(name)
        if clashed:
            raise ConfigError(clashed)


def refuse(start: Start, between: Between) -> Checked:
    """Every refusal a run of `start` meets before its cells run, in order (ConfigError at the first),
    with what `between` does between them: what the run refuses, its dry run refuses, alike."""
    request, bundle, scenario, resolved = start.request, start.bundle, start.scenario, start.resolved
    # The inputs first: a refusal then leaves nothing behind (no cache folder, no Ray, no probe).
    if request.rerun is not None:  # the folder the original's cells read, holding what they read
        input_folder, inputs_sha256 = rerun.checked_inputs(request.rerun)
    elif bundle is None:
        assert request.scenario_path is not None  # open_or_plan refused a new run without one
        refuse_a_clash(resolved)
        input_folder, inputs_sha256 = preflight.checked_inputs(scenario, request.scenario_path)
    else:
        input_folder, inputs_sha256 = bundle.header.get("input_folder"), None
        if start.resuming:
            resume_refusals.before_the_probe(bundle, scenario)
    slots.check_jobs(request.jobs, scenario.env, start.device)
    left_out = worker_path.plugins_left_out(scenario.env, [str(m["name"]) for m in resolved["models"]],
                                            [b.name for b in scenario.backends], os.environ)
    if left_out:  # the parent would plan cells whose workers cannot find their model or backend
        raise ConfigError(left_out)
    if request.executor == "local":
        slots.check_jobs_fit_here(request.jobs)
    if request.only:  # a filter no cell matches on any device this run could pick: refused before the probe
        opening.refuse_an_empty_selection(resolved, start.device, request.only, bundle)
    if request.rerun is not None:  # a plugin the original ran, not installed here: its package named
        rerun.plugin_gone(request.rerun, select(expand(resolved, scenario.device, request.rerun.header.get("model_plugins")),
                                                request.only or {}))
    if start.resuming:
        assert bundle is not None
        # Its cells are its plan's unfinished ones, on the device it started on: a disk too full for
        # them refuses the resume before the probe and Ray, as a new run's --out is refused.
        left = start.left()
        preflight.check_room(bundle.root, len(left), resuming=True)
        resume_refusals.backends_gone(bundle, left)  # a plugin the run had, not installed here
        # A Ray cell's share is --cpus-per-cell's and a CPU cell's here its slot's or this process's
        # cores, known now: a resume on another is refused before the cluster is asked, a local
        # instance started and the machine probed (seconds each).
        resume_refusals.share_before_the_probe(bundle, request)
    between.reach(start)
    # Where the cache and the bundle go: a refusal costs no probe (seconds) and leaves no bundle.
    if request.cache_dir is not None:  # a read-only cache would fail every cell, one by one
        between.writable(request.cache_dir, *preflight.cache_option(request.cache_chosen))
    if request.executor == "local":  # a noexec TMPDIR or cache would fail them too (Ray's are the nodes')
        preflight.build_folders(sorted({b.name for b in scenario.backends}), request.cache_dir)
    if bundle is None:
        between.writable(request.out_dir, "--out", preflight.OWN_FOLDER)
    probe = between.probe(start)
    recorded = bundle.header if bundle is not None else request.rerun.header if request.rerun is not None else None
    if recorded is not None:  # a plugin its run (or the original) had and this machine lacks: the package recorded
        probe = probe.model_copy(update={"backends": skips.with_plugins_to_install(probe.backends, recorded)})
    if not start.all_finished:
        preflight.check_a_gpu_is_seen(probe.device, probe.cuda_available, request.scenario_path,
                                      bundle.root if bundle else None, request.rerun.root if request.rerun else None)
    executor = between.executor(start, probe)
    executor_choice.check_thread_counts(request, probe.device, scenario.env,
                                        executor.slots if isinstance(executor, LocalPool) else [])
    timed = None
    if start.resuming and request.executor != "ray":  # the probe is the driver's, and the cells ran on the nodes
        assert bundle is not None
        timed = resume_refusals.once_probed(bundle, request, executor, probe, scenario.env, os.environ)
    return Checked(probe, executor, input_folder, inputs_sha256, timed)
