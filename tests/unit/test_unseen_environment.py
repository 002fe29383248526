"""A run says which variables set where it starts can move a figure and reach no cell, and a failed
cell whose worker's words name a variable of the shell that it did not get says so."""

from __future__ import annotations

import dataclasses
import io
import os
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from harness.bundle.reader import load
from harness.measure.protocol import WorkerAnswer, WorkerRequest
from harness.run import executors, unseen_environment
from harness.run.ending import bad_line
from harness.run.executors import CellTask, Finished, node_info
from harness.run.isolation import WorkerOutcome, worker_environment
from harness.run.run_request import RunRequest
from harness.run.runner import run
from harness.run.sweep import finished_record
from harness.run.unseen_environment import not_passed_in, read_by_plugin, unseen, warning
from tests.cell_configs import cell_config
from tests.unit.test_last_words import GOLDEN


def test_the_figure_moving_variables_a_worker_would_not_get_are_named_and_no_others(tmp_path: Path) -> None:
    shell = {"OMP_NUM_THREADS": "4", "LD_PRELOAD": "/usr/lib/libjemalloc.so", "TORCHINDUCTOR_MAX_AUTOTUNE": "1",
             "KMP_AFFINITY": "compact", "MKL_NUM_THREADS": "2", "CUDA_VISIBLE_DEVICES": "0", "FUSIONBENCH_X": "1",
             "LC_ALL": "C", "EDITOR": "vi", "PATH": "/usr/bin"}
    named = ["KMP_AFFINITY", "MKL_NUM_THREADS=1"]  # passed on, and set by the scenario
    names = unseen(shell, named)
    assert names == ["LD_PRELOAD", "OMP_NUM_THREADS", "TORCHINDUCTOR_MAX_AUTOTUNE"]
    # exactly those the worker's environment leaves out, of the figure-moving ones
    env = worker_environment(shell, named, {}, tmp_path)
    assert not set(names) & set(env) and {"KMP_AFFINITY", "MKL_NUM_THREADS", "CUDA_VISIBLE_DEVICES"} <= set(env)
    assert unseen({"PATH": "/usr/bin", "EDITOR": "vi"}, []) == []
    assert unseen({"CUDA_VERSION": "13.0", "PYTORCH_VERSION": "2.11", "CUDA_LAUNCH_BLOCKING": "1"}, []) == \
        ["CUDA_LAUNCH_BLOCKING"], "a name that only describes an image's build was warned of"


def test_the_warning_names_the_variables_and_how_to_pass_them_on() -> None:
    one = warning(["OMP_NUM_THREADS"])
    assert one.startswith("OMP_NUM_THREADS is set here but no cell sees it") and "env:" in one
    many = warning([f"OMP_{i}" for i in range(10)])
    assert many.startswith("OMP_0, OMP_1") and "and 2 more are set here but no cell sees them" in many


@pytest.mark.slow  # its run starts the system probe, which imports torch
def test_a_run_says_once_as_it_starts_which_variables_of_its_shell_no_cell_will_see(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def fake_cell(task: CellTask, slot: Any, on_phase: Any, stop: Any = None, parents: Any = None) -> WorkerOutcome:
        seen.append(task.env_names)
        (task.artifacts / "worker.log").write_text("a fake cell\n")
        return WorkerOutcome(answer=None, returncode=0, timed_out=False, last_phase="loadgen", wall_s=0.1)

    seen: list[list[str]] = []
    monkeypatch.setattr(executors, "run_here", fake_cell)
    for name in unseen(os.environ, []):  # whatever the shell running the tests sets
        monkeypatch.delenv(name)
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    monkeypatch.setenv("KMP_AFFINITY", "compact")
    scenario = tmp_path / "null.yaml"
    scenario.write_text("models: [{name: resnet18, input_size: 32}]\nbackends: [null]\n"
                        "scenarios: [SingleStream, Offline]\nenv: [KMP_AFFINITY]\n")
    shown = io.StringIO()
    run(RunRequest(scenario_path=scenario, device="cpu", out_dir=tmp_path / "out"), Console(file=shown, width=300))
    lines = [line for line in shown.getvalue().splitlines() if "no cell sees" in line]
    assert len(seen) == 2 and all("KMP_AFFINITY" in names for names in seen)
    assert len(lines) == 1 and lines[0].startswith("fusionbench: warning: OMP_NUM_THREADS is set here"), lines
    assert "KMP_AFFINITY" not in lines[0], "a variable the scenario passes on was warned of"


@pytest.mark.slow  # its runs start the system probe, which imports torch
def test_a_resume_tells_its_cells_to_run_the_stored_scenario_afresh_where_its_env_cannot_be_edited(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A resume runs the scenario its bundle stores, as a rerun does (docs/cli.md): its cell that failed
    naming a variable of the shell, and its start's line of variables no cell sees, told it to add the
    variable to the scenario's env:, which a resume never reads (an edited file is not what it runs)."""
    def stopped_at_offline(task: CellTask, slot: Any, on_phase: Any, stop: Any = None, parents: Any = None) -> WorkerOutcome:
        if "Offline" in task.label:
            raise KeyboardInterrupt
        (task.artifacts / "worker.log").write_text("a fake cell\n")
        return WorkerOutcome(answer=None, returncode=0, timed_out=False, last_phase="loadgen", wall_s=0.1)

    def failing(task: CellTask, slot: Any, on_phase: Any, stop: Any = None, parents: Any = None) -> WorkerOutcome:
        (task.artifacts / "worker.log").write_text("a fake cell\n")
        answer = WorkerAnswer(status="failed", reasons=["build: KeyError: 'ACME_WEIGHTS' (at /site/acme_env/models.py:11)"],
                              environment={"variables": {"PATH": "/usr/bin"}})
        return WorkerOutcome(answer=answer, returncode=0, timed_out=False, last_phase="build", wall_s=0.1)

    for name in unseen(os.environ, []):  # whatever the shell running the tests sets
        monkeypatch.delenv(name)
    scenario = tmp_path / "null.yaml"
    scenario.write_text("models: [{name: resnet18, input_size: 32}]\nbackends: [null]\nscenarios: [SingleStream, Offline]\n")
    monkeypatch.setattr(executors, "run_here", stopped_at_offline)
    run(RunRequest(scenario_path=scenario, device="cpu", out_dir=tmp_path / "out"), Console(file=io.StringIO(), width=300))
    [bundle] = (tmp_path / "out").iterdir()
    monkeypatch.setattr(executors, "run_here", failing)
    monkeypatch.setenv("ACME_WEIGHTS", "/data/acme")
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    shown = io.StringIO()
    assert run(RunRequest(scenario_path=None, resume=bundle, device="cpu"), Console(file=shown, width=300)) == 1
    [resumed] = [r for r in load(bundle).records if "Offline" in r.label]
    stored = ("a resume or a rerun runs the scenario its bundle stores, whose env: does not name it, and gives its workers "
              "no other variable of this shell: take that scenario (its bundle.json `scenario`), add it to its env: "
              "(`env: [ACME_WEIGHTS]`) and run it afresh with `fusionbench run`")
    assert resumed.reasons[0].startswith("build: KeyError: 'ACME_WEIGHTS' (at /site/acme_env/models.py:11); ACME_WEIGHTS is "
                                         f"set in this shell but not passed to workers: {stored}"), resumed.reasons
    [line] = [line for line in shown.getvalue().splitlines() if "no cell sees" in line]
    assert line.endswith("a resume or a rerun runs the scenario its bundle stores, whose env: no one edits: name a variable "
                         "in that scenario's env: (its bundle.json `scenario`) and run it afresh with `fusionbench run` to "
                         "pass it on"), line


@pytest.mark.slow  # its runs start the system probe, which imports torch
def test_a_resumes_start_warnings_name_only_the_models_with_cells_left_to_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A resume's warnings of what a plugin package read as it loaded (and of a plugin's other copy)
    named every model of the scenario, those whose cells were all done among them."""
    def stopped_at_mobilenet(task: CellTask, slot: Any, on_phase: Any, stop: Any = None, parents: Any = None) -> WorkerOutcome:
        if "mobilenet_v2" in task.label:
            raise KeyboardInterrupt
        (task.artifacts / "worker.log").write_text("a fake cell\n")
        return WorkerOutcome(answer=None, returncode=0, timed_out=False, last_phase="loadgen", wall_s=0.1)

    scenario = tmp_path / "null.yaml"
    scenario.write_text("models: [{name: resnet18, input_size: 32}, {name: mobilenet_v2, input_size: 32}]\n"
                        "backends: [null]\nscenarios: [SingleStream]\n")
    monkeypatch.setattr(executors, "run_here", stopped_at_mobilenet)
    run(RunRequest(scenario_path=scenario, device="cpu", out_dir=tmp_path / "out"), Console(file=io.StringIO(), width=300))
    [bundle] = (tmp_path / "out").iterdir()
    assert [r.label for r in load(bundle).records if "resnet18" in r.label], "resnet18's cell did not finish first"
    monkeypatch.setattr(unseen_environment, "read_as_loaded",
                        lambda models, parent, named, stored=False: [f"read as {', '.join(models)} loaded"])
    shown = io.StringIO()
    run(RunRequest(scenario_path=None, resume=bundle, device="cpu"), Console(file=shown, width=300))
    told = [line for line in shown.getvalue().splitlines() if "read as" in line]
    assert told == ["fusionbench: warning: read as mobilenet_v2 loaded"], told


SHELL = {"ACME_WEIGHTS": "/data/acme", "ACME_TOKEN": "s3cret", "PATH": "/usr/bin", "HOSTNAME": "box", "EDITOR": "vi"}
PASS_IT_ON = ("; ACME_WEIGHTS is set in this shell but not passed to workers: add it to the scenario's env: "
              "(`env: [ACME_WEIGHTS]`, which records its value in each cell)")


def test_a_failed_cells_reason_naming_a_variable_its_worker_did_not_get_says_how_to_pass_it_on() -> None:
    """A plugin's build reading `os.environ["ACME_WEIGHTS"]`, set in the shell: the parent found the
    plugin and planned its cells, and each failed `build: KeyError: 'ACME_WEIGHTS'`, the cause unsaid."""
    failed = "build: KeyError: 'ACME_WEIGHTS' (at /site/acme_models/weighted.py:6)"
    assert not_passed_in([failed], SHELL, [], None) == [failed + PASS_IT_ON]
    # a plugin's own words, bare names: both named, never a value (a token's would enter the bundle)
    both = not_passed_in(["build: RuntimeError: set ACME_WEIGHTS and ACME_TOKEN"], SHELL, [], {"PATH": "/usr/bin"})
    assert both == ["build: RuntimeError: set ACME_WEIGHTS and ACME_TOKEN; ACME_TOKEN, ACME_WEIGHTS are set in this shell "
                    "but not passed to workers: add them to the scenario's env: (`env: [ACME_TOKEN, ACME_WEIGHTS]`, which "
                    "records their values in each cell)"]
    assert "s3cret" not in both[0]
    # the worker got it (env: names it, or its recorded environment holds it), the shell lacks it, it is
    # no variable's name or one every worker inherits: the reason is the worker's alone
    for reasons, shell, named, worker in (([failed], SHELL, ["ACME_WEIGHTS"], None),
                                          ([failed], SHELL, ["ACME_WEIGHTS=/elsewhere"], None),
                                          ([failed], SHELL, [], {"ACME_WEIGHTS": "/data/acme"}),
                                          ([failed], {"PATH": "/usr/bin"}, [], None),
                                          (["build: KeyError: 'PATH'", "prepare: FileNotFoundError: /data/ACME_X"],
                                           {**SHELL, "ACME": "1"}, [], None),
                                          (["correctness: acme_weights differ"], {**SHELL, "acme_weights": "x"}, [], None)):
        assert not_passed_in(reasons, shell, named, worker) == reasons, (reasons, named, worker)


def test_a_worker_that_died_naming_one_in_its_last_words_is_told_it_where_it_ran_here(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A plugin backend reading the variable as its module loads: the worker ends without an answer,
    its last words the KeyError. A Ray node's workers get the node's environment, not this shell's."""
    for name, value in SHELL.items():
        monkeypatch.setenv(name, value)
    config = cell_config()
    artifacts = tmp_path / "cells" / "0123456789abcdef"
    artifacts.mkdir(parents=True)
    (artifacts / "worker.log").write_text("Traceback (most recent call last):\n  File \"acme_backend.py\", line 3\n"
                                          "    WEIGHTS = os.environ['ACME_WEIGHTS']\nKeyError: 'ACME_WEIGHTS'\n")
    task = CellTask(cell_id="0123456789abcdef", label=config.shown_label,
                    request=WorkerRequest(cell=config, artifact_dir=str(artifacts)), artifacts=artifacts,
                    timeout_s=60, memory_limit_bytes=None, env_names=["OMP_NUM_THREADS=1"], scratch_env={}, device="cpu")
    outcome = WorkerOutcome(None, 1, False, "import", 2.0)
    base = {"id": task.cell_id, "label": config.shown_label, "config": config.recorded()}
    said = "worker exited with code 1 without an answer (in phase import); it last wrote: KeyError: 'ACME_WEIGHTS'"
    whole_log = " (whole log: cells/0123456789abcdef/worker.log)"
    record = finished_record(base, Finished(task, outcome, node_info(None)))
    # the hint goes before the log's name, which such a reason ends with: the run's last line, which names
    # the log by its path, read it there, and named the log twice (`(whole log: ...); ACME_WEIGHTS ... (its log: ...)`)
    assert record["reasons"] == [said + PASS_IT_ON + whole_log]
    golden = next(r for r in load(GOLDEN).records if r.status == "valid")
    failed = golden.model_copy(update={"status": "failed", "reasons": record["reasons"], "log": record["log"]})
    line = bad_line(failed, tmp_path).plain
    assert line.count("worker.log") == 1 and line.endswith(f"{PASS_IT_ON} (its log: {artifacts / 'worker.log'})"), line
    assert finished_record(base, Finished(task, outcome, {"executor": "ray"}))["reasons"] == [said + whole_log]
    # a variable its backend points at a scratch folder of the cell's own, which the worker got and env: refuses
    # (`[0] sets ACME_WEIGHTS, which ... points at a fresh folder of each cell's own ...: leave it out`), is no hint's
    scratch = dataclasses.replace(task, scratch_env={"ACME_WEIGHTS": "acme-cache"})
    assert finished_record(base, Finished(scratch, outcome, node_info(None)))["reasons"] == [said + whole_log]


def test_a_reruns_cell_is_told_to_run_the_stored_scenario_afresh_where_its_env_cannot_be_edited(tmp_path: Path) -> None:
    """`fusionbench rerun` runs the scenario the bundle stores: the advice to add the variable to
    the scenario's env: could not be followed there (a rerun passes on no other variable of the shell)."""
    config = cell_config()
    artifacts = tmp_path / "cells" / "0123456789abcdef"
    artifacts.mkdir(parents=True)
    task = CellTask(cell_id="0123456789abcdef", label=config.shown_label,
                    request=WorkerRequest(cell=config, artifact_dir=str(artifacts)), artifacts=artifacts,
                    timeout_s=60, memory_limit_bytes=None, env_names=[], scratch_env={}, device="cpu")
    answer = WorkerAnswer(status="failed", reasons=["build: KeyError: 'ACME_WEIGHTS' (at /site/acme_env/models.py:11)"],
                          environment={"variables": {"PATH": "/usr/bin"}})
    base = {"id": task.cell_id, "label": config.shown_label, "config": config.recorded()}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ACME_WEIGHTS", "/data/acme")
        rerun = finished_record(base, Finished(task, WorkerOutcome(answer, 0, False, "build", 2.0), node_info(None)),
                                stored_scenario=True)
        fresh = finished_record(base, Finished(task, WorkerOutcome(answer, 0, False, "build", 2.0), node_info(None)))
    assert rerun["reasons"] == [
        "build: KeyError: 'ACME_WEIGHTS' (at /site/acme_env/models.py:11); ACME_WEIGHTS is set in this shell but not passed "
        "to workers: a resume or a rerun runs the scenario its bundle stores, whose env: does not name it, and gives its "
        "workers no other variable of this shell: take that scenario (its bundle.json `scenario`), add it to its env: "
        "(`env: [ACME_WEIGHTS]`) and run it afresh with `fusionbench run`"]
    assert fresh["reasons"][0].endswith(PASS_IT_ON)


class _FailsNamingWeights:
    """An executor whose every cell fails reading ACME_WEIGHTS, which its worker was not given."""

    slots: list[Any] = []

    def run(self, tasks: list[CellTask], on_phase: Any) -> Any:
        for task in tasks:
            on_phase(task, "start")
            answer = WorkerAnswer(status="failed", reasons=["build: KeyError: 'ACME_WEIGHTS' (at /site/acme_env/models.py:11)"],
                                  environment={"variables": {"PATH": "/usr/bin"}})
            yield Finished(task, WorkerOutcome(answer, 0, False, "build", 0.1), {"hostname": "h"})


@pytest.mark.parametrize("rerun_of", [None, {"run_id": "run", "created": "2026-12-07T00:00:00Z"}], ids=["run", "rerun"])
def test_the_sweep_tells_a_reruns_cell_and_no_other_to_run_the_stored_scenario_afresh(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rerun_of: dict[str, str] | None) -> None:
    """Which advice a cell gets is the sweep's to choose, from its bundle's `rerun_of`: the test
    above hands `finished_record` its answer, so a sweep that never passed it on would have passed."""
    from harness.bundle.header_record import BackendReport
    from harness.bundle.writer import Bundle
    from harness.run import sweep
    from harness.scenario.cells import expand
    from harness.scenario.schema import ScenarioFile
    from harness.scenario.settings import Limits

    data = {"models": [{"name": "resnet18", "input_size": 32}], "backends": ["null"], "scenarios": ["SingleStream"],
            "batch_sizes": {"cpu": [1]}}
    resolved = {**ScenarioFile.model_validate(data).model_dump(mode="json"), "name": "t"}
    cells = expand(resolved, "cpu")
    bundle = Bundle.create(tmp_path, "run", {"cells": [{"id": c.id, "label": c.label} for c in cells],
                                             **({"rerun_of": rerun_of} if rerun_of else {})})
    monkeypatch.setenv("ACME_WEIGHTS", "/data/acme")
    sweep.sweep(cells, bundle, {"null": BackendReport(available=True)}, Limits(), [], None, None,
                Console(file=io.StringIO()), executor=_FailsNamingWeights())
    [reason] = bundle.cells()[0]["reasons"]
    assert ("a resume or a rerun runs the scenario its bundle stores" in reason) == (rerun_of is not None), reason
    assert reason.endswith("and run it afresh with `fusionbench run`" if rerun_of else PASS_IT_ON), reason


def test_a_variable_whose_name_is_part_of_another_that_the_reason_names_is_still_said() -> None:
    """A plugin read ACME (unset in its worker) and failed on ACME_WEIGHTS: the reason names ACME_WEIGHTS,
    not ACME, which was said nowhere, as the plain substring match had it."""
    environment = {"variables": {"PATH": "/usr/bin"}, "plugin_reads_unset": ["ACME", "ACME_WEIGHTS"]}
    shell = {"ACME": "1", "ACME_WEIGHTS": "/data"}
    reasons = ["build: KeyError: 'ACME_WEIGHTS'"]
    warned = read_by_plugin(environment, reasons, shell, [])
    assert warned.startswith("the plugin model's code looked up ACME in its worker's environment"), warned
    told = not_passed_in(["build: acme_dirs missing"], {"acme_dir": "/d"}, [], {}, read=["acme_dir"])
    assert told == ["build: acme_dirs missing"]  # `acme_dirs` is not the variable acme_dir
