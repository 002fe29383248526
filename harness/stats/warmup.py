"""The warm-up's stopping rule, one window at a time: the device-timing pass runs it as it calls
the model (harness/measure/timing.py), and `validate` replays it over a cell's recorded warm-up
samples (harness/bundle/figures_check.py). One rule for both, so the two cannot drift apart.

Windows of about `WARMUP_WINDOW_S` of calls (at most `WARMUP_MAX_WINDOW`, at least one), all
sized from the first call, until two windows in a row have medians within `WARMUP_TOLERANCE` of
each other (steady), or the budget is spent, or the record would hold too many samples.

Known weaknesses, kept because `validate` of every harness of this schema version replays this
rule, and a changed rule would make their validate refuse the new bundles: a slow first call sizes
every window small (a first call of 200 ms gives one-call windows, which three calls of a model
still settling can pass as steady); and two windows let a slow drift through (1.9% a window passes
between neighbours). A new rule waits for a schema version that records which rule ran."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from harness.stats.thresholds import WARMUP_MAX_WINDOW, WARMUP_TOLERANCE, WARMUP_WINDOW_S


def window_for(call_ns: float) -> int:
    """Calls in a window of about WARMUP_WINDOW_S at `call_ns` a call."""
    return min(max(math.ceil(WARMUP_WINDOW_S * 1e9 / max(call_ns, 1)), 1), WARMUP_MAX_WINDOW)


class WarmupRule:
    """Feed it the first call, then each window of calls (`window` long) until `add` says stop."""

    def __init__(self, first_ns: int, minimum_calls: int, budget_ns: float, max_calls: int) -> None:
        self.minimum_calls, self.budget_ns, self.max_calls = minimum_calls, budget_ns, max_calls
        self.window = window_for(first_ns)
        self.calls, self.spent_ns = 1, float(first_ns)
        self.medians: list[float] = []
        self.steady = False

    def add(self, calls: Sequence[int]) -> bool:
        """Take one window's calls; True where the warm-up stops after them."""
        self.calls += len(calls)
        self.spent_ns += sum(calls)
        self.medians.append(statistics.median(calls))
        enough = self.calls >= self.minimum_calls
        if enough and len(self.medians) >= 2:
            previous, current = self.medians[-2:]
            if previous > 0 and abs(current / previous - 1) <= WARMUP_TOLERANCE:
                self.steady = True
                return True
        return (enough and self.spent_ns >= self.budget_ns) or self.calls >= self.max_calls - self.window

    @property
    def estimate_ns(self) -> float:
        """The settled time of a call: the last window's median."""
        return max(self.medians[-1], 1) if self.medians else 1.0


def replay(calls: Sequence[int], minimum_calls: int, budget_ns: float, max_calls: int) -> WarmupRule | None:
    """The rule as it ran over `calls` (the first call, then its windows), or None where it would not
    have stopped exactly after the last of them."""
    if not calls:
        return None
    rule = WarmupRule(calls[0], minimum_calls, budget_ns, max_calls)
    done = 1
    while done + rule.window <= len(calls):
        chunk = calls[done:done + rule.window]
        done += len(chunk)
        if rule.add(chunk):
            return rule if done == len(calls) else None
    return None
