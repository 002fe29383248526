"""The sweep's progress bar: what it says of the cells running as they start and end."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from harness.run.executors import CellTask, Finished
from harness.run.isolation import WorkerOutcome
from harness.scenario.cells import expand
from harness.scenario.schema import ScenarioFile


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

    from harness.bundle.header_record import BackendReport
    from harness.bundle.writer import Bundle
    from harness.run import sweep
    from harness.scenario.settings import Limits

    said: list[str] = []
    update = Progress.update

    def noted(self: Progress, task: Any, **fields: Any) -> None:
        if "description" in fields:
            said.append(fields["description"])
        update(self, task, **fields)

    monkeypatch.setattr(Progress, "update", noted)
    data = {"models": [{"name": "resnet18", "input_size": 32}], "backends": ["null"],
            "scenarios": ["SingleStream", "Offline"], "batch_sizes": {"cpu": [1]}}
    resolved = ScenarioFile.model_validate(data).model_dump(mode="json")
    resolved["name"] = "t"
    cells = expand(resolved, "cpu")
    bundle = Bundle.create(tmp_path, "run", {"cells": [{"id": c.id, "label": c.label} for c in cells]})
    backends = {"null": BackendReport(available=True)}
    sweep.sweep(cells, bundle, backends, Limits(), [], None, None, Console(file=io.StringIO()), executor=_TwoAtOnce())
    labels = [cell.config.shown_label for cell in cells]
    assert said[:3] == [labels[0], f"2 cells running: {labels[1]}", labels[1]], said
