"""Cells run in parallel here (`--jobs 2`) and as tasks on a local Ray instance with 2 CPUs: the
same bundle as a serial run, cell for cell, with a crashing cell, and a resumed run in which a Ray
worker is killed mid-cell (the cell is run again, never lost)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.integration.test_cli_end_to_end import cells_of, only_bundle
from tests.integration.test_faults import cli, faults_env  # noqa: F401 - a fixture used here
from tests.run_processes import phase_of

pytestmark = [pytest.mark.slow, pytest.mark.whole_machine]  # parallel runs: tests/conftest.py
REPO = Path(__file__).resolve().parents[2]
SWEEP = ("models: [{name: resnet18, input_size: 32}]\nbackends: [null, eager, fault_segfault]\n"
         "scenarios: [SingleStream]\nloadgen: {min_duration_s: 0.3}\n"
         "timing: {warmup_iters: 2, min_iters: 10, min_time_s: 0.2, max_warmup_s: 0.5}\n")
#: What Ray says on stderr when `ray.init` starts a local instance.
RAY_STARTED = "Started a local Ray instance"


def ray_or_skip() -> None:
    pytest.importorskip("ray", reason="Ray is an optional extra (pip install .[ray])")


def structure(bundle: Path) -> dict[str, Any]:
    """What must be the same whatever executor ran the cells: ids, statuses, record keys, files."""
    cells = cells_of(bundle)
    return {cell_id: (cell["status"], sorted(set(cell) - {"node"}),
                      sorted(p.relative_to(bundle / "cells" / cell_id).parts[0]
                             for p in (bundle / "cells" / cell_id).rglob("*") if p.is_file()))
            for cell_id, cell in cells.items()}


@pytest.fixture(scope="module")
def serial(faults_env, tmp_path_factory: pytest.TempPathFactory) -> Path:  # noqa: F811
    work = tmp_path_factory.mktemp("serial")
    # The reference run's eager cell on one thread, as the parallel runs' cells are (the scenario's
    # env is no part of a cell's id or record keys): on cores another test keeps busy, two threads
    # wait for each other at every operator. The parallel runs keep SWEEP as it is, so that their
    # OMP_NUM_THREADS=1 is still the slot's doing.
    (work / "sweep.yaml").write_text(SWEEP + "env: [OMP_NUM_THREADS=1]\n")
    done = cli(faults_env, "run", str(work / "sweep.yaml"), "--out", str(work / "out"))
    assert done.returncode == 1, done.stdout + done.stderr  # the segfault cell fails
    return only_bundle(work / "out")


def test_two_local_jobs_give_the_serial_runs_bundle_on_cores_of_their_own(faults_env, serial, tmp_path: Path) -> None:  # noqa: F811
    (tmp_path / "sweep.yaml").write_text(SWEEP)
    done = cli(faults_env, "run", str(tmp_path / "sweep.yaml"), "--out", str(tmp_path / "out"), "--jobs", "2")
    assert done.returncode == 1, done.stdout + done.stderr
    bundle = only_bundle(tmp_path / "out")
    assert structure(bundle) == structure(serial)
    cells = cells_of(bundle).values()
    assert {tuple(c["node"]["slot"]["cpus"]) for c in cells} <= {(0,), (1,)}
    for cell in cells:
        if cell["status"] == "valid":  # bound to its slot's core, one thread
            assert cell["environment"]["cpu_affinity"] == cell["node"]["slot"]["cpus"]
            assert cell["environment"]["variables"]["OMP_NUM_THREADS"] == "1"
    header = json.loads((bundle / "bundle.json").read_text())
    assert header["executor"]["jobs"] == 2 and len(header["nodes"]) == 1
    # two at a time: other cells run between one cell's rounds, so a setting's rounds are not said to pair
    assert header["rounds_paired"] is None
    assert json.loads((serial / "bundle.json").read_text())["rounds_paired"] == "setting"
    assert cli(faults_env, "validate", str(bundle)).returncode == 0


def test_ray_runs_the_same_bundle_and_a_crashing_cell_fails_with_its_reason(faults_env, serial, tmp_path: Path) -> None:  # noqa: F811
    ray_or_skip()
    (tmp_path / "sweep.yaml").write_text(SWEEP)
    done = cli(faults_env, "run", str(tmp_path / "sweep.yaml"), "--out", str(tmp_path / "out"), "--executor", "ray")
    assert done.returncode == 1, done.stdout + done.stderr
    bundle = only_bundle(tmp_path / "out")
    assert structure(bundle) == structure(serial)
    cells = {c["config"]["backend"]: c for c in cells_of(bundle).values()}
    assert "worker killed by SIGSEGV" in cells["fault_segfault"]["reasons"][0]
    assert cells["eager"]["node"]["executor"] == "ray" and cells["eager"]["node"]["ray_node_id"]
    assert json.loads((bundle / "bundle.json").read_text())["executor"]["name"] == "ray"
    assert cli(faults_env, "validate", str(bundle)).returncode == 0


def _worker_of(backend: str, deadline: float) -> psutil.Process:
    """The cell worker process measuring `backend` (its request names it)."""
    while time.monotonic() < deadline:
        for process in psutil.process_iter(["cmdline"]):
            cmdline = process.info["cmdline"] or []
            if "harness.measure.worker" in cmdline:
                try:
                    request = json.loads(Path(cmdline[-1]).read_text())
                except (OSError, ValueError):
                    continue
                if request["cell"]["backend"] == backend:
                    return process
        time.sleep(0.2)
    raise AssertionError(f"no worker for {backend} started")


def _ray_run(env: dict[str, str], work: Path, backends: str, limits: str = "", *options: str) -> subprocess.Popen[str]:
    """A CLI run of `backends` on a local Ray instance, in the background (`options`: the CLI's own).

    One thread a cell, as test_faults.py's scenarios have: two threads on cores the suite's other
    tests keep busy wait for each other at every operator (an inference took 121 ms, 5 ms alone)."""
    (work / "sweep.yaml").write_text(
        f"models: [{{name: resnet18, input_size: 32}}]\nbackends: [{backends}]\nscenarios: [SingleStream]\n"
        "loadgen: {min_duration_s: 0.3}\ntiming: {warmup_iters: 2, min_iters: 10, min_time_s: 0.2, max_warmup_s: 0.5}\n"
        f"env: [OMP_NUM_THREADS=1]\n{limits}")
    return subprocess.Popen([sys.executable, "-m", "harness.cli", "run", str(work / "sweep.yaml"), "--out",
                             str(work / "out"), "--executor", "ray", *options],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_a_ray_run_stopped_by_sigterm_resumes_to_completion(faults_env, tmp_path: Path) -> None:  # noqa: F811
    ray_or_skip()
    # One cell at a time (both of Ray's 2 CPUs a cell), in the scenario's order: the hang starts once the
    # null cell is written, so its time limit never races the null cell's start-up (which took over
    # 20 s once, side by side with it on a loaded machine, and the hang's record came first). The
    # limit is the null cell's and the resumed cell's too, and only a cell gone wrong meets it (the
    # SIGTERM ends the hang, and the resume's call returns after a second): at 20 s it ran out in the
    # null cell's LoadGen phase once, in the whole suite on a slow start of the 2-core VM (2 s alone),
    # and at 60 s in the resumed cell's, whose inference took 121 ms there against 5 ms alone.
    run = _ray_run(faults_env, tmp_path, "null, fault_hang", "limits: {cell_timeout_s: 300}\n", "--cpus-per-cell", "2")
    try:
        deadline = time.monotonic() + 180
        written: set[str] = set()
        while time.monotonic() < deadline and not written:
            time.sleep(0.2)
            written = {json.loads(p.read_text())["config"]["backend"] for p in (tmp_path / "out").glob("*/cells/*.json")}
        assert written == {"null"}, written  # the null cell is written; the hanging one is running
        hang = _worker_of("fault_hang", deadline)
        while hang.is_running() and not phase_of(hang):  # its task said it started before its worker did
            time.sleep(0.1)
        run.send_signal(signal.SIGTERM)  # the driver reads that start as it stops, if it had not yet
        output, _ = run.communicate(timeout=120)
    finally:
        run.kill()
    assert run.returncode == 143, output
    bundle = only_bundle(tmp_path / "out")
    assert json.loads((bundle / "bundle.json").read_text())["state"] == "interrupted"
    cells = {c["config"]["backend"]: c for c in cells_of(bundle).values()}
    assert cells["null"]["status"] == "valid", cells["null"]["reasons"]
    assert cells["fault_hang"]["status"] == "interrupted"
    # Both were sent to Ray at once; the hang waited in its queue until the null cell's task ended, and
    # is recorded as started then, not when it was sent.
    started = {backend: datetime.fromisoformat(cell["started"]) for backend, cell in cells.items()}
    assert (started["fault_hang"] - started["null"]).total_seconds() >= int(cells["null"]["wall_s"]), cells
    refused = cli(faults_env, "run", "--resume", str(bundle), "--executor", "ray")  # 1 CPU a cell: another share
    assert refused.returncode == 2 and "its cells ran on a slot of 2 core(s) and this resume would run" in refused.stderr, \
        refused.stdout + refused.stderr
    assert RAY_STARTED not in refused.stderr, refused.stderr  # refused before a local instance was started for it
    gone, alive = psutil.wait_procs([hang], timeout=60)
    assert not alive, f"the stopped run's worker outlived it: {alive}"
    # The interrupted cell runs again from its start; its first call now returns after 3 s, so that the
    # resume need not wait out its time limit (a local run's hang meets its limit in test_faults.py). In
    # those 3 s the Ray worker that runs it is killed: Ray runs the cell again, and it is not lost (a run
    # of its own for that took about 12 CPU-s: its probe, a Ray instance and the cell's workers).
    resume = subprocess.Popen([sys.executable, "-m", "harness.cli", "run", "--resume", str(bundle), "--executor", "ray",
                               "--cpus-per-cell", "2"], cwd=REPO, env={**faults_env, "FUSIONBENCH_FAULT_HANG_S": "3"},
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        worker = _worker_of("fault_hang", time.monotonic() + 180)
        while worker.is_running() and phase_of(worker) != "first_call":
            time.sleep(0.1)
        ray_worker = worker.parent()
        assert ray_worker is not None and "harness.measure.worker" not in " ".join(ray_worker.cmdline())
        os.kill(ray_worker.pid, signal.SIGKILL)
        stdout, stderr = resume.communicate(timeout=600)
    finally:
        resume.kill()
    assert resume.returncode == 0, stdout + stderr
    assert RAY_STARTED in stderr, stderr  # what the refusal's stderr is read for
    assert not worker.is_running()  # the first attempt's worker died with its Ray worker
    cells = {c["config"]["backend"]: c for c in cells_of(bundle).values()}
    assert cells["null"]["status"] == "valid" and cells["fault_hang"]["status"] == "valid", cells["fault_hang"]["reasons"]
    assert json.loads((bundle / "bundle.json").read_text())["state"] == "complete"
    assert cli(faults_env, "validate", str(bundle)).returncode == 0


def test_asking_for_ray_without_it_says_how_to_get_it(tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text(SWEEP.replace(", fault_segfault", ""))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(tmp_path / "no-ray"), os.environ.get("PYTHONPATH"))))}
    (tmp_path / "no-ray").mkdir()
    (tmp_path / "no-ray" / "ray.py").write_text("raise ImportError('no ray here')\n")
    done = subprocess.run([sys.executable, "-m", "harness.cli", "run", str(tmp_path / "s.yaml"), "--out",
                           str(tmp_path / "out"), "--executor", "ray"], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2 and "pip install .[ray]" in done.stderr, done.stdout + done.stderr
    assert not (tmp_path / "out").exists()
