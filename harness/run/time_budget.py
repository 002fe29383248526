"""A run's time budget (`run --budget-s`, `gpu-check --budget-s`), asked as each cell starts.

The budget ends at a deadline on `clock`. A cell that would start after it is not started; one
that starts before it runs at most until it (its time limit is cut to what is left). A cell whose
cut limit ran out did not fail: the budget ended. Either way the sweep records the cell as
skipped with the reason (gpu-check), or leaves it out of the bundle for --resume (`run`). A further
round of a cell (harness/run/rounds.py) the budget keeps is recorded failed with the reason in a
cell that keeps its rounds that finished.
"""

from __future__ import annotations

import time
from collections.abc import Callable

#: The clock deadlines are read on (tests replace it).
clock: Callable[[], float] = time.monotonic

#: Why a cell, or a further round of one, was not started.
SPENT = "the run's time budget was spent before it started"
#: Why a cell started within the budget has no result: its limit, cut to the budget, ran out.
ENDED = "the run's time budget ended while it ran"


def deadline_in(seconds: float | None) -> float | None:
    """The deadline of a budget of `seconds` from now; None for no budget."""
    return None if seconds is None else clock() + seconds


def left_s(deadline: float | None) -> float | None:
    """Seconds left of the budget (below 0 once it is spent); None for no budget."""
    return None if deadline is None else deadline - clock()


def limit_s(deadline: float | None, own_limit_s: float) -> float | None:
    """The time limit of a cell that starts now: its own, or what is left of the budget where that
    is less; None when the budget is spent."""
    if deadline is None:
        return own_limit_s
    left_s = deadline - clock()
    if left_s <= 0:
        return None
    return min(own_limit_s, left_s)
