"""Figures a cell record derives from others in the same record, each forged in a copy of a real
bundle whose manifest is then re-hashed: validate counts, adds or subtracts again and refuses the
forgery (the record's model checks, harness/bundle/passes_record.py and cell_record.py, and the
figures layer, harness/bundle/figures_check.py)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.bundle.migrations import SCHEMA_VERSION
from harness.bundle.passes_record import PROPORTIONAL_SPLIT
from harness.bundle.validate import validate
from tests.unit.test_validate import GOLDEN, edit_json

Change = Callable[[dict[str, Any]], None]


def _fused_cell() -> str:
    """The file name of a valid cell of the newest golden bundle whose fusion report counts fusions."""
    return next(p.name for p in sorted((GOLDEN / f"v{SCHEMA_VERSION}" / "cells").glob("*.json"))
                if json.loads(p.read_text())["status"] == "valid"
                and (json.loads(p.read_text())["metrics"].get("fusion_report") or {}).get("fusion_count"))


def _report(cell: dict[str, Any]) -> dict[str, Any]:
    report: dict[str, Any] = cell["metrics"]["fusion_report"]
    return report


def _one_fusion_fewer(cell: dict[str, Any]) -> None:
    _report(cell)["fusion_count"] -= 1


def _a_fusion_moved_to_another_class(cell: dict[str, Any]) -> None:
    by_class = _report(cell)["fusions_by_class"]
    full = next(key for key, value in by_class.items() if value)
    by_class[full] -= 1
    by_class[next(key for key in by_class if key != full)] += 1


def _a_fused_kernel_counted_single(cell: dict[str, Any]) -> None:
    """kernels_by_class still adds up to kernel_count: the one check there was."""
    by_class = _report(cell)["kernels_by_class"]
    by_class["single"] += 1
    by_class[next(key for key, value in by_class.items() if value and key != "single")] -= 1


def _a_mapping_counted_twice(cell: dict[str, Any]) -> None:
    by_mapping = _report(cell)["fusions_by_mapping"]
    by_mapping[next(iter(by_mapping))] += 1


def _a_fused_kernel_called_single_and_every_count_following(cell: dict[str, Any]) -> None:
    """One fused kernel relabelled `single`, each count made to agree but the count by mapping."""
    report = _report(cell)
    kernel = next(k for k in report["kernels"] if k["class"] != "single")
    report["kernels_by_class"][kernel["class"]] -= 1
    report["fusions_by_class"][kernel["class"]] -= 1
    report["kernels_by_class"]["single"] += 1
    report["fusion_count"] -= 1
    kernel["class"] = "single"


def _mappings_left_out_and_their_count_forged(cell: dict[str, Any]) -> None:
    """With no kernel's mapping there would be nothing to count fusions_by_mapping from."""
    report = _report(cell)
    for kernel in report["kernels"]:
        kernel.pop("mapping", None)
    report["fusions_by_mapping"] = {"one-to-one": report["fusion_count"]}


FUSION_FORGERIES: dict[str, Change] = {
    "fusion_count": _one_fusion_fewer,
    "fusions_by_class": _a_fusion_moved_to_another_class,
    "kernels_by_class": _a_fused_kernel_counted_single,
    "fusions_by_mapping": _a_mapping_counted_twice,
    "a kernel's class": _a_fused_kernel_called_single_and_every_count_following,
    "the kernels' mappings": _mappings_left_out_and_their_count_forged,
}


@pytest.mark.parametrize("what", FUSION_FORGERIES)
def test_a_fusion_report_count_forged_apart_from_its_kernels_is_refused(tmp_path: Path, what: str) -> None:
    """fusion_count 20 made 19, re-hashed, was valid: validate held the counts to kernel_count and
    kernel_count to the kernels listed, no more."""
    root = tmp_path / "bundle"
    shutil.copytree(GOLDEN / f"v{SCHEMA_VERSION}", root)
    cell = _fused_cell()
    edit_json(root / "cells" / cell, FUSION_FORGERIES[what])
    problems = validate(root).problems
    assert any(line.startswith(f"cells/{cell}: metrics/fusion_report:") for line in problems), problems



def _memory(cell: dict[str, Any]) -> dict[str, Any]:
    memory: dict[str, Any] = cell["metrics"]["memory"]
    return memory


MEMORY_FORGERIES: dict[str, Change] = {
    "peak_rss_delta_bytes halved": lambda c: _memory(c).update(peak_rss_delta_bytes=_memory(c)["peak_rss_delta_bytes"] // 2),
    "inference_peak_rss_delta_bytes halved": lambda c: _memory(c).update(
        inference_peak_rss_delta_bytes=_memory(c)["inference_peak_rss_delta_bytes"] // 2),
    # the delta halved, with the baseline that would show it left out
    "peak_rss_delta_bytes halved without its baseline": lambda c: (
        _memory(c).update(peak_rss_delta_bytes=_memory(c)["peak_rss_delta_bytes"] // 2), _memory(c).pop("rss_baseline_bytes")),
}


@pytest.mark.parametrize("what", MEMORY_FORGERIES)
def test_a_memory_delta_forged_apart_from_its_peak_and_baseline_is_refused(tmp_path: Path, what: str) -> None:
    """An eager cell's peak_rss_delta_bytes halved, re-hashed, was valid: nothing held the deltas
    (what the build and the inference added to the worker) to the peak and baseline beside them."""
    root = tmp_path / "bundle"
    shutil.copytree(GOLDEN / f"v{SCHEMA_VERSION}", root)
    cell = next(p.name for p in sorted((root / "cells").glob("*.json"))
                if json.loads(p.read_text())["status"] == "valid" and json.loads(p.read_text())["config"]["backend"] == "eager")
    edit_json(root / "cells" / cell, MEMORY_FORGERIES[what])
    problems = validate(root).problems
    assert any(line.startswith(f"cells/{cell}: metrics/memory:") for line in problems), problems


def _first_call_halved_with_its_ratio(cell: dict[str, Any]) -> None:
    """The ratio is checked against the time: halving both kept them agreeing."""
    cell["metrics"]["first_call_s"] /= 2
    cell["metrics"]["first_call_ratio"] /= 2


def _first_call_halved_with_its_ratio_and_phase_left_out(cell: dict[str, Any]) -> None:
    _first_call_halved_with_its_ratio(cell)
    cell["phases_s"].pop("first_call")


@pytest.mark.parametrize("change", [_first_call_halved_with_its_ratio, _first_call_halved_with_its_ratio_and_phase_left_out])
def test_a_first_call_forged_apart_from_its_phase_is_refused(tmp_path: Path, change: Change) -> None:
    """An eager cell's first call made twice as fast, its ratio to the median with it, re-hashed,
    was valid: the worker records the first_call phase's time as first_call_s, and nothing held them equal."""
    root = tmp_path / "bundle"
    shutil.copytree(GOLDEN / f"v{SCHEMA_VERSION}", root)
    cell = next(p.name for p in sorted((root / "cells").glob("*.json"))
                if json.loads(p.read_text())["status"] == "valid" and json.loads(p.read_text())["config"]["backend"] == "eager")
    edit_json(root / "cells" / cell, change)
    problems = validate(root).problems
    assert any(line.startswith(f"cells/{cell}: (top): Value error, metrics.first_call_s") for line in problems), problems


def test_a_compile_time_forged_with_its_phase_left_out_is_refused(tmp_path: Path) -> None:
    """An Inductor cell's compile time made ten times faster with its prepare phase left out of
    phases_s, re-hashed, was valid: prepare_s was held to its phase only where the phase was there,
    though the worker records the two together (harness/measure/phases.py)."""
    root = tmp_path / "bundle"
    shutil.copytree(GOLDEN / f"v{SCHEMA_VERSION}", root)
    cell = next(p.name for p in sorted((root / "cells").glob("*.json"))
                if json.loads(p.read_text())["status"] == "valid" and json.loads(p.read_text())["config"]["backend"] == "inductor")

    def faster(record: dict[str, Any]) -> None:
        record["metrics"]["prepare_s"] /= 10
        record["phases_s"].pop("prepare")

    edit_json(root / "cells" / cell, faster)
    problems = validate(root).problems
    assert any(line.startswith(f"cells/{cell}: (top): Value error, metrics.prepare_s") and "prepare phase's None" in line
               for line in problems), problems


def test_a_peak_rss_lowered_under_the_inference_peak_is_refused(tmp_path: Path) -> None:
    """An Inductor cell's peak RSS (the report's column) of 894 MB made 618 MB, its delta over the
    baseline made to match, re-hashed, was valid beside the 894 MB its inference pass peaked at:
    the lifetime peak is taken after that pass and includes it."""
    root = tmp_path / "bundle"
    shutil.copytree(GOLDEN / f"v{SCHEMA_VERSION}", root)
    cell = next(p.name for p in sorted((root / "cells").glob("*.json"))
                if json.loads(p.read_text())["status"] == "valid" and json.loads(p.read_text())["config"]["backend"] == "inductor")

    def lowered(record: dict[str, Any]) -> None:
        memory = record["metrics"]["memory"]
        memory.update(peak_rss_bytes=memory["rss_baseline_bytes"] + 1, peak_rss_delta_bytes=1)

    edit_json(root / "cells" / cell, lowered)
    problems = validate(root).problems
    assert any(line.startswith(f"cells/{cell}: metrics/memory: Value error, peak_rss_bytes") and
               "is below inference_peak_rss_bytes" in line for line in problems), problems


#: A kept H200 run whose Inductor cell lists the kinds of its kernels (docs/results/bundles).
GPU_RUN = Path(__file__).resolve().parents[2] / "docs" / "results" / "bundles" / "gpu-h200-2026-12-04-lstm-inductor"


def test_a_gpu_cells_kernel_count_forged_apart_from_its_kinds_is_refused(tmp_path: Path) -> None:
    """On a GPU one profiler trace gives the kernels per inference and each kind's calls: a count
    of 2021 made 1021, the report's kernels/inf, re-hashed, was valid beside kinds adding up to 2021."""
    root = tmp_path / "bundle"
    shutil.copytree(GPU_RUN, root)
    cell = next(p.name for p in sorted((root / "cells").glob("*.json"))
                if (json.loads(p.read_text())["metrics"].get("kernels") or {}).get("by_kind"))
    assert validate(root).ok
    edit_json(root / "cells" / cell, lambda c: c["metrics"]["kernels"].update(
        kernels_per_inference=c["metrics"]["kernels"]["kernels_per_inference"] - 1000))
    problems = validate(root).problems
    assert any(line.startswith(f"cells/{cell}: kernels: kernels_per_inference") for line in problems), problems


def test_a_disagreement_with_loadgen_laundered_by_batches_in_flight_is_refused(tmp_path: Path) -> None:
    """A CPU cell whose LoadGen figure ran 7.5% ahead of its device timing (outside the 5% limit),
    recorded with two batches in flight, `within` true and its warning gone, re-hashed, was valid:
    with batches in flight only falling behind counts, and the count was taken as recorded, where
    the config gives it (one on a CPU)."""
    root = tmp_path / "bundle"
    shutil.copytree(GOLDEN / f"v{SCHEMA_VERSION}", root)
    cell = next(p.name for p in sorted((root / "cells").glob("*.json"))
                if json.loads(p.read_text())["metrics"].get("latency_agreement", {}).get("gap", 0) < -0.05)

    def laundered(record: dict[str, Any]) -> None:
        record["metrics"]["loadgen"]["sut"]["batches_in_flight"] = 2
        record["metrics"]["latency_agreement"]["within"] = True
        record["warnings"] = [w for w in record["warnings"] if not w.startswith("LoadGen and device timing disagree")]

    edit_json(root / "cells" / cell, laundered)
    problems = validate(root).problems
    assert problems == [f"cells/{cell}: loadgen: sut batches_in_flight 2 but a SingleStream cell of batch 1 on cpu "
                        "keeps 1"], problems


def _split_in_proportion(cell: dict[str, Any]) -> None:
    """The cell's kernel time method as the profile pass writes it since 2026-12-06 (its kinds
    already add up to its time in kernels)."""
    kernels = cell["metrics"]["kernels"]
    kernels["kernel_time_method"] = kernels["kernel_time_method"].partition(";")[0] + (
        f"; the kernels' share the median over {kernels['profiled_iters']} profiled inferences, {PROPORTIONAL_SPLIT}")


def _first_kind_halved(cell: dict[str, Any]) -> None:
    cell["metrics"]["kernels"]["by_kind"][0]["ns_per_inference"] /= 2


def test_a_cpu_cells_kind_time_forged_apart_from_its_time_in_kernels_is_refused(tmp_path: Path) -> None:
    """A CPU cell's kinds are its time in kernels split between them: the costliest kind's time
    halved, re-hashed, was valid, the kinds then adding up to less than the time in kernels the cell
    states. A cell of the older split, whose kinds added up to less, is read as recorded."""
    root = tmp_path / "bundle"
    shutil.copytree(GOLDEN / f"v{SCHEMA_VERSION}", root)
    cell = next(p.name for p in sorted((root / "cells").glob("*.json"))
                if json.loads(p.read_text())["config"]["backend"] == "inductor")
    edit_json(root / "cells" / cell, _first_kind_halved)
    assert validate(root).ok  # the older split: nothing new is said
    edit_json(root / "cells" / cell, lambda c: c["metrics"]["kernels"]["by_kind"][0].update(
        ns_per_inference=c["metrics"]["kernels"]["by_kind"][0]["ns_per_inference"] * 2))
    edit_json(root / "cells" / cell, _split_in_proportion)
    assert validate(root).ok, validate(root).problems
    edit_json(root / "cells" / cell, _first_kind_halved)
    problems = validate(root).problems
    assert len(problems) == 1 and problems[0].startswith(f"cells/{cell}: kernels: its kinds' ns_per_inference add up to"), problems
