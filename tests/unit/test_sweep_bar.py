"""The sweep: what its progress bar says of the cells running as they start and end, and what a
stop leaves of the cells it kept from starting."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from harness.bundle.header_record import BackendReport
from harness.bundle.writer import Bundle
from harness.run import sweep
from harness.run.executors import CellTask, Finished
from harness.run.isolation import WorkerOutcome
from harness.scenario.cells import Cell, expand
from harness.scenario.schema import ScenarioFile
from harness.scenario.settings import Limits


def _planned(tmp_path: Path, scenarios: list[str]) -> tuple[list[Cell], Bundle]:
    """The null backend's cells of `scenarios` (resnet18 at 32, batch 1), and a new bundle for them."""
    data = {"models": [{"name": "resnet18", "input_size": 32}], "backends": ["null"], "scenarios": scenarios,
            "batch_sizes": {"cpu": [1]}}
    resolved = ScenarioFile.model_validate(data).model_dump(mode="json")
    resolved["name"] = "t"
    cells = expand(resolved, "cpu")
    return cells, Bundle.create(tmp_path, "run", {"cells": [{"id": c.id, "label": c.label} for c in cells]})


def _sweep(cells: list[Cell], bundle: Bundle, executor: Any) -> None:
    sweep.sweep(cells, bundle, {"null": BackendReport(available=True)}, Limits(), [], None, None,
                Console(file=io.StringIO()), executor=executor)


class _TwoAtOnce:
    """An executor that starts both cells, then ends them one by one."""

    slots: list[Any] = []

    def run(self, tasks: list[CellTask], on_phase: Any) -> Any:
        for task in tasks:
            on_phase(task, "start")
        for task in tasks:
            outcome = WorkerOutcome(answer=None, returncode=1, timed_out=False, last_phase="prepare", wall_s=0.1)
            yield Finished(task, outcome, {"hostname": "h"})


def test_the_bar_says_how_many_cells_run_once_one_has_ended(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """"2 cells running" stayed on the bar when one of the two had ended."""
    from rich.progress import Progress

    said: list[str] = []
    update = Progress.update

    def noted(self: Progress, task: Any, **fields: Any) -> None:
        if "description" in fields:
            said.append(fields["description"])
        update(self, task, **fields)

    monkeypatch.setattr(Progress, "update", noted)
    cells, bundle = _planned(tmp_path, ["SingleStream", "Offline"])
    _sweep(cells, bundle, _TwoAtOnce())
    labels = [cell.config.shown_label for cell in cells]
    assert said[:3] == [labels[0], f"2 cells running: {labels[1]}", labels[1]], said


class _OneAtATime:
    """An executor that runs each cell through its phases, one after the other, noting the bar's text
    as each is about to start."""

    slots: list[Any] = []

    def __init__(self, bars: list[Any]) -> None:
        self.bars = bars  # the sweep's progress bar, once made
        self.read: list[str] = []

    def run(self, tasks: list[CellTask], on_phase: Any) -> Any:
        for task in tasks:
            self.read.append(self.bars[0].tasks[0].description)
            for phase in ("start", "prepare", "loadgen"):
                on_phase(task, phase)
            outcome = WorkerOutcome(answer=None, returncode=1, timed_out=False, last_phase="loadgen", wall_s=0.1)
            yield Finished(task, outcome, {"hostname": "h"})
        self.read.append(self.bars[0].tasks[0].description)


def test_the_bar_says_no_cell_runs_between_one_cells_end_and_the_next_ones_start(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An ended cell's label and last phase stayed on the bar (`... Offline cpu fp32 b1 input 32 loadgen`)
    until the next cell started: while its record was written, a Ray node was awaited, or the run ended."""
    from rich.progress import Progress

    bars: list[Progress] = []
    made = Progress.__init__

    def kept(self: Progress, *args: Any, **kwargs: Any) -> None:
        made(self, *args, **kwargs)
        bars.append(self)

    monkeypatch.setattr(Progress, "__init__", kept)
    cells, bundle = _planned(tmp_path, ["SingleStream", "Offline"])
    executor = _OneAtATime(bars)
    _sweep(cells, bundle, executor)
    assert executor.read[1:] == ["no cell running", "no cell running"], executor.read
    assert bars[0].tasks[0].description == "cells done"


class _StoppedAfterOne:
    """An executor stopped (Ctrl-C) once its first cell has started."""

    slots: list[Any] = []

    def run(self, tasks: list[CellTask], on_phase: Any) -> Any:
        on_phase(tasks[0], "start")
        (tasks[0].artifacts / "worker.log").write_text("started\n")
        raise KeyboardInterrupt
        yield  # a generator, as executors are


def test_a_stop_leaves_no_empty_folder_for_the_cells_it_kept_from_starting(tmp_path: Path) -> None:
    """An interrupted bundle held an empty cells/<id>/ beside no record for every cell not yet started."""
    cells, bundle = _planned(tmp_path, ["SingleStream", "Offline", "Server"])
    with pytest.raises(KeyboardInterrupt):
        _sweep(cells, bundle, _StoppedAfterOne())
    folders = sorted(p.name for p in (bundle.root / "cells").iterdir() if p.is_dir())
    stopped = [cell.id for cell in cells if (bundle.read_cell(cell.id) or {}).get("status") == "interrupted"]
    assert len(stopped) == 1 and folders == stopped, folders  # the started cell's, with its log and its record
