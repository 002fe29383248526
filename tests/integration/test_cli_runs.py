"""The real CLI on small sweeps of its own: a sweep in which some cells fail or are skipped while
the others still run, on image-folder inputs and with `--fresh-workers` (one run), a bad option
refused before anything is written, Ctrl-C and SIGTERM mid-run then resume, markup-like text
printed as it is, a GPU bundle not resumed without a GPU, and `--resume --only` (and a resume's
warning where cells ran on another start of the machine). (Kept apart from
test_cli_end_to_end.py, whose tests share one smoke run, so that pytest-xdist can run the two
modules side by side.)"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from harness.bundle import manifest
from harness.bundle.migrations import SCHEMA_VERSION
from tests.integration.test_cli_end_to_end import REPO, cells_of, fusionbench, only_bundle
from tests.run_processes import phase_of, workers_of

pytestmark = pytest.mark.slow
# The sweeps here are of the harness's plumbing, not of figures: each cell measures briefly, and a
# cell of a model runs one thread (OMP_NUM_THREADS=1), as a cell of a parallel run does. Two
# threads on a machine whose cores another test keeps busy wait for each other at every operator:
# an eager cell then took 30-60 CPU-seconds instead of about 12.
BRIEF = ("timing: {min_time_s: 0.1, max_warmup_s: 0.5, repetitions: 2}\n"
         "passes: {memory_iters: 1, profile_iters: 1}\n"
         "env: [OMP_NUM_THREADS=1]\n")


@pytest.fixture(scope="module")
def folder_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path, Path, Path]:
    """One eager cell on images from a folder named relative to the scenario file, its worker started
    as a new Python (`--fresh-workers`), beside two cells this machine skips (TensorRT, and ONNX
    Runtime's CUDA provider in a CPU run): the run of the three tests below (two runs less than each
    making its own). Returns the run, its bundle, the images' folder and the scenario file."""
    from PIL import Image

    work = tmp_path_factory.mktemp("folder-run")
    images = work / "images"
    images.mkdir()
    for i, colour in enumerate(["red", "green", "blue", "white"]):
        Image.new("RGB", (80, 60), colour).save(images / f"{i}.jpg")
    scenario = work / "folder.yaml"
    scenario.write_text(
        "models: [{name: resnet18, input_size: 48}]\n"
        "backends:\n"
        "  - eager\n"
        "  - tensorrt\n"
        "  - {name: onnxruntime, options: {provider: cuda}}\n"
        "scenarios: [SingleStream]\n"
        "inputs: {source: folder, path: images, samples: 3}\n"
        "loadgen: {min_duration_s: 0.2}\n" + BRIEF
    )
    out = work / "results"
    # cwd is the repository, not the scenario's folder
    done = fusionbench("run", str(scenario), "--out", str(out), "--device", "cpu", "--fresh-workers")
    assert done.returncode == 0, done.stdout + done.stderr
    return done, only_bundle(out), images, scenario


def eager_cell(bundle: Path) -> dict[str, Any]:
    """The one cell of folder_run's bundle that ran (eager's; the other two were skipped)."""
    (cell,) = (c for c in cells_of(bundle).values() if c["config"]["backend"] == "eager")
    return cell


def test_fresh_workers_start_each_cell_as_a_new_python(folder_run) -> None:
    """The default forks each worker from a preloaded parent (test_cli_end_to_end.py's smoke run
    shows it); --fresh-workers starts each as `python -m harness.measure.worker`, and says so."""
    _, bundle, _, _ = folder_run
    cell = eager_cell(bundle)
    assert cell["metrics"]["memory"]["worker_start"] == "fresh" and cell["phases_s"]["import"] > 0.5  # torch, imported
    assert json.loads((bundle / "bundle.json").read_text())["executor"]["worker_start"] == "fresh"


def test_image_folder_inputs_relative_to_the_scenario_file(folder_run) -> None:
    _, bundle, images, _ = folder_run
    header = json.loads((bundle / "bundle.json").read_text())
    assert header["input_folder"] == str(images.resolve())
    cell = eager_cell(bundle)
    assert cell["status"] == "valid" and cell["config"]["inputs"]["path"] == "images"


def test_skipped_cells_do_not_stop_the_sweep(folder_run, tmp_path: Path) -> None:
    done, bundle, _, scenario = folder_run
    assert done.returncode == 0, done.stdout + done.stderr
    statuses = {(c["config"]["backend"], c["config"]["variant"]["fusion"], bool(c["config"]["variant"]["options"])): c
                for c in cells_of(bundle).values()}
    assert statuses[("eager", "on", False)]["status"] == "valid"
    skipped = statuses[("tensorrt", "on", False)]
    assert skipped["status"] == "skipped" and "TensorRT runs only on NVIDIA GPUs" in skipped["reasons"][0]
    # a provider the cell's device lacks is skipped as TensorRT on a CPU is (it failed in prepare, 2026-12-01)
    provider = statuses[("onnxruntime", "on", True)]
    assert provider["status"] == "skipped"
    assert provider["reasons"] == ["onnxruntime provider=cuda runs cuda cells; this cell is cpu"]
    # each cell's line says how far the run is, for a log that shows no bar: the skipped ones are written first
    counts = re.findall(r"^ *(valid|skipped|failed) resnet18 .*\(\d+\.\d s, (\d)/3\)", done.stdout, re.MULTILINE)
    assert [n for _, n in counts] == ["1", "2", "3"] and [s for s, _ in counts] == ["skipped", "skipped", "valid"], done.stdout
    # a run that skipped every cell measured nothing: not a pass for a script or a CI gate
    done = fusionbench("run", str(scenario), "--out", str(tmp_path / "none"), "--device", "cpu", "--only", "backend=tensorrt")
    assert done.returncode == 4, done.stdout + done.stderr
    assert "nothing measured: every cell run (1) was skipped, each for its reason above" in done.stdout.replace("\n", " ")
    done = fusionbench("run", "--resume", str(only_bundle(tmp_path / "none")))  # complete: left as it was, the run's code
    assert done.returncode == 4 and "it measured nothing: every cell was skipped" in done.stdout.replace("\n", " "), done.stdout


def test_a_bad_backend_option_stops_the_run_before_anything_is_written(tmp_path: Path) -> None:
    scenario = tmp_path / "typo.yaml"
    scenario.write_text(
        "models: [resnet18]\n"
        "backends:\n"
        "  - eager\n"
        "  - name: onnxruntime\n"
        "    options: {levle: all}\n"
        "scenarios: [Offline]\n"
    )
    out = tmp_path / "results"
    done = fusionbench("run", str(scenario), "--out", str(out), "--device", "cpu")
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"{scenario}:5: backends[1].options: onnxruntime: unknown option levle (allowed: level, " in done.stderr
    assert not out.exists()


def _stopped_after_one_more_cell(command: list[str], out: Path, stop: str) -> str:
    """Run `command` and send it `stop` once one more cell is valid and the next cell's worker is in its
    LoadGen phase; return its output, having checked its exit code (130 for SIGINT, 143 for SIGTERM)."""
    import signal

    def valid() -> int:
        return sum(json.loads(path.read_text())["status"] == "valid" for path in out.glob("*/cells/*.json"))

    before = valid()
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", *command], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
        # a test runner started in the background inherits SIGINT ignored; a user's terminal does not
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and valid() <= before:
            time.sleep(0.2)
        # the next cell is in LoadGen's 2 s, so the stop lands in it on any machine: a fixed 0.5 s after its
        # worker started stood in for that, and a quick machine had finished the cell in 0.2 s once
        while proc.poll() is None and time.monotonic() < deadline and not any(
                phase_of(worker) == "loadgen" for worker in workers_of(proc.pid)):
            time.sleep(0.05)
        assert time.monotonic() < deadline, "the next cell never reached its LoadGen phase"
        proc.send_signal(getattr(signal, stop))  # Ctrl-C, or docker stop / Slurm / Ray
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == {"SIGINT": 130, "SIGTERM": 143}[stop], stdout + stderr
    return stdout


def test_ctrl_c_and_sigterm_keep_finished_cells_and_resume_completes(tmp_path: Path) -> None:
    """Ctrl-C stops the run, SIGTERM stops its resume, and a second resume completes the bundle:
    each stop keeps the cells finished before it and marks the one it cut short."""
    # Three cells of the null backend (SingleStream at batch 1, Offline at 1 and 2), chosen with --only
    # from six (the resume runs what the bundle planned, not the file's every cell): what is shown is
    # the harness's, not a model's.
    scenario = tmp_path / "stop.yaml"
    # LoadGen's 2 s a cell: the stop, sent as the next cell's LoadGen phase begins, lands in it
    scenario.write_text("models: [{name: resnet18, input_size: 32}]\nbackends: [null, eager]\n"
                        "scenarios: [SingleStream, Offline]\nbatch_sizes: {cpu: [1, 2]}\n"
                        "loadgen: {min_duration_s: 1}\n" + BRIEF)
    out = tmp_path / "results"
    _stopped_after_one_more_cell(["run", str(scenario), "--device", "cpu", "--out", str(out), "--only", "backend=null"],
                                 out, "SIGINT")
    bundle = only_bundle(out)
    assert sorted(c["status"] for c in cells_of(bundle).values()) == ["interrupted", "valid"]
    cut = next(c for c in cells_of(bundle).values() if c["status"] == "interrupted")
    assert cut["reasons"] == ["interrupted by Ctrl-C (SIGINT)"] and cut["wall_s"] > 0.1, cut  # it ran into LoadGen, not 0
    assert json.loads((bundle / "bundle.json").read_text())["state"] == "interrupted"
    check = fusionbench("validate", str(bundle))
    assert check.returncode == 0, check.stdout + check.stderr
    stdout = _stopped_after_one_more_cell(["run", "--resume", str(bundle)], out, "SIGTERM")
    assert "3 cell(s) on cpu, 2 to run" in stdout
    assert sorted(c["status"] for c in cells_of(bundle).values()) == ["interrupted", "valid", "valid"]
    cut = next(c for c in cells_of(bundle).values() if c["status"] == "interrupted")
    assert cut["reasons"] == ["stopped by SIGTERM (a timeout, docker stop or a scheduler's limit)"], cut  # no user's
    assert json.loads((bundle / "bundle.json").read_text())["state"] == "interrupted"
    done = fusionbench("run", "--resume", str(bundle))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 cell(s) on cpu, 1 to run" in done.stdout
    assert sorted(c["status"] for c in cells_of(bundle).values()) == ["valid"] * 3
    assert json.loads((bundle / "bundle.json").read_text())["state"] == "complete"
    check = fusionbench("validate", str(bundle))
    assert check.returncode == 0, check.stdout + check.stderr


@pytest.fixture(scope="module")
def null_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    """One run of the null backend in both scenarios, into a folder whose name looks like Rich
    markup: its output is the markup test's, and its bundle the one the `--resume --only` test
    empties and resumes (a run less than each making its own)."""
    work = tmp_path_factory.mktemp("null-run")
    scenario = work / "null.yaml"
    scenario.write_text("models: [{name: resnet18, input_size: 32}]\nbackends: [null]\nscenarios: [SingleStream, Offline]\n"
                        "loadgen: {min_duration_s: 0.2}\ntiming: {min_time_s: 0.05, repetitions: 2}\n")
    out = work / "[bold]results[/bold]"
    return fusionbench("run", str(scenario), "--out", str(out), "--device", "cpu"), out


def test_user_text_that_looks_like_markup_is_printed_as_it_is(null_run) -> None:
    done, out = null_run
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"bundle: {out}" in done.stdout.replace("\n", ""), done.stdout


def test_each_cell_records_when_it_started_not_when_the_run_planned_it(null_run) -> None:
    """Every cell's `started` was the run's start: which cells overlapped could not be read."""
    done, out = null_run
    assert done.returncode == 0, done.stdout + done.stderr
    cells = sorted(cells_of(only_bundle(out)).values(), key=lambda c: c["started"])
    assert len(cells) == 2 and cells[0]["started"] <= cells[0]["finished"] <= cells[1]["started"], cells  # to the second


def test_the_bundle_records_the_command_as_the_cli_takes_it(null_run) -> None:
    """Started as `python -m harness.cli` (as ./run.sh starts it), the bundle's command began with
    the module's path: a reader could not run it again as written."""
    done, out = null_run
    assert done.returncode == 0, done.stdout + done.stderr
    header = json.loads((only_bundle(out) / "bundle.json").read_text())
    assert header["command"] == ["fusionbench", "run", *done.args[4:]], header["command"]


def test_a_gpu_bundle_is_not_resumed_on_a_machine_without_one(tmp_path: Path) -> None:
    import os
    import shutil

    from harness.bundle import manifest
    from harness.bundle.validate import validate
    from harness.scenario.cells import cell_id
    from harness.scenario.rules import batches_in_flight

    bundle = tmp_path / "gpu-run"
    shutil.copytree(REPO / "tests" / "golden" / f"v{SCHEMA_VERSION}", bundle)  # a bundle this harness resumes
    header = json.loads((bundle / "bundle.json").read_text())
    header["device"] = "cuda"
    header["state"] = "interrupted"
    for entry in header["cells"]:  # the golden CPU cells, as a GPU run would have recorded them (valid to validate)
        record = json.loads((bundle / "cells" / f"{entry['id']}.json").read_text())
        record["config"]["device"] = "cuda"
        sut = (record["metrics"].get("loadgen") or {}).get("sut")
        if sut and "batches_in_flight" in sut:  # a GPU cell's system under test pipelines its batches,
            sut["batches_in_flight"] = batches_in_flight(record["config"]["scenario"], True, record["config"]["batch"])
            agreement = record["metrics"].get("latency_agreement") or {}
            if sut["batches_in_flight"] > 1 and agreement.get("gap") is not None:  # and only falling behind counts
                agreement["within"] = agreement["gap"] <= agreement["limit"]
        record["id"] = cell_id(record["config"])
        record["label"] = entry["label"] = entry["label"].replace(" cpu ", " cuda ")
        (bundle / "cells" / f"{entry['id']}.json").unlink()
        if (bundle / "cells" / entry["id"]).is_dir():  # a skipped cell has no folder of logs
            (bundle / "cells" / entry["id"]).rename(bundle / "cells" / record["id"])
        moved = json.dumps(record, indent=1).replace(f"cells/{entry['id']}/", f"cells/{record['id']}/")  # its logs
        (bundle / "cells" / f"{record['id']}.json").write_text(moved)
        entry["id"] = record["id"]
    (bundle / "bundle.json").write_text(json.dumps(header, indent=1))
    manifest.write(bundle)
    assert validate(bundle).ok, validate(bundle).problems
    (bundle / "cells" / f"{header['cells'][0]['id']}.json").unlink()  # one cell to run: a GPU one
    shutil.rmtree(bundle / "cells" / header["cells"][0]["id"])
    before = {p: p.read_bytes() for p in bundle.rglob("*") if p.is_file()}
    # no GPU visible to the run, whether or not this machine has one
    done = subprocess.run([sys.executable, "-m", "harness.cli", "run", "--resume", str(bundle)], capture_output=True,
                          text=True, timeout=900, cwd=REPO, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    assert done.returncode == 2, done.stdout + done.stderr
    assert "was run on cuda and torch sees no CUDA device" in done.stderr
    assert {p: p.read_bytes() for p in bundle.rglob("*") if p.is_file()} == before  # nothing lost, nothing marked


def test_a_new_run_on_cuda_is_refused_on_a_machine_without_one(tmp_path: Path) -> None:
    """Every cell would be skipped, the run exit 0 and a --resume on a GPU find nothing to run."""
    import os

    scenario = tmp_path / "gpu.yaml"
    scenario.write_text("device: cuda\nmodels: [resnet18]\nbackends: [null]\nscenarios: [Offline]\n")
    out = tmp_path / "results" / "today"
    refusal = f"device cuda: torch sees no CUDA device on this machine; run {scenario} on a machine with a GPU"
    no_gpu = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run([sys.executable, "-m", "harness.cli", "run", str(scenario), "--out", str(out), "--cache-dir",
                           str(tmp_path / "new" / "cache")], capture_output=True, text=True, timeout=900, cwd=REPO, env=no_gpu)
    assert done.returncode == 2, done.stdout + done.stderr
    assert refusal in done.stderr
    # no bundle, and not the folders the run made for it on its way to the refusal (it skips the noise probe)
    assert [p.name for p in tmp_path.iterdir()] == ["gpu.yaml"], sorted(map(str, tmp_path.rglob("*")))
    # the dry run refuses it as the run does (it listed every cell as one to run, exit 0)
    done = subprocess.run([sys.executable, "-m", "harness.cli", "run", str(scenario), "--dry-run"], capture_output=True,
                          text=True, timeout=900, cwd=REPO, env=no_gpu)
    assert done.returncode == 2 and refusal in done.stderr, done.stdout + done.stderr


def test_resume_with_only_leaves_the_other_missing_cells_missing(null_run) -> None:
    done, out = null_run
    assert done.returncode == 0, done.stdout + done.stderr
    bundle = only_bundle(out)
    for cell in (bundle / "cells").glob("*.json"):
        cell.unlink()
    done = fusionbench("run", "--resume", str(bundle), "--only", "scenario=SingleStream")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 cell(s) of the bundle not run yet (outside --only): complete" in done.stdout.replace("\n", " ")
    assert json.loads((bundle / "bundle.json").read_text())["state"] == "interrupted"
    assert fusionbench("validate", str(bundle)).returncode == 0
    assert "another start of the machine" not in done.stdout.replace("\n", " ")
    # the cell that ran as if on an earlier start of the machine: the resume says so, and runs
    [finished] = cells_of(bundle).values()
    finished["node"]["boot_id"] = "b" * 36
    (bundle / "cells" / f"{finished['id']}.json").write_text(json.dumps(finished))
    manifest.write(bundle)
    done = fusionbench("run", "--resume", str(bundle))
    assert done.returncode == 0 and "1 to run" in done.stdout, done.stdout + done.stderr
    said = " ".join(done.stdout.split())
    assert f"warning: 1 of the bundle's timed cells ran on another start of the machine (boot {'b' * 8}; this is " in said, said
    assert json.loads((bundle / "bundle.json").read_text())["state"] == "complete"
    assert sorted(c["status"] for c in cells_of(bundle).values()) == ["valid", "valid"]


def test_a_run_whose_reader_goes_away_finishes_its_bundle(tmp_path: Path) -> None:
    """`fusionbench run ... | head -1`: the first line after the bundle was made stopped the run,
    its bundle left `running`. A run goes on with its output discarded."""
    import os

    scenario = tmp_path / "s.yaml"
    scenario.write_text("device: cpu\nmodels: [{name: resnet18, input_size: 32}]\nbackends: [null]\nscenarios: [Offline]\n"
                        "inputs: {samples: 8}\nloadgen: {min_duration_s: 0.2}\n"
                        "timing: {min_time_s: 0.05, min_iters: 2, repetitions: 2, warmup_iters: 1}\n")
    child = subprocess.Popen([sys.executable, "-m", "harness.cli", "run", str(scenario), "--out", str(tmp_path / "out"),
                              "--no-cache"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO,
                             env={**os.environ, "FUSIONBENCH_NOISE_PROBE_S": "0.1"})
    assert child.stdout is not None and child.stderr is not None
    child.stdout.close()
    assert child.wait(timeout=600) == 0, child.stderr.read()
    bundle = only_bundle(tmp_path / "out")
    assert json.loads((bundle / "bundle.json").read_text())["state"] == "complete"
