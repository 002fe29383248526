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
from harness.fusion import mapping, ops
from harness.fusion.report import CLASSIFIER_VERSION, FusionReport, KernelGroup, counts
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
    written, and one to harness/fusion/mapping.py's table their mapping: move
    harness/fusion/report.py CLASSIFIER_VERSION, say in fusion_check how the version before it
    classed and mapped, add a name the mapping table gains to mapping.py's names added since the
    first table, and update these digests."""
    tables = ops._TENSOR_OPS.pattern + "|" + ",".join(sorted(ops._ATEN_VIEWS))
    assert hashlib.sha256(tables.encode()).hexdigest()[:16] == "b6f7c79d9884bdfc"
    table = json.dumps({cls: sorted(names) for cls, names in mapping._TABLE.items()}, sort_keys=True)
    assert (CLASSIFIER_VERSION, hashlib.sha256(table.encode()).hexdigest()[:16]) == (1, "fc3f3d6bb2b37e9d")


def _rewritten_today(cell: dict[str, Any]) -> None:
    """The cell's fusion report as today's worker writes it from the same kernels (with the
    version of the tables that wrote it)."""
    kernels = cell["metrics"]["fusion_report"]["kernels"]
    old = cell["metrics"]["fusion_report"]
    cell["metrics"]["fusion_report"] = FusionReport(
        tuple(KernelGroup(k["kernel"], tuple(k["ops"])) for k in kernels), old["source"], old["approximate"], old["notes"],
    ).to_json()


def _remapped(cell: dict[str, Any], index: int, mapping: str) -> None:
    report = cell["metrics"]["fusion_report"]
    report["kernels"][index]["mapping"] = mapping
    report.update(counts((k["class"], k["mapping"]) for k in report["kernels"]))


def test_a_kernels_mapping_edited_with_its_counts_is_found_where_the_report_records_its_tables(tmp_path: Path) -> None:
    """resnet18's Inductor conv+bn+relu kernel remapped one-to-one, fusions_by_mapping recounted to
    match, re-hashed, was valid: no record said which table wrote a mapping. A report that records
    its tables' version is held to them (this cell says it started before the last change of the
    classifier, which reads its class by the rule of its day); one of a version this
    harness does not know is a problem; one without it (older bundles) is read as before."""
    root = tmp_path / "bundle"
    shutil.copytree(GOLDEN / f"v{SCHEMA_VERSION}", root)
    path = _inductor_cell(root)
    edit_json(path, _rewritten_today)
    assert json.loads(path.read_text())["metrics"]["fusion_report"]["classifier_version"] == CLASSIFIER_VERSION
    assert validate(root).problems == []
    kernels = json.loads(path.read_text())["metrics"]["fusion_report"]["kernels"]
    index = next(i for i, k in enumerate(kernels) if k["mapping"] == "many-to-many+one-to-one")
    edit_json(path, lambda c: _remapped(c, index, "one-to-one"))
    assert validate(root).problems == [
        f"cells/{path.stem}.json: fusion_report: kernel {index} ('{kernels[index]['kernel']}') has mapping "
        f"'one-to-one', but its operators {', '.join(kernels[index]['ops'])} make it 'many-to-many+one-to-one' "
        f"(classifier_version {CLASSIFIER_VERSION})"]
    edit_json(path, lambda c: c["metrics"]["fusion_report"].update(classifier_version=CLASSIFIER_VERSION + 98))
    assert validate(root).problems == [
        f"cells/{path.stem}.json: fusion_report: classifier_version {CLASSIFIER_VERSION + 98} is no version of the tables "
        f"this harness knows (it knows {CLASSIFIER_VERSION}): its kernels' classes and mappings cannot be checked"]
    # Its version removed, the report is read as an older one: held to the tables the harness has
    # had, in which a convolution, a batch norm and a relu were never unknown.
    edit_json(path, lambda c: c["metrics"]["fusion_report"].pop("classifier_version"))
    for forged in ("one-to-one", "one-to-one+unknown"):
        edit_json(path, lambda c, forged=forged: _remapped(c, index, forged))
        assert validate(root).problems == [
            f"cells/{path.stem}.json: fusion_report: kernel {index} ('{kernels[index]['kernel']}') has mapping "
            f"'{forged}', which no table gives its operators {', '.join(kernels[index]['ops'])} (today's: "
            "'many-to-many+one-to-one')"]


@pytest.mark.parametrize(("names", "recorded", "written"), [
    (["aten._mkl_linear", "aten.add"], "one-to-one+unknown", True),  # MKL's linear before 9e1170d
    (["aten.addmm (bias or layout)", "aten.relu"], "one-to-one+unknown", True),  # a part, before its rule
    (["aten.relu_"], "unknown", True),  # an in-place name, before its rule
    (["aten._mkl_linear", "aten.add"], "many-to-many+one-to-one", True),  # today's
    (["aten._mkl_linear", "aten.add"], "many-to-many+unknown", False),  # an add was never unknown
    (["aten.convolution", "aten.relu"], "many-to-many+unknown", False),
    (["aten.convolution", "aten.relu"], "one-to-one+many-to-many", False),  # not as kernel_mapping writes it
    (["aten.convolution", "aten.relu"], "many-to-many+one-to-one+shuffle", False),  # a class of no operator
])
def test_an_older_reports_mapping_is_one_some_table_gave(names: list[str], recorded: str, written: bool) -> None:
    """A report without the version of its tables (older bundles, or a forger who removed it) is
    held to every table the harness has had: today's, with the operators an earlier one did not
    know read as unknown; the table only grew (harness/fusion/mapping.py)."""
    cell = {"metrics": {"fusion_report": {"kernels": [
        {"kernel": "k", "ops": names, "class": ops.classify(names), "mapping": recorded}]}}}
    assert (fusion_check.problems(cell, SCHEMA_VERSION, before_the_change=False) == []) is written


def test_a_report_records_the_version_of_the_tables_that_wrote_it() -> None:
    report = FusionReport((KernelGroup("k", ("aten.convolution", "aten.relu")),), "test").to_json()
    assert report["classifier_version"] == CLASSIFIER_VERSION
    assert report["kernels"][0]["mapping"] == "many-to-many+one-to-one"


def test_each_kernel_is_classed_once_however_many_cells_run_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """validate classes a list of operators once a process, not once for each kernel of each cell
    that runs it: golden v12's fusion reports hold 750 kernels of 30 lists, and test_validate.py
    validates copies of it hundreds of times. Read by the rules of its day and by its recorded
    version's tables alike, each list is classed at most twice (today's rule, the rule before)."""
    from harness.bundle.reader import load

    for kept in (fusion_check._classes, fusion_check._today, fusion_check._a_mapping_of_some_table):
        kept.cache_clear()
    classed: list[tuple[str, ...]] = []
    real = fusion_check.classify
    monkeypatch.setattr(fusion_check, "classify", lambda kernel_ops: classed.append(tuple(kernel_ops)) or real(kernel_ops))
    cells = load(GOLDEN / f"v{SCHEMA_VERSION}").cells
    kernels = [tuple(k["ops"]) for cell in cells for k in (cell["metrics"].get("fusion_report") or {}).get("kernels", [])]
    assert len(kernels) > 10 * len(set(kernels))
    for _ in range(2):
        assert all(fusion_check.problems(cell, SCHEMA_VERSION, before_the_change=True) == [] for cell in cells)
        for cell in cells:  # the golden cells' mappings are their day's, which today's tables may not give
            fusion_check._by_version((cell["metrics"].get("fusion_report") or {}).get("kernels"), CLASSIFIER_VERSION)
    assert set(kernels) <= set(classed) and len(classed) <= 2 * len(set(kernels))
