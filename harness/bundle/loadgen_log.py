"""LoadGen's logs as a cell keeps them: validity, the scenario's metric, the settings LoadGen used
and its result entries, read from the detail log (`:::MLLOG` JSON lines)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.scenario.rules import rule

SUMMARY = "mlperf_log_summary.txt"
DETAIL = "mlperf_log_detail.txt"


def parse_logs(outdir: Path, scenario: str) -> dict[str, Any]:
    """Validity, the scenario's metric and the latency percentiles from LoadGen's detail log."""
    detail_path = outdir / DETAIL
    if not detail_path.exists():
        raise RuntimeError(f"LoadGen wrote no {DETAIL} in {outdir}")
    entries: dict[str, Any] = {}
    errors: list[str] = []
    warnings: list[str] = []
    for number, line in enumerate(detail_path.read_text(errors="replace").splitlines(), start=1):
        if not line.startswith(":::MLLOG "):
            continue
        try:
            record = json.loads(line[len(":::MLLOG "):])
        except ValueError as exc:  # a truncated or damaged line
            raise ValueError(f"line {number}: not a JSON record ({exc})") from None
        if not isinstance(record, dict) or not isinstance(record.get("key"), str):
            raise ValueError(f"line {number}: not a LoadGen record (no key)")
        key, value, meta = record["key"], record.get("value"), record.get("metadata")
        meta = meta if isinstance(meta, dict) else {}
        if meta.get("is_error"):
            errors.append(f"{key}: {value}")
        elif meta.get("is_warning"):
            warnings.append(f"{key}: {value}")
        entries[key] = value
    results = {k: v for k, v in entries.items() if k.startswith(("result_", "early_stopping_"))}
    validity = entries.get("result_validity", "MISSING")
    reasons = [name for name, met in (
        ("min duration not met", entries.get("result_min_duration_met")),
        ("min queries not met", entries.get("result_min_queries_met")),
        ("early stopping not met", entries.get("early_stopping_met")),
        ("performance constraints (latency bound) not met", entries.get("result_perf_constraints_met")),
    ) if met is False]
    if entries.get("result_invalid_reason"):
        reasons.append(str(entries["result_invalid_reason"]))
    reasons += errors
    return {
        "scenario": scenario,
        "validity": validity,
        "invalid_reasons": reasons if validity != "VALID" else [],
        "warnings": warnings,
        "metric": rule(scenario).metric(entries),
        "settings": {k: v for k, v in entries.items() if k.startswith(("effective_", "requested_"))},
        "results": results,
        "loadgen_version": entries.get("loadgen_version"),
        "logs": [SUMMARY, DETAIL],
    }
