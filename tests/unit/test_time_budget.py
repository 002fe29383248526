"""A run's time budget (`gpu-check --budget-s`): asked as each cell starts, not when the run plans
them. A cell that would start after the budget is skipped, saying so; one that starts before it
runs at most until its end."""

from __future__ import annotations

import io
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from harness.measure.protocol import WorkerRequest
from harness.run import executors
from harness.run.executors import BUDGET_SPENT, CellTask, Finished
from harness.run.isolation import WorkerOutcome
from harness.run.runner import RunRequest, run
from harness.run.slots import Slot
from harness.scenario.cells import expand
from harness.scenario.schema import ScenarioFile

REPO = Path(__file__).resolve().parents[2]


def _tasks(root: Path, deadline: float) -> list[CellTask]:
    data = {"models": [{"name": "resnet18", "input_size": 32}], "backends": ["null"],
            "scenarios": ["SingleStream", "Offline", "Server"], "batch_sizes": {"cpu": [1]}}
    resolved = ScenarioFile.model_validate(data).model_dump(mode="json")
    resolved["name"] = "t"
    tasks = []
    for cell in expand(resolved, "cpu"):
        folder = root / cell.id
        folder.mkdir()
        tasks.append(CellTask(cell_id=cell.id, label=cell.label, request=WorkerRequest(cell=cell.config, artifact_dir=str(folder)),
                              artifacts=folder, timeout_s=300, memory_limit_bytes=None, env_names=[], scratch_env={},
                              device="cpu", deadline=deadline))
    return tasks


class SlowCells:
    """run_here that takes `seconds` a cell and notes the time limit each was given."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.limits: dict[str, float] = {}
        self.lock = threading.Lock()

    def __call__(self, task: CellTask, slot: Any, on_phase: Any, stop: Any = None, parents: Any = None) -> WorkerOutcome:
        with self.lock:
            self.limits[task.cell_id] = task.timeout_s
        time.sleep(self.seconds)
        return WorkerOutcome(answer=None, returncode=0, timed_out=False, last_phase="done", wall_s=self.seconds)


def test_serial_skips_the_cells_that_would_start_after_the_budget_and_cuts_the_running_ones_limit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    slow = SlowCells(0.5)
    monkeypatch.setattr(executors, "run_here", slow)
    tasks = _tasks(tmp_path, deadline=time.monotonic() + 0.3)  # the first cell outlasts the budget
    done = list(executors.Serial().run(tasks, lambda task, phase: None))
    assert list(slow.limits) == [tasks[0].cell_id], "a cell started after the budget was spent"
    assert 0 < slow.limits[tasks[0].cell_id] <= 0.3, "the running cell was given more than the budget left"
    assert [d.skipped for d in done] == [False, True, True]
    assert all(d.failure == BUDGET_SPENT and d.outcome is None for d in done[1:])


def test_two_jobs_start_what_fits_and_skip_the_rest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    slow = SlowCells(0.6)
    monkeypatch.setattr(executors, "run_here", slow)
    tasks = _tasks(tmp_path, deadline=time.monotonic() + 0.3)
    pool = executors.LocalPool([Slot(index=0, cpus=[0]), Slot(index=1, cpus=[1])])
    done = {d.task.cell_id: d for d in pool.run(tasks, lambda task, phase: None)}
    assert set(slow.limits) == {tasks[0].cell_id, tasks[1].cell_id}, "both slots start a cell within the budget"
    assert all(0 < limit <= 0.3 for limit in slow.limits.values())
    assert done[tasks[2].cell_id].skipped and done[tasks[2].cell_id].failure == BUDGET_SPENT


def test_without_a_budget_the_cells_keep_their_own_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    slow = SlowCells(0.0)
    monkeypatch.setattr(executors, "run_here", slow)
    tasks = [CellTask(**{**t.__dict__, "deadline": None}) for t in _tasks(tmp_path, deadline=0.0)]
    done = list(executors.Serial().run(tasks, lambda task, phase: None))
    assert not any(d.skipped for d in done) and set(slow.limits.values()) == {300}
    assert all(d.task is t for d, t in zip(done, tasks, strict=True))


def test_a_run_whose_budget_ends_mid_sweep_records_the_rest_skipped_with_the_reason_and_no_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    slow = SlowCells(1.0)

    def one_cell(task: CellTask, *args: Any, **kwargs: Any) -> WorkerOutcome:
        slow(task, None, None)
        return WorkerOutcome(answer=None, returncode=-9, timed_out=True, last_phase="loadgen", wall_s=task.timeout_s)

    monkeypatch.setattr(executors, "run_here", one_cell)
    scenario = tmp_path / "null.yaml"
    scenario.write_text("models: [resnet18]\nbackends: [null]\nscenarios: [SingleStream, Offline, Server]\n")
    code = run(RunRequest(scenario_path=scenario, device="cpu", out_dir=tmp_path / "out", budget_s=0.5),
               Console(file=io.StringIO()))
    assert code == 1  # the first cell ran out of time: failed
    bundle = next((tmp_path / "out").iterdir())
    records = {p.stem: json.loads(p.read_text()) for p in (bundle / "cells").glob("*.json")}
    header = json.loads((bundle / "bundle.json").read_text())
    order = [c["id"] for c in header["cells"]]
    statuses = [records[cell]["status"] for cell in order]
    assert statuses == ["failed", "skipped", "skipped"]
    assert slow.limits[order[0]] <= 0.5 and "time limit" in records[order[0]]["reasons"][0]
    assert all(records[cell]["reasons"] == [BUDGET_SPENT] for cell in order[1:])
    assert not any((bundle / "cells" / cell).exists() for cell in order[1:]), "a cell that never started left a folder"


def test_a_skipped_finish_is_never_mistaken_for_a_lost_cell(tmp_path: Path) -> None:
    from harness.run.runner import _record

    task = _tasks(tmp_path, deadline=0.0)[0]
    record = _record({"id": task.cell_id}, Finished(task, None, {"hostname": "h"}, failure=BUDGET_SPENT, skipped=True))
    assert record["status"] == "skipped" and record["reasons"] == [BUDGET_SPENT] and "log" not in record
    lost = _record({"id": task.cell_id}, Finished(task, None, {"hostname": "h"}, failure="the Ray worker died twice"))
    assert lost["status"] == "failed"


def test_run_budget_leaves_the_cells_past_it_for_resume_and_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    slow = SlowCells(1.0)
    monkeypatch.setattr(executors, "run_here", slow)
    scenario = tmp_path / "null.yaml"
    scenario.write_text("models: [resnet18]\nbackends: [null]\nscenarios: [SingleStream, Offline, Server]\n")
    shown = io.StringIO()
    run(RunRequest(scenario_path=scenario, device="cpu", out_dir=tmp_path / "out", budget_s=0.5, past_budget="missing"),
        Console(file=shown, width=300))
    bundle = next((tmp_path / "out").iterdir())
    header = json.loads((bundle / "bundle.json").read_text())
    written = sorted(p.stem for p in (bundle / "cells").glob("*.json"))
    assert written == [header["cells"][0]["id"]], "a cell past the budget was recorded instead of left for --resume"
    assert header["state"] == "interrupted"
    assert "2 cell(s) of the bundle not run yet (the time budget was spent): complete them with --resume" in shown.getvalue()


@pytest.mark.parametrize("value", ["0", "-5", "nan", "inf", "700000"])
def test_a_budget_that_is_not_a_positive_number_of_seconds_is_refused(value: str, tmp_path: Path) -> None:
    from harness.cli.main import main

    assert main(["run", str(REPO / "scenarios" / "smoke.yaml"), "--budget-s", value, "--out", str(tmp_path)]) == 2
    assert not any(tmp_path.iterdir())


def test_ray_refuses_a_budget_it_could_not_keep(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from harness.cli.main import main

    assert main(["run", str(REPO / "scenarios" / "smoke.yaml"), "--executor", "ray", "--budget-s", "60", "--out", str(tmp_path)]) == 2
    assert "--budget-s is for --executor local" in capsys.readouterr().err
