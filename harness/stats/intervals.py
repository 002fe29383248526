"""Confidence intervals for the figures a fusion verdict rests on, and the verdict itself. Pure
Python: the parent, the report and the tests use it without numpy or scipy.

- A median's interval from order statistics: the widest-needed pair of ranks (l, n + 1 - l) whose
  binomial(n, 1/2) probability of holding the true median is at least the confidence (the interval
  asv_runner's `quantile_ci` gives for q = 1/2). With too few values for the confidence asked, the
  whole range, and the coverage it does have.
- A speedup's interval from paired rounds: round i ran fusion on and fusion off in fresh processes
  one after the other, so both met the same phase of the machine; its speedup is off_i / on_i.
  The interval is Student's t on the logs of the R paired speedups, exp(mean +- t(R-1) sd / sqrt(R)),
  centred on their geometric mean, which is the speedup reported. A bootstrap over the rounds was
  the other choice: at the 3 rounds a scenario can afford it undercovers (the percentile bootstrap
  of 3 paired ratios is about their range: 75% coverage at best), where the t interval holds its
  95% (tests/unit/test_intervals.py measures both on simulated pairs; at 5 rounds the bootstrap
  reaches about 90%).
- A speedup's interval from rounds that did not pair: where the two cells ran in different starts
  of a resumed run (`--budget-s`, or an interrupted run, left one for `--resume`), round i of one
  met another stretch of the machine than round i of the other, and pairing them by number would
  claim what did not happen. Their rounds are then two independent samples: the speedup is
  exp(mean log off - mean log on), its interval Student's two-sample t with the variance pooled
  from both sides' rounds (as `compare` tests two bundles' rounds), wider than a paired interval
  of the same spread, and the text says `rounds not paired`.
- The verdict of a pair: "faster" where the whole interval is above 1 and the speedup is at least
  the smallest effect worth the name (`SMALLEST_EFFECT`, 5%, `compare`'s default threshold too),
  "slower" where the whole interval is below 1 and the slowdown at least as large, "under 5%" where
  the whole interval lies between 1 and that effect (1/1.05 and 1 for a slowdown), "faster, size
  unclear" ("slower, ...") where it excludes 1 and the estimate is smaller than the effect but the
  interval reaches past it (`1.04x [1.01-1.07]`: 7% is not ruled out), else "no effect seen" (its
  direction, `Speedup.direction`, is the interval's side of 1 whatever its size: faster, slower, or
  none seen); with one
  round there is no interval and the verdict is "one round". Rounds whose logs have no spread (every
  paired round one ratio; unpaired, each side's rounds one median: a coarse clock's medians) have no
  interval either, and the verdict "rounds alike": their sample deviation of 0 is the clock's
  resolution, not the spread between processes, and the t interval it gives (no width, "95%") holds
  the true speedup with a probability nobody knows. `compare` declines its t test on such rounds
  (`rounds_t_test`) for the same reason. The bounds are written with as many
  figures as it takes to tell them apart and from 1 (`1.00x [1.001-1.003, 95%] under 5%`,
  `12.3x [12.31-12.34, 95%] faster`); an interval whose high is more than `READABLE_SPAN` (100) times
  its low is written `[too wide to read (2 rounds: run more with --rounds), 95%]`, its bounds kept
  in the record (two rounds that disagree gave `[0.0000748-3,341, 95%]`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from harness.metric_table import format_ratio, format_times

#: The confidence of a speedup's interval, and of a median's unless `median_interval` is asked another.
DEFAULT_CONFIDENCE = 0.95
#: The smallest speedup or slowdown a verdict calls one: 5%, as `compare` judges a change.
SMALLEST_EFFECT = 0.05
FASTER, SLOWER, NO_EFFECT, ONE_ROUND = "faster", "slower", "no effect seen", "one round"
#: Two rounds or more whose logs have no spread: no interval, as with one round (see the module's docstring).
ROUNDS_ALIKE = "rounds alike"
#: The verdicts of a speedup without an interval.
NO_INTERVAL = (ONE_ROUND, ROUNDS_ALIKE)
#: What an interval from rounds that did not pair says beside its verdict (`unpaired_speedup`).
UNPAIRED = "rounds not paired"
NEGLIGIBLE = f"under {SMALLEST_EFFECT:.0%}"
#: The interval is on one side of 1, the estimate under the smallest effect, the interval reaching past it.
FASTER_UNCLEAR, SLOWER_UNCLEAR = "faster, size unclear", "slower, size unclear"
#: Every verdict `verdict_of` gives: what a speedup timed over two or more rounds is called.
VERDICTS_OF_ROUNDS = (FASTER, FASTER_UNCLEAR, NEGLIGIBLE, NO_EFFECT, SLOWER_UNCLEAR, SLOWER)
#: A verdict's direction (`Speedup.direction`): its interval above 1 (`faster`, `under 5%` or `faster,
#: size unclear`), below 1 (`slower` and the others), or holding 1 (`no effect seen`: no direction seen).
NO_DIRECTION = "no direction seen"


@dataclass(frozen=True)
class Interval:
    low: float
    high: float
    coverage: float  # the probability the interval holds the true value under its model

    def holds(self, value: float) -> bool:
        return self.low <= value <= self.high

    def overlaps(self, other: Interval) -> bool:
        return self.low <= other.high and other.low <= self.high


def _binomial_half_cdf(k: int, n: int) -> float:
    """P(X <= k) for X ~ binomial(n, 1/2)."""
    return float(sum(math.comb(n, i) for i in range(k + 1)) / 2**n)


def median_interval(values: Sequence[float], confidence: float = DEFAULT_CONFIDENCE) -> Interval:
    """The order-statistics interval on the median of `values` (see the module's docstring)."""
    if not values:
        raise ValueError("the interval of no values")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence {confidence} outside (0, 1)")
    ordered = sorted(values)
    n = len(ordered)
    # The interval [x_(l), x_(n+1-l)] (1-based) holds the median unless at most l-1 values fall
    # below it or at most l-1 above: coverage 1 - 2 P(X <= l-1). Take the largest l that keeps the
    # coverage at least `confidence`; l = 1 (the whole range) when none does.
    best = 1
    for rank in range(1, n // 2 + 1):
        if 1 - 2 * _binomial_half_cdf(rank - 1, n) >= confidence:
            best = rank
        else:
            break
    coverage = max(0.0, 1 - 2 * _binomial_half_cdf(best - 1, n))
    return Interval(ordered[best - 1], ordered[n - best], coverage)


def _log_beta(a: float, b: float) -> float:
    return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularized incomplete beta function (modified Lentz)."""
    tiny, eps = 1e-300, 1e-15
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 500):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1 + numerator * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + numerator / c
            c = c if abs(c) > tiny else tiny
            result *= d * c
        if abs(d * c - 1) < eps:
            break
    return result


def _incomplete_beta(a: float, b: float, x: float) -> float:
    """I_x(a, b), the regularized incomplete beta function."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(a * math.log(x) + b * math.log(1 - x) - _log_beta(a, b))
    if x < (a + 1) / (a + b + 2):
        return front * _beta_fraction(a, b, x) / a
    return 1 - front * _beta_fraction(b, a, 1 - x) / b


def student_t_cdf(t: float, df: int) -> float:
    """P(T <= t) for Student's t with `df` degrees of freedom."""
    if df < 1:
        raise ValueError("Student's t needs at least one degree of freedom")
    tail = 0.5 * _incomplete_beta(df / 2, 0.5, df / (df + t * t))
    return 1 - tail if t >= 0 else tail


def student_t_quantile(p: float, df: int) -> float:
    """The t with P(T <= t) = p (bisection on the CDF: 1e-10 relative)."""
    if not 0 < p < 1:
        raise ValueError(f"quantile {p} outside (0, 1)")
    if p < 0.5:
        return -student_t_quantile(1 - p, df)
    low, high = 0.0, 1.0
    while student_t_cdf(high, df) < p:
        high *= 2
    while high - low > 1e-10 * max(1.0, high):
        middle = (low + high) / 2
        low, high = (middle, high) if student_t_cdf(middle, df) < p else (low, middle)
    return (low + high) / 2


@dataclass(frozen=True)
class Speedup:
    """A fusion pair's speedup (off over on) from its paired rounds, its interval and verdict."""

    value: float
    rounds: int  # the rounds paired; where they did not pair, the fewer of either cell's
    interval: Interval | None  # None with one round, or rounds alike (NO_INTERVAL)
    verdict: str
    paired: bool = True  # False: the two cells' rounds ran at different times (`unpaired_speedup`)

    def text(self) -> str:
        """As every table shows it: `1.42x [1.12-1.79, 95%] faster`, `1.31x (one round)`, `1.20x (3 rounds
        alike)`, each followed
        by `(rounds not paired)` where the two cells ran in different starts."""
        apart = "" if self.paired else f" ({UNPAIRED})"
        if self.interval is None:
            return f"{format_times(self.value)} ({self.verdict_counted()}){apart}"
        if too_wide(self.interval):
            return (f"{format_times(self.value)} [too wide to read ({self.rounds} rounds: run more with --rounds), "
                    f"{self.interval.coverage:.0%}] {self.verdict}{apart}")
        low, high = bounds_text(self.interval.low, self.interval.high)
        return f"{format_times(self.value)} [{low}-{high}, {self.interval.coverage:.0%}] {self.verdict}{apart}"

    @property
    def direction(self) -> str | None:
        """Which way the interval lies from 1: `faster` above it, `slower` below it, `NO_DIRECTION`
        where it holds 1; None without an interval. One verdict word may hold either way (`under 5%`),
        and two words one way (`faster`, `under 5%` above 1): what a rerun on other hardware asks
        of fusion's effect apart from its size."""
        if self.interval is None:
            return None
        return FASTER if self.interval.low > 1 else SLOWER if self.interval.high < 1 else NO_DIRECTION

    def verdict_counted(self) -> str:
        """The verdict, with the rounds counted where they are alike (`3 rounds alike`); unpaired, the
        fewer side may have one round, its one median beside the other side's alike: no count then."""
        return f"{self.rounds} {self.verdict}" if self.verdict == ROUNDS_ALIKE and self.rounds > 1 else self.verdict


#: The widest interval whose bounds are written: its high at most this many times its low (two orders
#: of magnitude: `[0.13-11.3]` is written). Past it no reader can act on the bounds, which came out as
#: `0.0000748-3,341` (two rounds: Student's t of one degree of freedom is 12.7); the text says so, and
#: the record keeps the bounds.
READABLE_SPAN = 100.0


def too_wide(interval: Interval) -> bool:
    """Whether `interval` spans more than `READABLE_SPAN` from its low bound to its high."""
    return interval.low <= 0 or interval.high / interval.low > READABLE_SPAN


#: Bounds closer than this, relatively, are one value that the logs' arithmetic left apart (three rounds of
#: 1 ms against three of 1.2 ms gave 1.1999999999999966 and 1.2000000000000026).
_ROUNDING = 1e-9


def bounds_text(low: float, high: float) -> tuple[str, str]:
    """An interval's bounds as the metric table writes ratios, with more figures where three
    would show two different bounds alike, or a bound that is not 1 as 1."""
    shown = format_ratio(low), format_ratio(high)
    alike = shown[0] == shown[1]
    for decimals in range(3, 9):  # bounds a rounding apart (every round's ratio one value) are one bound
        apart = shown[0] != shown[1] or math.isclose(low, high, rel_tol=_ROUNDING)
        off_one = all(text.rstrip("0").rstrip(".") != "1" or math.isclose(bound, 1, rel_tol=_ROUNDING)
                      for text, bound in zip(shown, (low, high)))
        if apart and off_one:
            break
        shown = _bound_text(low, decimals, alike), _bound_text(high, decimals, alike)
    return shown


def _bound_text(bound: float, decimals: int, alike: bool) -> str:
    """A bound with `decimals` decimals from 0.01 to 10; beyond, where three figures wrote both bounds
    alike (`alike`), as many figures as that gives 1.xxx (12.31, 1,520.3, 0.005121): [12.31-12.34]
    read `12.3-12.3`, as if it had no width."""
    size = abs(bound)
    if 0.01 <= size < 10:
        return f"{bound:.{decimals}f}"
    if not alike or size == 0 or not math.isfinite(bound):
        return format_ratio(bound)
    return f"{bound:,.{max(0, decimals - math.floor(math.log10(size)))}f}"


def paired_speedup(on: Sequence[float], off: Sequence[float]) -> Speedup:
    """The speedup of fusion on over off from round medians paired by round (see the module's docstring)."""
    if len(on) != len(off) or not on:
        raise ValueError(f"paired rounds need as many on as off, at least one each (got {len(on)} and {len(off)})")
    if any(v <= 0 for v in (*on, *off)):
        raise ValueError("round medians must be positive")
    logs = [math.log(b) - math.log(a) for a, b in zip(on, off)]  # a ratio of extremes would underflow
    rounds = len(logs)
    centre = sum(logs) / rounds
    if rounds < 2:
        return Speedup(math.exp(centre), rounds, None, ONE_ROUND)
    sd = math.sqrt(sum((v - centre) ** 2 for v in logs) / (rounds - 1))
    if sd <= _ROUNDING:  # one ratio in every round (the logs' arithmetic leaves them a rounding apart)
        return Speedup(math.exp(centre), rounds, None, ROUNDS_ALIKE)
    half = student_t_quantile(0.5 + DEFAULT_CONFIDENCE / 2, rounds - 1) * sd / math.sqrt(rounds)
    interval = Interval(math.exp(centre - half), math.exp(centre + half), DEFAULT_CONFIDENCE)
    return Speedup(math.exp(centre), rounds, interval, verdict_of(math.exp(centre), interval))


def unpaired_speedup(on: Sequence[float], off: Sequence[float]) -> Speedup:
    """The speedup of fusion on over off from round medians that did not pair (see the module's
    docstring): exp(mean log off - mean log on), its interval Student's two-sample t on the logs with
    the variance pooled from each side's rounds, as `rounds_t_test` pools it. With one round on each
    side, their ratio and no interval."""
    if not on or not off:
        raise ValueError(f"unpaired rounds need at least one on and one off (got {len(on)} and {len(off)})")
    if any(v <= 0 for v in (*on, *off)):
        raise ValueError("round medians must be positive")
    centre, standard_error, freedom = _two_samples_of_logs(on, off)
    rounds = min(len(on), len(off))
    if freedom < 1:
        return Speedup(math.exp(centre), rounds, None, ONE_ROUND, paired=False)
    if standard_error <= _ROUNDING:  # each side's rounds one median
        return Speedup(math.exp(centre), rounds, None, ROUNDS_ALIKE, paired=False)
    half = student_t_quantile(0.5 + DEFAULT_CONFIDENCE / 2, freedom) * standard_error
    interval = Interval(math.exp(centre - half), math.exp(centre + half), DEFAULT_CONFIDENCE)
    return Speedup(math.exp(centre), rounds, interval, verdict_of(math.exp(centre), interval), paired=False)


def rounds_t_test(a: Sequence[float], b: Sequence[float]) -> tuple[float, float] | None:
    """Student's two-sample t test on the logs of two cells' round medians (each round a fresh
    process, harness/run/rounds.py), the variance pooled from each side's rounds, so the variation
    between processes is in it, as it is not in one process's samples: (B's mean log minus A's, the
    two-sided p-value). None where neither side has two rounds to estimate that variation from, or
    where every round of each side gave the same median (no spread to test against: 300 ns against
    400 and 400 would read p = 0, a coarse clock's certainty)."""
    if any(v <= 0 for v in (*a, *b)):
        raise ValueError("round medians must be positive")
    if not a or not b or (len(a) < 2 and len(b) < 2):
        return None
    if len(set(a)) == 1 and len(set(b)) == 1:  # asked of the medians: the logs' pooled spread need not be 0
        return None  # (the mean of three logs of 305 is not each: 305 against 310 three times read p = 1e-53)
    difference, standard_error, freedom = _two_samples_of_logs(a, b)
    if standard_error == 0:  # medians a rounding apart whose logs are equal
        return None
    t = difference / standard_error
    return difference, min(1.0, 2 * student_t_cdf(-abs(t), freedom))


def _two_samples_of_logs(a: Sequence[float], b: Sequence[float]) -> tuple[float, float, int]:
    """Student's two-sample figures on the logs of two sets of positive values: B's mean log minus A's,
    that difference's standard error with the variance pooled from both sides, and its degrees of
    freedom (len(a) + len(b) - 2; below 1 there is nothing to pool, and the standard error is 0)."""
    logs_a, logs_b = [math.log(v) for v in a], [math.log(v) for v in b]
    mean_a, mean_b = sum(logs_a) / len(logs_a), sum(logs_b) / len(logs_b)
    freedom = len(a) + len(b) - 2
    if freedom < 1:
        return mean_b - mean_a, 0.0, freedom
    pooled = (sum((v - mean_a) ** 2 for v in logs_a) + sum((v - mean_b) ** 2 for v in logs_b)) / freedom
    return mean_b - mean_a, math.sqrt(pooled * (1 / len(a) + 1 / len(b))), freedom


def verdict_of(value: float, interval: Interval) -> str:
    """The verdict of a speedup `value` with this interval (see the module's docstring)."""
    large, small = 1 + SMALLEST_EFFECT, 1 / (1 + SMALLEST_EFFECT)
    if interval.low > 1:
        return FASTER if value >= large else NEGLIGIBLE if interval.high < large else FASTER_UNCLEAR
    if interval.high < 1:
        return SLOWER if value <= small else NEGLIGIBLE if interval.low > small else SLOWER_UNCLEAR
    return NO_EFFECT
