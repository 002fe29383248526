"""The untimed passes' records, each pass in its own: the memory pass (harness/measure/memory.py),
the profile pass (harness/measure/passes.py: kernels per inference, where their time goes, the
fusion report, the time split) and the memory-traffic pass (harness/measure/memory_traffic.py).
Parts of a cell's `Metrics` (harness/bundle/cell_record.py).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, model_validator

from harness.bundle.record_base import BYTES_MAX, Bytes, Count, MeanCount, Ns, Record, Share, SignedBytes
from harness.fusion.report import counts

#: How a cell's worker started: "preloaded" (forked by a parent that had imported torch,
#: harness/measure/preloaded.py) or "fresh" (a new Python, as every cell was before preloaded parents).
WorkerStart = Literal["fresh", "preloaded"]

#: How a CPU cell's `Kernels.kernel_time_method` ends where its kernels' times (and its kinds') are its
#: time in kernels split between them, so that they add up to it (harness/measure/passes.py, since
#: 2026-12-06); before, each was its own median share of an inference, and they added up to less.
PROPORTIONAL_SPLIT = "split between them in proportion to the median of each one's part of an inference's time in kernels"


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

    @model_validator(mode="after")
    def _deltas_are_over_the_baseline(self) -> Memory:
        """Each RSS delta is its peak over the baseline (`over_baseline`, which the memory pass
        subtracts with), and comes with both: without them it would be a figure nothing checks."""
        for delta, peak in (("peak_rss_delta_bytes", "peak_rss_bytes"),
                            ("inference_peak_rss_delta_bytes", "inference_peak_rss_bytes")):
            recorded = getattr(self, delta)
            if recorded is None:
                continue
            derived = over_baseline(getattr(self, peak), self.rss_baseline_bytes)
            if derived is None:
                raise ValueError(f"{delta} is recorded without {peak} and rss_baseline_bytes")
            if recorded != derived:
                raise ValueError(f"{delta} {recorded} but {peak} over rss_baseline_bytes is {derived}")
        return self

    @model_validator(mode="after")
    def _peaks_hold_what_they_include(self) -> Memory:
        """The worker's lifetime peak RSS is taken after the inference pass, as the larger of the
        kernel's high-water marks and the baseline (harness/measure/memory.py), so it is at least the
        pass's peak and the baseline; torch reserves on the device all it allocates. The report's
        peak RSS lowered under the inference peak recorded beside it, its delta with it, passed."""
        for low, high in (("inference_peak_rss_bytes", "peak_rss_bytes"), ("rss_baseline_bytes", "peak_rss_bytes"),
                          ("torch_max_allocated_bytes", "torch_max_reserved_bytes")):
            below, above = getattr(self, low), getattr(self, high)
            if below is not None and above is not None and below > above:
                raise ValueError(f"{high} {above} is below {low} {below}, which it includes")
        return self


def over_baseline(peak: int | None, baseline: int | None) -> int | None:
    """A peak RSS over the baseline the worker took before it built the model, or None without both."""
    return None if peak is None or baseline is None else peak - baseline


class KindTime(Record):
    """One kind of kernel of `Kernels.by_kind` (harness/measure/kernel_kinds.py): how many differently
    named kernels are of it, and their calls and time per inference together."""

    kind: str
    kernels: Count
    calls_per_inference: MeanCount
    ns_per_inference: Ns


class BackendFigures(Record):
    """What a backend's own profiler reports beside the kernels (`Backend.profile_figures`): free-form,
    but for the figures a reader shows, typed here."""

    #: its allocator arena at its fullest in the profile pass, and what the arena held from the system
    #: then (ONNX Runtime's `mem_in_use_peak` and `mem_arena_held`; the report's "arena peak")
    arena_peak_in_use_bytes: Bytes | None = None
    arena_held_bytes: Bytes | None = None


class Kernels(Record):
    """Kernels (GPU) or compute dispatches (CPU) per inference, and where the time inside them goes."""

    kernels_per_inference: MeanCount | None
    kernel_count_method: str
    backend_figures: BackendFigures = Field(default_factory=BackendFigures)
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
    """One kernel of the fusion report: its name, the operators it runs, their fusion class and the
    mapping classes they combine (docs/metrics.md)."""

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
    #: the tables its kernels' classes and mappings come from (harness/fusion/report.py
    #: CLASSIFIER_VERSION); reports written before 2026-12-06 lack it
    classifier_version: Annotated[int, Field(strict=True, ge=1)] | None = None
    kernel_count: Count
    fusion_count: Count
    kernels_by_class: dict[str, Count] = {}
    fusions_by_class: dict[str, Count] = {}
    fusions_by_mapping: dict[str, Count] = {}
    kernels: list[FusedKernel]

    @model_validator(mode="after")
    def _counts_are_its_kernels(self) -> FusionReportRecord:
        """Each count is its kernels' (harness/fusion/report.py `counts`, which the worker wrote it
        with): one edited apart from the kernels it counts is refused. A count an older record
        lacks (`fusions_by_class`, `fusions_by_mapping` before schema 3) is not asked for."""
        derived = counts((k.fusion_class, k.mapping) for k in self.kernels)
        # the worker writes each kernel's mapping with the totals of them: one left out would leave them unchecked
        if "fusions_by_mapping" in self.model_fields_set and any(
                k.mapping is None for k in self.kernels if k.fusion_class != "single"):
            raise ValueError("fusions_by_mapping is recorded, but not the mapping of each fused kernel it counts")
        wrong = [f"{key} {getattr(self, key)} but its kernels give {derived[key]}" for key in derived
                 if key in self.model_fields_set and getattr(self, key) != derived[key]]
        if wrong:
            raise ValueError("; ".join(wrong))
        return self


class TimeSplit(Record):
    """Where one inference's wall time goes: kernels and the rest (harness/measure/passes.py)."""

    wall_ns: Ns
    kernel_ns: Ns | None
    overhead_ns: Ns | None = None
    kernel_share: Share | None = None
    method: str
