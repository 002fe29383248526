"""LoadGen's logs as a cell keeps them: validity, the scenario's metric, the settings LoadGen used
and its result entries, read from the detail log (`:::MLLOG` JSON lines); and the figures of the
summary log (`label : value` lines), named by the detail log's keys."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from harness.scenario.rules import rule

SUMMARY = "mlperf_log_summary.txt"
DETAIL = "mlperf_log_detail.txt"


#: The reason an unmet early stopping gives, which LoadGen's own early-stopping words follow.
EARLY_STOPPING_UNMET = "early stopping not met"
#: The conditions LoadGen's validity is made of (VALID where every one is met), each as
#: its detail log key, the reason an unmet one gives, and the summary log's label for it.
CONDITIONS = (
    ("result_min_duration_met", "min duration not met", "Min duration satisfied"),
    ("result_min_queries_met", "min queries not met", "Min queries satisfied"),
    ("early_stopping_met", EARLY_STOPPING_UNMET, "Early stopping satisfied"),
    ("result_perf_constraints_met", "performance constraints (latency bound) not met", "Performance constraints satisfied"),
)


def unmet_conditions(entries: dict[str, Any]) -> list[str]:
    """The reasons of the conditions a detail log's entries say were not met (absent: not judged)."""
    return [reason for key, reason, _ in CONDITIONS if entries.get(key) is False]


def parse_logs(outdir: Path, scenario: str) -> dict[str, Any]:
    """Validity, the scenario's metric and the latency percentiles from LoadGen's detail log."""
    detail_path = outdir / DETAIL
    if not detail_path.exists():
        raise RuntimeError(f"LoadGen wrote no {DETAIL} in {outdir}")
    return parse_detail(detail_path.read_text(errors="replace"), scenario)


def parse_detail(text: str, scenario: str) -> dict[str, Any]:
    """`parse_logs` of a detail log's text, read by the caller (validate reads it bounded)."""
    entries: dict[str, Any] = {}
    errors: list[str] = []
    warnings: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
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
    reasons = [_with_loadgens_advice(reason, entries) for reason in unmet_conditions(entries)]
    if entries.get("result_invalid_reason"):
        reasons.append(str(entries["result_invalid_reason"]))
    reasons += errors
    return {
        "scenario": scenario,
        "validity": validity,
        # A VALID run that logged an error (a second config file read in one process) is one MLPerf's
        # checker refuses: its errors stand as the reasons it is not valid.
        "invalid_reasons": reasons if validity != "VALID" else errors,
        "warnings": warnings,
        "metric": rule(scenario).metric(entries),
        "settings": {k: v for k, v in entries.items() if k.startswith(("effective_", "requested_"))},
        "results": results,
        "loadgen_version": entries.get("loadgen_version"),
        "logs": [SUMMARY, DETAIL],
    }


def _with_loadgens_advice(reason: str, entries: dict[str, Any]) -> str:
    """Early stopping's reason with what LoadGen's `early_stopping_result` says of it (how many
    queries it processed and how many more it needs): alone, "early stopping not met" beside a
    latency within its bound gave no clue what to change."""
    said = entries.get("early_stopping_result")
    if reason != EARLY_STOPPING_UNMET or not isinstance(said, str):
        return reason
    points = [" ".join(point.split()) for point in said.split(" * ")]
    points = [point for point in points if point and point != "Run unsuccessful."]
    return f"{reason} ({' '.join(points)})" if points else reason


_SUMMARY_LINE = re.compile(r"^\s*(?:\* )?([A-Za-z0-9 ./()%-]*?[A-Za-z0-9)])\s*:\s*(.*?)\s*$")
_PERCENTILE = re.compile(r"^(\d+\.\d\d) percentile latency \(ns\)$")
_ESTIMATE = re.compile(r"^Early stopping \d+(?:\.\d+)?th percentile estimate$")
# The detail keys of the early-stopping estimates a summary prints, in the order LoadGen (6.0.17)
# prints them: SingleStream's at its own percentile, then at the 99th (with 662 queries or more);
# MultiStream's at its percentile. The first is each scenario's headline latency; both are in ns,
# whatever `early_stopping_latency_ms` says.
_ESTIMATES = {"SingleStream": ("early_stopping_latency_ss", "early_stopping_latency_ms"),
              "MultiStream": ("early_stopping_latency_ms",)}
_MET = {label: key for key, _, label in CONDITIONS}
# Summary labels -> detail keys, where the summary prints a figure the detail log also records.
_SAMPLE_STATS = {"Min latency (ns)": "result_min_latency_ns", "Max latency (ns)": "result_max_latency_ns",
                 "Mean latency (ns)": "result_mean_latency_ns"}
_QUERY_STATS = {"Min latency (ns)": "result_min_query_latency_ns", "Max latency (ns)": "result_max_query_latency_ns",
                "Mean latency (ns)": "result_mean_query_latency_ns"}
_RATES = {"Samples per second": "result_samples_per_second",
          "Completed samples per second": "result_completed_samples_per_sec",
          "Scheduled samples per second": "result_scheduled_samples_per_sec",
          "QPS w/ loadgen overhead": "result_qps_with_loadgen_overhead",
          "QPS w/o loadgen overhead": "result_qps_without_loadgen_overhead"}


def parse_summary(text: str) -> dict[str, Any]:
    """The summary log's scenario, mode, result (`VALID`/`INVALID`), figures and conditions:
    `figures` maps the detail log's key (`result_90.00_percentile_latency_ns`,
    `early_stopping_latency_ss`, ...) to the text the summary gives, `conditions` a condition's
    detail key (`result_min_duration_met`, ...) to whether the summary says it was met."""
    fields: dict[str, str] = {}
    figures: dict[str, str] = {}
    conditions: dict[str, bool] = {}
    estimates = 0
    per_query = False
    for line in text.splitlines():
        if line.strip().startswith("Per-query latency"):
            per_query = True  # MultiStream: the statistics that follow are of queries, not samples
            continue
        match = _SUMMARY_LINE.match(line)
        if not match:
            continue
        label, value = match.groups()
        fields.setdefault(label, value)
        percentile = _PERCENTILE.match(label)
        if percentile:
            kind = "per_query_latency_ns" if per_query else "latency_ns"
            figures[f"result_{percentile.group(1)}_percentile_{kind}"] = value
        elif label in _SAMPLE_STATS:
            figures[(_QUERY_STATS if per_query else _SAMPLE_STATS)[label]] = value
        elif label in _RATES:
            figures[_RATES[label]] = value
        elif label in _MET:
            conditions.setdefault(_MET[label], value == "Yes")
        elif _ESTIMATE.match(label):
            keys = _ESTIMATES.get(fields.get("Scenario", ""), ())
            if estimates < len(keys):
                figures[keys[estimates]] = value
            estimates += 1
    return {"scenario": fields.get("Scenario"), "mode": fields.get("Mode"), "validity": fields.get("Result is"),
            "figures": figures, "conditions": conditions}
