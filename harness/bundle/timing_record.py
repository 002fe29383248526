"""The device-timing pass's records (harness/measure/timing.py): every timed call, its summary,
the warm-up kept apart and the repetitions; the cell's further rounds (harness/run/rounds.py); and
what the timing is judged against: LoadGen's time per batch (`LatencyAgreement`) and the roofline's
bound (`Roofline`). Parts of a cell's `Metrics` (harness/bundle/cell_record.py).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from harness.bundle.record_base import (
    COUNT_MAX,
    FLOPS_MAX,
    MAX_SAMPLES,
    NS_MAX,
    Bytes,
    Count,
    InnerPath,
    IntNs,
    Ns,
    Ratio,
    Record,
    Seconds,
    Share,
)
from harness.scenario.settings import MAX_ROUNDS


class TimeSummary(Record):
    """n, median, p90, p99, mean, stdev, CV, min and max of nanosecond samples (harness/stats/summary.py)."""

    n: Count
    median_ns: Ns
    p90_ns: Ns | None = None
    p99_ns: Ns | None = None
    mean_ns: Ns | None = None
    stdev_ns: Ns | None = None
    cv: Ratio | None = None
    min_ns: Ns | None = None
    max_ns: Ns | None = None
    noisy: bool | None = None


class Warmup(Record):
    """The warm-up before the timed calls: how many calls, whether two windows in a row agreed
    (`steady`) within `tolerance`, and how long it took (harness/stats/warmup.py)."""

    calls: Count
    steady: bool
    tolerance: float | None = None
    seconds: Seconds | None = None


#: The `when` of the repetitions timed before the LoadGen pass, whose samples' median is the hint
#: its first run is given (harness/measure/phases.py).
BEFORE_LOADGEN = "before loadgen"


class Repetition(Record):
    """One block of timed calls (harness/measure/timing.py), and what ran beside it."""

    when: str
    n: Annotated[int, Field(ge=1, le=COUNT_MAX)]
    median_ns: Ns
    cv: Ratio | None = None
    beside: dict[str, Any] | None = None


class DeviceTime(Record):
    """The device-timing pass: every timed call, its summary, the warm-up kept apart."""

    method: str | None = None
    samples_ns: Annotated[list[IntNs], Field(max_length=MAX_SAMPLES)]
    warmup_samples_ns: Annotated[list[IntNs], Field(max_length=MAX_SAMPLES)] = []
    host_samples_ns: Annotated[list[IntNs], Field(max_length=MAX_SAMPLES)] | None = None
    summary: TimeSummary
    warmup: Warmup | None = None
    repetitions: list[Repetition] = []
    repetition_spread: Ratio | None = None


class TimingRound(Record):
    """One round of the cell's device timing, each in a fresh worker process (harness/run/rounds.py):
    round 1 is the cell's own measurement (`device_time`, whose samples are its samples); a further
    valid one keeps its samples (v8) and the frames Dynamo compiled in its timed calls (2026-12-06), a
    further failed one its reason."""

    round: Annotated[int, Field(ge=1, le=MAX_ROUNDS)]
    status: Literal["valid", "failed"]
    # A batch takes a nanosecond at least: a median below is no measurement (and its ratio to another
    # would underflow to zero).
    median_ns: Annotated[float, Field(ge=1, le=NS_MAX)] | None = None
    cv: Ratio | None = None
    n: Count | None = None
    samples_ns: Annotated[list[IntNs], Field(max_length=MAX_SAMPLES)] | None = None
    prepare_cache: Literal["cold", "warm", "none", "unknown"] | None = None
    wall_s: Seconds | None = None
    reason: str | None = None
    log: InnerPath | None = None
    # A further valid round's frames Dynamo compiled in its timed calls (a round whose prepare went through
    # torch.compile; absent before 2026-12-06 and in the others): round 1's are metrics.dynamo.recompiles_timed.
    recompiles_timed: Count | None = None

    @model_validator(mode="after")
    def _measured(self) -> TimingRound:
        if self.status == "valid" and (self.n is None or self.n < 1 or self.cv is None):
            raise ValueError("a valid round has its count of samples (1 or more) and its CV")
        if self.samples_ns is not None and (self.round == 1 or len(self.samples_ns) != self.n):
            raise ValueError("a further round's samples are as many as its n (round 1's are device_time's)")
        if self.recompiles_timed is not None and (self.round == 1 or self.status != "valid"):
            raise ValueError("recompiles_timed is a further valid round's (round 1's are metrics.dynamo's)")
        return self


class LatencyAgreement(Record):
    """LoadGen's time per batch against the device timing's (harness/measure/trust.py)."""

    gap: Annotated[float, Field(ge=-1.0, le=1e6)] | None
    within: bool | None
    why: str
    loadgen_ns_per_batch: Ns | None = None
    device_ns_per_batch: Ns | None = None
    device_statistic: Literal["median", "mean"] | None = None
    limit: Share | None = None


class Roofline(Record):
    """The model's compulsory work and the device's bound on its time (harness/measure/roofline.py)."""

    flops: Annotated[int, Field(ge=0, le=FLOPS_MAX)]
    compulsory_bytes: Bytes
    weight_bytes: Bytes | None = None
    input_bytes: Bytes | None = None
    output_bytes: Bytes | None = None
    peak_flops_per_s: Annotated[float, Field(ge=0, le=FLOPS_MAX)] | None = None
    peak_bytes_per_s: Annotated[float, Field(ge=0, le=FLOPS_MAX)] | None = None
    time_bound_ns: Ns | None = None
    measured_ns: Ns | None = None
    fraction_of_bound: Ratio | None = None
    bound_by: Literal["compute", "memory"] | None = None
    # one kernel could compute the whole model: the worker writes this 1 and the report prints
    # "floor 1" whatever it holds, so any other figure was not the harness's
    kernels_per_inference_floor: Literal[1] | None = None
