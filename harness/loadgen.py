"""The MLPerf LoadGen pass: one scenario, driven by the official `mlperf_loadgen`, in this process.

Traps handled here (DESIGN.md, "LoadGen facts that bite"):
- `TestSettings.FromConfig` is never called: every setting comes from the scenario file, so the
  built-in mlperf.conf cannot leak in. One scenario per worker process all the same.
- The output directory is created before `StartTest`.
- LoadGen reads an `audit.config` from the working directory; the worker runs in a fresh
  directory and LoadGen is pointed at a file name there that does not exist.
- Queries are pre-generated from the expected latency/QPS; the hint comes from the device-timing
  pass (the caller passes the measured median).

The system under test (harness/sut.py) runs the model inside LoadGen's issue callback on the
calling (main) thread, the thread of the device-timing pass, on views of the samples stacked in
LoadGen's load order; responses carry no data: this is a performance run. Server coalesces the
queries that arrived while the model was busy, so they run as one batch.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

from harness.contract import Prepared
from harness.sut import InlineSUT, SUTTimes

SUMMARY = "mlperf_log_summary.txt"
DETAIL = "mlperf_log_detail.txt"
MISSING_AUDIT_CONFIG = "no-audit.config"
# LoadGen pre-generates queries from the hint; a run faster than the hint runs out of queries
# before its minimum duration and is INVALID. Hint this much faster than the measured median.
HINT_HEADROOM = 1.2
# The system under test costs a microsecond or two per sample in Python (the response): never
# hint faster than this, or a near-free backend (null) makes LoadGen pre-generate millions of
# queries.
MIN_HINT_NS_PER_SAMPLE = 1_000
MIN_HINT_NS_PER_QUERY = 2_000
ATTEMPTS = 2
# LoadGen's one Offline query holds int(expected QPS x min duration x 1.1) samples, truncated.
OFFLINE_QUERY_FACTOR = 1.1


def settings_for(lg: Any, scenario: str, cell: dict[str, Any], latency_ns: float, sample_count: int) -> Any:
    """LoadGen TestSettings for a cell; `latency_ns` is the measured median per batch."""
    loadgen = cell["loadgen"]
    batch = cell["batch"]
    s = lg.TestSettings()
    s.scenario = getattr(lg.TestScenario, scenario)
    s.mode = lg.TestMode.PerformanceOnly
    s.min_duration_ms = int(loadgen["min_duration_s"] * 1000)
    if loadgen["max_duration_s"]:
        s.max_duration_ms = int(loadgen["max_duration_s"] * 1000)
    s.min_query_count = loadgen["min_query_count"]
    if loadgen["max_query_count"]:
        s.max_query_count = loadgen["max_query_count"]
    s.performance_sample_count_override = sample_count
    hinted_ns = max(int(latency_ns / HINT_HEADROOM), MIN_HINT_NS_PER_SAMPLE * batch, MIN_HINT_NS_PER_QUERY)
    if scenario == "SingleStream":
        s.single_stream_expected_latency_ns = hinted_ns
    elif scenario == "MultiStream":
        s.multi_stream_expected_latency_ns = hinted_ns
        s.multi_stream_samples_per_query = batch
    elif scenario == "Offline":
        s.offline_expected_qps = offline_expected_qps(batch, hinted_ns, latency_ns, loadgen["min_duration_s"])
    elif scenario == "Server":
        s.server_target_qps = server_target_qps(loadgen, batch, latency_ns)
        s.server_target_latency_ns = int(loadgen["target_latency_ms"] * 1e6)
        s.server_coalesce_queries = True  # queries that arrived while the model ran come as one call
    return s


def offline_expected_qps(batch: int, hinted_ns: float, latency_ns: float, min_duration_s: float) -> float:
    """The Offline hint: the measured rate with headroom, and never so low that LoadGen's
    truncated sample count leaves the query shorter than the minimum duration. A model that takes
    seconds per sample would otherwise get a one-sample query, finish early and be INVALID ("min
    duration not met") however often it is retried."""
    qps = batch * 1e9 / hinted_ns
    per_sample_ns = max(latency_ns, hinted_ns) / batch  # the hint's floors hold here too
    if per_sample_ns <= 0 or min_duration_s <= 0:
        return qps
    needed = math.ceil(HINT_HEADROOM * min_duration_s * 1e9 / per_sample_ns)
    return max(qps, (needed + 0.5) / (min_duration_s * OFFLINE_QUERY_FACTOR))


def server_target_qps(loadgen: dict[str, Any], batch: int, latency_ns: float) -> float:
    """The Server arrival rate: as given, or a fraction of the measured capacity."""
    if loadgen["target_qps"] != "auto":
        return float(loadgen["target_qps"])
    return loadgen["target_qps_fraction"] * batch * 1e9 / latency_ns


def run_scenario(
    prepared: Prepared, samples: list[Any], cell: dict[str, Any], latency_ns: float, outdir: Path
) -> dict[str, Any]:
    """Run the cell's scenario under LoadGen; return its parsed results.

    `latency_ns` (the device-timing median per batch) sets LoadGen's hint. When a run is INVALID
    only because it went faster than the hint allowed for (minimum duration or query count not
    met), it is run once more with the rate LoadGen itself measured, as a submitter would
    re-tune; every attempt is recorded and its logs kept under `outdir/attempt-N/`.
    """
    import mlperf_loadgen as lg

    attempts = []
    for attempt in range(1, ATTEMPTS + 1):
        logdir = outdir / f"attempt-{attempt}"
        result = _run_once(lg, prepared, samples, cell, latency_ns, logdir)
        result["log_dir"] = logdir.relative_to(outdir.parent).as_posix()
        attempts.append({"hint_latency_ns": latency_ns, "validity": result["validity"],
                         "invalid_reasons": result["invalid_reasons"]})
        measured = _measured_latency_ns(result, cell["batch"])
        if result["validity"] == "VALID" or not _too_fast(result) or measured is None:
            break
        latency_ns = measured
    result["attempts"] = attempts
    return result


def _too_fast(result: dict[str, Any]) -> bool:
    return result["scenario"] != "Server" and (
        result["results"].get("result_min_duration_met") is False
        or result["results"].get("result_min_queries_met") is False
    )


def _measured_latency_ns(result: dict[str, Any], batch: int) -> float | None:
    r = result["results"]
    if result["scenario"] == "Offline" and r.get("result_samples_per_second"):
        return batch * 1e9 / r["result_samples_per_second"]
    return r.get("result_mean_latency_ns") or None


def _run_once(
    lg: Any, prepared: Prepared, samples: list[Any], cell: dict[str, Any], latency_ns: float, outdir: Path
) -> dict[str, Any]:
    scenario = cell["scenario"]
    outdir.mkdir(parents=True, exist_ok=True)
    settings = settings_for(lg, scenario, cell, latency_ns, len(samples))
    log_settings = lg.LogSettings()
    log_settings.log_output.outdir = str(outdir)
    log_settings.log_output.copy_summary_to_stdout = False
    log_settings.enable_trace = False

    sut = InlineSUT(lg, prepared, samples, cell["batch"], scenario)
    sut_handle = lg.ConstructSUT(sut.issue_queries, sut.flush_queries)
    qsl_handle = lg.ConstructQSL(len(samples), len(samples), sut.load_samples, lambda indices: None)
    try:
        lg.StartTestWithLogSettings(sut_handle, qsl_handle, settings, log_settings, MISSING_AUDIT_CONFIG)
    finally:
        lg.DestroyQSL(qsl_handle)
        lg.DestroySUT(sut_handle)
    if sut.error is not None:
        raise RuntimeError(f"the model failed during the LoadGen run: {sut.error!r}") from sut.error
    for leftover in ("mlperf_log_accuracy.json", "mlperf_log_trace.json"):
        (outdir / leftover).unlink(missing_ok=True)  # empty in a performance run
    result = parse_logs(outdir, scenario)
    result["sut"] = sut_summary(sut.times, sut.depth)
    return result


def sut_summary(times: SUTTimes, depth: int) -> dict[str, Any]:
    """Medians of where the system under test spent each batch's time, in nanoseconds."""
    def median(values: list[int]) -> float | None:
        return float(statistics.median(values)) if values else None

    def mean(values: list[int]) -> float | None:
        return float(statistics.fmean(values)) if values else None

    return {
        "batches": times.batches, "samples": times.samples, "batches_in_flight": depth,
        "gathered_batches": times.gathered_batches,
        "gather_median_ns": median(times.gather_ns), "call_median_ns": median(times.call_ns),
        "call_mean_ns": mean(times.call_ns), "respond_median_ns": median(times.respond_ns),
        "call_definition": ("launch to its CUDA event's completion, waiting behind the batch before it included"
                            if times.pipelined else "the call and synchronize, as in the device-timing pass"),
    }


def parse_logs(outdir: Path, scenario: str) -> dict[str, Any]:
    """Validity, the scenario's metric and the latency percentiles from LoadGen's detail log."""
    detail_path = outdir / DETAIL
    if not detail_path.exists():
        raise RuntimeError(f"LoadGen wrote no {DETAIL} in {outdir}")
    entries: dict[str, Any] = {}
    errors: list[str] = []
    warnings: list[str] = []
    for line in detail_path.read_text(errors="replace").splitlines():
        if not line.startswith(":::MLLOG "):
            continue
        record = json.loads(line[len(":::MLLOG "):])
        key, value, meta = record.get("key"), record.get("value"), record.get("metadata", {})
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
        "metric": scenario_metric(scenario, entries),
        "settings": {k: v for k, v in entries.items() if k.startswith(("effective_", "requested_"))},
        "results": results,
        "loadgen_version": entries.get("loadgen_version"),
        "logs": [SUMMARY, DETAIL],
    }


def scenario_metric(scenario: str, entries: dict[str, Any]) -> dict[str, Any]:
    """MLPerf's headline figure for the scenario, with its name and unit."""
    if scenario == "SingleStream":
        value = entries.get("early_stopping_latency_ss") or entries.get("result_90.00_percentile_latency_ns")
        return {"name": "latency_p90_early_stopping_ns", "value": value, "unit": "ns"}
    if scenario == "MultiStream":
        value = entries.get("early_stopping_latency_ms") or entries.get("result_99.00_percentile_per_query_latency_ns")
        return {"name": "latency_p99_per_query_ns", "value": value, "unit": "ns"}
    if scenario == "Server":
        return {"name": "server_completed_samples_per_s", "value": entries.get("result_completed_samples_per_sec"),
                "unit": "samples/s", "scheduled_samples_per_s": entries.get("result_scheduled_samples_per_sec"),
                "latency_p99_ns": entries.get("result_99.00_percentile_latency_ns"),
                "target_latency_ns": entries.get("effective_target_latency_ns")}
    return {"name": "offline_samples_per_s", "value": entries.get("result_samples_per_second"), "unit": "samples/s"}
