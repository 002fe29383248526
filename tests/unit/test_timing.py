"""The device-timing pass with a fake clock and a fake model: warm-up until steady (not a fixed
count), repetitions sized from the settled estimate, what ran beside each read around it."""

from __future__ import annotations

from typing import Any

import pytest

from harness.contract import Prepared
from harness.fusion import FusionReport
from harness.measure.timing import STEADY_TOLERANCE, DeviceTiming
from harness.scenario.settings import TimingSettings


class FakeClock:
    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


class Settling(Prepared):
    """Each call advances the fake clock by its latency: slow at first, then steady."""

    def __init__(self, clock: FakeClock, latencies: list[int], steady_ns: int) -> None:
        self.clock = clock
        self.latencies = list(latencies)
        self.steady_ns = steady_ns
        self.calls = 0
        self.seen: list[Any] = []

    def __call__(self, batch: Any) -> Any:
        self.clock.now += self.latencies.pop(0) if self.latencies else self.steady_ns
        self.calls += 1
        self.seen.append(batch)
        return batch

    def synchronize(self) -> None:
        pass

    def fusion_report(self) -> FusionReport:
        return FusionReport(kernels=(), source="fake")


SETTINGS = TimingSettings(warmup_iters=3, max_warmup_s=5.0, min_iters=10, max_iters=2000, min_time_s=1.0,
                          repetitions=4)


def test_warm_up_lasts_until_the_figure_settles() -> None:
    clock = FakeClock()
    # 20 ms per call at first, settling to 10 ms after 40 calls: a fixed 3-call warm-up would time the slow start
    model = Settling(clock, [20_000_000 - i * 250_000 for i in range(40)], 10_000_000)
    timing = DeviceTiming(model, [None], SETTINGS, "cpu", clock=clock)
    timing.warm_up()
    assert timing.steady and len(timing.warmup_ns) > 40
    assert timing.estimate_ns == 10_000_000
    assert timing.calls_per_repetition() == 25  # 1 s in all over 4 repetitions at 10 ms


def test_a_warm_up_that_never_settles_stops_at_its_budget_and_says_so() -> None:
    clock = FakeClock()
    model = Settling(clock, [int(10_000_000 * 0.996**i) for i in range(10_000)], 10_000_000)  # 4% faster a window
    timing = DeviceTiming(model, [None], SETTINGS.model_copy(update={"max_warmup_s": 1.0}), "cpu", clock=clock)
    timing.warm_up()
    timing.repetition("before loadgen")
    result = timing.result()
    assert result.warmup is not None and not result.warmup.steady and 1.0 <= (result.warmup.seconds or 0) < 1.5


def test_repetitions_keep_their_own_medians_and_what_ran_beside_them() -> None:
    clock = FakeClock()
    model = Settling(clock, [], 10_000_000)
    timing = DeviceTiming(model, [None], SETTINGS.model_copy(update={"repetitions": 2}), "cpu", clock=clock,
                          observe=lambda after: clock.now, compare=lambda a, b: {"cpu": {"wall_s": (b - a) / 1e9}})
    timing.warm_up()
    timing.repetition("before loadgen")
    model.steady_ns = 10_500_000  # the machine got 5% slower during LoadGen's run
    timing.repetition("after loadgen")
    result = timing.result()
    assert [r.when for r in result.repetitions] == ["before loadgen", "after loadgen"]
    # 50 timed calls of 10 ms, after one untimed call that settles the model after the observer's reads
    assert (result.repetitions[0].beside or {})["cpu"]["wall_s"] == pytest.approx(0.51)
    assert result.repetition_spread == pytest.approx(0.5 / 10.25)  # spread over the median of the medians
    assert result.summary.n == len(result.samples_ns) == 100
    assert result.host_samples_ns is None  # a CPU cell's device time is its host time: no second clock


@pytest.mark.parametrize(("faster_a_window", "steady"), [(0.019, True), (0.021, False)])
def test_two_windows_within_two_percent_of_each_other_are_steady(faster_a_window: float, steady: bool) -> None:
    """Each 10-call window (0.1 s of 10 ms calls) is `faster_a_window` quicker than the one before:
    just inside the 2% tolerance the warm-up ends at its second window, just outside it never settles
    and stops at its budget."""
    clock = FakeClock()
    windows = [int(10_000_000 * (1 - faster_a_window) ** k) for k in range(200)]
    model = Settling(clock, [10_000_000] + [latency for latency in windows for _ in range(10)], 1)
    timing = DeviceTiming(model, [None], SETTINGS.model_copy(update={"max_warmup_s": 1.0}), "cpu", clock=clock)
    timing.warm_up()
    assert STEADY_TOLERANCE == 0.02 and timing.steady is steady
    if steady:  # the first call, then two windows
        assert len(timing.warmup_ns) == 21
    else:  # windows until the budget of 1 s is spent
        assert 1e9 <= sum(timing.warmup_ns) < 1e9 + 10 * 10_000_000 and (len(timing.warmup_ns) - 1) % 10 == 0


def test_the_timed_calls_walk_through_the_batches_as_loadgen_does() -> None:
    clock = FakeClock()
    model = Settling(clock, [], 10_000_000)
    timing = DeviceTiming(model, ["a", "b", "c"], SETTINGS.model_copy(update={"repetitions": 2}), "cpu", clock=clock)
    timing.warm_up()
    timing.repetition("before loadgen")
    assert model.seen[:6] == ["a", "b", "c", "a", "b", "c"]  # not one batch that stays in the caches
    assert {model.seen.count(b) for b in "abc"} <= {len(model.seen) // 3, len(model.seen) // 3 + 1}



def test_validate_replays_the_warm_up_by_the_rule_that_ran_it() -> None:
    """The timing and validate's replay run one rule (harness/stats/warmup.py): a warm-up the timing
    made replays to its own end and flag; a forged flag, or a sample cut off, is found."""
    from harness.bundle.figures_check import _warmup

    clock = FakeClock()
    model = Settling(clock, [20_000_000 - i * 250_000 for i in range(40)], 10_000_000)
    timing = DeviceTiming(model, [None], SETTINGS, "cpu", clock=clock)
    timing.warm_up()
    timing.repetition("before loadgen")
    record = timing.result().warmup
    assert record is not None and record.steady
    recorded = {"warmup": record.model_dump(), "warmup_samples_ns": timing.warmup_ns,
                "repetitions": [{"n": timing.calls_per_repetition()}]}
    config = {"timing": SETTINGS.model_dump()}
    assert _warmup(config, recorded) == []
    forged = {**recorded, "warmup": {**recorded["warmup"], "steady": False}}
    assert _warmup(config, forged) == ["device_time: warm-up steady is False but its samples say True (windows of 5 "
                                       "calls, tolerance 2%)"]  # 0.1 s of the first call's 20 ms
    cut = {**recorded, "warmup_samples_ns": timing.warmup_ns[:-1],
           "warmup": {**recorded["warmup"], "calls": len(timing.warmup_ns) - 1,
                      "seconds": sum(timing.warmup_ns[:-1]) / 1e9}}
    assert any("does not stop where they end" in line for line in _warmup(config, cut))
