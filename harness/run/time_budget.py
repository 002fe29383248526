"""A run's time budget (`run --budget-s`, `gpu-check --budget-s`), asked as each cell starts.

The budget ends at a deadline on `clock`. A cell that would start after it is not started; one
that starts before it runs at most until it (its time limit is cut to what is left). A cell whose
cut limit ran out did not fail: the budget ended. Nor is a cell started whose twin (the cell that
differs from it in fusion alone, harness/scenario/cells.py `twin_id`) has been measured, in this
run or in the bundle it resumes, in more time than is left (`shorter_than_twin`): of what the
bundles kept, the twin's time is the best guess at a cell's (swin_b's TVM cells 803 and 851 s,
ResNeXt-101's 162 and 155 s, though Inductor's efficientnet_b0 79 and 203 s), and a cell started
that cannot finish runs for nothing until the budget ends. A cell with no twin measured starts
while any budget is left, as it always did. Either way the sweep records the cell as skipped with
the reason (gpu-check), or leaves it out of the bundle for --resume (`run`). A further round of a
cell (harness/run/rounds.py) is held to the cell's own rounds instead (`shorter_than_a_round`):
it is not started where its longest further round so far, or else the part of round 1 a further
round runs again (`RoundGuess`), took longer than is left, for the same reason: a round that
cannot finish is cut by the budget, and its time is lost. A further round the budget keeps, not
started or cut, is recorded failed with the reason in a cell that keeps its rounds that finished;
a further round is never held to its twin's time. A `run --budget-s` leaves
such a cell for --resume (`rounds_cut`), which times every round of it afresh: rounds of one cell
from two sessions are not pooled (harness/run/resumable.py `to_run`); the resume holds its round 1 to
its kept round 1's time (`shorter_than_its_kept`), as it would otherwise replace a result with none.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from harness.bundle.statuses import MEASURED

#: The clock deadlines are read on (tests replace it).
clock: Callable[[], float] = time.monotonic

#: Why a cell, or a further round of one, was not started.
SPENT = "the run's time budget was spent before it started"
#: Why a cell started within the budget has no result: its limit, cut to the budget, ran out.
ENDED = "the run's time budget ended while it ran"


def measured_s(records: list[dict[str, Any]]) -> dict[str, float]:
    """How long each measured cell of `records` (a bundle's, as read) took to be measured, its round
    1 (`wall_s`), by id: what its twin is held to (`shorter_than_twin`)."""
    return {str(r["id"]): float(r["wall_s"]) for r in records if r.get("status") in MEASURED and r.get("wall_s")}


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


def shorter_than_twin(deadline: float | None, twin_took_s: float | None, fusion: str) -> str | None:
    """Why a cell of `fusion` whose twin (the other fusion setting) took `twin_took_s` to be
    measured is not started now: less than that is left of the budget. None where more is left, or
    there is no budget, or no twin time to go by."""
    other = "off" if fusion == "on" else "on"
    return _shorter(deadline, twin_took_s, lambda took_s: f"its twin (fusion {other}) took {took_s:.0f} s")


def shorter_than_its_kept(deadline: float | None, kept_took_s: float | None) -> str | None:
    """Why a cell whose rounds the budget cut, which a resume times afresh, is not started now: its
    kept round 1 took `kept_took_s`, more than is left. Started, it would replace its kept record and
    be cut by the budget, leaving nothing."""
    return _shorter(deadline, kept_took_s, lambda took_s: f"its kept round 1 took {took_s:.0f} s")


@dataclass(frozen=True)
class RoundGuess:
    """What a further round of a cell is held to (harness/run/rounds.py `Rounds.guess`): `took_s`, the
    longest valid further round of the cell so far (`round` 2 or more: the same work as the one to
    come), or else the part of round 1 a further round runs again (`round` 1, `whole_s` its wall time):
    round 1 less its LoadGen and other passes, which a further round does not run
    (harness/measure/protocol.py FURTHER_ROUND_PHASES). Round 1's part still holds its cold compile
    and tuning, which a further round finds in the caches round 1 filled, so it overstates a further
    round (Inductor's and TVM's resnet18 at 32x32 on the 2-core VM: round 1 33-50 s, that part 27-32
    s, round 2 15-17 s): a round may be held back that would have fit, never one started that cannot."""

    took_s: float
    round: int = 1
    whole_s: float | None = None  # round 1's wall time, where `took_s` is a part of it

    def said(self) -> str:
        """`round 1 took 36 s, 27 s of it in what a further round runs again` or `round 2 took 16 s`."""
        whole = self.whole_s
        if whole is None or round(whole) == round(self.took_s):
            return f"round {self.round} took {self.took_s:.0f} s"
        return f"round {self.round} took {whole:.0f} s, {self.took_s:.0f} s of it in what a further round runs again"


def shorter_than_a_round(deadline: float | None, guess: RoundGuess | None) -> str | None:
    """Why a further round of a cell is not started now: less is left of the budget than `guess`
    says it takes. None where more is left, or there is no budget, or nothing to go by."""
    return None if guess is None else _shorter(deadline, guess.took_s, lambda _: guess.said())


def for_a_round(reason: str | None) -> bool:
    """Whether `reason`, a further round's, is that it was not started for an earlier round's time."""
    return (reason or "").startswith("not started: round ")


def kept_a_round(reason: str | None) -> bool:
    """Whether `reason`, a further round's that is recorded failed, is the budget's: not started
    (spent, or less left than its rounds took) or cut. A round whose worker failed is not."""
    return reason in (SPENT, ENDED) or for_a_round(reason)


def rounds_cut(record: Mapping[str, Any] | None) -> list[int]:
    """The further rounds the budget kept from the cell of `record` (as read; none for a cell
    without rounds, or whose every round ran): a cell with any is one a resume times afresh, every
    round (harness/run/resumable.py `to_run`)."""
    return [int(r["round"]) for r in _rounds(record) if r.get("status") == "failed" and kept_a_round(r.get("reason"))]


def rounds_kept(record: Mapping[str, Any] | None) -> int:
    """How many of the rounds of the cell of `record` (as read) gave a time: what its lines say it
    was kept with, where the budget cut the others."""
    return sum(1 for r in _rounds(record) if r.get("status") == "valid")


def _rounds(record: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    return ((record or {}).get("metrics") or {}).get("rounds") or []


def _shorter(deadline: float | None, took_s: float | None, said: Callable[[float], str]) -> str | None:
    """`not started: ..., N s of the run's time budget left` where less than `took_s` is left (`said`
    says what took it, and how long); None where more is, or there is no budget or time to go by."""
    left_s = None if deadline is None else deadline - clock()
    if left_s is None or took_s is None or took_s <= left_s:
        return None
    return f"not started: {said(took_s)}, {left_of_it(left_s)} of the run's time budget left"


def left_of_it(left_s: float) -> str:
    """`left_s`, seconds left of the budget, as a line says them: "under 1 s" below half a second,
    where whole seconds read "0 s" of a budget not spent."""
    return f"{left_s:.0f} s" if left_s >= 0.5 else "under 1 s"


def why_left(by_twin: int, spent: bool) -> str | None:
    """Why a `run --budget-s`'s cells were left for --resume, in the run's last lines: `by_twin` of
    them not started for their twin's time, and the budget `spent` by the end of the run or not;
    None where it left none (the cells missing are outside a resume's --only)."""
    if not by_twin:
        return "the time budget was spent" if spent else None
    if not spent:
        return "the time budget left less than their twin took"
    return f"the time budget was spent, or left less than their twin took for {by_twin} of them"
