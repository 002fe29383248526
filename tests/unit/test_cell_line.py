"""The line a run prints per finished cell: how far the run is, and about how long is left from
the pace of the cells that ran."""

from __future__ import annotations

import pytest

from harness.run import time_budget
from harness.run.cell_line import MIN_CELLS_FOR_ESTIMATE, Pace, duration, line


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_pace_of_the_cells_that_ran_times_the_cells_left() -> None:
    clock = Clock()
    pace = Pace(10, clock)
    assert pace.left_s() is None  # nothing started
    pace.started()
    clock.now += 30
    pace.started()  # a second job's first cell: the run's pace counts from the first start
    for _ in range(MIN_CELLS_FOR_ESTIMATE - 1):
        pace.finished()
    assert pace.left_s() is None  # too early to say
    pace.finished()
    assert pace.left_s() == 30 / 3 * 7  # 10 s a cell so far, 7 cells to run
    clock.now += 60
    assert pace.left_s() == 90 / 3 * 7
    for _ in range(7):
        pace.finished()
    assert pace.left_s() is None  # nothing left


def test_a_resume_paces_its_first_cell_by_the_cells_its_bundle_kept() -> None:
    """A resume gave no estimate until its third cell, though its bundle held the times of the cells
    that ran before it."""
    clock = Clock()
    pace = Pace(4, clock, kept_s=[40.0, 60.0])
    pace.started()
    clock.now += 20
    pace.finished()
    assert pace.left_s() == (20 + 100) / 3 * 3  # 40 s a cell over the three, 3 cells to run
    assert Pace(4, clock, kept_s=[40.0]).left_s() is None  # nothing started
    lone = Pace(4, clock, kept_s=[40.0])
    lone.started()
    lone.finished()
    assert lone.left_s() is None  # two cells are too few, kept or not


def test_durations_read_to_the_minute() -> None:
    assert [duration(s) for s in (0, 29, 91, 3599, 3600, 3_900, 50_400)] == [
        "1 min", "1 min", "2 min", "1 h 00 min", "1 h 00 min", "1 h 05 min", "14 h 00 min"]


def test_the_line_says_the_count_the_time_left_and_the_first_reason_as_plain_text() -> None:
    said = line("valid", "resnet18 eager fusion-on Offline cpu fp32 b8", 51.14, 24, 270, [], 7_800)
    assert said.plain == "  valid resnet18 eager fusion-on Offline cpu fp32 b8 (51.1 s, 24/270, about 2 h 10 min left)"
    said = line("skipped", "[red]m[/red] tensorrt", 0.0, 1, 30, ["TensorRT runs only on NVIDIA GPUs", "more"])
    assert said.plain == "skipped [red]m[/red] tensorrt (0.0 s, 1/30): TensorRT runs only on NVIDIA GPUs"


def test_a_budget_that_ends_before_the_rest_is_said_beside_the_estimate() -> None:
    """Under `--budget-s 1200` the line said "about 2 h 10 min left" with 18 minutes of budget to go:
    a planner read it as the night's run going on, where the run would stop and leave the rest."""
    label = "swin_b tvm fusion-on SingleStream cpu fp32 b1"
    said = line("valid", label, 85.4, 9, 14, [], 7_800, budget_left_s=1_080)
    assert said.plain.endswith("(85.4 s, 9/14, about 2 h 10 min left, the budget ends in 18 min: the rest for --resume)")
    said = line("valid", label, 85.4, 9, 14, [], 7_800, budget_left_s=-3)
    assert said.plain.endswith("(85.4 s, 9/14, about 2 h 10 min left, the budget has ended: the rest for --resume)")
    # a budget that outlasts the estimate, or one that ends in the same minute, or none: the line as it was
    assert line("valid", label, 85.4, 9, 14, [], 50, budget_left_s=10).plain.endswith("(85.4 s, 9/14, about 1 min left)")
    assert line("valid", label, 85.4, 9, 14, [], 600, budget_left_s=1_080).plain.endswith("(85.4 s, 9/14, about 10 min left)")
    assert line("valid", label, 85.4, 9, 14, [], 600).plain.endswith("(85.4 s, 9/14, about 10 min left)")


def test_what_is_left_of_the_budget_is_read_on_its_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(time_budget, "clock", lambda: 500.0)
    assert time_budget.left_s(None) is None
    assert time_budget.left_s(800.0) == 300.0 and time_budget.left_s(450.0) == -50.0


def test_a_budget_under_half_a_minute_from_its_end_is_not_said_to_end_in_a_minute() -> None:
    """With 0.3 s of `--budget-s` left the line said "the budget ends in 1 min": `duration` is at least
    a minute."""
    said = line("valid", "resnet18 eager", 3.0, 1, 3, [], 600, budget_left_s=0.3)
    assert said.plain.endswith("(3.0 s, 1/3, about 10 min left, the budget ends in under 1 min: the rest for --resume)")
