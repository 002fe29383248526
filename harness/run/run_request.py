"""What one `fusionbench run` asks for (`RunRequest`): the scenario file, the bundle to resume or the
bundle to run again (`fusionbench rerun`),
what the command line overrides and where and how the cells run. The command line
(harness/cli/main.py: `run`, `run --dry-run`, and `container`, which checks a run's options before
an image is built) and `gpu-check` make one; harness/run/runner.py runs it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from harness.run.rerun_original import Original


@dataclass(frozen=True)
class RunRequest:
    """One run's options, checked against each other; what needs the scenario file or the machine
    is checked when the run starts."""

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
    #: Whether the command line chose `cache_dir` (`--cache-dir`, `--no-cache`); where it did not, a
    #: resume of a run made with `--no-cache` runs without the cache, as its run did.
    cache_chosen: bool = True
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
    #: `fusionbench rerun BUNDLE`: the bundle whose stored scenario this run runs in place of a
    #: file's (harness/run/rerun_original.py); its `only` is the request's, its device the request's device.
    rerun: Original | None = None
