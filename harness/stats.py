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


def median(values: Sequence[float]) -> float:
    """The median, as `summarize_ns` gives it (the 50th percentile of `percentile`)."""
    return percentile(sorted(values), 50)


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
        "median_ns": percentile(values, 50),  # `values` is sorted already: median() would sort again
        "p90_ns": percentile(values, 90),
        "p99_ns": percentile(values, 99),
        "mean_ns": mean,
        "stdev_ns": stdev,
        "cv": cv,
        "min_ns": values[0],
        "max_ns": values[-1],
        "noisy": cv > NOISY_CV,
    }


def mann_whitney_u(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """Two-sided Mann-Whitney U test of `a` against `b`: (U of `a`, p-value).

    Normal approximation with the tie correction and a continuity correction (what
    scipy.stats.mannwhitneyu calls method="asymptotic"), good from about 8 samples a side.
    """
    n1, n2 = len(a), len(b)
    if n1 == 0 or n2 == 0:
        raise ValueError("the rank test needs samples on both sides")
    combined = sorted([(value, 0) for value in a] + [(value, 1) for value in b])
    total = n1 + n2
    rank_sum_a = 0.0
    tie_term = 0
    i = 0
    while i < total:
        j = i
        while j + 1 < total and combined[j + 1][0] == combined[i][0]:
            j += 1
        average_rank = (i + j) / 2 + 1
        rank_sum_a += average_rank * sum(1 for k in range(i, j + 1) if combined[k][1] == 0)
        ties = j - i + 1
        tie_term += ties**3 - ties
        i = j + 1
    u_a = rank_sum_a - n1 * (n1 + 1) / 2
    variance = n1 * n2 / 12 * ((total + 1) - tie_term / (total * (total - 1)))
    if variance <= 0:
        return u_a, 1.0  # every value tied: no evidence of a difference
    z = (abs(u_a - n1 * n2 / 2) - 0.5) / math.sqrt(variance)
    return u_a, min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2)))


def geometric_mean(values: Sequence[float]) -> float:
    if not values or any(v <= 0 for v in values):
        raise ValueError("the geometric mean needs positive values")
    return math.exp(sum(math.log(v) for v in values) / len(values))
