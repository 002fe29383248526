"""GPU checks (marked `gpu`; skipped with the reason where no CUDA device is visible).

They run the real CLI on CUDA and check what only a GPU can show: IEEE fp32 verdicts (TF32 off
everywhere, read back), TF32 on request, every backend the GPU stack installs (each skipped with
its reason where its package is missing), CUDA graphs, batches in flight for Offline, kernels
counted through the profiler, the time inside kernels, CUDA-event timings that agree with
LoadGen, torch and NVML memory figures, and the one-command GPU check. They want the GPU to
themselves: the default `--dist loadscope` runs them one after another in one worker (spread over
several workers, SingleStream's queries wait for the other processes' kernels and LoadGen's
latency leaves the device time's by tens of percent).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.fusion import is_part_of_tensor_op
from harness.reporting.op_classes import CONVOLUTION, ELEMENTWISE, class_of

pytestmark = pytest.mark.gpu
REPO = Path(__file__).resolve().parents[2]


def run_cells(tmp_path: Path, yaml_text: str, allowed_exit: tuple[int, ...] = (0,)) -> dict[tuple[Any, ...], dict[str, Any]]:
    scenario = tmp_path / "gpu.yaml"
    scenario.write_text(yaml_text)
    out = tmp_path / "results"
    done = subprocess.run([sys.executable, "-m", "harness.cli", "run", str(scenario), "--device", "cuda", "--out", str(out),
                           "--cache-dir", str(tmp_path / "cache")],
                          capture_output=True, text=True, timeout=1800, cwd=REPO)
    bundles = [p for p in out.iterdir() if p.is_dir()] if out.is_dir() else []
    cells = [json.loads(p.read_text()) for p in (bundles[0] / "cells").glob("*.json")] if bundles else []
    # Each cell that did not pass, with its whole reason (the console's table cuts them short).
    troubles = "\n".join(f"{c['label']}: {c['status']}: {c['reasons']}" for c in cells if c["status"] not in ("valid", "skipped"))
    assert done.returncode in allowed_exit, troubles + "\n" + done.stdout[-3000:] + done.stderr[-3000:]
    return {(c["config"]["backend"], c["config"]["scenario"], c["config"]["variant"]["fusion"],
             c["config"]["variant"].get("graphs", "off"), c["config"]["dtype"]): c for c in cells}


def test_resnet50_ieee_kernels_memory_and_one_latency_truth(tmp_path: Path) -> None:
    cells = run_cells(tmp_path, """
models: [resnet50]
backends: [eager, inductor]
scenarios: [SingleStream, Offline]
batch_sizes: {cuda: [32]}
loadgen: {min_duration_s: 3}
timing: {min_time_s: 1}
""")
    for key, cell in cells.items():
        assert cell["status"] == "valid", (key, cell["reasons"])
        m = cell["metrics"]
        assert m["math_mode"]["effective"] == "ieee" and m["math_mode"]["torch"]["cudnn_conv_fp32_precision"] == "ieee"
        assert m["kernels"]["kernel_count_method"].startswith("CUDA kernels")
        assert m["kernels"]["kernels_per_inference"] > 10
        # kinds, not instantiations or tile shapes: no template, parameter list or tile in a kind's name,
        # and some kind holds several differently named kernels (ATen's elementwise functors, Triton's numbering)
        kinds = m["kernels"]["by_kind"]
        assert not [k["kind"] for k in kinds if any(mark in k["kind"] for mark in ("<", "(", "tilesize"))], kinds
        assert any(k["kernels"] >= 2 for k in kinds), kinds
        assert 0 < m["time_split"]["kernel_ns"] <= m["time_split"]["wall_ns"] * 1.05
        assert m["memory"]["torch_max_allocated_bytes"] > 25e6 * 4  # resnet50 weights alone are ~100 MB
        assert m["memory"]["nvml_process_peak_bytes"] or m["memory"]["nvml_device_used_delta_bytes"]
        agreement = m["latency_agreement"]
        assert agreement["within"], (key, agreement)
        assert all("gpu_before" in r["beside"] for r in m["device_time"]["repetitions"])
    eager, inductor = (cells[(b, "SingleStream", "on", "off", "fp32")]["metrics"] for b in ("eager", "inductor"))
    assert eager["kernels"]["kernels_per_inference"] > inductor["kernels"]["kernels_per_inference"]
    assert any(k["kind"].startswith("triton_") for k in inductor["kernels"]["by_kind"]), inductor["kernels"]["by_kind"]
    offline = cells[("eager", "Offline", "on", "off", "fp32")]["metrics"]
    assert offline["loadgen"]["sut"]["batches_in_flight"] == 2 and offline["loadgen"]["sut"]["gathered_batches"] == 0


def test_tf32_on_request_with_its_own_tolerance(tmp_path: Path) -> None:
    cells = run_cells(tmp_path, """
models: [resnet18]
backends: [eager, inductor]
dtypes: [fp32, tf32]
scenarios: [SingleStream]
loadgen: {min_duration_s: 2}
timing: {min_time_s: 0.5}
""")
    for key, cell in cells.items():
        assert cell["status"] == "valid", (key, cell["reasons"])
        dtype = key[-1]
        assert cell["metrics"]["math_mode"]["effective"] == ("tf32" if dtype == "tf32" else "ieee")
        assert cell["metrics"]["correctness"]["reference"] == "eager, fp32"


def test_cuda_graphs_replay_the_same_kernels_with_less_overhead(tmp_path: Path) -> None:
    cells = run_cells(tmp_path, """
models: [{name: resnet18, input_size: 112}]
backends: [{name: eager, graphs: [on, off]}, {name: inductor, graphs: [on, off]}]
scenarios: [SingleStream]
loadgen: {min_duration_s: 2}
timing: {min_time_s: 0.5}
""")
    for backend in ("eager", "inductor"):
        on, off = (cells[(backend, "SingleStream", "on", g, "fp32")] for g in ("on", "off"))
        for cell in (on, off):
            assert cell["status"] == "valid", (cell["label"], cell["reasons"])
        assert on["metrics"]["correctness"]["ok"]
        assert on["metrics"]["time_split"]["overhead_ns"] < off["metrics"]["time_split"]["overhead_ns"]


def test_inductor_fusion_off_launches_more_triton_kernels_and_moves_more_dram_bytes(tmp_path: Path) -> None:
    cells = run_cells(tmp_path, """
models: [{name: resnet18, input_size: 112}]
backends: [{name: inductor, fusion: [on, off]}]
scenarios: [SingleStream]
loadgen: {min_duration_s: 2}
timing: {min_time_s: 0.5}
""")
    on, off = (cells[("inductor", "SingleStream", f, "off", "fp32")] for f in ("on", "off"))
    for cell in (on, off):
        assert cell["status"] == "valid", cell["reasons"]
    assert off["metrics"]["kernels"]["kernels_per_inference"] > on["metrics"]["kernels"]["kernels_per_inference"]
    assert off["metrics"]["fusion_report"]["fusion_count"] == 0 < on["metrics"]["fusion_report"]["fusion_count"]
    # cuDNN runs the convolutions, each with its batch norm folded in by freezing; the Triton kernels
    # after them add the bias and the activation: element-wise fusions, not conv+relu
    report = on["metrics"]["fusion_report"]
    assert report["notes"].startswith("20 batch norm(s) folded") and "not be matched" not in report["notes"], report["notes"]
    assert sum("aten.batch_norm" in kernel["ops"] for kernel in report["kernels"]) == 20
    for kernel in report["kernels"]:
        if kernel["kernel"].startswith("triton_") and not kernel["kernel"].startswith("triton_tem_"):
            assert kernel["class"] in ("element", "single"), kernel
    # ...and their time is not the convolutions': each is of the kind of what it runs, as Inductor's
    # code says (`triton_poi_fused_bias_relu`), where its name made it a convolution beside cuDNN's
    assert any(is_part_of_tensor_op(op) for kernel in report["kernels"] for op in kernel["ops"])
    kinds = [kind["kind"] for kind in on["metrics"]["kernels"]["by_kind"]]
    assert not [kind for kind in kinds if kind.startswith("triton_poi") and class_of(kind) == CONVOLUTION], kinds
    assert any(kind.startswith("triton_poi_fused_bias") and class_of(kind) == ELEMENTWISE for kind in kinds), kinds
    traffic = [cell["metrics"]["memory_traffic"] for cell in (on, off)]
    if any(t["absent"] for t in traffic):  # no counters here: each cell says why, with no figure
        for t in traffic:
            assert t["absent"] and t.get("dram_bytes_per_inference") is None, t
            # the machine's refusal is a skip; the harness's child failing under ncu is a failure
            assert not t["absent"].startswith("the profiled child") and "the child said" not in t["absent"], t["absent"]
        pytest.skip(f"the GPU's counters were not read here: {traffic[0]['absent']}")
    for cell, t in zip((on, off), traffic):
        roofline = cell["metrics"]["roofline"]
        assert t["dram_read_bytes_per_inference"] >= 0.9 * (roofline["weight_bytes"] + roofline["input_bytes"]), t
        profiled = cell["metrics"]["kernels"]["kernels_per_inference"]
        assert abs(t["kernels_per_inference"] - profiled) <= 0.1 * profiled, (t["kernels_per_inference"], profiled)
    # Unfused, each intermediate goes to DRAM and comes back: the bytes fusion exists to save.
    assert traffic[1]["dram_bytes_per_inference"] > traffic[0]["dram_bytes_per_inference"]


@pytest.mark.parametrize("backend", ["onnxruntime", "tvm", "tensorrt"])
def test_library_backends_on_cuda(tmp_path: Path, backend: str) -> None:
    """Each runs where the GPU stack installed it; otherwise its cells are skipped with the reason."""
    cells = run_cells(tmp_path, f"""
models: [{{name: resnet18, input_size: 112}}]
backends: [{{name: {backend}, fusion: [on, off]}}]
scenarios: [SingleStream]
loadgen: {{min_duration_s: 2}}
timing: {{min_time_s: 0.5}}
""", allowed_exit=(0, 1))
    on, off = (cells[(backend, "SingleStream", f, "off", "fp32")] for f in ("on", "off"))
    if on["status"] == "skipped":
        pytest.skip(f"{backend} on cuda: {on['reasons'][0]}")
    for cell in (on, off):
        assert cell["status"] == "valid", (cell["label"], cell["reasons"], cell.get("log_tail"))
        assert cell["metrics"]["kernels"]["kernel_count_method"].startswith("CUDA kernels")
        assert cell["metrics"]["math_mode"]["effective"] == "ieee"
    assert off["metrics"]["kernels"]["kernels_per_inference"] > on["metrics"]["kernels"]["kernels_per_inference"]


def test_gpu_check_prints_a_verdict_per_backend(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "harness.cli", "gpu-check", "--out", str(tmp_path / "results"),
                           "--cache-dir", str(tmp_path / "cache")],
                          capture_output=True, text=True, timeout=900, cwd=REPO)
    assert done.returncode in (0, 1), done.stderr[-3000:]
    assert "GPU check: verdicts" in done.stdout
    (bundle,) = [p for p in (tmp_path / "results").iterdir() if p.is_dir()]
    cells = [json.loads(p.read_text()) for p in (bundle / "cells").glob("*.json")]
    fusions = {(c["config"]["backend"], c["config"]["variant"]["fusion"]) for c in cells}
    assert fusions == {("eager", "on")} | {(b, f) for b in ("inductor", "onnxruntime", "tvm", "tensorrt") for f in ("on", "off")}
    # a backend with a cell that did not run or failed gets its line with the first reason, after the table
    for cell in cells:
        if cell["status"] in ("skipped", "failed"):
            after_the_table = done.stdout.split("GPU check: verdicts", 1)[1]
            assert re.search(rf"^{cell['config']['backend']}: (skipped|failed): ", after_the_table, re.MULTILINE), cell["label"]
    assert (done.returncode == 0) == all(c["status"] in ("valid", "skipped") for c in cells), done.stdout[-3000:]
