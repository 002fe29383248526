"""The real CLI end to end: scenarios/smoke.yaml on this machine, the bundle it leaves, resume,
and a sweep in which some cells fail or are skipped while the others still run."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
# smoke.yaml: resnet18 x (eager, inductor on/off, onnxruntime on/off, tvm on/off, tensorrt on/off,
# null) x (SingleStream, Offline)
SMOKE_CELLS = 20
SMOKE_JOBS = min(2, len(os.sched_getaffinity(0)))


def fusionbench(*args: str, timeout: int = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO)


def only_bundle(out: Path) -> Path:
    runs = [p for p in out.iterdir() if p.is_dir()]
    assert len(runs) == 1, runs
    return runs[0]


def cells_of(bundle: Path) -> dict[str, dict[str, Any]]:
    return {p.stem: json.loads(p.read_text()) for p in (bundle / "cells").glob("*.json")}


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path_factory.mktemp("smoke")
    # Two cells at a time, each on a core of its own: 2.5 min instead of 4 on 2 cores. The other
    # tests of this module run cells one at a time, and tests/integration/test_executors.py shows
    # that two jobs give the serial run's bundle.
    done = fusionbench("run", "scenarios/smoke.yaml", "--device", "cpu", "--jobs", str(SMOKE_JOBS), "--out", str(out))
    return done, only_bundle(out)


def test_smoke_runs_clean(smoke) -> None:
    done, _ = smoke
    assert done.returncode == 0, done.stdout + done.stderr
    assert "FusionBench results" in done.stdout


def test_bundle_header_describes_the_run(smoke) -> None:
    _, bundle = smoke
    header = json.loads((bundle / "bundle.json").read_text())
    assert header["schema_version"] == 3 and header["device"] == "cpu" and header["state"] == "complete"
    assert header["scenario"]["name"] == "smoke" and len(header["scenario_sha256"]) == 64
    assert header["harness"]["version"]
    system = header["system"]
    assert system["packages"]["torch"].startswith(("2.14", "2.11")) and "mlcommons-loadgen" in system["packages"]
    assert system["cpu"]["logical_cores"] >= 1 and system["python"]["version"]
    assert header["backends"]["eager"]["available"]
    assert len(header["cells"]) == SMOKE_CELLS
    assert header["executor"]["jobs"] == SMOKE_JOBS
    assert len({tuple(slot["cpus"]) for slot in header["executor"]["slots"]}) == SMOKE_JOBS, "a core of its own"


def test_every_cell_is_valid_with_loadgen_logs(smoke) -> None:
    _, bundle = smoke
    cells = cells_of(bundle)
    assert len(cells) == SMOKE_CELLS
    for cell_id, cell in cells.items():
        if cell["config"]["backend"] == "tensorrt":  # no GPU here: skipped, with the reason
            assert cell["status"] == "skipped" and "NVIDIA GPU" in cell["reasons"][0]
            continue
        assert cell["status"] == "valid", (cell["label"], cell["reasons"], cell.get("log_tail"))
        lg = cell["metrics"]["loadgen"]
        assert lg["validity"] == "VALID"
        summary = bundle / "cells" / cell_id / lg["log_dir"] / "mlperf_log_summary.txt"
        assert "Result is : VALID" in summary.read_text()
        assert cell["metrics"]["device_time"]["summary"]["n"] >= 10
        assert cell["metrics"]["correctness"]["ok"]


def test_inductor_fuses_and_matches_eager(smoke) -> None:
    _, bundle = smoke
    by = {(c["config"]["backend"], c["config"]["variant"]["fusion"], c["config"]["scenario"]): c
          for c in cells_of(bundle).values()}
    eager, inductor = by[("eager", "on", "Offline")]["metrics"], by[("inductor", "on", "Offline")]["metrics"]
    assert inductor["kernels"]["kernels_per_inference"] < eager["kernels"]["kernels_per_inference"]
    assert inductor["fusion_report"]["fusion_count"] > 0 and eager["fusion_report"]["fusion_count"] == 0
    assert inductor["correctness"]["max_abs_error"] <= inductor["correctness"]["max_abs_error_limit"]
    assert inductor["prepare_s"] > eager["prepare_s"]
    assert (inductor["prepare_cache"], eager["prepare_cache"]) == ("cold", "none")
    assert by[("null", "on", "Offline")]["metrics"]["kernels"]["kernels_per_inference"] == 0


@pytest.mark.parametrize("backend", ["inductor", "onnxruntime", "tvm"])
def test_fusion_off_runs_more_kernels_unfused_and_still_matches(smoke, backend: str) -> None:
    _, bundle = smoke
    by = {(c["config"]["backend"], c["config"]["variant"]["fusion"], c["config"]["scenario"]): c["metrics"]
          for c in cells_of(bundle).values()}
    for scenario in ("SingleStream", "Offline"):
        on, off = by[(backend, "on", scenario)], by[(backend, "off", scenario)]
        assert off["kernels"]["kernels_per_inference"] > on["kernels"]["kernels_per_inference"]
        assert on["fusion_report"]["fusion_count"] > 0 and off["fusion_report"]["fusion_count"] == 0
        assert off["correctness"]["ok"] and on["correctness"]["ok"]


def test_the_bundle_validates_and_carries_its_report(smoke) -> None:
    _, bundle = smoke
    done = fusionbench("validate", str(bundle))
    assert done.returncode == 0, done.stdout + done.stderr
    page = (bundle / "report.html").read_text()
    assert 'id="plot-fusion"' in page and 'id="plot-speedup"' in page
    assert "## Fusion on vs off" in (bundle / "report.md").read_text()


def test_roofline_per_cell_and_the_fusion_summary(smoke) -> None:
    done, bundle = smoke
    assert "Fusion on vs off" in done.stdout
    peaks = json.loads((bundle / "bundle.json").read_text())["system"]["peaks"]
    assert peaks["flops_per_s"]["fp32"] > 1e8 and peaks["bytes_per_s"] > 1e8
    by = {(c["config"]["backend"], c["config"]["variant"]["fusion"], c["config"]["scenario"]): c["metrics"]
          for c in cells_of(bundle).values()}
    eager = by[("eager", "on", "Offline")]["roofline"]
    assert eager["flops"] > 0 and eager["compulsory_bytes"] > eager["weight_bytes"] > 0
    assert 0 < eager["fraction_of_bound"] < 1.5 and eager["bound_by"] in ("compute", "memory")
    assert by[("inductor", "on", "Offline")]["roofline"]["flops"] == eager["flops"]  # a property of the model
    assert "computes no model" in by[("null", "on", "Offline")]["roofline"]["note"]
    report = (bundle / "report.md").read_text()
    assert "## Roofline" in report and "| resnet18 | eager fusion-on | Offline b4 fp32 cpu |" in report


def test_manifest_matches_files(smoke) -> None:
    _, bundle = smoke
    listed = {}
    for line in (bundle / "MANIFEST.sha256").read_text().splitlines():
        digest, rel = line.split("  ", 1)
        listed[rel] = digest
    on_disk = {p.relative_to(bundle).as_posix() for p in bundle.rglob("*") if p.is_file()} - {"MANIFEST.sha256"}
    assert set(listed) == on_disk
    for rel, digest in listed.items():
        assert hashlib.sha256((bundle / rel).read_bytes()).hexdigest() == digest


def test_resume_runs_only_missing_cells(smoke) -> None:
    _, bundle = smoke
    before = cells_of(bundle)
    done = fusionbench("run", "--resume", str(bundle))
    assert done.returncode == 0, done.stderr
    assert f"{SMOKE_CELLS} cell(s) on cpu, 0 to run" in done.stdout
    null_offline = next(k for k, c in before.items() if c["config"]["backend"] == "null" and c["config"]["scenario"] == "Offline")
    (bundle / "cells" / f"{null_offline}.json").unlink()
    done = fusionbench("run", "scenarios/smoke.yaml", "--device", "cpu", "--resume", str(bundle))
    assert done.returncode == 0, done.stderr
    assert f"{SMOKE_CELLS} cell(s) on cpu, 1 to run" in done.stdout
    after = cells_of(bundle)
    assert set(after) == set(before)
    assert after[null_offline]["status"] == "valid"
    unchanged = [k for k in before if k != null_offline]
    assert all(after[k] == before[k] for k in unchanged)
    assert len(json.loads((bundle / "bundle.json").read_text())["resumed"]) == 2


def test_resume_refuses_a_different_scenario(smoke, tmp_path: Path) -> None:
    _, bundle = smoke
    other = tmp_path / "smoke.yaml"
    other.write_text((REPO / "scenarios" / "smoke.yaml").read_text().replace("min_duration_s: 2", "min_duration_s: 3"))
    done = fusionbench("run", str(other), "--device", "cpu", "--resume", str(bundle))
    assert done.returncode == 2 and "differs from the scenario stored" in done.stderr


def test_failures_and_skips_do_not_stop_the_sweep(tmp_path: Path) -> None:
    scenario = tmp_path / "mixed.yaml"
    scenario.write_text(
        "models: [{name: resnet18, input_size: 32}]\n"
        "backends:\n"
        "  - eager\n"
        "  - tensorrt\n"
        "  - {name: onnxruntime, options: {provider: cuda}}\n"
        "scenarios: [SingleStream]\n"
        "loadgen: {min_duration_s: 0.5}\n"
        "timing: {min_time_s: 0.1}\n"
    )
    out = tmp_path / "results"
    done = fusionbench("run", str(scenario), "--out", str(out), "--device", "cpu")
    assert done.returncode == 1, done.stdout + done.stderr
    statuses = {(c["config"]["backend"], c["config"]["variant"]["fusion"], bool(c["config"]["variant"]["options"])): c
                for c in cells_of(only_bundle(out)).values()}
    assert statuses[("eager", "on", False)]["status"] == "valid"
    skipped = statuses[("tensorrt", "on", False)]
    assert skipped["status"] == "skipped" and "TensorRT runs only on NVIDIA GPUs" in skipped["reasons"][0]
    failed = statuses[("onnxruntime", "on", True)]
    assert failed["status"] == "failed"
    assert failed["reasons"] == ["prepare: onnxruntime provider=cuda cannot run a cpu cell"]
    assert "failed or invalid" in done.stdout


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


def _workers_of(pid: int) -> list[Any]:
    import psutil

    try:
        return [p for p in psutil.Process(pid).children(recursive=True) if "harness.measure.worker" in " ".join(p.cmdline())]
    except psutil.Error:
        return []


@pytest.mark.parametrize(("stop", "code"), [("SIGINT", 130), ("SIGTERM", 143)])
def test_ctrl_c_keeps_finished_cells_and_resume_completes(tmp_path: Path, stop: str, code: int) -> None:
    import signal

    out = tmp_path / "results"
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness.cli", "run", "scenarios/smoke.yaml", "--device", "cpu", "--out", str(out),
         "--only", "backend=eager"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        # a test runner started in the background inherits SIGINT ignored; a user's terminal does not
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not list(out.glob("*/cells/*.json")):
        time.sleep(0.2)
    while time.monotonic() < deadline and not _workers_of(proc.pid):  # the second cell's worker runs
        time.sleep(0.1)
    time.sleep(0.5)
    proc.send_signal(getattr(signal, stop))  # Ctrl-C, or docker stop / Slurm / Ray
    stdout, _ = proc.communicate(timeout=60)
    assert proc.returncode == code, stdout
    bundle = only_bundle(out)
    statuses = sorted(c["status"] for c in cells_of(bundle).values())
    assert statuses == ["interrupted", "valid"]
    assert json.loads((bundle / "bundle.json").read_text())["state"] == "interrupted"
    check = fusionbench("validate", str(bundle))
    assert check.returncode == 0, check.stdout + check.stderr
    done = fusionbench("run", "--resume", str(bundle))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 cell(s) on cpu, 1 to run" in done.stdout
    assert sorted(c["status"] for c in cells_of(bundle).values()) == ["valid", "valid"]
    assert json.loads((bundle / "bundle.json").read_text())["state"] == "complete"


def test_image_folder_inputs_relative_to_the_scenario_file(tmp_path: Path) -> None:
    from PIL import Image

    images = tmp_path / "images"
    images.mkdir()
    for i, colour in enumerate(["red", "green", "blue", "white"]):
        Image.new("RGB", (80, 60), colour).save(images / f"{i}.jpg")
    scenario = tmp_path / "folder.yaml"
    scenario.write_text(
        "models: [{name: resnet18, input_size: 48}]\nbackends: [eager]\nscenarios: [SingleStream]\n"
        "inputs: {source: folder, path: images, samples: 3}\n"
        "loadgen: {min_duration_s: 0.5}\ntiming: {min_time_s: 0.1}\n"
    )
    out = tmp_path / "results"
    done = fusionbench("run", str(scenario), "--out", str(out), "--device", "cpu")  # cwd is the repository
    assert done.returncode == 0, done.stdout + done.stderr
    bundle = only_bundle(out)
    header = json.loads((bundle / "bundle.json").read_text())
    assert header["input_folder"] == str(images.resolve())
    (cell,) = cells_of(bundle).values()
    assert cell["status"] == "valid" and cell["config"]["inputs"]["path"] == "images"


def test_resume_checks_the_device_it_ran_on(smoke) -> None:
    _, bundle = smoke
    done = fusionbench("run", "--resume", str(bundle), "--device", "cuda")
    assert done.returncode == 2 and "was run on cpu" in done.stderr


def test_user_text_that_looks_like_markup_is_printed_as_it_is(tmp_path: Path) -> None:
    scenario = tmp_path / "null.yaml"
    scenario.write_text("models: [{name: resnet18, input_size: 32}]\nbackends: [null]\nscenarios: [SingleStream]\n"
                        "loadgen: {min_duration_s: 0.2}\ntiming: {min_time_s: 0.05, repetitions: 2}\n")
    out = tmp_path / "[bold]results[/bold]"
    done = fusionbench("run", str(scenario), "--out", str(out), "--device", "cpu")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"bundle: {out}" in done.stdout.replace("\n", ""), done.stdout


def test_a_gpu_bundle_is_not_resumed_on_a_machine_without_one(tmp_path: Path) -> None:
    import shutil

    import torch

    from harness.bundle import manifest

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA device: there is nothing to refuse here")
    from harness.bundle.validate import validate
    from harness.scenario.cells import cell_id

    bundle = tmp_path / "gpu-run"
    shutil.copytree(REPO / "tests" / "golden" / "v3", bundle)
    header = json.loads((bundle / "bundle.json").read_text())
    header["device"] = "cuda"
    header["state"] = "interrupted"
    for entry in header["cells"]:  # the golden CPU cells, as a GPU run would have recorded them (valid to validate)
        record = json.loads((bundle / "cells" / f"{entry['id']}.json").read_text())
        record["config"]["device"] = "cuda"
        record["id"] = cell_id(record["config"])
        record["label"] = entry["label"] = entry["label"].replace(" cpu ", " cuda ")
        (bundle / "cells" / f"{entry['id']}.json").unlink()
        (bundle / "cells" / entry["id"]).rename(bundle / "cells" / record["id"])
        (bundle / "cells" / f"{record['id']}.json").write_text(json.dumps(record, indent=1))
        entry["id"] = record["id"]
    (bundle / "bundle.json").write_text(json.dumps(header, indent=1))
    manifest.write(bundle)
    assert validate(bundle).ok, validate(bundle).problems
    (bundle / "cells" / f"{header['cells'][0]['id']}.json").unlink()  # one cell to run: a GPU one
    shutil.rmtree(bundle / "cells" / header["cells"][0]["id"])
    before = {p: p.read_bytes() for p in bundle.rglob("*") if p.is_file()}
    done = fusionbench("run", "--resume", str(bundle))
    assert done.returncode == 2, done.stdout + done.stderr
    assert "was run on cuda and torch sees no CUDA device" in done.stderr
    assert {p: p.read_bytes() for p in bundle.rglob("*") if p.is_file()} == before  # nothing lost, nothing marked


def test_resume_with_only_leaves_the_other_missing_cells_missing(tmp_path: Path) -> None:
    scenario = tmp_path / "null.yaml"
    scenario.write_text("models: [{name: resnet18, input_size: 32}]\nbackends: [null]\nscenarios: [SingleStream, Offline]\n"
                        "loadgen: {min_duration_s: 0.2}\ntiming: {min_time_s: 0.05, repetitions: 2}\n")
    out = tmp_path / "results"
    assert fusionbench("run", str(scenario), "--out", str(out), "--device", "cpu").returncode == 0
    bundle = only_bundle(out)
    for cell in (bundle / "cells").glob("*.json"):
        cell.unlink()
    done = fusionbench("run", "--resume", str(bundle), "--only", "scenario=SingleStream")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 cell(s) of the bundle not run yet" in done.stdout.replace("\n", " ")
    assert json.loads((bundle / "bundle.json").read_text())["state"] == "interrupted"
    assert fusionbench("validate", str(bundle)).returncode == 0
    done = fusionbench("run", "--resume", str(bundle))
    assert done.returncode == 0 and "1 to run" in done.stdout, done.stdout + done.stderr
    assert json.loads((bundle / "bundle.json").read_text())["state"] == "complete"
    assert sorted(c["status"] for c in cells_of(bundle).values()) == ["valid", "valid"]
