"""The line a run prints as each cell finishes: its status, its label, how long it took, how far
the run is and, once cells have run, about how long the rest will take.

A run in the background writes a log, which gets the progress bar only once, when the cells are
done: these lines are what it has as it goes.
The estimate is the pace of this start or resume so far (the cells that ran, over the time since
the first began, so that parallel jobs count once) times the cells left to run; skipped cells,
written at once, take no part in it. A resume counts the cells its bundle kept that ran among them,
each at the time its rounds took (`--jobs N`: an Nth of it, as N run at once; on Ray, whose
cluster decides how many run at once, none), so that its first cell's line has an estimate where
the bundle kept two or more. A suite's cells differ tenfold in length (a TVM cell that tunes
against an eager one), so it is said as "about", and only from the third cell run on.

A cell that ran but that the run's time budget ended before it had a result (`run --budget-s`
leaves it out of the bundle for --resume) gets a line of its own, saying how long it ran: that time
is lost, and --resume runs the cell from its start. A cell not started because its twin took longer
than the budget had left (harness/run/time_budget.py) gets a line of its own too, saying both times.
The other cells the budget never started are counted once, at the end of the run. The estimate is
of every cell left, the budget aside: where the budget ends first, the line says when, and that
the rest is for --resume. A cell of several rounds (harness/run/rounds.py) whose round 1 finished
but a further round of which the budget kept (cut it, or did not start it where less was left than
its rounds took, time_budget.RoundGuess) is written with the rounds that finished, and a line of
its own says how many of how many it kept; --resume times every round of it afresh
(harness/run/resumable.py `to_run`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from rich.text import Text

from harness.plain_text import one_line, visible
from harness.run import time_budget
from harness.run.summary import STATUS_STYLE

#: Cells that must have run before the pace says anything.
MIN_CELLS_FOR_ESTIMATE = 3


class Pace:
    """The cells of one start or resume that run (not skipped), and how fast they finish, from the
    times `kept_s` of the cells that ran before it (a resumed bundle's) on."""

    def __init__(self, to_run: int, clock: Callable[[], float] = time.monotonic, kept_s: Sequence[float] = ()) -> None:
        self.to_run = to_run
        self.ran = 0
        self._clock = clock
        self._since: float | None = None
        self._kept, self._kept_s = len(kept_s), sum(kept_s)

    def started(self) -> None:
        """The first cell starts now."""
        if self._since is None:
            self._since = self._clock()

    def finished(self) -> None:
        self.ran += 1

    def left_s(self) -> float | None:
        """About how many seconds the cells not yet run will take, or None too early to say."""
        counted = self.ran + self._kept
        if self._since is None or counted < MIN_CELLS_FOR_ESTIMATE or self.ran >= self.to_run:
            return None
        return (self._clock() - self._since + self._kept_s) / counted * (self.to_run - self.ran)


def duration(seconds: float) -> str:
    """3 min, 1 h 05 min, 14 h 00 min: to the minute, at least one."""
    minutes = max(round(seconds / 60), 1)
    return f"{minutes} min" if minutes < 60 else f"{minutes // 60} h {minutes % 60:02d} min"


def line(status: str, label: str, wall_s: float, done: int, total: int, reasons: list[str],
         left_s: float | None = None, budget_left_s: float | None = None) -> Text:
    """`  valid LABEL (51.1 s, 24/270, about 2 h 10 min left): first reason`; user text is never
    read as markup. Where the run's time budget (`budget_left_s`, what is left of it) ends before
    the rest would, the line says so: the rest is not this run's but --resume's."""
    said = Text(f"{status:>7}", style=STATUS_STYLE[status])
    left = ""
    if left_s is not None:
        left = f", about {duration(left_s)} left"
        # said where it reads otherwise ("about 1 min left, the budget ends in 1 min" would not)
        if budget_left_s is not None and budget_left_s < left_s and duration(budget_left_s) != duration(left_s):
            # `duration` says at least a minute: 20 s left of the budget read "ends in 1 min"
            soon = "under 1 min" if budget_left_s < 30 else duration(budget_left_s)
            ends = f"the budget ends in {soon}" if budget_left_s > 0 else "the budget has ended"
            left += f", {ends}: the rest for --resume"
    why = f": {one_line(reasons[0])}" if reasons else ""
    said.append(f" {visible(label)} ({wall_s:.1f} s, {done}/{total}{left}){why}")
    return said


def ended_by_budget(label: str, ran_s: float, done: int, total: int) -> Text:
    """`  ended LABEL (ran 660.2 s, 3/4): ...`: a cell the budget stopped, left for --resume."""
    said = Text(f"{'ended':>7}", style=STATUS_STYLE["interrupted"])
    said.append(f" {visible(label)} (ran {ran_s:.1f} s, {done}/{total}): the run's time budget ended before it had a "
                "result; what it ran is discarded, and --resume runs it again from its start")
    return said


def not_started(label: str, reason: str, done: int, total: int) -> Text:
    """`   left LABEL (4/14): not started: its twin (fusion on) took 803 s, ...`: a cell not started for
    its twin's time, left for --resume."""
    said = Text(f"{'left':>7}", style=STATUS_STYLE["interrupted"])
    said.append(f" {visible(label)} ({done}/{total}): {one_line(reason)}; --resume runs it")
    return said


def rounds_cut(label: str, record: dict[str, Any]) -> Text:
    """`    cut LABEL: ... kept with 1 of its 3 rounds ...`: a cell whose further rounds the budget kept,
    cut or not started where less was left than its rounds took (time_budget.RoundGuess)."""
    rounds = (record.get("metrics") or {}).get("rounds") or []
    kept = time_budget.rounds_kept(record)
    why = ("left less than its rounds took before they were done"
           if any(time_budget.for_a_round(r.get("reason")) for r in rounds) else "ended before its rounds did")
    said = Text(f"{'cut':>7}", style=STATUS_STYLE["interrupted"])
    over = "its speedups' intervals are over those" if kept > 1 else "one round gives its speedups no interval"
    said.append(f" {visible(label)}: the run's time budget {why}: kept with {kept} of its "
                f"{len(rounds)} rounds, and {over}; --resume times its {len(rounds)} rounds afresh")
    return said
