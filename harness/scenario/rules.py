"""The MLPerf scenarios, one row each: every rule that depends on which scenario a cell runs lives in
`RULES`, and no other module tests a scenario's name or its metric's name.

A row says how a cell's batch is chosen, which LoadGen settings the scenario takes from the file,
the minimum query count LoadGen's early stopping needs, how the LoadGen hint is set, MLPerf's
headline metric (its recorded name carries its percentile: harness/metric_table.py shows it from
there), the LoadGen figure that stands for one batch's time (and which device-timing statistic it
is compared with), whether an INVALID run that went faster than its hint is run again with
LoadGen's own measured rate, and whether LoadGen issues queries at a fixed rate however fast they
are answered (Server: a rate above the system's capacity queues for the whole run, `overload_s`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol, get_args

ScenarioName = Literal["SingleStream", "MultiStream", "Server", "Offline"]

# LoadGen pre-generates queries from the hint; a run faster than the hint runs out of queries
# before its minimum duration and is INVALID. Hint this much faster than the measured median.
HINT_HEADROOM = 1.2
# The system under test costs a microsecond or two per sample in Python (the response): never
# hint faster than this, or a near-free backend (null) makes LoadGen pre-generate millions of queries.
MIN_HINT_NS_PER_SAMPLE = 1_000
MIN_HINT_NS_PER_QUERY = 2_000
# LoadGen's one Offline query holds int(expected QPS x min duration x 1.1) samples, truncated.
OFFLINE_QUERY_FACTOR = 1.1



class HintSettings(Protocol):
    """The LoadGen settings a hint reads: the scenario file's (settings.LoadGenSettings) or a cell's
    (cell_config.CellLoadGen)."""

    @property
    def min_duration_s(self) -> float: ...
    @property
    def samples_per_query(self) -> int | None: ...
    @property
    def target_qps(self) -> float | str | None: ...
    @property
    def target_qps_fraction(self) -> float | None: ...
    @property
    def target_latency_ms(self) -> float | None: ...


# apply(settings, batch, hinted_ns, latency_ns, the cell's LoadGen settings)
HintSetter = Callable[[Any, int, float, float, HintSettings], None]


@dataclass(frozen=True)
class ScenarioRule:
    name: str
    batch: Literal["one", "samples_per_query", "batch_sizes"]  # where a cell's batch comes from
    loadgen_keys: tuple[str, ...]  # the scenario's own LoadGen settings in the file
    default_min_queries: int  # what LoadGen's early stopping needs before it calls a run VALID
    set_hint: HintSetter
    metric_name: str  # the name of the figure the first of `metric_keys` gives
    metric_unit: Literal["ns", "samples/s"]
    metric_keys: tuple[str, ...]  # the LoadGen log entries that give the metric, first present wins
    batch_figure: str | None  # LoadGen's figure for one batch (a latency key, or "rate" for samples/s)
    device_statistic: Literal["median", "mean"] | None  # what the batch figure is compared with
    not_compared_why: str = ""
    fallback_name: str = ""  # the name where a later key gave it (no early-stopping estimate: the plain percentile)
    retune_when_too_fast: bool = True
    batches_in_flight: bool = False  # the system under test may pipeline batches (GPU)
    arrival_rate_fixed: bool = False  # LoadGen issues queries at the target rate, however fast the system answers
    metric_extras: tuple[tuple[str, str], ...] = ()  # more figures the metric carries: (name, log key)

    def batches(self, loadgen: HintSettings, batch_sizes: list[int]) -> list[int]:
        if self.batch == "one":
            return [1]
        if self.batch == "samples_per_query":
            return [int(_given(loadgen.samples_per_query, "samples_per_query"))]
        return list(batch_sizes)

    def min_queries(self, given: int | None) -> int:
        return given or self.default_min_queries

    def metric(self, entries: dict[str, Any]) -> dict[str, Any]:
        """MLPerf's headline figure for the scenario, with its name and unit."""
        value = entries.get(self.metric_keys[0]) or None
        name = self.metric_name
        if value is None:
            value = next((entries[k] for k in self.metric_keys[1:] if entries.get(k)), entries.get(self.metric_keys[-1]))
            name = self.fallback_name or name
        metric = {"name": name, "value": value, "unit": self.metric_unit}
        metric.update({name: entries.get(key) for name, key in self.metric_extras})
        return metric

    def ns_per_batch(self, batch: int, results: dict[str, Any]) -> float | None:
        """LoadGen's measured time for one batch, from its result entries."""
        if self.batch_figure is None:
            return None
        if self.batch_figure == "rate":
            rate = results.get("result_samples_per_second")
            return batch * 1e9 / rate if rate else None
        value = results.get(self.batch_figure)
        return float(value) if value else None

    def retune_ns(self, batch: int, results: dict[str, Any]) -> float | None:
        """LoadGen's time per batch in a run too fast for its hint, as the retune after it reads it
        (harness/measure/loadgen.py): the batch over Offline's rate, else the mean latency. The
        retune hints with the faster of this and the system under test's own time, so never a
        slower one (harness/bundle/loadgen_check.py holds it so)."""
        if self.batch_figure == "rate" and results.get("result_samples_per_second"):
            return batch * 1e9 / float(results["result_samples_per_second"])
        return results.get("result_mean_latency_ns") or None


def offline_expected_qps(batch: int, hinted_ns: float, latency_ns: float, min_duration_s: float) -> float:
    """The Offline hint: the measured rate with headroom, and never so low that LoadGen's
    truncated sample count leaves the query shorter than the minimum duration. A model that takes
    seconds per sample would otherwise get a one-sample query, finish early and be INVALID ("min
    duration not met") however often it is retried. The query then holds whole batches: LoadGen
    asks for the hint times the duration times `OFFLINE_QUERY_FACTOR` samples, truncated, and a
    count that is no multiple of the batch leaves the last batch padded, whose computed but
    uncounted samples LoadGen's rate would charge to the model (a query of 10 samples at batch 8
    is two batches' work: 60% more time a sample)."""
    qps = batch * 1e9 / hinted_ns
    per_sample_ns = max(latency_ns, hinted_ns) / batch  # the hint's floors hold here too
    if per_sample_ns <= 0 or min_duration_s <= 0:
        return qps
    span = min_duration_s * OFFLINE_QUERY_FACTOR
    asked = math.floor(qps * span)
    needed = max(asked, math.ceil(HINT_HEADROOM * min_duration_s * 1e9 / per_sample_ns))
    whole = -(-needed // batch) * batch
    return qps if whole == asked else (whole + 0.5) / span


def server_target_qps(loadgen: HintSettings, batch: int, latency_ns: float) -> float:
    """The Server arrival rate: as given, or a fraction of the measured capacity."""
    qps = _given(loadgen.target_qps, "target_qps")
    if qps != "auto":
        return float(qps)
    return float(_given(loadgen.target_qps_fraction, "target_qps_fraction")) * batch * 1e9 / latency_ns


def overload_s(target_qps: float, min_duration_s: float, min_query_count: int, max_query_count: int,
               batch: int, latency_ns: float) -> float | None:
    """The least time a Server run takes where its arrival rate is above what the system can answer
    (None where it is not): LoadGen schedules max(min_query_count, target_qps x min_duration)
    queries (at most max_query_count, where set) whatever the system's speed, the queue grows for
    the whole run, and every query is answered before the run ends; at `batch` samples per
    `latency_ns` (every batch full: the best case) that takes this long."""
    capacity = batch * 1e9 / latency_ns if latency_ns > 0 else math.inf
    if target_qps <= capacity:
        return None
    queries = max(min_query_count, math.ceil(target_qps * min_duration_s))
    if max_query_count:
        queries = min(queries, max_query_count)
    return queries / capacity


def _given(value: Any, key: str) -> Any:
    """A scenario's own LoadGen setting, which a cell of that scenario always has."""
    if value is None:
        raise ValueError(f"loadgen.{key} is not set for this scenario's cell")
    return value


def hinted_ns(latency_ns: float, batch: int) -> int:
    """The latency LoadGen is told to expect: the measured one with headroom, above the floors."""
    return max(int(latency_ns / HINT_HEADROOM), MIN_HINT_NS_PER_SAMPLE * batch, MIN_HINT_NS_PER_QUERY)


def _single_stream(s: Any, batch: int, hinted: float, latency_ns: float, loadgen: HintSettings) -> None:
    s.single_stream_expected_latency_ns = int(hinted)


def _multi_stream(s: Any, batch: int, hinted: float, latency_ns: float, loadgen: HintSettings) -> None:
    s.multi_stream_expected_latency_ns = int(hinted)
    s.multi_stream_samples_per_query = batch


def _offline(s: Any, batch: int, hinted: float, latency_ns: float, loadgen: HintSettings) -> None:
    s.offline_expected_qps = offline_expected_qps(batch, hinted, latency_ns, loadgen.min_duration_s)


def _server(s: Any, batch: int, hinted: float, latency_ns: float, loadgen: HintSettings) -> None:
    s.server_target_qps = server_target_qps(loadgen, batch, latency_ns)
    s.server_target_latency_ns = int(_given(loadgen.target_latency_ms, "target_latency_ms") * 1e6)
    s.server_coalesce_queries = True  # queries that arrived while the model ran come as one call


RULES: dict[str, ScenarioRule] = {rule.name: rule for rule in (
    ScenarioRule(
        "SingleStream", batch="one", loadgen_keys=(), default_min_queries=100, set_hint=_single_stream,
        metric_name="latency_p90_early_stopping_ns", metric_unit="ns",
        metric_keys=("early_stopping_latency_ss", "result_90.00_percentile_latency_ns"), fallback_name="latency_p90_ns",
        batch_figure="result_50.00_percentile_latency_ns", device_statistic="median"),
    ScenarioRule(
        "MultiStream", batch="samples_per_query", loadgen_keys=("samples_per_query",), default_min_queries=662,
        set_hint=_multi_stream, metric_name="latency_p99_per_query_early_stopping_ns", metric_unit="ns",
        metric_keys=("early_stopping_latency_ms", "result_99.00_percentile_per_query_latency_ns"),
        fallback_name="latency_p99_per_query_ns",
        batch_figure="result_50.00_percentile_per_query_latency_ns", device_statistic="median"),
    ScenarioRule(
        "Server", batch="batch_sizes", loadgen_keys=("target_qps", "target_qps_fraction", "target_latency_ms"),
        default_min_queries=500, set_hint=_server, metric_name="server_completed_samples_per_s",
        metric_unit="samples/s", metric_keys=("result_completed_samples_per_sec",),
        batch_figure=None, device_statistic=None,
        not_compared_why="not compared: Server latency includes queueing at the target rate by design",
        retune_when_too_fast=False, arrival_rate_fixed=True,
        metric_extras=(("scheduled_samples_per_s", "result_scheduled_samples_per_sec"),
                       ("latency_p99_ns", "result_99.00_percentile_latency_ns"),
                       ("target_latency_ns", "effective_target_latency_ns"))),
    ScenarioRule(
        "Offline", batch="batch_sizes", loadgen_keys=(), default_min_queries=1, set_hint=_offline,
        metric_name="offline_samples_per_s", metric_unit="samples/s",
        metric_keys=("result_samples_per_second",), batch_figure="rate", device_statistic="mean",
        batches_in_flight=True),
)}
SCENARIOS: tuple[str, ...] = tuple(RULES)
assert SCENARIOS == get_args(ScenarioName), "the table and the type name the same scenarios"


def rule(scenario: str) -> ScenarioRule:
    return RULES[scenario]


#: The batches a system under test keeps in flight where it pipelines them (harness/measure/sut.py).
PIPELINE_DEPTH = 2


def batches_in_flight(scenario: str, on_gpu: bool, batch: int) -> int:
    """The batches the system under test keeps in flight: PIPELINE_DEPTH on a GPU, for batches of
    more than one sample, where the scenario's rule lets it pipeline them (Offline); else 1 (on the
    CPU every call has finished when it returns). The worker runs and records it
    (`loadgen.sut.batches_in_flight`), and validate derives it again from the cell's config: it
    decides whether LoadGen running ahead of the device timing is within the limit."""
    return PIPELINE_DEPTH if on_gpu and rule(scenario).batches_in_flight and batch > 1 else 1
