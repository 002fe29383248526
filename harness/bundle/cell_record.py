"""A cell's record in a bundle (`cells/<id>.json`), typed: the worker fills these models, the
bundle keeps them, and every reader reads them by attribute: `validate` reads every cell, upgraded
to the current version (harness/bundle/migrations.py), as a `CellRecord`, and the report, compare,
pack, gpu-check and the run's summary read the records of a bundle that passed it
(`LoadedBundle.records`). The current schema version's JSON Schema is generated from `CellRecord`
(harness/bundle/schema.py).

Here are the top of the record (`CellRecord`, its `Metrics`) and the parts that say how the cell
ran rather than what a pass measured: its tuning, its correctness against eager and its math mode.
The passes' parts are in harness/bundle/timing_record.py, loadgen_record.py and passes_record.py,
and what every part is built from (its ranges, the `Record` base) in harness/bundle/record_base.py.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from harness.bundle.loadgen_record import Accuracy, ComplianceOutcome, LoadGenRun
from harness.bundle.passes_record import FusionReportRecord, Kernels, Memory, MemoryTraffic, TimeSplit
from harness.bundle.record_base import HEX16, Count, InnerPath, Record, Seconds, Status, model_problems
from harness.bundle.timing_record import DeviceTime, LatencyAgreement, Roofline, TimingRound
from harness.models.catalog import RECORD
from harness.scenario.cell_config import CellConfig, ComplianceTest


class CorrectnessCheck(Record):
    """One batch's output against eager's on the same batch (harness/measure/correctness.py)."""

    ok: bool
    reason: str = ""
    note: str | None = None
    reference: str | None = None
    max_abs_error: Annotated[float, Field(ge=0, le=1e300)] | None = None
    max_abs_error_limit: Annotated[float, Field(ge=0)] | None = None
    reference_max_abs: Annotated[float, Field(ge=0)] | None = None
    cosine_similarity: Annotated[float, Field(ge=-1.0001, le=1.0001)] | None = None
    rtol: float | None = None
    min_cosine: float | None = None
    samples: list[Count] | None = None  # the sample indices of the batch compared, in its order


class Correctness(CorrectnessCheck):
    """The first call's output against eager's, and `after_timing` the timed callable's once more
    after its last timed call, on other samples (absent before 2026-12-04, and for a backend that
    computes no model)."""

    after_timing: CorrectnessCheck | None = None


class MathMode(Record):
    """The math the cell ran with, read back from torch and the backend (harness/precision.py)."""

    requested: Literal["ieee", "tf32", "fp16", "bf16"] | None = None
    effective: Literal["ieee", "tf32", "mixed", "fp16", "bf16", "unrecorded"]
    problems: list[str]
    torch: dict[str, Any] = {}
    backend: dict[str, Any] = {}
    note: str | None = None


class Tuning(Record):
    """What the backend's search for faster code did before `prepare` (`Backend.tune`,
    harness/contract.py): timed on its own as `tuning_s`, never part of `prepare_s`."""

    tuned: bool
    reason: str = ""
    tuner: str = ""
    trials_per_task: Count = 0
    tasks: Count = 0
    tasks_tuned: Count = 0
    trials: Count = 0
    database_sha256: Annotated[str, Field(pattern="^([0-9a-f]{64})?$")] = ""
    cache: Literal["cold", "warm", "none"] = "none"
    tuning_s: Seconds

    @model_validator(mode="after")
    def _consistent(self) -> Tuning:
        if self.tuned != bool(self.database_sha256) or self.tuned == (self.cache == "none"):
            raise ValueError("a tuned cell has a database hash and a cache state (cold or warm), an untuned one neither")
        if self.tasks_tuned > self.tasks or self.trials > self.trials_per_task * self.tasks:
            raise ValueError("more tasks tuned or trials run than the budget and the tasks allow")
        return self


class BreakReason(Record):
    """One reason Dynamo gave for a graph break, and how many breaks gave it."""

    reason: str
    count: Annotated[int, Field(strict=True, ge=1)]


#: The most frequent break reasons a record keeps (harness/measure/dynamo_counts.py keeps them).
BREAK_REASONS_KEPT = 5


class Dynamo(Record):
    """What TorchDynamo counted for a cell compiled through `torch.compile` (harness/measure/dynamo_counts.py):
    optional, with no new schema version (absent before 2026-12-06, and in cells that compiled nothing
    through it). `absent` says why figures are missing; a missing figure is never a zero."""

    graphs: Count | None = None
    graph_breaks: Count | None = None
    distinct_break_reasons: Count | None = None
    break_reasons: list[BreakReason] = []
    recompiles_timed: Count | None = None
    absent: str | None = None
    method: str = ""

    @model_validator(mode="after")
    def _reasons_are_its_breaks(self) -> Dynamo:
        """The reasons listed are the most frequent of the breaks counted: each distinct, as many as
        the distinct reasons up to BREAK_REASONS_KEPT, most frequent first (the report names the first
        as the most frequent), their counts summing to the breaks where every reason is listed, and
        where some are left out, leaving each left-out reason at least one break and none more than the
        least frequent listed. Breaks are counted with their distinct reasons. Graphs and breaks hold no law between
        them: a break before any operator compiles no graph, a break on a path first taken later adds
        a break and no graph, and a frame compiled again adds graphs and no break."""
        if (self.graphs is None or self.graph_breaks is None) and not self.absent:
            raise ValueError("graphs and graph_breaks, where either is missing, need the reason (absent)")
        if self.graph_breaks is None or self.distinct_break_reasons is None:
            if self.break_reasons or (self.graph_breaks is None) != (self.distinct_break_reasons is None):
                raise ValueError("graph_breaks, distinct_break_reasons and break_reasons are counted together")
            return self
        listed = [r.reason for r in self.break_reasons]
        if len(set(listed)) != len(listed):
            raise ValueError("break_reasons lists a reason twice")
        if self.distinct_break_reasons > self.graph_breaks:
            raise ValueError(f"{self.distinct_break_reasons} distinct break reasons for {self.graph_breaks} breaks")
        if len(listed) != min(self.distinct_break_reasons, BREAK_REASONS_KEPT):
            raise ValueError(f"break_reasons lists {len(listed)} reasons of {self.distinct_break_reasons} distinct: "
                             f"the {BREAK_REASONS_KEPT} most frequent are kept")
        counts = [r.count for r in self.break_reasons]
        if counts != sorted(counts, reverse=True):
            raise ValueError(f"break_reasons counts {counts} are not the most frequent first")
        total, left_out = sum(counts), self.distinct_break_reasons - len(counts)
        # each reason left out gave at least one break and no more than the least frequent one kept
        fewest, most = left_out, left_out * (counts[-1] if counts else 0)
        if not fewest <= self.graph_breaks - total <= most:
            raise ValueError(f"break_reasons count {total} breaks of {self.graph_breaks}"
                             + (f", leaving {self.graph_breaks - total} to {left_out} reasons left out, each "
                                f"with 1 to {counts[-1]}" if left_out else ""))
        return self


class Metrics(Record):
    """What the worker measured, pass by pass; a pass a cell did not reach is None."""

    tuning: Tuning | None = None  # a backend with nothing to tune (`Backend.tune` gave None): none
    prepare_s: Seconds | None = None
    prepare_cache: Literal["cold", "warm", "none", "unknown"] | None = None
    first_call_s: Seconds | None = None
    # The first call over the steady median per batch: what the first inference costs beyond a warm one.
    first_call_ratio: Annotated[float, Field(ge=0, le=1e9)] | None = None
    correctness: Correctness | None = None
    device_time: DeviceTime | None = None
    loadgen: LoadGenRun | None = None
    accuracy: Accuracy | None = None
    compliance: dict[ComplianceTest, ComplianceOutcome] | None = None
    latency_agreement: LatencyAgreement | None = None
    roofline: Roofline | None = None
    memory: Memory | None = None
    fusion_report: FusionReportRecord | None = None
    kernels: Kernels | None = None
    time_split: TimeSplit | None = None
    memory_traffic: MemoryTraffic | None = None  # from schema 9
    math_mode: MathMode | None = None
    rewrites: dict[str, Any] | None = None
    dynamo: Dynamo | None = None  # optional in schema 12: a cell compiled through torch.compile
    rounds: list[TimingRound] | None = None  # absent: one round, the cell's device timing

    @model_validator(mode="after")
    def _derived_figures_agree(self) -> Metrics:
        """A figure derived from others in the record is checked against them (validate re-derives it)."""
        if self.rounds is not None:
            if not self.rounds:
                raise ValueError("rounds, where recorded, hold round 1 at least")
            if [r.round for r in self.rounds] != list(range(1, len(self.rounds) + 1)):
                raise ValueError("rounds must be numbered 1, 2, ... in order")
            if any((r.status == "valid") != (r.median_ns is not None) for r in self.rounds):
                raise ValueError("a valid round has a median and a failed one none")
            first = self.rounds[0]
            if self.device_time is None or first.median_ns != self.device_time.summary.median_ns:
                raise ValueError("round 1 is the cell's own device timing: its median must be device_time's")
        if self.first_call_ratio is not None:
            if self.first_call_s is None or self.device_time is None or self.device_time.summary.median_ns <= 0:
                raise ValueError("first_call_ratio without the first call's time and a device-time median")
            derived = self.first_call_s * 1e9 / self.device_time.summary.median_ns
            if abs(self.first_call_ratio - derived) > 1e-6 * max(derived, 1.0):
                raise ValueError(f"first_call_ratio {self.first_call_ratio:.6g} but first_call_s over the device-time "
                                 f"median gives {derived:.6g}")
        return self


class CellRecord(Record):
    """`cells/<id>.json`: the cell's config, its status and why, what ran where, and its metrics."""

    schema_version: Literal[12]  # harness/bundle/migrations.py SCHEMA_VERSION: a test holds them equal
    id: Annotated[str, Field(pattern=HEX16)]
    label: str
    status: Status
    reasons: list[str]
    config: CellConfig
    started: str | None = None
    finished: str | None = None
    wall_s: Seconds | None = None
    log: InnerPath | None = None
    log_tail: str | None = None
    node: dict[str, Any] | None = None  # where it ran: hostname, executor, slot, cpu, gpus
    environment: dict[str, Any] = {}
    phases_s: dict[str, Seconds] = {}
    warnings: list[str] = []
    metrics: Metrics

    @model_validator(mode="after")
    def _timed_figures_are_their_phases(self) -> CellRecord:
        """Three figures are the worker's phases as timed (harness/measure/phases.py): the tuning
        time the `tune` phase, the compile time the `prepare` phase (less what the backend measured
        as its one-time work for the machine, the `toolchain` phase, harness/contract.py
        `Prepared.toolchain_s`), the first call's time the `first_call` phase. Each is held to its
        phase with the phase left out too: `first_call_ratio` is checked against `first_call_s`, so
        the two halved together would pass without this."""
        tuning = self.metrics.tuning
        for name, recorded, phase in (("metrics.tuning.tuning_s", None if tuning is None else tuning.tuning_s, "tune"),
                                      ("metrics.prepare_s", self.metrics.prepare_s, "prepare"),
                                      ("metrics.first_call_s", self.metrics.first_call_s, "first_call")):
            if recorded is not None and recorded != self.phases_s.get(phase):
                raise ValueError(f"{name} {recorded:.6g} is not the {phase} phase's {self.phases_s.get(phase)}")
        return self


def problems(record: Any, where: str, model_plugins: object = None) -> list[str]:
    """Where `record` (a cell record, upgraded to the current version) is not a `CellRecord`: what
    the schema cannot say (a figure that disagrees with those it derives from). `model_plugins`: its
    bundle's, by which a plugin model it ran is known, installed here or not."""
    return model_problems(CellRecord, record, where, {RECORD: model_plugins})
