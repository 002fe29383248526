"""GPU checks (marked `gpu`; skipped with the reason where no CUDA device is visible).

They run the real CLI on CUDA and check that what only a GPU can show is real and plausible:
kernels counted through the profiler, CUDA-event timings beside LoadGen's latency, torch and
NVML memory figures.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.gpu
REPO = Path(__file__).resolve().parents[2]


def run_cells(tmp_path: Path, yaml_text: str) -> dict[tuple[str, str], dict[str, Any]]:
    scenario = tmp_path / "gpu.yaml"
    scenario.write_text(yaml_text)
    out = tmp_path / "results"
    done = subprocess.run([sys.executable, "-m", "harness.cli", "run", str(scenario), "--device", "cuda", "--out", str(out)],
                          capture_output=True, text=True, timeout=1800, cwd=REPO)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    bundle = next(p for p in out.iterdir() if p.is_dir())
    cells = [json.loads(p.read_text()) for p in (bundle / "cells").glob("*.json")]
    return {(c["config"]["backend"], c["config"]["scenario"]): c for c in cells}


def test_resnet50_kernels_memory_and_timing_on_cuda(tmp_path: Path) -> None:
    cells = run_cells(tmp_path, """
models: [resnet50]
backends: [eager, inductor]
scenarios: [SingleStream, Offline]
batch_sizes: {cuda: [32]}
loadgen: {min_duration_s: 3}
timing: {min_time_s: 1}
""")
    eager, inductor = cells[("eager", "SingleStream")]["metrics"], cells[("inductor", "SingleStream")]["metrics"]
    for m in (eager, inductor):
        assert m["kernels"]["kernel_count_method"].startswith("CUDA kernels")
        assert m["kernels"]["kernels_per_inference"] > 10
        assert m["memory"]["torch_max_allocated_bytes"] > 25e6 * 4  # resnet50 weights alone are ~100 MB
        assert m["memory"]["nvml_process_peak_bytes"] or m["memory"]["nvml_device_used_delta_bytes"]
        assert m["correctness"]["ok"]
        # CUDA-event device time and LoadGen's SingleStream latency agree within launch overheads
        device_p50 = m["device_time"]["summary"]["median_ns"]
        loadgen_p50 = m["loadgen"]["results"]["result_50.00_percentile_latency_ns"]
        assert device_p50 <= loadgen_p50 * 1.10
        assert loadgen_p50 - device_p50 < max(0.5 * device_p50, 2e6)
    assert eager["kernels"]["kernels_per_inference"] > inductor["kernels"]["kernels_per_inference"]
    for key in cells:
        assert cells[key]["status"] == "valid", (key, cells[key]["reasons"])


def _variants(tmp_path: Path, backends_yaml: str) -> dict[tuple[str, str], dict[str, Any]]:
    scenario = tmp_path / "variants.yaml"
    scenario.write_text(f"""
models: [{{name: resnet18, input_size: 112}}]
backends:
{backends_yaml}
scenarios: [SingleStream]
loadgen: {{min_duration_s: 2}}
timing: {{min_time_s: 0.5}}
""")
    out = tmp_path / "results"
    done = subprocess.run([sys.executable, "-m", "harness.cli", "run", str(scenario), "--device", "cuda", "--out", str(out)],
                          capture_output=True, text=True, timeout=1800, cwd=REPO)
    bundle = next(p for p in out.iterdir() if p.is_dir())
    cells = [json.loads(p.read_text()) for p in (bundle / "cells").glob("*.json")]
    assert done.returncode in (0, 1), done.stderr[-4000:]
    return {(c["config"]["backend"], c["config"]["variant"]["fusion"]): c for c in cells}


def test_inductor_fusion_off_launches_more_triton_kernels(tmp_path: Path) -> None:
    cells = _variants(tmp_path, "  - {name: inductor, fusion: [on, off]}")
    on, off = cells[("inductor", "on")], cells[("inductor", "off")]
    for cell in (on, off):
        assert cell["status"] == "valid", cell["reasons"]
    assert off["metrics"]["kernels"]["kernels_per_inference"] > on["metrics"]["kernels"]["kernels_per_inference"]
    assert off["metrics"]["fusion_report"]["fusion_count"] == 0 < on["metrics"]["fusion_report"]["fusion_count"]


@pytest.mark.parametrize("backend", ["onnxruntime", "tvm", "tensorrt"])
def test_library_backends_on_cuda(tmp_path: Path, backend: str) -> None:
    """Each runs where its GPU build is present; otherwise its cells are skipped with the reason."""
    cells = _variants(tmp_path, f"  - {{name: {backend}, fusion: [on, off]}}")
    on, off = cells[(backend, "on")], cells[(backend, "off")]
    if on["status"] == "skipped":
        pytest.skip(f"{backend} on cuda: {on['reasons'][0]}")
    for cell in (on, off):
        assert cell["status"] == "valid", (cell["label"], cell["reasons"], cell.get("log_tail"))
        assert cell["metrics"]["kernels"]["kernel_count_method"].startswith("CUDA kernels")
    assert off["metrics"]["kernels"]["kernels_per_inference"] > on["metrics"]["kernels"]["kernels_per_inference"]
