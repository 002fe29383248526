"""The device-timing pass: per-batch latency, warmed up until steady, in repetitions.

- Warm-up runs windows of calls until two windows in a row have medians within
  `STEADY_TOLERANCE` of each other (harness/stats/warmup.py, the rule `validate` replays: caches,
  allocators, lazy initialisation and the CPU's clock settle at different speeds per model and
  machine; a fixed count is either too short or wasted), at least `warmup_iters` calls and at
  most `max_warmup_s`; whether it got steady is recorded.
- The timed calls are split into `repetitions`, which the worker interleaves with the LoadGen
  pass (half before it, half after), so a drift of the machine shows as a spread between
  repetitions and both measures of the cell see the same conditions.
- The timed loop does nothing but call, synchronise and store into a preallocated list: on a GPU,
  CUDA events around the call on torch's current stream (the host wall time beside them); on a
  CPU, `perf_counter_ns` around call and synchronize. What ran beside each repetition (threads,
  other processes, stolen time, the GPU's clocks) is read before and after it, never inside.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

from harness.bundle.record_base import MAX_SAMPLES
from harness.bundle.timing_record import DeviceTime, Repetition, TimeSummary, Warmup
from harness.contract import Prepared
from harness.scenario.settings import TimingSettings
from harness.stats.summary import summarize_ns
from harness.stats.thresholds import WARMUP_TOLERANCE as STEADY_TOLERANCE
from harness.stats.warmup import WarmupRule


class DeviceTiming:
    """Warm-up and timed repetitions of one prepared model. Each call takes the next of `batches`
    in turn (one batch repeated when given one), so the timing walks through the sample set as
    LoadGen's run does instead of reading one batch that stays in the caches."""

    def __init__(
        self,
        prepared: Prepared,
        batches: Sequence[Any],
        settings: TimingSettings,
        device: str,
        observe: Callable[[bool], Any] | None = None,
        compare: Callable[[Any, Any], dict[str, Any]] | None = None,
        clock: Callable[[], int] = time.perf_counter_ns,
    ) -> None:
        if not batches:
            raise ValueError("the timing needs at least one batch")
        self.prepared = prepared
        self.batches = list(batches)
        self._next = 0
        self.settings = settings
        self.device = device
        self.clock = clock
        self.observe = observe  # observe(after) reads what runs beside the timed calls, before and after
        self.compare = compare
        self.warmup_ns: list[int] = []
        self.steady = False
        self.estimate_ns = 1.0
        self.repetitions: list[Repetition] = []
        self.samples: list[int] = []
        self.host: list[int] = []

    def _take(self) -> Any:
        batch = self.batches[self._next]
        self._next = (self._next + 1) % len(self.batches)
        return batch

    def _call_ns(self) -> int:
        batch = self._take()
        start = self.clock()
        self.prepared(batch)
        self.prepared.synchronize()
        return self.clock() - start

    def warm_up(self) -> None:
        """Call until the warm-up's stopping rule says so (harness/stats/warmup.py)."""
        first = self._call_ns()
        self.warmup_ns.append(first)
        rule = WarmupRule(first, max(self.settings.warmup_iters, 1), self.settings.max_warmup_s * 1e9, MAX_SAMPLES)
        while True:
            calls = [self._call_ns() for _ in range(rule.window)]
            self.warmup_ns += calls
            if rule.add(calls):
                break
        self.steady = rule.steady
        self.estimate_ns = rule.estimate_ns

    def calls_per_repetition(self) -> int:
        reps = self.settings.repetitions
        wanted = math.ceil(self.settings.min_time_s * 1e9 / self.estimate_ns / reps)
        low = math.ceil(self.settings.min_iters / reps)
        high = max(self.settings.max_iters // reps, 1)
        return int(min(max(wanted, low), high))

    def repetition(self, when: str) -> None:
        """One block of timed calls; `when` says where it ran ("before loadgen", ...)."""
        n = self.calls_per_repetition()
        before = None
        if self.observe:
            before = self.observe(False)
            self._call_ns()  # untimed: the reads flushed the caches and let the thread pool sleep
        samples, host = self._timed(n)
        after = self.observe(True) if self.observe else None
        summary = TimeSummary.model_validate(summarize_ns(samples))
        entry = Repetition(when=when, n=n, median_ns=summary.median_ns, cv=summary.cv)
        if self.compare is not None and before is not None:
            entry.beside = self.compare(before, after)  # recorded only where it was read
        self.repetitions.append(entry)
        self.samples += samples
        if host is not None:
            self.host += host

    def _timed(self, n: int) -> tuple[list[int], list[int] | None]:
        prepared, clock = self.prepared, self.clock
        batches = [self._take() for _ in range(n)]  # chosen before the clock runs
        if self.device == "cuda":
            import torch

            starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
            ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
            host = [0] * n
            torch.cuda.synchronize()
            for i in range(n):
                t0 = clock()
                starts[i].record()
                prepared(batches[i])
                ends[i].record()
                prepared.synchronize()
                host[i] = clock() - t0
            torch.cuda.synchronize()
            return [round(s.elapsed_time(e) * 1e6) for s, e in zip(starts, ends, strict=True)], host
        samples = [0] * n
        for i in range(n):
            batch = batches[i]
            t0 = clock()
            prepared(batch)
            prepared.synchronize()
            samples[i] = clock() - t0
        return samples, None

    def result(self) -> DeviceTime:
        medians = [r.median_ns for r in self.repetitions]
        middle = statistics.median(medians) if medians else 0
        return DeviceTime(
            method=(
                "cuda events around the call on torch's current stream; host wall time beside it"
                if self.device == "cuda"
                else "perf_counter_ns around call + synchronize"
            ),
            warmup_samples_ns=self.warmup_ns,
            warmup=Warmup(
                calls=len(self.warmup_ns), steady=self.steady, tolerance=STEADY_TOLERANCE, seconds=sum(self.warmup_ns) / 1e9
            ),
            samples_ns=self.samples,
            host_samples_ns=self.host or None,
            repetitions=[r.model_copy() for r in self.repetitions],
            repetition_spread=(max(medians) - min(medians)) / middle if len(medians) > 1 and middle else 0.0,
            summary=TimeSummary.model_validate(summarize_ns(self.samples)),
        )
