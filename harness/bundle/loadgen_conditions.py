"""LoadGen's minimum-duration and early-stopping conditions rebuilt from the figures its detail
log records beside them (LoadGen's results.cc), so that a log calling either met against its own
figures was edited: validate's fourth layer (harness/bundle/loadgen_check.py) reads each.

Minimum duration: LoadGen judges Offline by its query's latency and the others by when their last
query was issued or scheduled, and logs each as a rate of samples over that time: Offline's
`result_samples_per_second` (samples over the query's latency), SingleStream's
`result_qps_with_loadgen_overhead` and Server's `result_scheduled_samples_per_sec` (one sample
less over the last query's issue or schedule time). The samples over the rate is therefore at
least the time LoadGen judged. MultiStream logs no such rate: its duration is read as logged.

Early stopping: SingleStream and MultiStream need at least as many queries as LoadGen's binomial
rule asks with one query over the percentile (64 at the 90th, 662 at the 99th), Server as many as
it asks with none; and the estimate LoadGen reports is one of the run's latencies, ranked above the
target percentile's: never under that percentile's latency nor over the run's largest.
"""

from __future__ import annotations

import math
from typing import Any

from harness.bundle.loadgen_log import DETAIL
from harness.bundle.tolerance import SIX_DIGITS, number

_CONFIDENCE = 0.99  # LoadGen's early-stopping confidence, fixed in its code
#: The rate each scenario logs of the time its minimum duration is judged by (samples over it).
_DURATION_RATES = {"Offline": "result_samples_per_second", "SingleStream": "result_qps_with_loadgen_overhead",
                   "Server": "result_scheduled_samples_per_sec"}
#: The queries over the percentile early stopping is first judged with (LoadGen's `t`).
_OVER_AT_LEAST = {"SingleStream": 1, "MultiStream": 1, "Server": 0}
#: Each early-stopping estimate a scenario logs: its key, the percentile it estimates (None: the
#: target's), and the keys its latencies are named by (`{}` the percentile as LoadGen names it).
_ESTIMATES = {
    "SingleStream": (("early_stopping_latency_ss", None, "result_{}_percentile_latency_ns", "result_max_latency_ns"),
                     ("early_stopping_latency_ms", 0.99, "result_{}_percentile_latency_ns", "result_max_latency_ns")),
    "MultiStream": (("early_stopping_latency_ms", None, "result_{}_percentile_per_query_latency_ns",
                     "result_max_query_latency_ns"),),
}


def least_passing(over: int, percentile: float) -> int:
    """LoadGen's `MinPassingQueriesFinder` (early_stopping.cc) at its confidence and no tolerance,
    as its first call for `over` 0 or 1 makes it: the fewest queries within the percentile's latency
    that, beside `over` queries over it, make it 99% sure that the percentile holds (the binomial
    odds of `over` or fewer such queries under 1%), searched for where LoadGen searches."""
    first = math.ceil(math.log(1 - _CONFIDENCE) / math.log(percentile))  # with none over
    low, high = int(over * percentile / (1 - percentile) + first), int(over * first + first + 1)
    count = high - low
    while count > 0:  # LoadGen's binary search, over the same range
        step = count // 2
        if _odds(low + step, over, percentile) < 1 - _CONFIDENCE:
            count = step
        else:
            low, count = low + step + 1, count - step - 1
    return low


def _odds(within: int, over: int, percentile: float) -> float:
    """The odds of `over` or fewer queries over the percentile among `within + over`."""
    n = within + over
    return sum(math.comb(n, k) * (1 - percentile) ** k * percentile ** (n - k) for k in range(over + 1))


def problems(rel: str, parsed: dict[str, Any]) -> list[str]:
    """Where a detail log (`parse_detail`) calls minimum duration or early stopping met against its
    own figures."""
    return _duration(rel, parsed) + _early_stopping(rel, parsed)


def _duration(rel: str, parsed: dict[str, Any]) -> list[str]:
    results, settings = parsed["results"], parsed["settings"]
    rate_key = _DURATION_RATES.get(parsed["scenario"], "")
    rate, queries = number(results.get(rate_key)), number(results.get("result_query_count"))
    per_query, least_ms = number(settings.get("effective_samples_per_query")), number(settings.get("effective_min_duration_ms"))
    if (results.get("result_min_duration_met") is not True or not rate or queries is None or per_query is None
            or least_ms is None):
        return []
    at_most_s = queries * per_query / rate * (1 + SIX_DIGITS)
    if at_most_s * 1000 >= least_ms:
        return []
    return [f"{rel}/{DETAIL}: result_min_duration_met True, yet its {queries * per_query:.0f} samples at {rate_key} "
            f"{rate:g} took {at_most_s:.4g} s at the most, under effective_min_duration_ms {least_ms:.0f}"]


def _early_stopping(rel: str, parsed: dict[str, Any]) -> list[str]:
    results, settings, scenario = parsed["results"], parsed["settings"], parsed["scenario"]
    target, queries = number(settings.get("effective_target_latency_percentile")), number(results.get("result_query_count"))
    if results.get("early_stopping_met") is not True or scenario not in _OVER_AT_LEAST or target is None or queries is None:
        return []
    if not 0 < target < 1:
        return []  # the schema's finding: no percentile to rebuild the rule with
    over = _OVER_AT_LEAST[scenario]
    least = least_passing(over, target) + over
    if queries < least:
        return [f"{rel}/{DETAIL}: early_stopping_met True, yet result_query_count {queries:.0f} is under the "
                f"{least} queries LoadGen's early stopping needs at the {target * 100:g}th percentile"]
    lines = []
    for key, percentile, named, largest_key in _ESTIMATES.get(scenario, ()):
        percentile = percentile or target
        estimate, latency_key = number(results.get(key)), named.format(f"{percentile * 100:.2f}")
        latency, largest = number(results.get(latency_key)), number(results.get(largest_key))
        if estimate is None or (percentile != target and queries < least_passing(1, percentile) + 1):
            continue  # too few queries for this percentile's estimate: LoadGen logs 0
        if latency is not None and estimate < latency:
            lines.append(f"{rel}/{DETAIL}: {key} {estimate:.0f} is under {latency_key} {latency:.0f}: an early-stopping "
                         "estimate is a latency ranked above its percentile's")
        if largest is not None and estimate > largest:
            lines.append(f"{rel}/{DETAIL}: {key} {estimate:.0f} is over {largest_key} {largest:.0f}, the run's largest")
    return lines
