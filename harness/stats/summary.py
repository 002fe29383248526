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


def out_of_line(medians: Sequence[float], limit: float) -> list[int]:
    """The positions of the medians more than `limit` times above, or below by as much, the median
    of them all (of three or more); of two, both where one is more than `limit` times the other
    (neither can be told the odd one)."""
    if len(medians) < 2 or min(medians) <= 0:
        return []
    if len(medians) == 2:
        return [0, 1] if max(medians) / min(medians) > limit else []
    middle = median(medians)
    return [i for i, value in enumerate(medians) if value / middle > limit or middle / value > limit]


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


#: The exact distribution of U is used where there are no ties and the smaller sample has at most
#: this many values (its cost grows with the square of that size times the larger one's).
EXACT_MAX_SMALLER = 20
EXACT_MAX_PRODUCT = 20_000


def mann_whitney_u(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """Two-sided Mann-Whitney U test of `a` against `b`: (U of `a`, p-value).

    Exact where there are no ties and the samples are small (`EXACT_MAX_SMALLER`,
    `EXACT_MAX_PRODUCT`): the p-value from U's own distribution, what scipy.stats.mannwhitneyu
    calls method="exact". Otherwise the normal approximation with the tie and continuity
    corrections (method="asymptotic"). Any sizes from one value a side: with few values no p-value
    is small (two values a side cannot go below 1/3).
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
    if tie_term == 0 and exact_u_applies(n1, n2):
        return u_a, _exact_p(round(u_a), n1, n2)
    variance = n1 * n2 / 12 * ((total + 1) - tie_term / (total * (total - 1)))
    if variance <= 0:
        return u_a, 1.0  # every value tied: no evidence of a difference
    z = (abs(u_a - n1 * n2 / 2) - 0.5) / math.sqrt(variance)
    return u_a, min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2)))


def exact_u_applies(n1: int, n2: int) -> bool:
    """Whether samples of these sizes (and no ties) get U's exact p-value rather than the normal
    approximation."""
    return min(n1, n2) <= EXACT_MAX_SMALLER and n1 * n2 <= EXACT_MAX_PRODUCT


def u_test_method(a: Sequence[float], b: Sequence[float]) -> str:
    """The test `mann_whitney_u` gives these samples, in words."""
    tied = len(set(a) | set(b)) < len(a) + len(b)
    return "exact" if not tied and exact_u_applies(len(a), len(b)) else "normal approximation"


def u_counts(n1: int, n2: int) -> list[int]:
    """How many of the C(n1 + n2, n1) orderings of two samples without ties give U = 0, 1, ...,
    n1 n2: the coefficients of the Gaussian binomial [n1 + n2 choose n1], the product over
    i = 1..m of (1 - q^(n + i)) / (1 - q^i) with m, n the smaller and larger size."""
    m, n = min(n1, n2), max(n1, n2)
    counts = [1] + [0] * (m * n)
    degree = 0
    for i in range(1, m + 1):
        shift = n + i
        degree += n
        for u in range(degree, shift - 1, -1):  # times (1 - q^shift)
            counts[u] -= counts[u - shift]
        for u in range(i, degree + 1):  # divided by (1 - q^i): a running sum with stride i
            counts[u] += counts[u - i]
    return counts


def _exact_p(u: int, n1: int, n2: int) -> float:
    """Two-sided p of U = u: twice the smaller tail, at most 1 (U's distribution is symmetric)."""
    counts = u_counts(n1, n2)
    upper = max(u, n1 * n2 - u)
    return min(1.0, 2 * sum(counts[upper:]) / math.comb(n1 + n2, n1))


def geometric_mean(values: Sequence[float]) -> float:
    if not values or any(v <= 0 for v in values):
        raise ValueError("the geometric mean needs positive values")
    return math.exp(sum(math.log(v) for v in values) / len(values))
