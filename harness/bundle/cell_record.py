"""A cell's record in a bundle (`cells/<id>.json`), typed: the worker fills these models, the
bundle keeps them, and every reader reads them by attribute: `validate` reads every cell, upgraded
to the current version (harness/bundle/migrations.py), as a `CellRecord`, and the report, compare,
pack, gpu-check and the run's summary read the records of a bundle that passed it
(`LoadedBundle.records`). The current schema version's JSON Schema is generated from `CellRecord`
(harness/bundle/schema.py).

A record is read, never trusted: ranges are what "sane" means in `fusionbench validate` (a negative
latency or a 10^30-byte peak is a problem, whatever produced it), and a path the bundle names stays
inside it. Fields a newer harness adds are kept and ignored (`extra="allow"`), so its bundles still
read here; a figure an older record lacks, or a pass a failed cell never reached, is None.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from harness.scenario.cell_config import CellConfig, ComplianceTest
from harness.scenario.rules import ScenarioName
from harness.scenario.schema import MAX_ROUNDS

# Sane ranges: far beyond any real figure, far below what a hostile or corrupted file could hold.
NS_MAX = 10**13  # 2.8 hours
SECONDS_MAX = 10**7  # 116 days
BYTES_MAX = 2**50  # 1 PiB
COUNT_MAX = 10**8
RATE_MAX = 10**10  # samples per second
FLOPS_MAX = 10**21  # per batch, or per second

#: The most samples a timing list holds: the scenario's largest `max_iters`, and the warm-up's cap
#: (harness/measure/timing.py). A longer list is no measurement of this harness, and would cost
#: validate seconds an item.
MAX_SAMPLES = 1_000_000

HEX16 = "^[0-9a-f]{16}$"
# A path inside the bundle: relative, no "..", no backslash or control characters.
INNER_PATH = r"^(?!/)(?!.*(^|/)\.\.(/|$))[^\\\x00-\x1f]+$"

Ns = Annotated[float, Field(ge=0, le=NS_MAX)]
IntNs = Annotated[int, Field(ge=0, le=NS_MAX)]
Seconds = Annotated[float, Field(ge=0, le=SECONDS_MAX)]
Bytes = Annotated[int, Field(ge=0, le=BYTES_MAX)]
SignedBytes = Annotated[int, Field(ge=-BYTES_MAX, le=BYTES_MAX)]
Count = Annotated[int, Field(ge=0, le=COUNT_MAX)]
MeanCount = Annotated[float, Field(ge=0, le=COUNT_MAX)]
Ratio = Annotated[float, Field(ge=0, le=1e6)]
Share = Annotated[float, Field(ge=0, le=1.0)]
InnerPath = Annotated[str, Field(pattern=INNER_PATH)]
Validity = Literal["VALID", "INVALID", "MISSING"]
Status = Literal["valid", "invalid", "failed", "skipped", "interrupted"]


class Record(BaseModel):
    """Base of every part of a cell record."""

    model_config = ConfigDict(extra="allow", validate_assignment=True, regex_engine="python-re")

    def __setattr__(self, name: str, value: Any) -> None:
        """A field set as validated: a name the record does not declare is refused (extra fields are
        a newer harness's, read from a bundle, never written), and a value its checks refuse leaves
        the field as it was (pydantic keeps the refused value when a model's own check fails after
        the field's: the record could then no longer be written, and every figure in it was lost)."""
        if name not in type(self).model_fields and not name.startswith("_"):
            raise AttributeError(f"{type(self).__name__} has no field {name!r}: a figure is declared in its record "
                                 "first (docs/adding_a_metric.md)")
        before, was_set = self.__dict__.get(name), set(self.model_fields_set)
        try:
            super().__setattr__(name, value)
        except ValidationError:
            self.__dict__[name] = before
            self.__pydantic_fields_set__ = was_set
            raise

    def recorded(self) -> dict[str, Any]:
        """The JSON the bundle keeps: the fields that were set, None where a figure is none."""
        return self.model_dump(mode="json", exclude_unset=True, by_alias=True)


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
    calls: Count
    steady: bool
    tolerance: float | None = None
    seconds: Seconds | None = None


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


class LoadGenMetric(Record):
    """MLPerf's headline figure of the scenario (harness/scenario/rules.py), with its name and unit."""

    name: str
    unit: Literal["ns", "samples/s"]
    value: Annotated[float, Field(ge=0, le=max(NS_MAX, RATE_MAX))] | None


class SutFigures(Record):
    """What the system under test measured of itself in a LoadGen run (harness/measure/sut.py)."""

    batches: Count | None = None
    samples: Count | None = None
    batches_in_flight: Count | None = None
    gathered_batches: Count | None = None
    gather_median_ns: Ns | None = None
    call_median_ns: Ns | None = None
    call_mean_ns: Ns | None = None
    respond_median_ns: Ns | None = None
    call_definition: str | None = None


class LoadGenRun(Record):
    """A LoadGen run: the verdict, the headline metric, LoadGen's own entries and where its logs are."""

    scenario: ScenarioName
    validity: Validity
    invalid_reasons: list[str] = []
    metric: LoadGenMetric
    log_dir: InnerPath
    logs: list[Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]+$")]] = []
    attempts: list[dict[str, Any]] = []
    results: dict[str, Any] = {}
    settings: dict[str, Any] = {}
    sut: SutFigures | None = None
    beside: dict[str, Any] | None = None
    profile: Literal["dev", "mlperf"] | None = None
    user_conf: str | None = None
    loadgen_version: str | None = None
    warnings: list[str] = []


#: How a cell's worker started: "preloaded" (forked by a parent that had imported torch,
#: harness/measure/preloaded.py) or "fresh" (a new Python, as every cell was before preloaded parents).
WorkerStart = Literal["fresh", "preloaded"]


class Memory(Record):
    """Host (and on a GPU, device) memory of the worker (harness/measure/memory.py)."""

    rss_baseline_bytes: Bytes | None = None
    peak_rss_bytes: Bytes | None = None
    peak_rss_delta_bytes: Bytes | None = None
    inference_peak_rss_bytes: Bytes | None = None
    inference_peak_rss_delta_bytes: SignedBytes | None = None
    inference_peak_method: str | None = None
    torch_max_allocated_bytes: Bytes | None = None
    torch_max_reserved_bytes: Bytes | None = None
    nvml_process_peak_bytes: Bytes | None = None
    nvml_device_used_peak_bytes: Bytes | None = None
    nvml_device_used_delta_bytes: Bytes | None = None
    #: How the worker started, which moves the host figures (WorkerStart); older records: "fresh".
    worker_start: WorkerStart = "fresh"


class KindTime(Record):
    """One kind of kernel of `Kernels.by_kind` (harness/measure/kernel_kinds.py): how many differently
    named kernels are of it, and their calls and time per inference together."""

    kind: str
    kernels: Count
    calls_per_inference: MeanCount
    ns_per_inference: Ns


class Kernels(Record):
    """Kernels (GPU) or compute dispatches (CPU) per inference, and where the time inside them goes."""

    kernels_per_inference: MeanCount | None
    kernel_count_method: str
    backend_figures: dict[str, Any] = {}
    kernel_share: Share | None = None
    kernel_time_method: str | None = None
    profiled_iters: Count | None = None
    top_kernels: list[dict[str, Any]] = []
    kernel_time_ns_per_inference: Ns | None = None
    kernel_time_sum_ns_per_inference: Ns | None = None
    #: Every kind of kernel the profiled inferences ran, the costliest first, and how the kinds were
    #: named; empty in cells of schemas before 11 and in GPU cells written before 2026-12-02.
    by_kind: list[KindTime] = []
    kind_method: str | None = None


MeanBytes = Annotated[float, Field(ge=0, le=BYTES_MAX)]


class TrafficKernel(Record):
    """One kernel of `MemoryTraffic.top_kernels`: its launches and the DRAM bytes it moved, per inference."""

    name: str
    calls_per_inference: MeanCount
    dram_read_bytes_per_inference: MeanBytes
    dram_write_bytes_per_inference: MeanBytes


class MemoryTraffic(Record):
    """The DRAM bytes one inference reads and writes, from the GPU's hardware counters
    (harness/measure/memory_traffic.py), or why none were read: a figure that was not measured is
    absent with its reason, never zero."""

    dram_read_bytes_per_inference: MeanBytes | None = None
    dram_write_bytes_per_inference: MeanBytes | None = None
    dram_bytes_per_inference: MeanBytes | None = None
    # Kernel launches per inference the counter tool profiled: a count independent of `Kernels`'.
    kernels_per_inference: MeanCount | None = None
    profiled_iters: Count | None = None
    top_kernels: list[TrafficKernel] = []
    tool: str | None = None
    # Whether the caches were flushed before each kernel (ncu's `--cache-control all`): then every
    # kernel reads its inputs from DRAM, and the reads cannot fall below the weights and input.
    caches_flushed: bool | None = None
    method: str
    absent: str | None = None

    @model_validator(mode="after")
    def _measured_or_why_not(self) -> MemoryTraffic:
        read, write, total = (self.dram_read_bytes_per_inference, self.dram_write_bytes_per_inference,
                              self.dram_bytes_per_inference)
        if self.absent is None:
            if read is None or write is None or total is None:
                raise ValueError("memory traffic without its absent reason needs its read, write and total bytes")
            if abs(read + write - total) > 1.0:
                raise ValueError("dram_bytes_per_inference is not the read and write bytes together")
        elif read is not None or write is not None or total is not None or not self.absent.strip():
            raise ValueError("memory traffic that is absent carries its reason and no figure")
        return self


#: A number as JSON writes one: an int or a float, never a bool or a numeric string.
Number = Annotated[float, Field(strict=True)]


class TopKernel(Record):
    """One entry of `Kernels.top_kernels` (harness/measure/passes.py): a kernel, its calls per
    inference and, in bundles that kept it, its time per inference. The schema keeps the entries
    loose dicts, so a reader parses each with `read_as`."""

    name: str
    calls_per_inference: Number
    ns_per_inference: Number | None = None


FusionClass = Literal["tensor+element+tensor", "tensor+element", "element", "single"]


class FusedKernel(Record):
    model_config = ConfigDict(extra="allow", validate_assignment=True, regex_engine="python-re", populate_by_name=True)

    kernel: str
    ops: list[str]
    fusion_class: FusionClass = Field(alias="class")
    mapping: str | None = None


class FusionReportRecord(Record):
    """Which operators the backend fused into which kernels (harness/fusion/report.py)."""

    source: str | None = None
    approximate: bool | None = None
    notes: str | None = None
    kernel_count: Count
    fusion_count: Count
    kernels_by_class: dict[str, Count] = {}
    fusions_by_class: dict[str, Count] = {}
    fusions_by_mapping: dict[str, Count] = {}
    kernels: list[FusedKernel]


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


class MathMode(Record):
    """The math the cell ran with, read back from torch and the backend (harness/precision.py)."""

    requested: Literal["ieee", "tf32", "fp16", "bf16"] | None = None
    effective: Literal["ieee", "tf32", "mixed", "fp16", "bf16", "unrecorded"]
    problems: list[str]
    torch: dict[str, Any] = {}
    backend: dict[str, Any] = {}
    note: str | None = None


class LatencyAgreement(Record):
    """LoadGen's time per batch against the device timing's (harness/measure/trust.py)."""

    gap: Annotated[float, Field(ge=-1.0, le=1e6)] | None
    within: bool | None
    why: str
    loadgen_ns_per_batch: Ns | None = None
    device_ns_per_batch: Ns | None = None
    device_statistic: Literal["median", "mean"] | None = None
    limit: Share | None = None


class TimeSplit(Record):
    """Where one inference's wall time goes: kernels and the rest (harness/measure/passes.py)."""

    wall_ns: Ns
    kernel_ns: Ns | None
    overhead_ns: Ns | None = None
    kernel_share: Share | None = None
    method: str


class Accuracy(Record):
    """LoadGen's accuracy run, scored against the labels (the logs re-derive it in validate)."""

    top1_percent: Annotated[float, Field(ge=0, le=100)]
    good: Count
    total: Annotated[int, Field(ge=1, le=COUNT_MAX)]
    log_dir: InnerPath
    labels: Annotated[str, Field(pattern=r"^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,99}$")] | None = None


class ComplianceChecks(BaseModel):
    model_config = ConfigDict(extra="forbid")

    performance: bool
    accuracy: bool | None = None


class ComplianceOutcome(Record):
    """One MLPerf compliance test, verified against the cell's runs."""

    passed: bool
    checks: ComplianceChecks
    validity: Validity
    metric: LoadGenMetric
    log_dir: InnerPath


class TimingRound(Record):
    """One round of the cell's device timing, each in a fresh worker process (harness/run/rounds.py):
    round 1 is the cell's own measurement (`device_time`, whose samples are its samples); a further
    valid one keeps its samples (v8), a further failed one its reason."""

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

    @model_validator(mode="after")
    def _measured(self) -> TimingRound:
        if self.status == "valid" and (self.n is None or self.n < 1 or self.cv is None):
            raise ValueError("a valid round has its count of samples (1 or more) and its CV")
        if self.samples_ns is not None and (self.round == 1 or len(self.samples_ns) != self.n):
            raise ValueError("a further round's samples are as many as its n (round 1's are device_time's)")
        return self


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
    def _tuning_is_its_phase(self) -> CellRecord:
        """The tuning time is the worker's `tune` phase (harness/measure/protocol.py), as timed."""
        tuning = self.metrics.tuning
        if tuning is not None and tuning.tuning_s != self.phases_s.get("tune"):
            raise ValueError(f"metrics.tuning.tuning_s {tuning.tuning_s:.6g} is not the tune phase's "
                             f"{self.phases_s.get('tune')}")
        return self

    @model_validator(mode="after")
    def _compile_time_is_its_phase(self) -> CellRecord:
        """The compile time is the worker's `prepare` phase, less what the backend measured as its
        one-time work for the machine (the `toolchain` phase, harness/contract.py `Prepared.toolchain_s`)."""
        prepare_s = self.metrics.prepare_s
        if prepare_s is not None and "prepare" in self.phases_s and prepare_s != self.phases_s["prepare"]:
            raise ValueError(f"metrics.prepare_s {prepare_s:.6g} is not the prepare phase's {self.phases_s['prepare']:.6g}")
        return self


ModelT = TypeVar("ModelT", bound=BaseModel)


def read_as(model: type[ModelT], value: Any) -> ModelT | None:
    """`value` as a `model`, or None where it has another shape: for the parts of a record the
    schema keeps loose (a bundle is read, never trusted to have the shape it should)."""
    try:
        return model.model_validate(value)
    except ValidationError:
        return None


def model_problems(model: type[BaseModel], record: Any, where: str) -> list[str]:
    """One line per place where `record` is not a `model`, `where` first."""
    try:
        model.model_validate(record)
    except ValidationError as exc:
        return [f"{where}: {'/'.join(map(str, e['loc'])) or '(top)'}: {e['msg'][:200]}" for e in exc.errors()]
    return []


def problems(record: Any, where: str) -> list[str]:
    """Where `record` (a cell record, upgraded to the current version) is not a `CellRecord`: what
    the schema cannot say (a figure that disagrees with those it derives from)."""
    return model_problems(CellRecord, record, where)
