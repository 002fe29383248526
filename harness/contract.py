"""The backend contract: what a backend plugin implements, and nothing more.

A backend turns a torch model into something callable (`prepare`), and reports what it did
(`fusion_report`, `cpu_dispatches`). The harness owns everything else: clocks, configuration,
isolation (each cell runs in its own process), and the device-side kernel counting on GPU.

Rules for implementers:
- Never read the clock, the scenario file or the environment; the harness passes what you need.
- Import your library inside methods, not at module level: the module is imported by the parent
  process just to read `name`, and must stay cheap.
- `Prepared.__call__` is the only thing inside the timed region. It may return before the device
  has finished; the harness calls `synchronize()` inside the timed region right after it.
- `dtype` is one of harness/precision.py's: "fp32" (IEEE fp32 math: TF32 off), "tf32" (fp32
  tensors, TF32 matmul and convolution allowed), "fp16", "bf16". The harness sets torch's own
  math flags; a backend that runs another library sets that library's (ONNX Runtime's
  `use_tf32`, TensorRT's TF32 flag) and reads them back in `Prepared.math_mode`.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal, Mapping

from harness.fusion import FusionReport
from harness.options import BackendOptions, parse

__all__ = ["Availability", "Backend", "CpuKernelTimes", "FusionReport", "OnOff", "Prepared", "Tuning", "Variant"]

OnOff = Literal["on", "off"]


@dataclass(frozen=True)
class Availability:
    """Whether a backend can run here, and why not."""

    ok: bool
    reason: str = ""

    @classmethod
    def yes(cls) -> Availability:
        return cls(True)

    @classmethod
    def no(cls, reason: str) -> Availability:
        return cls(False, reason)


@dataclass(frozen=True)
class Variant:
    """The backend setting under study in one cell."""

    fusion: OnOff = "on"
    #: The backend's options, already parsed by its `options_model` (`Backend.variant` makes a
    #: variant from the scenario file's values); the empty default stands for the model's defaults.
    options: BackendOptions = field(default_factory=BackendOptions)
    #: "on": the whole inference captured once and replayed as a CUDA graph (one launch), for
    #: backends with `cuda_graphs = True`, on a GPU.
    graphs: OnOff = "off"


@dataclass(frozen=True)
class CpuKernelTimes:
    """One inference on the CPU under the backend's own profiler: each compute kernel it ran, in
    the order it ran, with its time, and the whole call's time, both measured under the profiler
    (which adds a little to every kernel it records)."""

    #: (kernel name, nanoseconds) per call; a kernel called twice appears twice. The names are the
    #: ones the fusion report gives the kernels where the backend can (TVM's PrimFuncs, Inductor's
    #: generated kernels), so a slow kernel can be looked up there.
    calls: tuple[tuple[str, float], ...]
    #: The whole profiled call: kernels and the dispatch between them.
    wall_ns: float
    #: Each kernel's kind where the backend names one (ONNX Runtime's node type: "SkipLayerNormalization",
    #: "MatMul"; Inductor's kernel that only copies, after what it copies, and its kernel that adds a
    #: library call's bias, after what it runs, where its name lists the operators around it): the
    #: harness sums the time by kind, so that fusion on can be set against off kind by kind. A kernel
    #: not named here is of the kind its name gives (harness/measure/kernel_kinds.py): an operator's
    #: (eager's aten::linear) as it is, else without the numbers a compiler numbers its kernels by
    #: (TVM's matmul14 is a matmul, Inductor's cpp_fused_gelu_178 a cpp_fused_gelu).
    kinds: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Tuning:
    """What `Backend.tune` did: whether it searched for faster code for this cell, how much, and
    the result it left for `prepare` (a schedule database, identified by its hash)."""

    tuned: bool
    #: Why the cell was not tuned (a budget of 0, a device the tuner does not serve), when it was not.
    reason: str = ""
    #: The tuner and its search, in words: "MetaSchedule replay-trace ...".
    tuner: str = ""
    #: The budget asked for: measured candidates per task (a task is one kernel to schedule).
    trials_per_task: int = 0
    #: Tasks found, tasks with at least one candidate that built and ran, candidates measured in all.
    tasks: int = 0
    tasks_tuned: int = 0
    trials: int = 0
    #: SHA-256 of the database `prepare` compiles with.
    database_sha256: str = ""
    #: "cold": searched now; "warm": the database of an earlier search with the same key was reused.
    cache: Literal["cold", "warm", "none"] = "none"


class Prepared(abc.ABC):
    """A model prepared by a backend for one input shape, dtype and device."""

    #: How `cpu_dispatches` counts, in words; goes into the bundle beside the count.
    dispatch_definition: ClassVar[str] = ""
    #: How `cpu_kernel_times` measures, in words; goes into the bundle beside its figures.
    kernel_time_definition: ClassVar[str] = ""
    #: What `prepare` found in its compile cache: "cold" (compiled from scratch), "warm"
    #: (loaded a cached artifact), "none" (nothing to compile) or "unknown". Set it in `prepare`.
    prepare_cache: str = "unknown"
    #: Seconds of `prepare` spent on the backend's one-time work for the machine, not for the model
    #: (work the first compile on a machine does and every later one finds done, such as Inductor's
    #: check of the CPU's vector instruction sets and its precompiled header). The harness records
    #: them as the phase `toolchain` and leaves them out of `prepare_s`, so the first cell of a
    #: machine is not charged for them. Set it in `prepare`, measured there; 0: none.
    toolchain_s: float = 0.0

    @abc.abstractmethod
    def __call__(self, batch: Any) -> Any:
        """Run one inference on `batch` (a torch tensor on the cell's device and dtype).

        This is the timed region: do nothing else here (no logging, no I/O, no conversion that
        a deployed system would not do). Return the output as a torch tensor.
        """

    @abc.abstractmethod
    def synchronize(self) -> None:
        """Block until all device work issued by earlier calls has completed."""

    @abc.abstractmethod
    def fusion_report(self) -> FusionReport:
        """Which source operators ended up in which kernel. Called once, outside timing."""

    def cpu_dispatches(self, batch: Any) -> int | None:
        """Compute dispatches one inference makes on CPU (see `dispatch_definition`), or None.

        Called in the profile pass, never in a timed one; it may run the model.
        """
        return None

    def rewrites(self) -> dict[str, Any]:
        """The graph rewrites `prepare` ran besides fusion (freezing, constant folding, layout
        changes, ...) and the ones it left out, as facts the cell records, read from what was
        built where the backend can: fusion on and off should differ in fusion alone, and where
        they cannot, this says how. Called once, after the passes. Default: {} (none)."""
        return {}

    def math_mode(self) -> dict[str, Any]:
        """The math the backend's own library runs with, read back from the library after the
        run (not what was asked for): `{"tf32": bool, ...}` plus the settings it read, e.g.
        `{"tf32": False, "use_tf32": "0"}`. Default `{}`: the backend computes through torch,
        whose flags the harness reads itself. A cell whose math differs from its dtype's
        (harness/precision.py) is invalid. Called once, after the passes."""
        return {}

    def cpu_kernel_times(self, batch: Any) -> CpuKernelTimes | None:
        """One inference on the CPU under the backend's own profiler (see `kernel_time_definition`):
        each compute kernel's time and the whole call's. The harness keeps the kernels' share of the
        call (applied to the timed median: profilers slow what they watch; the rest is dispatch
        overhead: Python, the runtime between kernels) and the kernels that take the most time, so
        a report can say which fused kernel a slower cell spends its time in. Called
        `passes.profile_iters` times in a row, each call a new inference (the harness takes the
        kernels' median share over them, and each kernel's median time); on a GPU the harness times kernels itself. Called in the
        profile pass, never in a timed one; it may run the model. None where the backend cannot tell."""
        return None

    def cuda_kernel_kinds(self) -> Mapping[str, str]:
        """On a GPU, where the harness traces the kernels itself (CUPTI names them), the kind of each
        kernel whose name does not say what it runs, where the backend knows, by the name CUPTI gives
        it: as `CpuKernelTimes.kinds` on the CPU (Inductor's Triton kernel that adds the bias of a
        cuDNN convolution and runs its relu, `triton_poi_fused_convolution_relu_0`, is a
        `triton_poi_fused_bias_relu`, element-wise; by its name it was a convolution). A kernel not
        named here is of the kind its name gives (harness/measure/kernel_kinds.py). Called once in
        the profile pass on a GPU, after `fusion_report`. Default: {} (every kind from its name)."""
        return {}

    def profile_figures(self, batch: Any) -> dict[str, Any]:
        """Figures only this backend's own profiler knows, units in the names (for example
        ONNX Runtime's `arena_peak_in_use_bytes`). Called in the profile pass on every device, after
        `cpu_dispatches`, never in a timed one; it may run the model. Default: none. The names a
        reader shows are typed (harness/bundle/passes_record.py `BackendFigures`): an arena's
        `arena_peak_in_use_bytes` and `arena_held_bytes` are whole bytes, shown as "arena peak".
        """
        return {}

    def close(self) -> None:
        """Release what `prepare` acquired."""


class Backend(abc.ABC):
    """A way of running a torch model: eager, a compiler, a runtime, a plugin."""

    #: Registered name, lower case; must equal the entry-point name.
    name: ClassVar[str]
    #: False for backends that do not compute the model (the null backend); their outputs are
    #: not checked against eager.
    computes_model: ClassVar[bool] = True
    #: False for backends with no fusion switch (eager, null): `fusion: off` would run the same code
    #: as on and report the noise between them as fusion's effect, so a scenario file may not ask for it.
    fusion_switch: ClassVar[bool] = True
    #: True for backends that implement `Variant.graphs == "on"` (the harness skips the cells of
    #: the others, saying so).
    cuda_graphs: ClassVar[bool] = False
    #: The typed model of the backend's `options:` (harness/options.py); the scenario loader checks
    #: every entry's options against it, so a typo stops the run before anything is written. The
    #: default accepts no options.
    options_model: ClassVar[type[BackendOptions]] = BackendOptions
    #: Environment variables the worker points at folders of the cell's own (variable -> folder
    #: name), e.g. a compiler's on-disk cache: empty for the cell's first round, as the rounds
    #: before it left them for a further round (harness/run/rounds.py); the worker's environment is
    #: otherwise the whitelisted one (harness/run/isolation.py).
    scratch_env: ClassVar[dict[str, str]] = {}
    #: Modules this backend's cells import that a run's preloaded parent (harness/measure/preloaded.py)
    #: may import once, so that each forked worker need not: only modules that start no thread when
    #: imported (a parent running a second thread cannot fork, and its cells' workers start fresh).
    preload: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def variant(cls, fusion: OnOff = "on", options: Mapping[str, Any] | None = None, graphs: OnOff = "off") -> Variant:
        """A variant of this backend with `options` (the scenario file's values) parsed by its
        `options_model`; `BackendFailed` names what does not fit."""
        return Variant(fusion, parse(cls.name, cls.options_model, options or {}), graphs)

    @abc.abstractmethod
    def availability(self, device: str) -> Availability:
        """Can this backend run on `device` ("cpu" or "cuda") here? Cheap; imports lazily."""

    def supports(self, variant: Variant, dtype: str, device: str) -> Availability:
        """Can this backend run this variant and dtype ("fp32", "tf32", "fp16", "bf16") on `device`?

        Called in the parent before a cell starts (cheap, no heavy imports); a "no" makes the
        cell `skipped` with the reason. Problems only `prepare` can find (an option's value, a
        model that does not export) raise `BackendFailed` there instead.
        """
        return Availability.yes()

    @abc.abstractmethod
    def versions(self) -> dict[str, str]:
        """Versions of the libraries this backend uses, recorded in every cell."""

    def tune(
        self, model: Any, example: Any, *, device: str, dtype: str, variant: Variant, workdir: Path, cache_dir: Path,
    ) -> Tuning | None:
        """Search for faster code for `model` within the variant's tuning budget, before `prepare`,
        and keep what was found in `cache_dir`, keyed by everything that changes it, where `prepare`
        (in this process or a later one) finds it. The harness times this call as `tuning_s`, apart
        from `prepare_s`, and calls it once per cell, in the same process and with the same arguments
        as `prepare`, right before it. Return what was done (`Tuning(tuned=False, reason=...)` where
        nothing was); the default None: this backend has nothing to tune."""
        return None

    @abc.abstractmethod
    def prepare(
        self,
        model: Any,
        example: Any,
        *,
        device: str,
        dtype: str,
        variant: Variant,
        workdir: Path,
        cache_dir: Path,
    ) -> Prepared:
        """Export and/or compile `model` (a torch.nn.Module in eval mode, already on `device`
        in `dtype`) for inputs shaped like `example`. The harness times this call as
        `prepare_s`. Raise `harness.errors.BackendFailed` with a clear reason when the model or
        an option cannot be handled.

        `workdir` is a private scratch directory for this cell, deleted after it. `cache_dir` is
        this backend's persistent directory, shared by cells and runs: keep exported or compiled
        artifacts there, keyed by everything that changes them (`harness.artifact_cache` does
        the keying and the atomic writes), and set `Prepared.prepare_cache` to say whether
        the artifact was built ("cold") or loaded ("warm").
        """
