"""The MLPerf LoadGen pass: one scenario, driven by the official `mlperf_loadgen`, in this process.

Traps handled here (DESIGN.md, "LoadGen facts that bite"):
- `TestSettings.FromConfig` is never called: every setting comes from the scenario file, so the
  built-in mlperf.conf cannot leak in. One scenario per worker process all the same.
- The output directory is created before `StartTest`.
- LoadGen reads an `audit.config` from the working directory; the worker runs in a fresh
  directory and LoadGen is pointed at a file name there that does not exist.
- Queries are pre-generated from the expected latency/QPS; the hint comes from the device-timing
  pass (the caller passes the measured median).

The system under test (harness/measure/sut.py) runs the model inside LoadGen's issue callback on the
calling (main) thread, the thread of the device-timing pass, on views of the samples stacked in
LoadGen's load order; responses carry no data: this is a performance run. Server coalesces the
queries that arrived while the model was busy, so they run as one batch.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from harness.bundle.loadgen_log import parse_logs
from harness.contract import Prepared
from harness.measure.sut import InlineSUT, SUTTimes
from harness.scenario.rules import hinted_ns, rule

MISSING_AUDIT_CONFIG = "no-audit.config"
ATTEMPTS = 2


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
    rule(scenario).set_hint(s, batch, hinted_ns(latency_ns, batch), latency_ns, loadgen)
    return s


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
    return rule(result["scenario"]).retune_when_too_fast and (
        result["results"].get("result_min_duration_met") is False
        or result["results"].get("result_min_queries_met") is False
    )


def _measured_latency_ns(result: dict[str, Any], batch: int) -> float | None:
    r = result["results"]
    if rule(result["scenario"]).batch_figure == "rate" and r.get("result_samples_per_second"):
        return batch * 1e9 / float(r["result_samples_per_second"])
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
