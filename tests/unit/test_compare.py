"""`fusionbench compare`: labels per pair, the rank test, geometric means, the systems'
differences, and an exit code CI pipelines can use."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.bundle import manifest
from harness.reporting.compare import compare_cells, system_differences
from harness.stats import geometric_mean, mann_whitney_u, summarize_ns

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
REPO = GOLDEN.parents[1]


def cell(status: str = "valid", samples: list[int] | None = None, reason: str = "", math: str = "ieee") -> dict[str, Any]:
    return {"id": "0123456789abcdef", "label": "m b fusion-on Offline cpu fp32 b8", "status": status,
            "reasons": [reason] if reason else [], "config": {"backend": "b"},
            "metrics": {"device_time": {"samples_ns": samples or []},
                        "math_mode": {"effective": math, "problems": []}}}


BASE = [1000 + (i * 37) % 50 for i in range(40)]


@pytest.mark.parametrize(
    ("a", "b", "verdict"),
    [
        (cell(samples=BASE), cell(samples=[int(v * 1.3) for v in BASE]), "regressed"),
        (cell(samples=BASE), cell(samples=[int(v * 0.7) for v in BASE]), "improved"),
        (cell(samples=BASE), cell(samples=[v + 1 for v in BASE]), "not significant"),
        (cell(samples=BASE), cell("failed", reason="prepare: boom"), "new failure"),
        (cell("invalid", reason="correctness"), cell(samples=BASE), "fixed"),
        (cell("skipped", reason="no GPU"), cell("skipped", reason="no GPU"), "not comparable"),
        (cell("failed", reason="x"), cell("invalid", reason="y"), "not comparable"),
        (cell(samples=BASE[:5]), cell(samples=BASE[:5]), "not comparable"),
    ],
)
def test_verdicts(a: dict[str, Any], b: dict[str, Any], verdict: str) -> None:
    pair = compare_cells(a, b, 0.05, 0.01)
    assert pair.verdict == verdict, pair


def test_cells_of_different_math_modes_are_never_paired() -> None:
    pair = compare_cells(cell(samples=BASE), cell(samples=[int(v * 0.7) for v in BASE], math="tf32"), 0.05, 0.01)
    assert pair.verdict == "not comparable" and pair.why == "math modes differ: A ieee, B tf32"
    unrecorded = cell(samples=BASE)
    del unrecorded["metrics"]["math_mode"]
    pair = compare_cells(unrecorded, cell(samples=BASE), 0.05, 0.01)
    assert pair.verdict == "not comparable" and "A unrecorded" in pair.why


def test_a_big_but_noisy_change_needs_the_rank_test_too() -> None:
    # Medians 10% apart, but the two sample sets overlap so much that the rank test cannot tell.
    a = [100, 300, 100, 300, 100, 300, 100, 300, 200, 200]
    b = [110, 290, 110, 290, 110, 290, 110, 290, 220, 220]
    pair = compare_cells(cell(samples=a), cell(samples=b), 0.05, 0.01)
    assert pair.ratio == pytest.approx(1.1) and pair.verdict == "not significant" and "p =" in pair.why


def test_why_names_both_sides() -> None:
    pair = compare_cells(cell("skipped", reason="no GPU"), cell("skipped", reason="no GPU"), 0.05, 0.01)
    assert pair.why == "both skipped: no GPU"
    pair = compare_cells(cell(samples=BASE), cell("failed", reason="prepare: boom"), 0.05, 0.01)
    assert pair.why == "B failed: prepare: boom"


@pytest.mark.parametrize(
    ("a", "b", "u", "p"),
    [  # reference values from scipy 1.17.1: mannwhitneyu(a, b, method="asymptotic", use_continuity=True)
        ([10, 12, 11, 13, 12, 14, 11, 12], [15, 16, 14, 17, 15, 16, 18, 15], 0.5, 0.0010296125441885782),
        ([3, 1, 4, 1, 5, 9, 2, 6, 5, 3], [5, 8, 9, 7, 9, 3, 2, 3, 8, 4, 6], 32.5, 0.11854895009989554),
        ([100] * 6 + [101] * 4, [100] * 5 + [101] * 5, 45.0, 0.6933763617576532),
        ([7] * 5, [7] * 5, 12.5, 1.0),
    ],
)
def test_mann_whitney_u_matches_scipy(a: list[int], b: list[int], u: float, p: float) -> None:
    got_u, got_p = mann_whitney_u(a, b)
    assert got_u == u and got_p == pytest.approx(p, rel=1e-9)


def test_geometric_mean() -> None:
    assert geometric_mean([0.5, 2.0]) == pytest.approx(1.0)
    with pytest.raises(ValueError):
        geometric_mean([1.0, 0.0])


def test_system_differences_list_what_changed() -> None:
    a = {"harness": {"version": "0.1.0"}, "device": "cuda",
         "system": {"gpu": {"driver": "550", "gpus": [{"name": "H100"}]}, "packages": {"torch": "2.11.0", "onnx": "1.0"}}}
    b = {"harness": {"version": "0.1.0"}, "device": "cuda",
         "system": {"gpu": {"driver": "560", "gpus": [{"name": "H200"}]}, "packages": {"torch": "2.14.1", "tvm": "0.27"}}}
    rows = system_differences(a, b)
    assert ("GPU driver", "550", "560") in rows and ("GPUs", "H100", "H200") in rows
    assert ("package torch", "2.11.0", "2.14.1") in rows and ("package onnx", "1.0", "-") in rows
    assert ("package tvm", "-", "0.27") in rows
    assert system_differences(a, a) == []


def slowed(tmp_path: Path, factor: float) -> Path:
    """A copy of the golden v2 bundle whose eager timing samples are `factor` times longer."""
    root = tmp_path / f"slow-{factor}"
    shutil.copytree(GOLDEN / "v2", root)
    for path in (root / "cells").glob("*.json"):
        record = json.loads(path.read_text())
        if record["config"]["backend"] == "eager" and record["status"] == "valid":
            timing = record["metrics"]["device_time"]
            timing["samples_ns"] = [int(v * factor) for v in timing["samples_ns"]]
            timing["summary"] = summarize_ns(timing["samples_ns"])
            path.write_text(json.dumps(record))
    manifest.write(root)
    return root


def fusionbench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, cwd=REPO, timeout=120)


def test_cli_exits_1_on_a_regression_and_0_otherwise(tmp_path: Path) -> None:
    slow = slowed(tmp_path, 1.5)
    done = fusionbench("compare", str(GOLDEN / "v2"), str(slow), "--format", "json")
    assert done.returncode == 1, done.stderr
    result = json.loads(done.stdout)
    assert result["counts"]["regressed"] == 2 and result["worse"]
    assert result["geomean_by_backend"]["eager"]["geomean_ratio"] == pytest.approx(1.5, rel=0.01)
    done = fusionbench("compare", str(slow), str(GOLDEN / "v2"))
    assert done.returncode == 0, done.stderr
    assert "improved: 2" in done.stdout and "| eager | 2 | 0.667 |" in done.stdout


def test_cli_compares_across_schema_versions_and_shows_the_systems() -> None:
    done = fusionbench("compare", str(GOLDEN / "v1"), str(GOLDEN / "v2"))
    assert done.returncode in (0, 1), done.stderr
    assert "## The systems differ" in done.stdout and "harness git sha" in done.stdout
    assert "A skipped: inductor fusion=off is not implemented yet" in done.stdout  # v1's skip, v2 runs it


def test_cli_refuses_a_damaged_bundle_and_a_bad_threshold(tmp_path: Path) -> None:
    damaged = tmp_path / "damaged"
    shutil.copytree(GOLDEN / "v2", damaged)
    (damaged / "report.md").write_text("edited")
    done = fusionbench("compare", str(GOLDEN / "v2"), str(damaged))
    assert done.returncode == 2 and "fails validation: report.md: edited" in done.stderr
    done = fusionbench("compare", str(GOLDEN / "v2"), str(GOLDEN / "v2"), "--threshold", "5")
    assert done.returncode == 2 and "--threshold 5.0" in done.stderr


def test_cells_that_ran_on_different_hardware_are_never_paired() -> None:
    def on(model: str, gpus: list[str]) -> dict[str, Any]:
        return {**cell(samples=[100] * 20), "node": {"hostname": "n", "cpu": {"model": model, "logical_cores": 8},
                                                   "gpus": gpus}}

    pair = compare_cells(on("EPYC", ["H100"]), on("EPYC", ["H200"]), 0.05, 0.01)
    assert pair.verdict == "not comparable" and "ran on different hardware" in pair.why and "H200" in pair.why
    same = compare_cells(on("EPYC", ["H100"]), on("EPYC", ["H100"]), 0.05, 0.01)
    assert same.verdict == "not significant"


def test_a_run_over_machines_of_different_kinds_says_so() -> None:
    from harness.reporting.view import machines

    node = {"cpu": {"model": "EPYC", "logical_cores": 8}, "gpus": ["H100"]}
    assert machines({"nodes": {"a": node}}) == ""
    assert "all EPYC x8, H100" in machines({"nodes": {"a": node, "b": node}})
    mixed = machines({"nodes": {"a": node, "b": {**node, "gpus": ["H200"]}}})
    assert "2 machines (a, b) of 2 different kinds" in mixed


def test_valid_cells_that_cannot_be_paired_are_listed_and_exit_1_unless_allowed() -> None:
    done = fusionbench("compare", str(GOLDEN / "v3"), str(GOLDEN / "mlperf"))
    assert done.returncode == 1, done.stderr
    assert "## Unpaired:" in done.stdout and "valid in A, not run in B" in done.stdout
    assert "valid in B, not run in A" in done.stdout and "--allow-missing" in done.stderr
    allowed = fusionbench("compare", str(GOLDEN / "v3"), str(GOLDEN / "mlperf"), "--allow-missing", "--format", "json")
    assert allowed.returncode == 0, allowed.stderr
    assert len(json.loads(allowed.stdout)["unpaired"]) >= 2
    same = fusionbench("compare", str(GOLDEN / "v3"), str(GOLDEN / "v3"))
    assert same.returncode == 0 and "Unpaired" not in same.stdout
