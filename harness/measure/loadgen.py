"""The MLPerf LoadGen pass: one scenario, driven by the official `mlperf_loadgen`, in this process.

Two profiles (the scenario file's `loadgen.profile`):
- `dev` (the default): every setting comes from the scenario file; `TestSettings.FromConfig` is
  never called, so LoadGen's built-in mlperf.conf cannot leak in.
- `mlperf`: the official settings. A user.conf (harness/mlperf/user_conf.py) with the measured hint
  and any overrides the file asked for is written beside the logs, and `FromConfig(user.conf)`
  reads LoadGen's built-in mlperf.conf first, then it. LoadGen reads mlperf.conf once per process
  (a second TestSettings would get none of it), so one settings object serves the cell's every
  LoadGen run (performance, accuracy, compliance). A re-tuned attempt sets its new hint on that
  object (the user.conf key's own field) and writes its user.conf for the record: reading a second
  config file in one process makes LoadGen log "Multiple conf files are used", an error MLPerf's
  checker refuses the run for, however VALID its result.

LoadGen behaviours that would spoil a run, handled here:
- One scenario per worker process.
- LoadGen does not create its output directory (it only prints that it cannot open its logs),
  so the directory is created before `StartTest`.
- LoadGen reads an `audit.config` from the working directory; the worker runs in a fresh
  directory and LoadGen is pointed at a file name there that does not exist.
- Queries are pre-generated from the expected latency/QPS; the hint comes from the device-timing
  pass (the caller passes the measured median).

The system under test (harness/measure/sut.py) runs the model inside LoadGen's issue callback on the
calling (main) thread, the thread of the device-timing pass, on views of the samples stacked in
LoadGen's load order; in a performance run responses carry no data. Server coalesces the
queries that arrived while the model was busy, so they run as one batch.

`run_accuracy` runs LoadGen's AccuracyOnly mode (every sample once, each response carrying its
top-1 class) and scores the log against the labels as MLPerf's ImageNet script does.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from harness.bundle.loadgen_log import parse_logs
from harness.bundle.loadgen_record import LoadGenRun
from harness.contract import Prepared
from harness.errors import HarnessError
from harness.measure.sut import InlineSUT, SUTTimes
from harness.mlperf import accuracy, compliance, user_conf
from harness.mlperf.benchmarks import MLPERF_MIN_DURATION_S, benchmark_for
from harness.scenario.cell_config import CellConfig
from harness.scenario.rules import hinted_ns, offline_expected_qps, overload_s, rule, server_target_qps

MISSING_AUDIT_CONFIG = "no-audit.config"
ATTEMPTS = 3  # the first run and up to two retunes (docs/metrics.md, LoadGen)


class Settings:
    """A cell's LoadGen TestSettings: built once (see the module docstring), re-hinted per attempt."""

    def __init__(self, cell: CellConfig, sample_count: int) -> None:
        import mlperf_loadgen

        self.lg: Any = mlperf_loadgen
        self.cell = cell
        self.sample_count = sample_count
        self.profile = cell.loadgen.profile
        self.current: Any = None
        self.user_conf: str | None = None

    def hinted(self, latency_ns: float, outdir: Path) -> Any:
        """The settings for a performance run hinted with `latency_ns`; under the mlperf profile
        the user.conf is written to `outdir` (and kept with the logs)."""
        if self.profile != "mlperf":
            self.current = settings_for(self.lg, self.cell, latency_ns, self.sample_count)
            return self.current
        benchmark = benchmark_for(self.cell.model.name)
        if benchmark is None:
            raise HarnessError(f"{self.cell.model.name} stands for no MLPerf benchmark")
        if self.current is None:
            self.current = self.lg.TestSettings()
            self.current.scenario = getattr(self.lg.TestScenario, self.cell.scenario)
        retune = self.user_conf is not None
        self.user_conf = mlperf_user_conf(benchmark.conf_model, self.cell, latency_ns)
        path = outdir / "user.conf"
        path.write_text(self.user_conf)
        if retune:  # LoadGen has read its config files: the new hint goes on the settings themselves
            set_mlperf_hint(self.current, self.cell.scenario, *mlperf_hint(self.cell, latency_ns))
        else:
            status = self.current.FromConfig(str(path), benchmark.conf_model, self.cell.scenario)
            if status != 0:
                raise HarnessError(f"LoadGen refused the user.conf it was given ({path}): status {status}")
        self.current.mode = self.lg.TestMode.PerformanceOnly
        if self.cell.scenario == "Server":
            self.current.server_coalesce_queries = True
        return self.current

    def for_accuracy(self) -> Any:
        """The same settings in AccuracyOnly mode (every sample of the library once)."""
        self._again("the accuracy run").mode = self.lg.TestMode.AccuracyOnly
        if self.profile != "mlperf":
            self.current.performance_sample_count_override = self.sample_count
        return self.current

    def for_compliance(self, test: str) -> Any:
        """The same settings in PerformanceOnly mode, which the test's audit.config then adjusts."""
        self._again(test).mode = self.lg.TestMode.PerformanceOnly
        return self.current

    def _again(self, what: str) -> Any:
        if self.current is None:
            raise HarnessError(f"{what} needs the performance run's settings")
        return self.current


def mlperf_user_conf(conf_model: str, cell: CellConfig, latency_ns: float) -> str:
    """The user.conf of the mlperf profile: the hint measured for this cell, and the overrides."""
    key, value = mlperf_hint(cell, latency_ns)
    return user_conf.text(conf_model, cell.scenario, {key: value}, cell.loadgen.overrides)


def mlperf_hint(cell: CellConfig, latency_ns: float) -> tuple[str, float]:
    """The user.conf hint for a cell measured at `latency_ns` a batch: (`target_qps`, queries per
    second) or (`target_latency`, milliseconds)."""
    scenario, batch, loadgen = cell.scenario, cell.batch, cell.loadgen
    hinted = hinted_ns(latency_ns, batch)
    if scenario == "Offline":
        min_duration_s = loadgen.overrides.get("min_duration_s", MLPERF_MIN_DURATION_S)
        key, value = "target_qps", offline_expected_qps(batch, hinted, latency_ns, min_duration_s)
    elif scenario == "Server":
        key, value = "target_qps", server_target_qps(loadgen, batch, latency_ns)
    else:
        key, value = "target_latency", hinted / 1e6
    return key, float(f"{value:.6g}")  # as user.conf writes it: a retune sets on LoadGen what its file says


#: The TestSettings field each scenario's user.conf hint sets, and the factor from the conf's unit.
_HINT_FIELDS = {"SingleStream": ("single_stream_expected_latency_ns", 1e6), "MultiStream": ("multi_stream_expected_latency_ns", 1e6),
                "Offline": ("offline_expected_qps", 1.0), "Server": ("server_target_qps", 1.0)}


def set_mlperf_hint(settings: Any, scenario: str, key: str, value: float) -> None:
    """Set a user.conf hint (`mlperf_hint`) on LoadGen settings directly, as FromConfig reads it."""
    field, factor = _HINT_FIELDS[scenario]
    expected = "target_latency" if factor != 1.0 else "target_qps"
    if key != expected:
        raise HarnessError(f"{scenario}'s hint is {expected}, not {key}")
    setattr(settings, field, int(value * factor) if factor != 1.0 else value)

def settings_for(lg: Any, cell: CellConfig, latency_ns: float, sample_count: int) -> Any:
    """LoadGen TestSettings for a cell under the dev profile; `latency_ns` is the measured median
    per batch."""
    loadgen, batch = cell.loadgen, cell.batch
    s = lg.TestSettings()
    s.scenario = getattr(lg.TestScenario, cell.scenario)
    s.mode = lg.TestMode.PerformanceOnly
    s.min_duration_ms = int(loadgen.min_duration_s * 1000)
    if loadgen.max_duration_s:
        s.max_duration_ms = int(loadgen.max_duration_s * 1000)
    s.min_query_count = loadgen.min_query_count
    if loadgen.max_query_count:
        s.max_query_count = loadgen.max_query_count
    s.performance_sample_count_override = sample_count
    rule(cell.scenario).set_hint(s, batch, hinted_ns(latency_ns, batch), latency_ns, loadgen)
    return s


def run_scenario(
    prepared: Prepared, samples: list[Any], cell: CellConfig, latency_ns: float, outdir: Path,
    settings: Settings | None = None, seconds_left: float | None = None,
) -> dict[str, Any]:
    """Run the cell's scenario under LoadGen; return its parsed results.

    `latency_ns` (the device-timing median per batch) sets LoadGen's hint. When a run is INVALID
    only because it went faster than the hint allowed for (minimum duration or query count not
    met), it is run again with the speed observed in that run (`_measured_latency_ns`), up to
    `ATTEMPTS` runs in all, as a submitter would re-tune; every attempt is recorded and its logs
    kept under `outdir/attempt-N/`. Pass
    `settings` to use them again afterwards (the accuracy and compliance runs).

    `seconds_left` (what the cell's time limit leaves): a Server run whose arrival rate is so far
    above the measured capacity that answering its queries would outlast it is not started
    (`HarnessError`, saying so), rather than left to run into the time limit.
    """
    import mlperf_loadgen as lg

    attempts = []
    settings = settings or Settings(cell, len(samples))
    for attempt in range(1, ATTEMPTS + 1):
        logdir = outdir / f"attempt-{attempt}"
        logdir.mkdir(parents=True, exist_ok=True)
        hinted = settings.hinted(latency_ns, logdir)
        _refuse_an_endless_queue(cell, hinted, latency_ns, seconds_left)
        result = _run_once(lg, prepared, samples, cell, hinted, logdir)
        result["log_dir"] = logdir.relative_to(outdir.parent).as_posix()
        attempts.append({"hint_latency_ns": latency_ns, "validity": result["validity"],
                         "invalid_reasons": result["invalid_reasons"]})
        measured = _measured_latency_ns(result, cell.batch)
        if result["validity"] == "VALID" or not _too_fast(result) or measured is None:
            break
        latency_ns = measured
    result["attempts"] = attempts
    result["profile"] = settings.profile
    if settings.user_conf is not None:
        result["user_conf"] = settings.user_conf
    return result


def run_accuracy(prepared: Prepared, samples: list[Any], cell: CellConfig, settings: Settings,
                 labels: list[int], outdir: Path) -> dict[str, Any]:
    """LoadGen's AccuracyOnly mode over the sample library, scored against `labels`; the
    accuracy log and accuracy.txt stay in `outdir`."""
    import mlperf_loadgen as lg

    _run_once(lg, prepared, samples, cell, settings.for_accuracy(), outdir, answer_top1=True, keep_accuracy_log=True)
    log = outdir / "mlperf_log_accuracy.json"
    scored = accuracy.score(log, labels)
    (outdir / "accuracy.txt").write_text(accuracy.summary_line(scored) + "\n")
    # The labels scored against stay beside the log, so that validate can score it again.
    (outdir / accuracy.LABELS).write_text(accuracy.labels_text(labels))
    return {**scored, "log_dir": outdir.relative_to(outdir.parent.parent).as_posix(), "labels": accuracy.LABELS}


def _refuse_an_endless_queue(cell: CellConfig, settings: Any, latency_ns: float, seconds_left: float | None) -> None:
    """Stop before a run that would outlast the cell's time limit only because its queries arrive
    faster than the model answers them: it would end as a timed-out cell, whatever LoadGen said of it."""
    if seconds_left is None or not rule(cell.scenario).arrival_rate_fixed:
        return
    qps = float(settings.server_target_qps)
    least_s = overload_s(qps, settings.min_duration_ms / 1000, int(settings.min_query_count),
                         int(settings.max_query_count), cell.batch, latency_ns)
    if least_s is None or least_s <= seconds_left:
        return
    capacity = cell.batch * 1e9 / latency_ns
    raise HarnessError(
        f"target_qps {qps:g} is {qps / capacity:.3g}x the {capacity:.3g} samples/s the timing pass measured "
        f"(batch {cell.batch}, {latency_ns / 1e6:.3g} ms a batch): the queries LoadGen issues would queue for the "
        f"whole run, and answering them takes at least {least_s:.3g} s, beyond the {max(seconds_left, 0):.3g} s the "
        "cell's time limit leaves (LoadGen would call the run INVALID: latency bound not met); "
        "lower loadgen.target_qps, or use auto")


#: What LoadGen logs (an `error_runtime`) where it stopped a run at the file's maximum: a retune would
#: stop the same way. A run that went faster than its hint logs an error too ("Ran out of generated
#: queries"): that one is what a retune is for.
_STOPPED_AT_A_MAXIMUM = ("Max test duration reached", "Max query count reached")


def _too_fast(result: dict[str, Any]) -> bool:
    """Whether the run fell short of its minimum duration or query count by going faster than its
    hint: not where LoadGen stopped it at `max_duration_s` or `max_query_count`."""
    stopped = any(words in reason for reason in result["invalid_reasons"] for words in _STOPPED_AT_A_MAXIMUM)
    return rule(result["scenario"]).retune_when_too_fast and not stopped and (
        result["results"].get("result_min_duration_met") is False
        or result["results"].get("result_min_queries_met") is False
    )


def _measured_latency_ns(result: dict[str, Any], batch: int) -> float | None:
    """The time per batch the retune hints with: the faster of LoadGen's own figure and the
    system under test's median time per batch in the failed attempt.

    LoadGen's figure (samples over the whole run, or its mean latency) averages whatever happened
    during the attempt: on a machine whose speed changed 6x mid-cell it said 77 ms a batch while
    the model ran at 30 ms a call, so the retuned query was again too short ("min duration not
    met" twice). The SUT's median gather + call + answer is the speed the model ran at for most of
    the attempt, not dragged by a slow stretch. The faster of the two is taken because the retune
    only follows a run that was too fast for its hint: a hint too fast makes the query longer than
    the minimum duration (still VALID), one too slow makes it INVALID again. With batches in
    flight a call's time includes waiting behind the batch before it, so it is shared out over
    them (a lower bound, as LoadGen's figure is an upper one)."""
    loadgen_ns = rule(result["scenario"]).retune_ns(batch, result["results"])
    sut = result.get("sut") or {}
    if not sut.get("batches") or not sut.get("call_median_ns"):
        return loadgen_ns
    sut_ns = (float(sut["call_median_ns"]) / max(int(sut.get("batches_in_flight") or 1), 1)
              + float(sut.get("gather_median_ns") or 0.0) + float(sut.get("respond_median_ns") or 0.0))
    return min(sut_ns, loadgen_ns) if loadgen_ns else sut_ns


def _run_once(
    lg: Any, prepared: Prepared, samples: list[Any], cell: CellConfig, settings: Any, outdir: Path,
    *, answer_top1: bool = False, keep_accuracy_log: bool = False, audit_config: str = MISSING_AUDIT_CONFIG,
) -> dict[str, Any]:
    scenario = cell.scenario
    outdir.mkdir(parents=True, exist_ok=True)
    log_settings = lg.LogSettings()
    log_settings.log_output.outdir = str(outdir)
    log_settings.log_output.copy_summary_to_stdout = False
    log_settings.enable_trace = False

    sut = InlineSUT(lg, prepared, samples, cell.batch, scenario, answer_top1=answer_top1)
    sut_handle = lg.ConstructSUT(sut.issue_queries, sut.flush_queries)
    qsl_handle = lg.ConstructQSL(len(samples), len(samples), sut.load_samples, lambda indices: None)
    try:
        lg.StartTestWithLogSettings(sut_handle, qsl_handle, settings, log_settings, audit_config)
    finally:
        lg.DestroyQSL(qsl_handle)
        lg.DestroySUT(sut_handle)
    if sut.error is not None:
        raise RuntimeError(f"the model failed during the LoadGen run: {sut.error!r}") from sut.error
    (outdir / "mlperf_log_trace.json").unlink(missing_ok=True)  # empty: tracing is off
    if not keep_accuracy_log:
        (outdir / "mlperf_log_accuracy.json").unlink(missing_ok=True)  # empty in a performance run
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


def run_compliance(prepared: Prepared, samples: list[Any], cell: CellConfig, settings: Settings, test: str,
                   performance: LoadGenRun, accuracy_dir: Path | None, outdir: Path) -> dict[str, Any]:
    """One MLPerf compliance test (harness/mlperf/compliance.py) through its audit.config, verified
    against the cell's performance run (and, for TEST01, its accuracy run); the logs and the
    verification reports stay in `outdir`."""
    import mlperf_loadgen as lg

    outdir.mkdir(parents=True, exist_ok=True)
    audit = outdir / "audit.config"
    audit.write_text(compliance.audit_config(test))
    run_dir = outdir / "performance" / "run_1"
    logs_responses = test == "TEST01"
    result = _run_once(lg, prepared, samples, cell, settings.for_compliance(test), run_dir, answer_top1=logs_responses,
                       keep_accuracy_log=logs_responses, audit_config=str(audit))
    passed, lines = compliance.verify_performance(test, performance.model_dump(mode="json"), result)
    (outdir / "verify_performance.txt").write_text(compliance.report(passed, lines))
    verdict = {"performance": passed}
    if logs_responses:
        if accuracy_dir is None:
            raise HarnessError("TEST01 needs the accuracy run's log")
        ok, lines = compliance.verify_accuracy(accuracy_dir / "mlperf_log_accuracy.json",
                                               run_dir / "mlperf_log_accuracy.json")
        (outdir / "verify_accuracy.txt").write_text(compliance.report(ok, lines))
        verdict["accuracy"] = ok
    return {"passed": all(verdict.values()), "checks": verdict, "validity": result["validity"],
            "metric": result["metric"], "log_dir": outdir.relative_to(outdir.parent.parent).as_posix()}
