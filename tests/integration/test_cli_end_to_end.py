"""The real CLI end to end: scenarios/smoke.yaml on this machine, the bundle it leaves, and resume.
The CLI on small sweeps of their own (failures, interrupts, inputs) is in test_cli_runs.py.

The run is of smoke.yaml's cells exactly (every model, backend, fusion setting, scenario, batch
size and input it names, read from the file), each measured more briefly than the file asks
(`BRIEFER`): LoadGen's minimum duration, the device timing's warm-up and length and the memory and
profile passes' calls. Nothing checked here depends on how long a figure was measured, and those
phases were a quarter of the cells' time (the compiles and each worker's imports are the rest);
tests/unit/test_schema.py checks the file itself."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.bundle.migrations import SCHEMA_VERSION
from tests.conftest import WHOLE_MACHINE

pytestmark = [pytest.mark.slow, pytest.mark.whole_machine]  # parallel runs: tests/conftest.py
REPO = Path(__file__).resolve().parents[2]
# smoke.yaml: resnet18 x (eager, inductor on/off, onnxruntime on/off, tvm on/off, tensorrt on/off,
# null) x Offline
SMOKE_CELLS = 10
SMOKE_JOBS = min(2, len(WHOLE_MACHINE))  # the module gets every core back: tests/conftest.py
# What the run changes of smoke.yaml: how long each cell measures, never which cells there are.
BRIEFER = {"loadgen": {"min_duration_s": 0.5},
           "timing": {"min_time_s": 0.1, "max_warmup_s": 0.5, "repetitions": 2},
           "passes": {"memory_iters": 1, "profile_iters": 1}}


def fusionbench(*args: str, timeout: int = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO)


def only_bundle(out: Path) -> Path:
    runs = [p for p in out.iterdir() if p.is_dir()]
    assert len(runs) == 1, runs
    return runs[0]


def cells_of(bundle: Path) -> dict[str, dict[str, Any]]:
    return {p.stem: json.loads(p.read_text()) for p in (bundle / "cells").glob("*.json")}


def smoke_copy(folder: Path, min_duration_s: float = BRIEFER["loadgen"]["min_duration_s"]) -> Path:
    """scenarios/smoke.yaml with BRIEFER's figures, as `folder`/smoke.yaml (so still named smoke)."""
    data = yaml.safe_load((REPO / "scenarios" / "smoke.yaml").read_text())
    for section, figures in BRIEFER.items():
        data[section] = {**(data.get(section) or {}), **figures}
    data["loadgen"]["min_duration_s"] = min_duration_s
    path = folder / "smoke.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def smoke_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return smoke_copy(tmp_path_factory.mktemp("smoke-scenario"))


@pytest.fixture(scope="module")
def smoke(smoke_file: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path_factory.mktemp("smoke")
    # Two cells at a time, each on a core of its own: 2.5 min instead of 4 on 2 cores. The other
    # tests of this module run cells one at a time, and tests/integration/test_executors.py shows
    # that two jobs give the serial run's bundle.
    done = fusionbench("run", str(smoke_file), "--device", "cpu", "--jobs", str(SMOKE_JOBS), "--out", str(out))
    return done, only_bundle(out)


def test_smoke_runs_clean(smoke) -> None:
    done, _ = smoke
    assert done.returncode == 0, done.stdout + done.stderr
    assert "FusionBench results" in done.stdout
    # each cell's line counts the run's cells; the cells that ran say about how long is left once three
    # have run (the skipped ones, written first, never do), and the last one says nothing
    lines = re.findall(rf"^ *(valid|skipped) resnet18 .* \(\d+\.\d s, (\d+)/{SMOKE_CELLS}(, about \d+ min left)?\)",
                       done.stdout, re.MULTILINE)
    assert [int(count) for _, count, _ in lines] == list(range(1, SMOKE_CELLS + 1)), done.stdout
    estimates = [bool(left) for status, _, left in lines if status == "valid"]
    assert estimates == [False, False] + [True] * (len(estimates) - 3) + [False], done.stdout


def test_bundle_header_describes_the_run(smoke) -> None:
    _, bundle = smoke
    header = json.loads((bundle / "bundle.json").read_text())
    assert header["schema_version"] == SCHEMA_VERSION and header["device"] == "cpu" and header["state"] == "complete"
    assert header["scenario"]["name"] == "smoke" and len(header["scenario_sha256"]) == 64
    assert header["harness"]["version"]
    system = header["system"]
    assert system["packages"]["torch"].startswith(("2.14", "2.11")) and "mlcommons-loadgen" in system["packages"]
    assert system["cpu"]["logical_cores"] >= 1 and system["python"]["version"]
    assert header["backends"]["eager"]["available"]
    assert len(header["cells"]) == SMOKE_CELLS
    assert header["executor"]["jobs"] == SMOKE_JOBS and header["executor"]["worker_start"] == "preloaded"
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
        if cell["config"]["backend"] != "null":  # every backend right on a LoadGen-like batch after its timing too
            assert cell["metrics"]["correctness"]["after_timing"]["ok"], cell["label"]
        assert cell["metrics"]["memory"]["worker_start"] == "preloaded"  # forked: torch was imported once a slot


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
    # Dynamo's counts: resnet18 is one graph, unbroken, and compiled nothing again in the timed calls
    dynamo = inductor["dynamo"]
    assert (dynamo["graphs"], dynamo["graph_breaks"], dynamo["break_reasons"], dynamo["recompiles_timed"]) == (1, 0, [], 0)
    assert "(1 graph)" in inductor["fusion_report"]["source"]  # Inductor's own count of the graphs it generated code for
    # a cell whose prepare went through no torch.compile records none (ONNX Runtime's and TVM's exports are not Dynamo's)
    assert [c["label"] for c in by.values()
            if c["config"]["backend"] != "inductor" and (c["metrics"] or {}).get("dynamo") is not None] == []


@pytest.mark.parametrize("backend", ["inductor", "onnxruntime", "tvm"])
def test_fusion_off_runs_more_kernels_unfused_and_still_matches(smoke, backend: str) -> None:
    _, bundle = smoke
    by = {(c["config"]["backend"], c["config"]["variant"]["fusion"], c["config"]["scenario"]): c["metrics"]
          for c in cells_of(bundle).values()}
    on, off = by[(backend, "on", "Offline")], by[(backend, "off", "Offline")]
    assert off["kernels"]["kernels_per_inference"] > on["kernels"]["kernels_per_inference"]
    assert on["fusion_report"]["fusion_count"] > 0 and off["fusion_report"]["fusion_count"] == 0
    assert off["correctness"]["ok"] and on["correctness"]["ok"]


def test_tvm_fuses_every_convolution_of_resnet18_with_its_batch_norm_and_residual_add(smoke) -> None:
    """The smoke run's TVM cell, fusion on (resnet18 untuned at 32 pixels, valid, so its output
    matched eager's): each of its 20 convolutions (17 on the main path, 3 downsampling shortcuts) is a
    kernel with the element-wise work after it, the residual add (a second add after batch norm's) in
    the last one of each of the 8 blocks, and each kernel the report lists runs once an inference.
    (tests/backends/test_tvm.py compiled the same model with the same options for this.)"""
    from harness.fusion import op_name

    _, bundle = smoke
    [cell] = [c for c in cells_of(bundle).values()
              if (c["config"]["backend"], c["config"]["variant"]["fusion"]) == ("tvm", "on")]
    assert cell["status"] == "valid" and cell["metrics"]["correctness"]["ok"], cell.get("reasons")
    kernels = cell["metrics"]["fusion_report"]["kernels"]
    convs = [k for k in kernels if any(op_name(op) == "conv2d" for op in k["ops"])]
    assert len(convs) == 20 and all(k["class"] == "tensor+element" for k in convs), convs
    assert sum(1 for k in convs if [op_name(op) for op in k["ops"]].count("add") == 2) == 8, convs
    assert cell["metrics"]["kernels"]["kernels_per_inference"] == len(kernels) < 30


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
    assert "## Roofline" in report and "| resnet18 | eager fusion-on | Offline b4 fp32 cpu input 32 |" in report


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


def test_resume_runs_only_missing_cells(smoke, smoke_file: Path) -> None:
    _, bundle = smoke
    before = cells_of(bundle)
    files = {p: p.read_bytes() for p in bundle.rglob("*") if p.is_file()}
    done = fusionbench("run", "--resume", str(bundle))  # a complete bundle: it said "0 to run" and wrote it again
    assert done.returncode == 0, done.stderr
    assert "is complete: every cell has its record and the report is written; nothing to resume" in " ".join(
        done.stdout.split())
    assert {p: p.read_bytes() for p in bundle.rglob("*") if p.is_file()} == files, "the bundle was changed"
    null_offline = next(k for k, c in before.items() if c["config"]["backend"] == "null" and c["config"]["scenario"] == "Offline")
    (bundle / "cells" / f"{null_offline}.json").unlink()
    done = fusionbench("run", str(smoke_file), "--device", "cpu", "--resume", str(bundle))  # serially: refused
    assert done.returncode == 2 and "its cells ran on a slot of 1 core(s) and this resume would run" in done.stderr
    done = fusionbench("run", str(smoke_file), "--device", "cpu", "--resume", str(bundle), "--jobs", str(SMOKE_JOBS))
    assert done.returncode == 0, done.stderr
    assert f"{SMOKE_CELLS} cell(s) on cpu, 1 to run" in done.stdout
    after = cells_of(bundle)
    assert set(after) == set(before)
    assert after[null_offline]["status"] == "valid"
    unchanged = [k for k in before if k != null_offline]
    assert all(after[k] == before[k] for k in unchanged)
    assert len(json.loads((bundle / "bundle.json").read_text())["resumed"]) == 1  # the first found it complete


def test_resume_refuses_a_different_scenario(smoke, tmp_path: Path) -> None:
    _, bundle = smoke
    other = smoke_copy(tmp_path, min_duration_s=BRIEFER["loadgen"]["min_duration_s"] + 1)
    done = fusionbench("run", str(other), "--device", "cpu", "--resume", str(bundle))
    assert done.returncode == 2 and "differs from the scenario stored" in done.stderr


def test_resume_checks_the_device_it_ran_on(smoke) -> None:
    _, bundle = smoke
    done = fusionbench("run", "--resume", str(bundle), "--device", "cuda")
    assert done.returncode == 2 and "was run on cpu" in done.stderr


def test_resume_checks_the_rounds_it_ran_with(smoke) -> None:
    _, bundle = smoke
    done = fusionbench("run", "--resume", str(bundle), "--rounds", "3")
    assert done.returncode == 2 and "--rounds 3: " in done.stderr and "was run with 1 round(s)" in done.stderr
