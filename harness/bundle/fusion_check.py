"""Validate's check of a fusion report's kernels: each kernel's class is the one its operators give
(harness/fusion/ops.py `classify`, which the worker wrote it with). The report's counts are its
kernels' classes counted again (harness/bundle/passes_record.py), so a kernel re-classed, an
element-wise one called fused with the counts made to match, was found by neither without this.

The classifier has changed twice. Schema 1 was written by the first, which counted ATen views as
operators (880b459 left them out), and is not held to today's. 9e1170d (CLASSIFIER_CHANGED) made
MKL's linear (`_mkl_linear`) a tensor operator: a cell started before it may give a kernel listing
it either class, today's or the one of its day (the operator named as a part that is no tensor
operator, `mkl._mkl_linear (...)`, as harness/fusion/ops.py reads such a name). A change to the
classifier moves CLASSIFIER_CHANGED and says here how the rule before it classed
(tests/unit/test_fusion_check.py holds the classifier's tables to the ones this was written against).

A report that records the version of the tables that wrote it (`classifier_version`, since
2026-12-06: harness/fusion/report.py CLASSIFIER_VERSION) is held to that version's tables: each
kernel's class and its mapping (harness/fusion/mapping.py `kernel_mapping`) must be the ones its
operators give, whenever the cell says it started; a version this harness does not know is a
problem, not a pass. A report without it is read by the rules above, by the cell's day, and its
mappings by every table the harness has had: that table grew with each backend and model (an
operator once `unknown` has a class now) and no record says which wrote them, but no operator ever
changed class, so a mapping must be today's with at most the operators an earlier table did not
know read as `unknown` (harness/fusion/mapping.py `unknown_to_the_first_table`). No date or version
says the field was due: no bundle carries it yet, and the harness's version and schema are those
of the bundles without it. When the tables change, CLASSIFIER_VERSION moves and the version before
it gets its own rule here.
"""

from __future__ import annotations

import functools
from datetime import datetime, timezone
from typing import Any

from harness.bundle.reader import lookup
from harness.fusion.mapping import CLASSES, kernel_mapping, mapping_class, unknown_to_the_first_table
from harness.fusion.ops import classify, is_view_op, op_name
from harness.fusion.report import CLASSIFIER_VERSION

#: The classifier's last change (9e1170d: MKL's linear a tensor operator).
CLASSIFIER_CHANGED = datetime(2026, 12, 6, 2, 25, 40, tzinfo=timezone.utc)
#: The first schema version written by the classifier that leaves ATen views out (880b459).
VIEWS_LEFT_OUT_FROM = 2
#: The operators today's classifier counts as tensor operators and that before CLASSIFIER_CHANGED's did not.
_TENSOR_OPS_SINCE_THE_CHANGE = frozenset({"_mkl_linear"})


def problems(cell: dict[str, Any], version: int, before_the_change: bool) -> list[str]:
    """Each kernel of `cell`'s fusion report (a cell of schema `version`, started before
    CLASSIFIER_CHANGED where `before_the_change`) whose class is not the one its operators give, and,
    where the report records the version of the tables that wrote it, whose mapping is not."""
    kernels = lookup(cell, "metrics", "fusion_report", "kernels")
    recorded_version = lookup(cell, "metrics", "fusion_report", "classifier_version")
    if recorded_version is not None:
        return _by_version(kernels, recorded_version)
    if version < VIEWS_LEFT_OUT_FROM or not isinstance(kernels, list):
        return []
    lines = []
    for index, kernel in enumerate(kernels):
        ops, recorded = lookup(kernel, "ops"), lookup(kernel, "class")
        if not isinstance(ops, list) or not all(isinstance(op, str) for op in ops):
            continue  # the schema's finding
        derived, then = _classes(tuple(ops), before_the_change)
        if recorded not in (derived, then):
            lines.append(f"fusion_report: kernel {index} ({str(kernel.get('kernel'))[:60]!r}) is class {recorded!r}, "
                         f"but its operators {', '.join(ops)[:120]} make it {derived!r}")
        mapped = lookup(kernel, "mapping")
        if isinstance(mapped, str) and not _a_mapping_of_some_table(tuple(ops), mapped):
            lines.append(f"fusion_report: kernel {index} ({str(kernel.get('kernel'))[:60]!r}) has mapping {mapped!r}, "
                         f"which no table gives its operators {', '.join(ops)[:120]} (today's: {kernel_mapping(ops)!r})")
    return lines


#: How many kernels' judgements a process keeps: a bundle's cells run the same few dozen kernels
#: (each fusion pair, each round), which were classed again for every cell; bounded, for a hostile
#: report of millions of distinct operator lists.
_KEPT = 4096


@functools.lru_cache(maxsize=_KEPT)
def _classes(ops: tuple[str, ...], before_the_change: bool) -> tuple[str, str]:
    """The class today's classifier gives `ops`, and the one the classifier before
    CLASSIFIER_CHANGED gave them (today's where not `before_the_change`)."""
    derived = _today(ops)[0]
    then = classify([f"{op} (no tensor operator then)" if op_name(op) in _TENSOR_OPS_SINCE_THE_CHANGE else op
                     for op in ops]) if before_the_change else derived
    return derived, then


@functools.lru_cache(maxsize=_KEPT)
def _today(ops: tuple[str, ...]) -> tuple[str, str]:
    """The class and the mapping today's tables give `ops`."""
    return classify(ops), kernel_mapping(ops)


@functools.lru_cache(maxsize=_KEPT)
def _a_mapping_of_some_table(ops: tuple[str, ...], recorded: str) -> bool:
    """Whether a table the harness has had gives `ops` the mapping `recorded`: today's, with any of
    the operators an earlier table did not know (harness/fusion/mapping.py
    `unknown_to_the_first_table`) read as `unknown`. A class no operator of the kernel has, or one
    dropped that an operator every table knew gives it, was written by no table."""
    computing = [op for op in ops if not is_view_op(op)]
    wanted = set(recorded.split("+")) if recorded else set()
    if "+".join(cls for cls in CLASSES if cls in wanted) != recorded:
        return False  # not in the order, or of the names, kernel_mapping writes
    unknown_today = any(mapping_class(op) == "unknown" for op in computing)
    # For each class the kernel's operators have today: whether it can be present or absent in an
    # older table's mapping, and with or without one of its operators read as unknown.
    read_unknown: list[set[bool]] = []
    for cls in {mapping_class(op) for op in computing} - {"unknown"}:
        known = [not unknown_to_the_first_table(op) for op in computing if mapping_class(op) == cls]
        options = {(True, False)} | ({(True, True)} if known.count(False) >= (1 if any(known) else 2) else set())
        options |= set() if any(known) else {(False, True)}
        allowed = {unknown for present, unknown in options if present == (cls in wanted)}
        if not allowed:
            return False
        read_unknown.append(allowed)
    if not wanted - {"unknown"} <= {mapping_class(op) for op in computing}:
        return False
    if unknown_today:
        return "unknown" in wanted
    if "unknown" in wanted:
        return any(True in allowed for allowed in read_unknown)
    return all(False in allowed for allowed in read_unknown)


def _by_version(kernels: Any, recorded_version: Any) -> list[str]:
    """Each kernel whose class or mapping is not the one the recorded version's tables give its
    operators (today's: the only version a report has recorded)."""
    if recorded_version != CLASSIFIER_VERSION:
        return [f"fusion_report: classifier_version {recorded_version!r} is no version of the tables this harness knows "
                f"(it knows {CLASSIFIER_VERSION}): its kernels' classes and mappings cannot be checked"]
    lines = []
    for index, kernel in enumerate(kernels if isinstance(kernels, list) else []):
        ops = lookup(kernel, "ops")
        if not isinstance(ops, list) or not all(isinstance(op, str) for op in ops):
            continue  # the schema's finding
        name = str(kernel.get("kernel"))[:60]
        for field, derived in zip(("class", "mapping"), _today(tuple(ops)), strict=True):
            if lookup(kernel, field) != derived:
                lines.append(f"fusion_report: kernel {index} ({name!r}) has {field} {lookup(kernel, field)!r}, but its "
                             f"operators {', '.join(ops)[:120]} make it {derived!r} (classifier_version {CLASSIFIER_VERSION})")
    return lines
