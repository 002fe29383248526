"""What makes a bundle's cell a submission result, per MLPerf division, in words a submitter can act on.

Both divisions need the official LoadGen settings (the `mlperf` profile: its seeds, performance
sample count and minimum duration are checked in the open division too) and an accuracy run.
The closed division also needs the benchmark's reference model with trained weights, the accuracy
target on the full validation set, no overrides of mlperf.conf, both compliance tests passed, and
the scenarios its system type must submit.
"""

from __future__ import annotations

from harness.bundle.cell_record import CellRecord
from harness.mlperf.benchmarks import IMAGENET_VALIDATION_IMAGES, benchmark_for
from harness.mlperf.compliance import TESTS
from harness.scenario.settings import MAX_SAMPLES

DATACENTER_SCENARIOS = ("Offline", "Server")


def unpackable(cell: CellRecord) -> str | None:
    """Why a cell cannot be a result in either division, or None."""
    config, metrics = cell.config, cell.metrics
    if cell.status != "valid":
        return f"{cell.status} (only valid runs are results)"
    if metrics.correctness is None or metrics.correctness.max_abs_error is None:
        return "computes no model (its output was never checked against eager)"  # the null backend
    if benchmark_for(config.model.name) is None:
        return f"{config.model.name} stands for no MLPerf benchmark"
    if config.loadgen.profile != "mlperf":
        return "not run with the mlperf profile (loadgen.profile: mlperf), so not with the official LoadGen settings"
    if metrics.accuracy is None:
        return "no accuracy run (loadgen.accuracy: true, with labelled images)"
    if metrics.loadgen is None:
        return "no LoadGen performance run"
    return None


def open_notes(cell: CellRecord) -> list[str]:
    """What the checker will say about an open-division result that `pack` still packs."""
    overrides = cell.config.loadgen.overrides
    notes = []
    if overrides:
        shown = ", ".join(f"{key}={value}" for key, value in sorted(overrides.items()))
        notes.append(f"overrides mlperf.conf ({shown}): not an official run; the checker flags it")
    total = cell.metrics.accuracy.total if cell.metrics.accuracy else 0
    if total != IMAGENET_VALIDATION_IMAGES:
        notes.append(f"accuracy on {total} images, not ImageNet's {IMAGENET_VALIDATION_IMAGES} "
                     "(the checker's dataset-size check fails; --skip-dataset-size-check skips it)")
    return notes


def closed_problems(cell: CellRecord) -> list[str]:
    """Each closed-division rule a result breaks."""
    config, accuracy = cell.config, cell.metrics.accuracy
    benchmark = benchmark_for(config.model.name)
    assert benchmark is not None and accuracy is not None, "unpackable() ran first"
    problems = []
    if config.model.name != benchmark.reference_model:
        problems.append(f"{config.model.name} is not {benchmark.name}'s reference model {benchmark.reference_model}")
    if not config.model.pretrained:
        problems.append("random weights (the closed division runs the reference's trained weights)")
    if config.inputs.source != "folder":
        problems.append("synthetic inputs (the closed division runs the benchmark's dataset)")
    if config.loadgen.overrides:
        problems.append(f"overrides mlperf.conf: {', '.join(sorted(config.loadgen.overrides))}")
    if accuracy.total != IMAGENET_VALIDATION_IMAGES:
        problems.append(f"accuracy measured on {accuracy.total} images, not the {IMAGENET_VALIDATION_IMAGES} "
                        f"of ImageNet's validation set (a run holds at most {MAX_SAMPLES}: no run of this harness "
                        "meets this; pack its results for the open division)")
    if accuracy.top1_percent < benchmark.target_top1_percent:
        problems.append(f"top-1 {accuracy.top1_percent:.3f}% is below the target {benchmark.target_top1_percent:.3f}% "
                        f"({benchmark.target_fraction:.0%} of {benchmark.reference_top1_percent}%)")
    outcomes = cell.metrics.compliance or {}
    for test in TESTS:
        if test not in outcomes:
            problems.append(f"compliance {test} not run (loadgen.compliance)")
        elif not outcomes[test].passed:
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
