"""Summary statistics of timing samples. Pure Python: the parent and the tests use it without numpy."""

from __future__ import annotations

import math
from collections.abc import Sequence

# pyperf's rule: a spread over 10% of the mean makes a figure too noisy to trust as it is.
NOISY_CV = 0.10


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default method) of already sorted values."""
    if not sorted_values:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q} outside [0, 100]")
    pos = (len(sorted_values) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def summarize_ns(samples: Sequence[int]) -> dict[str, float | int | bool]:
    """n, median, p90, p99, mean, stdev (sample), CV, min, max of nanosecond samples, and
    whether the spread makes them noisy."""
    if not samples:
        raise ValueError("no samples to summarize")
    values = sorted(samples)
    n = len(values)
    mean = sum(values) / n
    stdev = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
    cv = stdev / mean if mean > 0 else 0.0
    return {
        "n": n,
        "median_ns": percentile(values, 50),
        "p90_ns": percentile(values, 90),
        "p99_ns": percentile(values, 99),
        "mean_ns": mean,
        "stdev_ns": stdev,
        "cv": cv,
        "min_ns": values[0],
        "max_ns": values[-1],
        "noisy": cv > NOISY_CV,
    }
