"""A cell's config and metrics are read by attribute, from their typed models, wherever the house
measures, runs or reports (harness/scenario/cell_config.py, harness/bundle/cell_record.py): no
string-key read of them is left in harness/measure, harness/run or harness/reporting. The bundle's
reader of older versions (harness/bundle/) reads raw records, and may."""

from __future__ import annotations

import re
from pathlib import Path

HARNESS = Path(__file__).resolve().parents[2] / "harness"
PACKAGES = ("measure", "run", "reporting")
# `config["model"]`, `metrics.get("loadgen")`, `cell["config"]`, `lookup(cell, "metrics", ...)`
STRING_KEY_READ = re.compile(r"""\b(config|metrics|cell)(\[["']|\.get\(["'])|lookup\(\w+, ["'](config|metrics)["']""")


def test_no_string_key_reads_of_a_cells_config_or_metrics() -> None:
    found = [f"{path.relative_to(HARNESS.parent)}:{number}: {line.strip()}"
             for package in PACKAGES for path in sorted((HARNESS / package).rglob("*.py"))
             for number, line in enumerate(path.read_text().splitlines(), 1) if STRING_KEY_READ.search(line)]
    assert found == [], "\n".join(found)


def test_the_pattern_finds_what_it_is_for() -> None:
    for line in ('c = config["model"]', "lg = metrics.get('loadgen')", 'x = cell["config"]',
                 'lookup(cell, "metrics", "accuracy")'):
        assert STRING_KEY_READ.search(line), line
    for line in ("c = config.model", "metrics.loadgen", 'record["status"] = "valid"', 'header["cells"]'):
        assert not STRING_KEY_READ.search(line), line
