"""The run's closing lines: why cells were skipped, which the table shows only as `skipped`."""

from __future__ import annotations

import json
from pathlib import Path

from harness.bundle.cell_record import CellRecord
from harness.bundle.migrations import SCHEMA_VERSION
from harness.run.summary import skipped_lines

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / f"v{SCHEMA_VERSION}"
TEMPLATE = CellRecord.model_validate(json.loads(next(iter(sorted((GOLDEN / "cells").glob("*.json")))).read_text()))


def skipped(reason: str | None) -> CellRecord:
    return TEMPLATE.model_copy(update={"status": "skipped", "reasons": [reason] if reason else []})


def test_skipped_cells_are_counted_by_reason_most_first_and_a_plugin_that_failed_to_load_is_named() -> None:
    """A run of plugins that failed to load ended "no cell ran", exit 0, the table saying `skipped`:
    why was in report.md only."""
    trt = "TensorRT runs only on NVIDIA GPUs; run its cells with device cuda"
    broken = "backend 'deep' failed to load: AttributeError: x\n  (at /p/helpers.py:4)"
    records = [skipped(trt), skipped(broken), skipped(trt), TEMPLATE, skipped(None)]
    assert skipped_lines(records, shown=10) == [
        "4 cell(s) skipped:",
        f"  2 cell(s): {trt}",
        "  1 cell(s): backend 'deep' failed to load: AttributeError: x / (at /p/helpers.py:4)",
        "  1 cell(s): no reason recorded",
    ]
    assert skipped_lines(records, shown=1) == [
        "4 cell(s) skipped:", f"  2 cell(s): {trt}", "  (2 more reasons, each in its cells' JSON and report.md)"]
    assert skipped_lines([TEMPLATE], shown=10) == []
