"""What makes a bundle's cell a submission result, per MLPerf division, in words a submitter can act on.

Both divisions need the official LoadGen settings (the `mlperf` profile: its seeds, performance
sample count and minimum duration are checked in the open division too) and an accuracy run.
The closed division also needs the benchmark's reference model with trained weights, the accuracy
target on the full validation set, no overrides of mlperf.conf, both compliance tests passed, and
the scenarios its system type must submit.
"""

from __future__ import annotations

from typing import Any

from harness.bundle.reader import lookup
from harness.mlperf.benchmarks import IMAGENET_VALIDATION_IMAGES, benchmark_for
from harness.mlperf.compliance import TESTS

DATACENTER_SCENARIOS = ("Offline", "Server")


def unpackable(cell: dict[str, Any]) -> str | None:
    """Why a cell cannot be a result in either division, or None."""
    config = cell["config"]
    if cell["status"] != "valid":
        return f"{cell['status']} (only valid runs are results)"
    if lookup(cell, "metrics", "correctness", "max_abs_error") is None:
        return "computes no model (its output was never checked against eager)"  # the null backend
    if benchmark_for(config["model"]["name"]) is None:
        return f"{config['model']['name']} stands for no MLPerf benchmark"
    if config["loadgen"].get("profile") != "mlperf":
        return "not run with the mlperf profile (loadgen.profile: mlperf), so not with the official LoadGen settings"
    if not lookup(cell, "metrics", "accuracy"):
        return "no accuracy run (loadgen.accuracy: true, with labelled images)"
    return None


def open_notes(cell: dict[str, Any]) -> list[str]:
    """What the checker will say about an open-division result that `pack` still packs."""
    overrides = cell["config"]["loadgen"].get("overrides") or {}
    notes = []
    if overrides:
        shown = ", ".join(f"{key}={value}" for key, value in sorted(overrides.items()))
        notes.append(f"overrides mlperf.conf ({shown}): not an official run; the checker flags it")
    total = cell["metrics"]["accuracy"]["total"]
    if total != IMAGENET_VALIDATION_IMAGES:
        notes.append(f"accuracy on {total} images, not ImageNet's {IMAGENET_VALIDATION_IMAGES} "
                     "(the checker's dataset-size check fails; --skip-dataset-size-check skips it)")
    return notes


def closed_problems(cell: dict[str, Any]) -> list[str]:
    """Each closed-division rule a result breaks."""
    config = cell["config"]
    benchmark = benchmark_for(config["model"]["name"])
    assert benchmark is not None, "unpackable() ran first"
    problems = []
    if config["model"]["name"] != benchmark.reference_model:
        problems.append(f"{config['model']['name']} is not {benchmark.name}'s reference model {benchmark.reference_model}")
    if not config["model"].get("pretrained"):
        problems.append("random weights (the closed division runs the reference's trained weights)")
    if config["inputs"].get("source") != "folder":
        problems.append("synthetic inputs (the closed division runs the benchmark's dataset)")
    overrides = config["loadgen"].get("overrides") or {}
    if overrides:
        problems.append(f"overrides mlperf.conf: {', '.join(sorted(overrides))}")
    accuracy = cell["metrics"]["accuracy"]
    if accuracy["total"] != IMAGENET_VALIDATION_IMAGES:
        problems.append(f"accuracy measured on {accuracy['total']} images, not the {IMAGENET_VALIDATION_IMAGES} "
                        "of ImageNet's validation set")
    if accuracy["top1_percent"] < benchmark.target_top1_percent:
        problems.append(f"top-1 {accuracy['top1_percent']:.3f}% is below the target {benchmark.target_top1_percent:.3f}% "
                        f"({benchmark.target_fraction:.0%} of {benchmark.reference_top1_percent}%)")
    outcomes = cell["metrics"].get("compliance") or {}
    for test in TESTS:
        if test not in outcomes:
            problems.append(f"compliance {test} not run (loadgen.compliance)")
        elif not outcomes[test]["passed"]:
            problems.append(f"compliance {test} failed")
    return problems


def missing_scenarios(system_type: str, scenarios: set[str], benchmark_edge: tuple[str, ...]) -> list[str]:
    """The scenarios a closed-division system of `system_type` must submit and has not."""
    needed: set[str] = set()
    if "edge" in system_type:
        needed |= set(benchmark_edge)
    if "datacenter" in system_type:
        needed |= set(DATACENTER_SCENARIOS)
    return sorted(needed - scenarios)
