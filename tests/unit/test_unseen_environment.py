"""A run says which variables set where it starts can move a figure and reach no cell."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from harness.run import executors
from harness.run.executors import CellTask
from harness.run.isolation import WorkerOutcome, worker_environment
from harness.run.run_request import RunRequest
from harness.run.runner import run
from harness.run.unseen_environment import unseen, warning


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
