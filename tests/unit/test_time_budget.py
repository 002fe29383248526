"""A run's time budget (`gpu-check --budget-s`, `run --budget-s`): asked as each cell starts, not
when the run plans them. A cell that would start after the budget is not started; one that starts
before it runs at most until its end. gpu-check records both as skipped, saying why; `run` leaves
them out of the bundle for --resume. The clock is a fake one that moves as the fake cells run."""

from __future__ import annotations

import io
import json
import re
import threading
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from harness.bundle.validate import validate
from harness.measure.protocol import WorkerRequest
from harness.run import executors, rounds, runner, time_budget
from harness.run.executors import CellTask, Finished
from harness.run.isolation import WorkerOutcome
from harness.run.run_request import RunRequest
from harness.run.runner import run
from harness.run.slots import Slot
from harness.scenario.cells import Cell, expand, twin_id
from harness.scenario.schema import ScenarioFile
from tests.shared_probe import SharedProbe

REPO = Path(__file__).resolve().parents[2]


def _cells(count: int = 1) -> list[Cell]:
    """Three cells of the null backend, of `count` rounds each."""
    data = {"models": [{"name": "resnet18", "input_size": 32}], "backends": ["null"],
            "scenarios": ["SingleStream", "Offline", "Server"], "batch_sizes": {"cpu": [1]}, "timing": {"rounds": count}}
    resolved = ScenarioFile.model_validate(data).model_dump(mode="json")
    resolved["name"] = "t"
    return expand(resolved, "cpu")


def _tasks(root: Path, deadline: float, count: int = 1) -> list[CellTask]:
    tasks = []
    for cell in _cells(count):
        folder = root / cell.id
        folder.mkdir()
        tasks.append(CellTask(cell_id=cell.id, label=cell.label, request=WorkerRequest(cell=cell.config, artifact_dir=str(folder)),
                              artifacts=folder, timeout_s=300, memory_limit_bytes=None, env_names=[], scratch_env={},
                              device="cpu", deadline=deadline))
    return tasks


class FakeClock:
    """time_budget's clock: it moves only when a fake cell runs."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class SlowCells:
    """run_here that takes `seconds` of the fake clock a cell (timing out where its limit is
    shorter) and notes the limit each was given; with `together`, that many cells must be running
    at once before any of them ends."""

    def __init__(self, clock: FakeClock, seconds: float, together: int = 1) -> None:
        self.clock = clock
        self.seconds = seconds
        self.limits: dict[str, float] = {}
        self.lock = threading.Lock()
        self.barrier = threading.Barrier(together, timeout=10)

    def __call__(self, task: CellTask, slot: Any, on_phase: Any, stop: Any = None, parents: Any = None) -> WorkerOutcome:
        with self.lock:
            self.limits[task.label] = task.timeout_s
        (task.artifacts / "worker.log").write_text("a fake cell\n")  # as a worker writes its log
        self.barrier.wait()
        with self.lock:
            self.clock.now += self.seconds / self.barrier.parties
        timed_out = self.seconds > task.timeout_s
        return WorkerOutcome(answer=None, returncode=-9 if timed_out else 0, timed_out=timed_out, last_phase="loadgen",
                             wall_s=min(self.seconds, task.timeout_s))


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    fake = FakeClock()
    monkeypatch.setattr(time_budget, "clock", fake)
    return fake


@pytest.fixture(scope="module")
def shared_probe() -> SharedProbe:
    return SharedProbe()


@pytest.fixture
def one_probe(shared_probe: SharedProbe, monkeypatch: pytest.MonkeyPatch) -> None:
    """The module's runs of the null backend ask the probe the same: it probes once for them all
    (tests/shared_probe.py); what they check is the budget, which the probe's answer has no part in."""
    monkeypatch.setattr(runner, "run_probe", shared_probe)


def test_serial_starts_no_cell_past_the_budget_and_the_running_one_ends_with_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clock: FakeClock) -> None:
    slow = SlowCells(clock, 50.0)
    monkeypatch.setattr(executors, "run_here", slow)
    tasks = _tasks(tmp_path, deadline=clock.now + 30)  # the first cell outlasts the budget
    done = list(executors.Serial().run(tasks, lambda task, phase: None))
    assert slow.limits == {tasks[0].label: 30}, "a cell started after the budget, or got more than was left"
    assert done[0].skipped and done[0].failure == time_budget.ENDED and done[0].outcome is not None
    assert [d.skipped for d in done[1:]] == [True, True]
    assert all(d.failure == time_budget.SPENT and d.outcome is None for d in done[1:])


def test_a_cell_that_fits_keeps_its_own_limit_and_is_not_the_budgets(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clock: FakeClock) -> None:
    slow = SlowCells(clock, 10.0)
    monkeypatch.setattr(executors, "run_here", slow)
    tasks = _tasks(tmp_path, deadline=clock.now + 1000)
    done = list(executors.Serial().run(tasks, lambda task, phase: None))
    assert set(slow.limits.values()) == {300} and not any(d.skipped for d in done)
    assert all(d.task is t for d, t in zip(done, tasks, strict=True))


def test_a_cell_whose_own_limit_ends_first_fails_as_it_would_without_a_budget(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clock: FakeClock) -> None:
    slow = SlowCells(clock, 400.0)  # longer than the cell's own 300 s, within the budget
    monkeypatch.setattr(executors, "run_here", slow)
    done = list(executors.Serial().run(_tasks(tmp_path, deadline=clock.now + 5000)[:1], lambda task, phase: None))
    assert not done[0].skipped and done[0].outcome is not None and done[0].outcome.timed_out


def test_two_jobs_start_what_fits_and_skip_the_rest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clock: FakeClock) -> None:
    slow = SlowCells(clock, 60.0, together=2)
    monkeypatch.setattr(executors, "run_here", slow)
    tasks = _tasks(tmp_path, deadline=clock.now + 30)
    pool = executors.LocalPool([Slot(index=0, cpus=[0]), Slot(index=1, cpus=[1])])
    done = {d.task.cell_id: d for d in pool.run(tasks, lambda task, phase: None)}
    assert slow.limits == {tasks[0].label: 30, tasks[1].label: 30}, "both slots start a cell within the budget"
    assert done[tasks[2].cell_id].skipped and done[tasks[2].cell_id].failure == time_budget.SPENT


def _null_run(tmp_path: Path, budget_s: float, past_budget: str, rounds: int = 1,
              scenarios: str = "[SingleStream, Offline, Server]", brief: bool = False,
              only: dict[str, set[str]] | None = None) -> tuple[int, Path, str]:
    """A run of the null backend; `brief`: its cells' real workers time and run LoadGen briefly."""
    scenario = tmp_path / "null.yaml"
    timing = f"{{rounds: {rounds}, min_time_s: 0.1, max_warmup_s: 0.5}}" if brief else f"{{rounds: {rounds}}}"
    scenario.write_text(f"models: [{{name: resnet18, input_size: 32}}]\nbackends: [null]\nscenarios: {scenarios}\n"
                        f"timing: {timing}\n" + ("loadgen: {min_duration_s: 0.2}\n" if brief else ""))
    shown = io.StringIO()
    code = run(RunRequest(scenario_path=scenario, device="cpu", out_dir=tmp_path / "out", budget_s=budget_s,
                          past_budget=past_budget, only=only),  # type: ignore[arg-type]
               Console(file=shown, width=300))
    return code, next((tmp_path / "out").iterdir()), shown.getvalue()


def slow_label(slow: SlowCells, index: int) -> str:
    """The label of the `index`-th cell SlowCells ran."""
    return list(slow.limits)[index]


def _records(bundle: Path) -> tuple[list[str], dict[str, dict[str, Any]]]:
    order = [c["id"] for c in json.loads((bundle / "bundle.json").read_text())["cells"]]
    return order, {p.stem: json.loads(p.read_text()) for p in (bundle / "cells").glob("*.json")}


@pytest.mark.slow  # its run starts the system probe, which imports torch
def test_gpu_checks_budget_records_the_cell_it_ended_and_those_it_never_started_as_skipped(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clock: FakeClock, one_probe: None) -> None:
    slow = SlowCells(clock, 50.0)
    monkeypatch.setattr(executors, "run_here", slow)
    code, bundle, shown = _null_run(tmp_path, budget_s=30, past_budget="skipped")
    order, records = _records(bundle)
    # the budget ended before any cell finished: nothing measured, which the exit code says (4, not 0)
    assert code == 4 and [records[c]["status"] for c in order] == ["skipped"] * 3
    assert records[order[0]]["reasons"] == [time_budget.ENDED] and list(slow.limits.values()) == [30]
    assert records[order[0]]["wall_s"] == 30.0 and f"skipped {slow_label(slow, 0)} (30.0 s" in shown  # it ran: not 0.0 s
    assert all(records[c]["reasons"] == [time_budget.SPENT] for c in order[1:])
    assert not any((bundle / "cells" / c).exists() for c in order), "a cell without a result left a folder"
    assert "min left" not in shown, "a skipped cell was counted as run"
    assert validate(bundle).problems == []


@pytest.mark.slow  # its run starts the system probe, which imports torch
def test_run_budget_leaves_the_cells_it_kept_from_a_result_for_resume(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clock: FakeClock, one_probe: None) -> None:
    slow = SlowCells(clock, 20.0)
    monkeypatch.setattr(executors, "run_here", slow)
    code, bundle, shown = _null_run(tmp_path, budget_s=30, past_budget="missing")
    order, records = _records(bundle)
    # the first cell fits; the second starts with 10 s left and is stopped; the third never starts
    assert code == 1 and list(records) == [order[0]]  # the fake's cell has no answer: failed
    assert not any((bundle / "cells" / c).exists() for c in order[1:])
    assert json.loads((bundle / "bundle.json").read_text())["state"] == "interrupted"
    assert "2 cell(s) of the bundle not run yet (the time budget was spent): complete them with --resume" in shown
    # the bundle says why it is interrupted and what a resume runs, and so does its report: it said
    # `state interrupted` alone, and nothing told a budget's stop from a Ctrl-C
    assert json.loads((bundle / "bundle.json").read_text())["interruption"] == {
        "why": "the time budget was spent (--budget-s 30)", "resume_runs": order[1:]}
    assert ("- **interrupted**: the time budget was spent (--budget-s 30); --resume runs 2 cell(s): 2 with no result"
            in (bundle / "report.md").read_text())
    # the cell that ran 10 s for nothing says so as it ends; the one never started costs nothing, and only counts
    ended = [line.strip() for line in shown.splitlines() if line.strip().startswith("ended")]
    assert ended == [f"ended {slow_label(slow, 1)} (ran 10.0 s, 2/3): the run's time budget ended before it had a result; "
                     "what it ran is discarded, and --resume runs it again from its start"], shown
    assert validate(bundle).problems == []
    clock.now += 1000
    resumed = run(RunRequest(scenario_path=None, device=None, out_dir=tmp_path / "out", resume=bundle, budget_s=1000,
                             past_budget="missing"), Console(file=io.StringIO()))
    assert resumed == 1 and len(_records(bundle)[1]) == 3
    assert json.loads((bundle / "bundle.json").read_text())["state"] == "complete"
    assert "interruption" not in json.loads((bundle / "bundle.json").read_text()), "a complete bundle kept a stop's why"
    assert validate(bundle).problems == []


@pytest.mark.slow  # its run starts the system probe, which imports torch
def test_a_run_budget_spent_before_any_cell_had_a_result_exits_4_not_0(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clock: FakeClock, one_probe: None) -> None:
    monkeypatch.setattr(executors, "run_here", SlowCells(clock, 50.0))  # the first cell outlasts the budget
    # a new run's bundle holds only what --only chose: none of its cells is missing for being outside it
    code, bundle, shown = _null_run(tmp_path, budget_s=30, past_budget="missing",
                                    only={"backend": {"null"}})
    assert _records(bundle)[1] == {}, "a cell kept from a result by the budget was recorded"
    assert code == 4, "a run that measured nothing exited as a pass"
    assert "3 cell(s) of the bundle not run yet (the time budget was spent): complete" in shown
    assert "cells done" not in shown and "3 cell(s) left for --resume by the time budget" in shown  # the bar's 3/3
    assert "nothing measured: no cell of the bundle has a result yet" in shown
    assert json.loads((bundle / "bundle.json").read_text())["state"] == "interrupted"
    assert validate(bundle).problems == []


@pytest.mark.slow  # its run starts the system probe, which imports torch
def test_a_resume_whose_budget_ran_no_cell_of_a_bundle_holding_only_interrupted_cells_exits_4(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clock: FakeClock, one_probe: None) -> None:
    """The record a Ctrl-C leaves (`interrupted`) is no result: the resume exited 0 with nothing measured."""

    def stopped(task: CellTask, slot: Any, on_phase: Any, stop: Any = None, parents: Any = None) -> WorkerOutcome:
        raise KeyboardInterrupt

    monkeypatch.setattr(executors, "run_here", stopped)
    code, bundle, _ = _null_run(tmp_path, budget_s=30, past_budget="missing")
    assert code == 130 and {r["status"] for r in _records(bundle)[1].values()} == {"interrupted"}
    assert json.loads((bundle / "bundle.json").read_text())["interruption"] == {
        "why": "interrupted by Ctrl-C (SIGINT)", "resume_runs": _records(bundle)[0]}
    assert any(note.startswith("bundle.json: the run is interrupted (interrupted by Ctrl-C (SIGINT)): 2 of 3 listed")
               for note in validate(bundle).notes)
    monkeypatch.setattr(executors, "run_here", SlowCells(clock, 50.0))  # the first cell outlasts the budget
    shown = io.StringIO()
    resumed = run(RunRequest(scenario_path=None, device=None, out_dir=tmp_path / "out", resume=bundle, budget_s=30,
                             past_budget="missing"), Console(file=shown, width=400))
    assert resumed == 4, "a resume that measured nothing exited as a pass"
    assert "nothing measured: no cell of the bundle has a result yet" in shown.getvalue()
    assert validate(bundle).problems == []


class RealFirstRound:
    """run_here that runs each cell's round 1 for real (the null backend: valid in seconds), taking
    `first_s` of the fake clock, and fakes every further round as SlowCells does, `further_s` each."""

    def __init__(self, clock: FakeClock, first_s: float, further_s: float, recorded_s: float | None = None) -> None:
        self.real = executors.run_here
        self.clock = clock
        self.first_s = first_s
        self.further = SlowCells(clock, further_s)
        self.recorded_s = recorded_s  # round 1's wall time as recorded, where not the real worker's

    def __call__(self, task: CellTask, slot: Any, on_phase: Any, stop: Any = None, parents: Any = None) -> WorkerOutcome:
        if task.request.timing_round > 1:
            return self.further(task, slot, on_phase, stop, parents)
        outcome = self.real(task, slot, on_phase, stop, parents)
        self.clock.now += self.first_s
        return replace(outcome, wall_s=self.recorded_s) if self.recorded_s is not None else outcome


@pytest.mark.slow  # its run starts the system probe, which imports torch, and a real worker
def test_with_rounds_a_cell_the_budget_cut_keeps_the_rounds_that_finished_and_a_resume_times_them_afresh(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clock: FakeClock, shared_probe: SharedProbe,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A resume of a run whose budget kept round 2 and 3 of a cell said the bundle complete: the user
    had to delete the cell's record to time its rounds. It times them all afresh now, and says so."""
    monkeypatch.setattr(runner, "run_probe", shared_probe)
    # round 1 recorded as 15 s, so that round 2 may start with 20 s left whatever the real worker took
    cells = RealFirstRound(clock, first_s=80.0, further_s=50.0, recorded_s=15.0)
    monkeypatch.setattr(executors, "run_here", cells)
    code, bundle, shown = _null_run(tmp_path, budget_s=100, past_budget="missing", rounds=3, scenarios="[SingleStream]",
                                    brief=True)
    # round 1 (80 s of the clock) fits; round 2 starts with 20 s left and is stopped; round 3 never starts
    assert list(cells.further.limits.values()) == [20], "a further round started past the budget, or got more than was left"
    order, records = _records(bundle)
    record = records[order[0]]
    assert code == 0 and record["status"] == "valid", shown
    kept = [(r["round"], r["status"], r.get("reason")) for r in record["metrics"]["rounds"]]
    assert kept == [(1, "valid", None), (2, "failed", time_budget.ENDED), (3, "failed", time_budget.SPENT)]
    assert any(w.startswith(f"round 2 of 3 {rounds.ROUND_NO_TIME} ({time_budget.ENDED})") for w in record["warnings"])
    assert any(w.startswith(f"round 3 of 3 {rounds.ROUND_NO_TIME} ({time_budget.SPENT})") for w in record["warnings"])
    assert "kept with 1 of its 3 rounds, and one round gives its speedups no interval; --resume times its 3 rounds afresh" in shown
    # the bar said "cells done" over a cell left for --resume
    assert "cells done" not in shown and "1 cell(s) cut short of their rounds by the time budget, for --resume to time afresh" in shown
    # left for --resume, where it was kept as it was and a resume said the bundle complete, nothing to run
    assert json.loads((bundle / "bundle.json").read_text())["state"] == "interrupted"
    assert ("1 cell(s) kept with fewer rounds than asked (the time budget), which a resume times afresh, every round: "
            "complete them with --resume") in " ".join(shown.split())
    assert validate(bundle).problems == []
    assert json.loads((bundle / "bundle.json").read_text())["interruption"]["resume_runs"] == [order[0]]
    assert ("--resume runs 1 cell(s): 0 with no result, 1 cut short of their rounds by the time budget, timed afresh, "
            "every round") in (bundle / "report.md").read_text()
    # its dry run lists it as the resume runs it, and the resume times every round of it again
    from harness.cli.main import main
    from harness.run import plan

    monkeypatch.setattr(plan, "run_probe", shared_probe)
    assert main(["run", "--resume", str(bundle), "--dry-run"]) == 0
    listed = " ".join(capsys.readouterr().out.split())
    assert "1 of the 1 cell(s)" in listed and "run all 3 rounds afresh (the time budget kept it with 1 of 3)" in listed
    # a resume whose budget is less than the cell's kept round 1 took does not start it, and keeps it as it
    # was: its record and folder are replaced as its round 1 starts, where they were removed as the resume
    # began, and a budget that ended the new round 1 left the cell with nothing
    short = "not started: its kept round 1 took 15 s, 10 s of the run's time budget left"
    assert main(["run", "--resume", str(bundle), "--dry-run", "--budget-s", "10"]) == 0
    assert f"be left for --resume ({short})" in " ".join(capsys.readouterr().out.replace("│", " ").split())
    spent, before = io.StringIO(), clock.now
    assert run(RunRequest(scenario_path=None, device=None, out_dir=tmp_path / "out", resume=bundle, budget_s=10,
                          past_budget="missing"), Console(file=spent, width=400)) == 0, spent.getvalue()
    assert clock.now == before, "the kept cell's round 1 started"  # RealFirstRound moves the clock 80 s
    assert _records(bundle)[1][order[0]]["metrics"]["rounds"] == record["metrics"]["rounds"], spent.getvalue()
    assert short in spent.getvalue() and "1 cell(s) kept with fewer rounds than asked" in spent.getvalue()
    assert validate(bundle).problems == []
    cells.further.limits.clear()
    clock.now += 1000
    said = io.StringIO()
    assert run(RunRequest(scenario_path=None, device=None, out_dir=tmp_path / "out", resume=bundle, budget_s=1000,
                          past_budget="missing"), Console(file=said, width=400)) == 0
    assert ("the time budget kept it with 1 of its 3 rounds; this resume times its 3 rounds afresh, its record and "
            "folder replaced as its round 1 starts") in " ".join(said.getvalue().split())
    again = _records(bundle)[1][order[0]]
    assert [(r["round"], r["status"]) for r in again["metrics"]["rounds"]] == [(1, "valid"), (2, "failed"), (3, "failed")]
    assert len(cells.further.limits) == 2 and not any(rounds.ROUND_NO_TIME in w and "budget" in w for w in again["warnings"])
    assert json.loads((bundle / "bundle.json").read_text())["state"] == "complete"
    assert validate(bundle).problems == []


@pytest.mark.slow  # its run starts the system probe, which imports torch, and a real worker
def test_with_rounds_a_further_round_is_not_started_where_its_round_1_took_longer_than_is_left(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clock: FakeClock, one_probe: None) -> None:
    """`--rounds 2 --budget-s 45` started round 2 with 7 s left after round 1 took 33 s: the budget
    cut it, time spent for nothing. It is not started now, and the cell reads as one cut by the budget.
    gpu-check's way (the cells the budget keeps recorded skipped) writes it as `run --budget-s` does."""
    from harness.bundle.reader import load
    from harness.reporting import findings_page
    from harness.reporting.compare import compare
    from harness.reporting.report import REPORT_MD, render

    cells = RealFirstRound(clock, first_s=33.0, further_s=20.0, recorded_s=33.0)
    monkeypatch.setattr(executors, "run_here", cells)
    code, bundle, shown = _null_run(tmp_path, budget_s=45, past_budget="skipped", rounds=2, scenarios="[SingleStream]",
                                    brief=True)
    assert cells.further.limits == {}, "a further round started with less left than its round 1 took"
    order, records = _records(bundle)
    record = records[order[0]]
    assert code == 0 and record["status"] == "valid", shown
    # round 1's 33 s less what of it went to LoadGen and the other passes (the real worker's: seconds)
    why = record["metrics"]["rounds"][1]["reason"]
    assert re.fullmatch(r"not started: round 1 took 33 s(, \d+ s of it in what a further round runs again)?, 12 s of "
                        r"the run's time budget left", why), why
    assert [(r["round"], r["status"]) for r in record["metrics"]["rounds"]] == [(1, "valid"), (2, "failed")]
    warning = f"round 2 of 2 {rounds.ROUND_NO_TIME} ({why})"
    assert any(w.startswith(warning) for w in record["warnings"]), record["warnings"]
    assert "left less than its rounds took before they were done: kept with 1 of its 2 rounds" in shown, shown
    assert json.loads((bundle / "bundle.json").read_text())["state"] == "complete"
    assert validate(bundle).problems == []
    loaded = load(bundle)
    render(loaded, tmp_path / "report")
    assert why in (tmp_path / "report" / REPORT_MD).read_text()
    findings_page.render([loaded], tmp_path / "findings")
    assert len(compare(loaded, loaded).pairs) == 1, "compare did not pair the cell with itself"


def test_a_skipped_finish_is_never_mistaken_for_a_lost_cell(tmp_path: Path) -> None:
    from harness.run.sweep import finished_record

    task = _tasks(tmp_path, deadline=0.0)[0]
    record = finished_record({"id": task.cell_id}, Finished(task, None, {"hostname": "h"}, failure=time_budget.SPENT, skipped=True))
    assert record["status"] == "skipped" and record["reasons"] == [time_budget.SPENT] and "log" not in record
    lost = finished_record({"id": task.cell_id}, Finished(task, None, {"hostname": "h"}, failure="the Ray worker died twice"))
    assert lost["status"] == "failed"


@pytest.mark.parametrize("value", ["0", "-5", "nan", "inf", "700000"])
def test_a_budget_that_is_not_a_positive_number_of_seconds_is_refused(value: str, tmp_path: Path) -> None:
    from harness.cli.main import main

    assert main(["run", str(REPO / "scenarios" / "smoke.yaml"), "--budget-s", value, "--out", str(tmp_path)]) == 2
    assert not any(tmp_path.iterdir())


def test_ray_refuses_a_budget_it_could_not_keep(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from harness.cli.main import main

    assert main(["run", str(REPO / "scenarios" / "smoke.yaml"), "--executor", "ray", "--budget-s", "60", "--out", str(tmp_path)]) == 2
    assert "--budget-s is for --executor local" in capsys.readouterr().err


def test_a_dry_run_says_what_the_budget_makes_of_its_floor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """`--dry-run --budget-s 600` of the vision suite (210 cells, a floor of 35 min) said nothing of
    the budget: a planner learnt only in the night that 10 minutes could never hold it."""
    from harness.bundle.header_record import BackendReport
    from harness.cli.main import main
    from harness.run import plan
    from harness.run.probe_answer import ProbeAnswer

    monkeypatch.setattr(plan, "run_probe", lambda *a, **k: ProbeAnswer(
        device="cpu", backends={"null": BackendReport(available=True)}))
    scenario = tmp_path / "s.yaml"
    scenario.write_text("models: [resnet18, vgg11, alexnet]\nbackends: [null]\nscenarios: [Offline]\n"
                        "loadgen: {min_duration_s: 10}\n")

    def said(budget_s: str, *more: str) -> str:
        assert main(["run", str(scenario), "--dry-run", "--device", "cpu", "--out", str(tmp_path / "out"),
                     "--budget-s", budget_s, *more]) == 0
        return " ".join(capsys.readouterr().out.split())

    assert ("--budget-s 25 (25.0 s) is less than this floor: at most 2 of the 3 cell(s) can finish within it"
            in said("25"))
    assert "--budget-s 600 (10 min) is at least this floor: whether every cell finishes within it depends on" in said("600")
    # a 3-round run's further rounds run no LoadGen, so its floor is round 1's; the budget line counts them
    # beside preparing, where it named preparing alone
    three = said("600", "--rounds", "3")
    assert "at least 30.0 s of LoadGen's minimum duration (3 x 10.0 s)" in three
    assert ("depends on preparing (compiling, tuning) and on each cell's 2 further round(s), which prepare and time it "
            "again but run no LoadGen (the floor is round 1's), which a dry run cannot tell") in three
    assert not (tmp_path / "out").exists()


def test_a_dry_run_with_jobs_gives_the_floor_of_the_cells_run_at_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`--dry-run --jobs 2` gave the floor of the cells run one after another (16 s for smoke's 8
    cells of 2 s, where two at a time take 8 s): a "floor" above the run, and --budget-s judged by it."""
    import os

    from harness import cpu_topology
    from harness.bundle.header_record import BackendReport
    from harness.cli.main import main
    from harness.run import plan, slots
    from harness.run.probe_answer import ProbeAnswer

    assert plan.floor_s(8, 2.0, 1) == 16.0 and plan.floor_s(8, 2.0, 2) == 8.0 and plan.floor_s(7, 2.0, 2) == 8.0
    assert "at most 10 of the 12 cell(s) can finish" in plan.budget_line(10, 12, 2.0, 2)
    assert "is at least this floor" in plan.budget_line(10, 8, 2.0, 2)
    cpus = list(range(os.cpu_count() or 1))[:2]
    if len(cpu_topology.physical_cores(cpus)) < 2:
        pytest.skip(f"--jobs 2 needs two physical cores; CPUs {cpus} are one")
    monkeypatch.setattr(slots, "usable_cores", lambda: cpus)
    monkeypatch.setattr(plan, "run_probe", lambda *a, **k: ProbeAnswer(
        device="cpu", backends={"null": BackendReport(available=True)}))
    scenario = tmp_path / "s.yaml"
    scenario.write_text("models: [resnet18, vgg11, alexnet]\nbackends: [null]\nscenarios: [Offline]\n"
                        "loadgen: {min_duration_s: 10}\n")
    assert main(["run", str(scenario), "--dry-run", "--device", "cpu", "--out", str(tmp_path / "out"),
                 "--jobs", "2", "--budget-s", "25"]) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert "at least 20.0 s of LoadGen's minimum duration (3 x 10.0 s, 2 at a time)" in said, said
    assert "--budget-s 25 (25.0 s) is at least this floor" in said, said


def test_a_cell_whose_twin_took_longer_than_is_left_is_not_started_and_a_later_one_is(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clock: FakeClock) -> None:
    """A 20-minute budget started swin_b's TVM cell with 509 s left where its twin had taken 803 s:
    it ran for nothing until the budget ended. A cell with no twin time, or one that fits, still starts."""
    slow = SlowCells(clock, 10.0)
    monkeypatch.setattr(executors, "run_here", slow)
    first, second, third = _tasks(tmp_path, deadline=clock.now + 100)
    tasks = [first, replace(second, twin_took_s=lambda: 150.0), replace(third, twin_took_s=lambda: 90.0)]
    done = list(executors.Serial().run(tasks, lambda task, phase: None))
    # the first runs 10 s: 90 s left; the second's twin took 150 s; the third's 90 s, which fits
    assert list(slow.limits) == [first.label, third.label], "a cell its twin said could not finish was started"
    assert done[1].skipped and done[1].outcome is None
    assert done[1].failure == "not started: its twin (fusion off) took 150 s, 90 s of the run's time budget left"
    assert not done[2].skipped and slow.limits[third.label] == 90


def test_two_jobs_hold_a_cell_to_its_twin_by_the_budget_left_as_it_starts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clock: FakeClock) -> None:
    slow = SlowCells(clock, 60.0, together=2)
    monkeypatch.setattr(executors, "run_here", slow)
    first, second, third = _tasks(tmp_path, deadline=clock.now + 100)
    # planned with 100 s left, where its twin's 80 s fit, it starts once a slot is free: the first two
    # cells have taken 30 s each of the fake clock, and one or both of them have counted by then
    tasks = [first, second, replace(third, twin_took_s=lambda: 80.0)]
    pool = executors.LocalPool([Slot(index=0, cpus=[0]), Slot(index=1, cpus=[1])])
    done = {d.task.cell_id: d for d in pool.run(tasks, lambda task, phase: None)}
    assert sorted(slow.limits) == sorted([first.label, second.label]), "a cell its twin said could not finish was started"
    assert done[third.cell_id].skipped and done[third.cell_id].failure in (
        f"not started: its twin (fusion off) took 80 s, {left} s of the run's time budget left" for left in (40, 70))


def test_a_further_round_is_not_held_to_its_twins_time(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clock: FakeClock) -> None:
    """Round 1 was let start: its further rounds keep what the budget leaves them, as they did."""
    slow = SlowCells(clock, 10.0)
    monkeypatch.setattr(executors, "run_here", slow)
    task = _tasks(tmp_path, deadline=clock.now + 100)[0]
    further = replace(task, request=replace(task.request, timing_round=2), twin_took_s=lambda: 500.0, label="round 2")
    done = list(executors.Serial().run([further], lambda task, phase: None))
    assert not done[0].skipped and slow.limits == {"round 2": 100}


def _rounds_of_one_cell(root: Path, deadline: float, count: int) -> tuple[list[CellTask], rounds.Rounds]:
    """Every round of one cell of `count` rounds, in order, and the state that holds them."""
    first = _tasks(root, deadline, count)[0]
    state = rounds.Rounds({first.cell_id: count}, root)
    return rounds.order([first], {cell.id: cell for cell in _cells(count)}, state), state


def _taken(state: rounds.Rounds, done: Iterable[Finished]) -> list[Finished]:
    """`done` as the sweep takes it: each round handed to `state`, round 1 as a valid record of its time."""
    taken = []
    for finished in done:
        first = ({"status": "valid", "metrics": {}, "wall_s": finished.outcome.wall_s}
                 if finished.task.request.timing_round == 1 and finished.outcome is not None else None)
        state.finished(finished, first)
        taken.append(finished)
    state.close()
    return taken


def test_a_further_round_is_not_started_where_its_round_1_took_longer_than_is_left(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clock: FakeClock) -> None:
    """Round 1 took 40 s of a 100 s budget: round 2 starts with 60 s left, and round 3, with 20 s left,
    would be cut by the budget; it is not started, and says why."""
    slow = SlowCells(clock, 40.0)
    monkeypatch.setattr(executors, "run_here", slow)
    tasks, state = _rounds_of_one_cell(tmp_path, clock.now + 100, 3)
    done = _taken(state, executors.Serial().run(tasks, lambda task, phase: None))
    assert list(slow.limits.values()) == [100, 60], "a further round started with less left than its round 1 took"
    assert done[2].skipped and done[2].outcome is None
    assert done[2].failure == "not started: round 1 took 40 s, 20 s of the run's time budget left"


def test_two_jobs_hold_a_further_round_to_its_round_1_as_it_starts(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clock: FakeClock) -> None:
    slow = SlowCells(clock, 40.0)
    monkeypatch.setattr(executors, "run_here", slow)
    tasks, state = _rounds_of_one_cell(tmp_path, clock.now + 70, 2)
    pool = executors.LocalPool([Slot(index=0, cpus=[0]), Slot(index=1, cpus=[1])])
    done = _taken(state, pool.run(tasks, lambda task, phase: None))
    assert list(slow.limits.values()) == [70], "a further round started with less left than its round 1 took"
    assert done[1].skipped and done[1].failure == "not started: round 1 took 40 s, 30 s of the run's time budget left"


def test_a_cells_twin_is_the_cell_of_its_other_fusion_setting() -> None:
    data = {"models": [{"name": "resnet18", "input_size": 32}], "backends": [{"name": "onnxruntime", "fusion": ["on", "off"]}],
            "scenarios": ["SingleStream", "Offline"], "batch_sizes": {"cpu": [1, 2]}}
    resolved = ScenarioFile.model_validate(data).model_dump(mode="json")
    resolved["name"] = "t"
    cells = expand(resolved, "cpu")
    by_id = {cell.id: cell for cell in cells}
    for cell in cells:
        twin = by_id[twin_id(cell.config)]
        assert twin.config.variant.fusion != cell.config.variant.fusion
        assert twin.label.replace("fusion-off", "fusion-on") == cell.label.replace("fusion-off", "fusion-on")


class TwinTimes:
    """run_here that runs each cell for real and says it took `seconds[(fusion, scenario, batch)]` of
    the fake clock, as its wall time too. The cells are the example plugin's TorchScript on one
    convolution block, timed briefly (tests/conftest.py installs the plugin): a backend with a fusion
    switch, valid in a second, whose probe imports no ONNX Runtime. On ONNX Runtime's resnet18 the
    six cells took 46 to 51 CPU-s, on this about 20 (the test alone, under contention); the budget
    reads only the fake clock's times."""

    def __init__(self, clock: FakeClock, seconds: dict[tuple[str, str, int], float]) -> None:
        self.real = executors.run_here
        self.clock = clock
        self.seconds = seconds
        self.ran: list[tuple[str, str, int]] = []

    def __call__(self, task: CellTask, slot: Any, on_phase: Any, stop: Any = None, parents: Any = None) -> WorkerOutcome:
        outcome = self.real(task, slot, on_phase, stop, parents)
        key = (task.request.cell.variant.fusion, task.request.cell.scenario, task.request.cell.batch)
        self.ran.append(key)
        took = min(self.seconds.get(key, 5.0), task.timeout_s)
        self.clock.now += took
        return replace(outcome, wall_s=took)


@pytest.mark.slow  # its runs start the system probe, which imports torch, and real workers
def test_run_budget_leaves_a_cell_whose_twin_took_longer_for_resume_saying_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clock: FakeClock, one_probe: None) -> None:
    cells = TwinTimes(clock, {("on", "SingleStream", 1): 50, ("on", "Offline", 1): 10, ("on", "Offline", 2): 10,
                              ("off", "Offline", 1): 30})
    monkeypatch.setattr(executors, "run_here", cells)
    scenario = tmp_path / "ort.yaml"
    scenario.write_text("models: [{name: pattern_conv_bn_relu, input_size: 32}]\nbackends: [{name: torchscript, fusion: [on, off]}]\n"
                        "scenarios: [SingleStream, Offline]\nbatch_sizes: {cpu: [1, 2]}\ninputs: {samples: 4}\n"
                        "timing: {warmup_iters: 1, min_iters: 2, min_time_s: 0.0, max_warmup_s: 0.2, repetitions: 2}\n"
                        "loadgen: {min_duration_s: 0.05}\npasses: {memory_iters: 1, profile_iters: 1}\n")
    shown = io.StringIO()
    code = run(RunRequest(scenario_path=scenario, device="cpu", out_dir=tmp_path / "out", budget_s=100,
                          past_budget="missing"), Console(file=shown, width=400))
    said = shown.getvalue()
    bundle = next((tmp_path / "out").iterdir())
    # 70 s for fusion on: 30 left; off SingleStream's twin took 50 (not started), off Offline b1's 10 (runs,
    # 30 s), and the budget is spent before off Offline b2
    assert code == 0, said
    assert cells.ran == [("on", "SingleStream", 1), ("on", "Offline", 1), ("on", "Offline", 2), ("off", "Offline", 1)], said
    left = [line.strip() for line in said.splitlines() if line.strip().startswith("left")]
    assert left == ["left pattern_conv_bn_relu torchscript fusion-off SingleStream cpu fp32 b1 input 32 (4/6): not started: its "
                    "twin (fusion on) took 50 s, 30 s of the run's time budget left; --resume runs it"], said
    assert ("2 cell(s) of the bundle not run yet (the time budget was spent, or left less than their twin took for 1 "
            "of them): complete them with --resume") in said
    order, records = _records(bundle)
    assert len(records) == 4 and json.loads((bundle / "bundle.json").read_text())["state"] == "interrupted"
    assert validate(bundle).problems == []
    clock.now += 1000
    shown = io.StringIO()
    resumed = run(RunRequest(scenario_path=None, device=None, out_dir=tmp_path / "out", resume=bundle, budget_s=1000,
                             past_budget="missing"), Console(file=shown, width=400))
    said = shown.getvalue()
    assert resumed == 0 and cells.ran[4:] == [("off", "SingleStream", 1), ("off", "Offline", 2)], said
    # the 4 cells kept (100 s) pace the resume: its first cell's line has an estimate
    first = next(line for line in said.splitlines() if line.strip().startswith("valid"))
    assert "1/2, about 1 min left)" in first, said
    assert len(_records(bundle)[1]) == 6 and json.loads((bundle / "bundle.json").read_text())["state"] == "complete"
    assert validate(bundle).problems == []


def test_under_half_a_second_left_is_not_said_as_0_s_left(clock: FakeClock) -> None:
    """A round not started with 0.3 s of the budget left read "0 s of the run's time budget left", as if
    it were spent (then the round's reason would be SPENT)."""
    deadline = clock.now + 0.3
    assert time_budget.shorter_than_a_round(deadline, time_budget.RoundGuess(33.0)) == (
        "not started: round 1 took 33 s, under 1 s of the run's time budget left")
    assert time_budget.shorter_than_twin(deadline, 33.0, "off") == (
        "not started: its twin (fusion on) took 33 s, under 1 s of the run's time budget left")
    assert time_budget.shorter_than_a_round(clock.now + 7.4, time_budget.RoundGuess(33.0)) == (
        "not started: round 1 took 33 s, 7 s of the run's time budget left")
