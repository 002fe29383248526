"""`fusionbench gpu-check`: its verdict table, the backends it could not run and why, its time
budget, and a clear refusal on a machine without a GPU."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from harness.bundle.cell_record import CellRecord
from harness.run.gpu_check import SCENARIO, could_not_run, verdict_table
from harness.run.run_request import RunRequest
from harness.run.runner import run
from tests.cell_configs import cell_config, cell_record

REPO = Path(__file__).resolve().parents[2]


def cell(backend: str, fusion: str, status: str, reasons: list[str] | None = None, **metrics: Any) -> CellRecord:
    config = cell_config("Offline", 32, backend="eager")
    config = config.model_copy(update={"backend": backend, "variant": config.variant.model_copy(update={"fusion": fusion})})
    return cell_record(config, status, reasons, metrics)


def rendered(table: Any) -> str:
    console = Console(file=io.StringIO(), width=200)
    console.print(table)
    return console.file.getvalue()


def test_the_table_has_a_verdict_per_backend_and_fusion() -> None:
    cells = [
        cell("inductor", "on", "valid", math_mode={"effective": "ieee", "problems": []},
             kernels={"kernels_per_inference": 31.0, "kernel_count_method": "cpu dispatches"},
             loadgen={"scenario": "Offline", "validity": "VALID", "log_dir": "loadgen/attempt-1",
                      "metric": {"name": "offline_samples_per_s", "value": 18919.4, "unit": "samples/s"}},
             device_time={"samples_ns": [], "summary": {"n": 10, "median_ns": 1.62e6, "cv": 0.004}},
             latency_agreement={"gap": 0.021, "within": True, "why": ""}),
        cell("tensorrt", "off", "skipped", ["tensorrt is not importable (No module named 'tensorrt')"]),
        cell("tvm", "on", "failed", ["prepare: tvm: compilation for cuda failed: ..."]),
        cell("onnxruntime", "on", "invalid", ["math mode: TF32 was on in a cell of dtype fp32"]),  # its exit 1's reason
    ]
    text = rendered(verdict_table(cells))
    assert "18,919 samples/s" in text and "1.62 ms ±0.4%" in text and "+2.1%" in text
    assert "ieee" in text and " 31 " in text
    assert could_not_run(cells) == [
        "onnxruntime: invalid: math mode: TF32 was on in a cell of dtype fp32",
        "tensorrt: skipped: tensorrt is not importable (No module named 'tensorrt')",
        "tvm: failed: prepare: tvm: compilation for cuda failed: ...",
    ]


def test_the_check_scenario_covers_every_built_in_backend_both_ways() -> None:
    import yaml

    scenario = yaml.safe_load(SCENARIO.read_text())
    names = {b if isinstance(b, str) else b["name"] for b in scenario["backends"]}
    assert names == {"eager", "inductor", "onnxruntime", "tvm", "tensorrt"}
    assert scenario["device"] == "cuda" and scenario["dtypes"] == "fp32"


@pytest.mark.slow
@pytest.mark.skipif(__import__("torch").cuda.is_available(), reason="this machine has a GPU")
def test_without_a_gpu_it_refuses_in_one_line(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "harness.cli", "gpu-check", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=300, cwd=REPO)
    assert done.returncode == 2 and "needs an NVIDIA GPU that torch can see" in done.stderr
    assert "Traceback" not in done.stderr and list(tmp_path.iterdir()) == []


def test_on_a_gpu_machine_it_refuses_an_out_inside_a_bundle_making_nothing(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """It made its --out folder before the run's own refusal: inside a bundle, a folder the bundle's
    manifest does not list."""
    import shutil

    from harness.bundle.migrations import SCHEMA_VERSION
    from harness.errors import ConfigError
    from harness.run import gpu_check

    bundle = tmp_path / "earlier"
    shutil.copytree(REPO / "tests" / "golden" / f"v{SCHEMA_VERSION}", bundle)
    monkeypatch.setattr(gpu_check, "_why_torch_sees_no_cuda", lambda: "")
    with pytest.raises(ConfigError, match="is inside the bundle"):
        gpu_check.check(bundle / "more", None, Console(file=io.StringIO()))
    assert not (bundle / "more").exists()


@pytest.mark.slow
def test_a_spent_budget_skips_the_cells_left_saying_so(tmp_path: Path) -> None:
    scenario = tmp_path / "null.yaml"
    scenario.write_text("models: [resnet18]\nbackends: [null]\nscenarios: [SingleStream, Offline]\n")
    code = run(RunRequest(scenario_path=scenario, device="cpu", out_dir=tmp_path / "out", budget_s=1e-9),
               Console(file=io.StringIO()))
    assert code == 4  # nothing measured: not a pass
    bundle = next((tmp_path / "out").iterdir())
    cells = [json.loads(p.read_text()) for p in (bundle / "cells").glob("*.json")]
    assert len(cells) == 2
    assert all(c["status"] == "skipped" and "time budget was spent" in c["reasons"][0] for c in cells)


def test_the_verdicts_are_read_from_the_bundle_the_run_made_not_a_cache_folder_beside_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A new --cache-dir inside --out is a new folder too, and sorted after the bundle: the check read
    it as the bundle and exited 2 after the whole run."""
    import shutil

    from harness.bundle.migrations import SCHEMA_VERSION
    from harness.run import gpu_check, runner

    out = tmp_path / "results"

    def a_run(request: RunRequest, console: Console) -> int:
        shutil.copytree(REPO / "tests" / "golden" / f"v{SCHEMA_VERSION}", out / "20261130-000000-gpu-check")
        (out / "zz-cache").mkdir()  # as the run makes a new --cache-dir
        return 1

    monkeypatch.setattr(gpu_check, "_why_torch_sees_no_cuda", lambda: "")
    monkeypatch.setattr(runner, "run", a_run)
    shown = io.StringIO()
    assert gpu_check.check(out, out / "zz-cache", Console(file=shown, width=300)) == 1
    assert "GPU check: verdicts" in shown.getvalue()


def test_a_torch_that_hangs_or_fails_to_answer_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.run import gpu_check

    def hangs(*args: object, **kwargs: object) -> None:
        raise subprocess.TimeoutExpired("python", 300)

    monkeypatch.setattr(subprocess, "run", hangs)
    assert "within 300 s" in gpu_check._why_torch_sees_no_cuda()
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 1, "", "ImportError: libcuda"))
    assert gpu_check._why_torch_sees_no_cuda() == "asking torch failed (exit 1): ImportError: libcuda"



def test_without_a_gpu_the_line_says_why_and_what_to_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """It said `torch.cuda.is_available() is False here` and no more: not whether torch was built
    without CUDA, that CUDA_VISIBLE_DEVICES hid the GPUs, or what to run instead."""
    import io

    from rich.console import Console

    from harness.errors import ConfigError
    from harness.run import gpu_check

    def refusal(answer: str) -> str:
        monkeypatch.setattr(subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 0, answer, ""))
        with pytest.raises(ConfigError) as refused:
            gpu_check.check(tmp_path / "out", None, Console(file=io.StringIO()))
        assert not (tmp_path / "out").exists()
        return str(refused.value)

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    line = refusal("False 13.0 2.14.1+cu130\n")
    assert "torch 2.14.1+cu130 (CUDA 13.0) finds no NVIDIA driver or GPU" in line and "CUDA_VISIBLE_DEVICES" not in line
    assert "run it on a machine with one" in line and "fusionbench run scenarios/smoke.yaml" in line, line
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert "CUDA_VISIBLE_DEVICES='' is set, which hides any not listed" in refusal("False 13.0 2.14.1+cu130\n")
    assert "torch 2.14.1+cpu is a build without CUDA: install its CUDA build" in refusal("False - 2.14.1+cpu\n")
    # an answer cut short was read as a build without CUDA ("torch ? is a build without CUDA")
    assert "torch's answer could not be read (nothing printed)" in refusal("")
    assert "torch's answer could not be read (False)" in refusal("False\n")


def test_a_default_cache_folder_that_cannot_be_made_is_named_as_the_default(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Under a read-only HOME gpu-check was refused as "--cache-dir .../fusionbench: cannot create it",
    an option the user never gave, as `run` was before 2026-12-06. A file stands in for the read-only
    HOME (the suite runs as root); a GPU torch sees is stood in for: the refusal comes before the probe."""
    from harness.cli.main import main
    from harness.run import gpu_check

    (tmp_path / "a-file").write_text("not a folder")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "a-file"))
    monkeypatch.setattr(gpu_check, "_why_torch_sees_no_cuda", lambda: None)
    assert main(["gpu-check", "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == (
        f"fusionbench: error: the default --cache-dir {tmp_path / 'a-file' / 'fusionbench'}: cannot create it (Not a "
        "directory); give --cache-dir a folder of your own, or --no-cache to run without the cache\n")
    assert main(["gpu-check", "--out", str(tmp_path / "out"), "--cache-dir", str(tmp_path / "a-file" / "x")]) == 2
    assert capsys.readouterr().err.startswith(f"fusionbench: error: --cache-dir {tmp_path / 'a-file' / 'x'}: cannot")
