"""The example out-of-tree plugin (examples/fusionbench-torchscript), pip-installed by
tests/conftest.py, found through its entry point and run through the real CLI. `backends` is
asked once, for the built-in backends and the plugin alike: each call probes every backend
(TVM's and ONNX Runtime's imports among them)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration.test_cli_end_to_end import cells_of, fusionbench, only_bundle

pytestmark = pytest.mark.slow


def test_backends_lists_the_built_in_backends_and_the_plugin_with_their_versions() -> None:
    done = fusionbench("backends", "--device", "cpu", "--json")
    assert done.returncode == 0, done.stderr
    backends = json.loads(done.stdout)
    assert backends["device"] == "cpu"
    assert backends["backends"]["eager"]["available"] and backends["backends"]["eager"]["versions"]["torch"]
    plugin = backends["backends"]["torchscript"]
    assert plugin["available"], plugin
    assert plugin["versions"]["fusionbench-torchscript"] == "0.1.0"


def test_plugin_runs_fusion_on_and_off_through_the_cli(tmp_path: Path) -> None:
    scenario = tmp_path / "plugin.yaml"
    scenario.write_text(
        "models: [{name: resnet18, input_size: 64}]\n"
        "backends:\n"
        "  - eager\n"
        "  - {name: torchscript, fusion: [on, off]}\n"
        "scenarios: [SingleStream]\n"
        "loadgen: {min_duration_s: 0.5}\n"
        "timing: {min_time_s: 0.2, max_warmup_s: 0.5, repetitions: 2}\n"
        "passes: {memory_iters: 1, profile_iters: 1}\n"
        # one thread a cell: on cores another test keeps busy, two threads wait for each other at
        # every operator (an eager cell took 30-60 CPU-seconds instead of about 12)
        "env: [OMP_NUM_THREADS=1]\n"
    )
    out = tmp_path / "results"
    done = fusionbench("run", str(scenario), "--out", str(out), "--device", "cpu")
    assert done.returncode == 0, done.stdout + done.stderr
    cells = {(c["config"]["backend"], c["config"]["variant"]["fusion"]): c for c in cells_of(only_bundle(out)).values()}
    for key, cell in cells.items():
        assert cell["status"] == "valid", (key, cell["reasons"], cell.get("log_tail"))
    on, off = cells[("torchscript", "on")]["metrics"], cells[("torchscript", "off")]["metrics"]
    assert on["fusion_report"]["fusion_count"] == 20  # every conv+bn pair of resnet18 folded
    assert off["fusion_report"]["fusion_count"] == 0
    assert off["kernels"]["kernels_per_inference"] > on["kernels"]["kernels_per_inference"]
    assert cells[("torchscript", "on")]["environment"]["backend_versions"]["fusionbench-torchscript"] == "0.1.0"
