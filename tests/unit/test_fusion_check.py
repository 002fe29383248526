"""A fusion report's kernel re-classed, with the report's counts made to match it, is found: each
kernel's class is held to the one its operators give (harness/bundle/fusion_check.py)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from harness.bundle import fusion_check
from harness.bundle.migrations import SCHEMA_VERSION
from harness.bundle.validate import validate
from harness.fusion import ops
from harness.fusion.report import counts
from tests.unit.test_validate import edit_json

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


def _reclassed(cell: dict[str, Any], index: int, fusion_class: str) -> None:
    report = cell["metrics"]["fusion_report"]
    report["kernels"][index]["class"] = fusion_class
    report.update(counts((k["class"], k["mapping"]) for k in report["kernels"]))


def _inductor_cell(root: Path) -> Path:
    return next(p for p in sorted((root / "cells").glob("*.json"))
                if (c := json.loads(p.read_text()))["config"]["backend"] == "inductor" and c["config"]["variant"]["fusion"] == "on"
                and c["config"]["scenario"] == "Offline")


def test_a_kernel_reclassed_with_its_counts_made_to_match_is_found(tmp_path: Path) -> None:
    """resnet18's Inductor max-pool kernel, one operator, called fused: fusion_count 20 made 21 with
    every count recounted, re-hashed, was valid."""
    root = tmp_path / "bundle"
    shutil.copytree(GOLDEN / f"v{SCHEMA_VERSION}", root)
    path = _inductor_cell(root)
    kernels = json.loads(path.read_text())["metrics"]["fusion_report"]["kernels"]
    index = next(i for i, k in enumerate(kernels) if k["ops"] == ["aten.max_pool2d_with_indices"])
    edit_json(path, lambda c: _reclassed(c, index, "tensor+element"))
    assert validate(root).problems == [
        f"cells/{path.stem}.json: fusion_report: kernel {index} ('{kernels[index]['kernel']}') is class "
        "'tensor+element', but its operators aten.max_pool2d_with_indices make it 'single'"]


@pytest.mark.parametrize("before_the_change", [True, False])
def test_mkl_linear_may_keep_the_class_of_its_day_in_a_cell_from_before_the_change(before_the_change: bool) -> None:
    """Before 9e1170d MKL's linear was no tensor operator: a kernel of it and an add was element-wise
    then, and is tensor+element now. A cell started before the change may keep either; one after, today's."""
    kernel = {"kernel": "k", "ops": ["mkl._mkl_linear", "aten.add"], "mapping": "many-to-many+one-to-one"}

    def found(fusion_class: str) -> list[str]:
        cell = {"metrics": {"fusion_report": {"kernels": [{**kernel, "class": fusion_class}]}}}
        return fusion_check.problems(cell, SCHEMA_VERSION, before_the_change)

    assert found("tensor+element") == []
    assert (found("element") == []) is before_the_change
    assert found("tensor+element+tensor") != []


def test_the_classifier_is_the_one_the_check_was_written_against() -> None:
    """A change to harness/fusion/ops.py's tables changes the class of kernels in bundles already
    written: move fusion_check.CLASSIFIER_CHANGED to it, say there how the rule before it classed,
    and update this digest."""
    tables = ops._TENSOR_OPS.pattern + "|" + ",".join(sorted(ops._ATEN_VIEWS))
    assert hashlib.sha256(tables.encode()).hexdigest()[:16] == "b6f7c79d9884bdfc"
