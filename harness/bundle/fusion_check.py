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

Each kernel's mapping (harness/fusion/mapping.py) is not checked: its table grew with each backend
and model (an operator once `unknown` has a class now), and no record says which table wrote it.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from harness.bundle.reader import lookup
from harness.fusion.ops import classify, op_name

#: The classifier's last change (9e1170d: MKL's linear a tensor operator).
CLASSIFIER_CHANGED = datetime(2026, 12, 6, 2, 25, 40, tzinfo=timezone.utc)
#: The first schema version written by the classifier that leaves ATen views out (880b459).
VIEWS_LEFT_OUT_FROM = 2
#: The operators today's classifier counts as tensor operators and that before CLASSIFIER_CHANGED's did not.
_TENSOR_OPS_SINCE_THE_CHANGE = frozenset({"_mkl_linear"})


def problems(cell: dict[str, Any], version: int, before_the_change: bool) -> list[str]:
    """Each kernel of `cell`'s fusion report (a cell of schema `version`, started before
    CLASSIFIER_CHANGED where `before_the_change`) whose class is not the one its operators give."""
    kernels = lookup(cell, "metrics", "fusion_report", "kernels")
    if version < VIEWS_LEFT_OUT_FROM or not isinstance(kernels, list):
        return []
    lines = []
    for index, kernel in enumerate(kernels):
        ops, recorded = lookup(kernel, "ops"), lookup(kernel, "class")
        if not isinstance(ops, list) or not all(isinstance(op, str) for op in ops):
            continue  # the schema's finding
        derived = classify(ops)
        then = classify([f"{op} (no tensor operator then)" if op_name(op) in _TENSOR_OPS_SINCE_THE_CHANGE else op
                         for op in ops]) if before_the_change else derived
        if recorded not in (derived, then):
            lines.append(f"fusion_report: kernel {index} ({str(kernel.get('kernel'))[:60]!r}) is class {recorded!r}, "
                         f"but its operators {', '.join(ops)[:120]} make it {derived!r}")
    return lines
