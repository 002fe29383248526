"""Apache TVM (Relax): the model imported through torch.export, compiled by TVM's default pipeline.

The model is exported with `torch.export.export` and imported with
`tvm.relax.frontend.torch.from_exported_program`, parameters bound as constants, always from a
copy of the model on the CPU: the importer wraps each weight without copying (DLPack), so CUDA
weights would become CUDA constants, and FoldConstant evaluates its functions on the host (that
was "Mismatched A.device_type on argument #0" on every CUDA cell). A matmul whose operand is
broadcast along its batch only is given the operand unbroadcast (backends/tvm_broadcast_matmul.py:
torch decomposes attention's in-projection at a batch above 1 into a weight broadcast to the
sequence's length, which FoldConstant made a constant of 1.3 GiB a layer for vit_b_16). Three
clean-up passes run next in both variants: `DecomposeOpsForInference` (batch norm becomes
subtract/divide/multiply/add, so it can fuse with the conv before it), then `CanonicalizeBindings`
and `DeadCodeElimination` (they remove the tuple that batch norm's three outputs leave behind,
which would otherwise stop the relu after it from fusing). Then `relax.get_default_pipeline`
of the target runs: on CPU `LegalizeOps` -> `FoldConstant` -> `FuseOps` -> `FuseTIR` -> lowering; on
CUDA the same plus the dlight default GPU schedules (Matmul, GEMV, Reduction, GeneralReduction,
Fallback), rebuilt from TVM's own CUDA pipeline stages with one change: dlight's Matmul rule
raises, instead of declining, on a squeeze-and-excitation block's second convolution fused with
its gate (a hard sigmoid or a sigmoid) and the product with the block's input, at batch 8
(mobilenet_v3_small, efficientnet_b0: "consumers of the cache-write stage that are not properly
inlined"), which stopped the whole build; guarded, it declines and the next rule schedules the
function. The CUDA target is built from the compute capability torch reports (no TVM device
query), so CUDA code compiles on a machine without a GPU too; it is turned into GPU binaries
(NVRTC) where one is present.
- `fusion: on`  -> the pipeline as it is.
- `fusion: off` -> `PassContext(disabled_pass=["FuseOps", "FuseTIR"])`: one PrimFunc per Relax op.

On CPU the default pipeline schedules nothing (dlight has no CPU rule for convolutions): its
kernels are plain single-threaded loops, tens of times slower than oneDNN. So CPU cells are tuned
first (`Backend.tune`, timed apart from the compile as `tuning_s`): MetaSchedule draws
`tuning_trials` candidate schedules for each kernel, times them here and keeps the fastest in a
database that the compile applies after FuseTIR (backends/tvm_tuning.py), the same budget per
kernel for fusion on and off. The database is cached by the model's structure and shapes, target,
variant, budget and the versions of TVM and torch: a later cell or run reuses it.

Options (scenario file, `options:`):
- `opt_level`: the PassContext optimisation level, 0..3 (default 3); it gates TIR lowering passes,
  not the Relax fusion passes, which run at every level
- `mcpu`: "host" | "generic", CPU cells only (default "host": LLVM code for this machine's CPU,
  as `Target.from_device("cpu")` detects it; "generic": LLVM's baseline for the architecture)
- `tuning_trials`: candidate schedules MetaSchedule times per kernel (task), CPU cells only
  (default 2; 0: untuned loops)
- `tuning_repeat`: how many times MetaSchedule's runner times each candidate, CPU cells only
  (default 1); the mean of the runs ranks it. More runs cost each candidate that much more of its
  kernel's time (its build, most of a candidate's cost, is done once). They steady the choice
  between near-equal candidates only where the noise is within a candidate's runs: on the 2-core
  VM, whose speed moves over seconds, three did not
  (docs/results/cpu-2core-intel-2026-11-30-tvm-tuning-draws.md)
- `threads`: threads of TVM's thread pool, which runs the kernels' parallel loops and MetaSchedule's
  timing of candidates, CPU cells only (default 0: the count the cell was given, TVM_NUM_THREADS
  or OMP_NUM_THREADS as a `--jobs` slot or the scenario's `env:` sets them, else one per core this
  process may run on, as many as torch and ONNX Runtime run). TVM's own last guess is half the
  machine's logical CPUs on x86 (it takes every core for two hardware threads), which gave TVM one
  thread on a 2-core VM without SMT where every other backend ran two
  (docs/results/cpu-2core-amd-2026-12-01-tvm-threads.md). TVM's pool pins its threads, the
  calling thread among them, to the machine's first cores whatever this process's affinity: a
  process given core 1 of two (`taskset -c 1`, a test worker's share) ran its
  kernels, and everything after them, on core 0. Where this process may run on fewer CPUs than the
  machine has, the pool is left unpinned (TVM_BIND_THREADS=0, as a `--jobs` slot sets it) unless
  TVM_BIND_THREADS is set; on the whole machine TVM pins as it always does.

Limits, checked on TVM 0.27: fp32 only (the importer gives conv2d and linear float32 outputs
whatever the input dtype, so fp16 models do not import). A budget of a few trials a task is a
random search, not a converged one: it brings TVM's CPU code from untuned loops to parallel,
vectorised kernels, not to what hours of tuning reach.

The targets and pipelines are in backends/tvm_pipeline.py, the walk of the IR that gives the
fusion report in backends/tvm_fusion_report.py, the tuning in backends/tvm_tuning.py, the compiled
model a cell calls (the Relax VM, and what the profile pass reads from it) in backends/tvm_prepared.py.

Compiled libraries are cached in `cache_dir` by weights, input shape, dtype, target, variant,
options and library versions; a warm prepare loads the library and its fusion report without
importing the model again. The fusion report is read from the IR while it compiles: which Relax
ops each fused function was built from, in the order the main function calls the kernels.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from backends.attention_provenance import attention_origins
from backends.tvm_broadcast_matmul import unbroadcast_matmul_operands
from backends.tvm_fusion_report import kernel_groups, snapshot_instrument
from backends.tvm_pipeline import cpu_target, current_cuda_target, pipeline, process_cores
from backends.tvm_prepared import TVMPrepared
from harness.artifact_cache import cached_dir, damage_of, fingerprint, structure_fingerprint
from harness.contract import Availability, Backend, Prepared, Tuning, Variant
from harness.errors import BackendFailed
from harness.fusion import FusionReport, KernelGroup
from harness.options import BackendOptions, expect

#: Candidates MetaSchedule times for each task of a CPU cell (backends/tvm_tuning.py) unless the
#: scenario says otherwise: mobilenet_v3_small's 51 tasks take about 100 s at 2 on 2 cores.
DEFAULT_TUNING_TRIALS = 2


class TVMOptions(BackendOptions):
    opt_level: int = Field(3, ge=0, le=3)
    mcpu: Literal["host", "generic"] = "host"  # cpu cells only
    tuning_trials: int = Field(DEFAULT_TUNING_TRIALS, ge=0, le=10_000)  # cpu cells only; 0: untuned
    tuning_repeat: int = Field(1, ge=1, le=100)  # cpu cells only: timed runs of each candidate, their mean ranks it
    threads: int = Field(0, ge=0, le=4096)  # cpu cells only: TVM's thread pool; 0: the count given, else one per core


LIBRARY_FILE = "model.so"
REPORT_FILE = "fusion_report.json"
#: Bumped when what goes into the cached directory changes (v2: the import removes matmuls'
#: batch-only broadcasts, backends/tvm_broadcast_matmul.py; v3: the fusion report counts the parts of one
#: of the model's own attention calls in a kernel as one operator, backends/attention_provenance.py).
CACHE_LAYOUT = "tvm-relax-v3"
#: The variables TVM sizes its thread pool by, the first one set winning.
_POOL_VARIABLES = ("TVM_NUM_THREADS", "OMP_NUM_THREADS")
#: Whether TVM's pool pins its threads to cores ("0": it does not), read when the pool is made.
BIND_VARIABLE = "TVM_BIND_THREADS"
_DTYPES = ("fp32",)


class TVMBackend(Backend):
    """TVM's Relax compiler and virtual machine; LLVM code on CPU, CUDA (dlight schedules) on GPU."""

    name = "tvm"
    options_model = TVMOptions
    preload = ("tvm",)  # about 3 CPU-seconds of import (its runtime library and Relax)

    def availability(self, device: str) -> Availability:
        try:
            import tvm
        except ImportError:
            return Availability.no("apache-tvm is not installed (pip install apache-tvm)")
        if device == "cuda":
            from backends.torch_device import torch_availability

            basic = torch_availability("cuda")
            if not basic.ok:
                return basic
            if not tvm.cuda(0).exist:
                return Availability.no("TVM sees no CUDA device (this apache-tvm build cannot open the GPU torch sees)")
            return Availability.yes()
        try:
            cpu_target("host")
        except Exception as exc:  # TVM raises its own error types when LLVM is missing
            return Availability.no(f"TVM cannot create an LLVM target (built without LLVM?): {_first_line(exc)}")
        from tvm.support.cc import get_cc

        if get_cc() is None:
            return Availability.no("no C/C++ compiler on PATH; TVM links its compiled library with one (g++, clang, cc)")
        return Availability.yes()

    def supports(self, variant: Variant, dtype: str, device: str) -> Availability:
        if dtype == "fp16":
            # Checked on TVM 0.27: the importer builds conv2d and linear with out_dtype="float32"
            # whatever the input dtype, so the following fp16 bias add or batch norm fails to import.
            return Availability.no(
                "tvm: fp16 does not import: TVM 0.27's torch importer emits conv2d/linear with float32 "
                "outputs, which the fp16 ops after them reject (fp32 only for now)"
            )
        if dtype not in _DTYPES:
            return Availability.no(f"tvm: {dtype} is not supported (fp32 only)")
        return Availability.yes()

    def versions(self) -> dict[str, str]:
        import torch
        import tvm

        return {"tvm": tvm.__version__, "torch": torch.__version__}

    def tune(
        self, model: Any, example: Any, *, device: str, dtype: str, variant: Variant, workdir: Path, cache_dir: Path,
    ) -> Tuning:
        """MetaSchedule's search for each kernel's schedule, `tuning_trials` candidates a task, on CPU
        (backends/tvm_tuning.py); the database is kept in `cache_dir` for `prepare` and later cells."""
        options = _checked_options(variant, device)
        if device != "cpu":
            return Tuning(tuned=False, reason="CUDA cells are scheduled by dlight's default GPU rules, not tuned")
        size_thread_pool(options.threads)  # before MetaSchedule's runner process starts: it inherits the count
        if options.tuning_trials == 0:
            return Tuning(tuned=False, reason="tuning_trials is 0: untuned loops")
        from backends import tvm_tuning

        target = _target(device, options)
        entry = _tuning_entry(model, example, target, dtype, variant.fusion, options, cache_dir)
        hit = cached_dir(entry, lambda tmp: tvm_tuning.tune(
            _legalized(*_host_copy(model, example), target, variant.fusion, options), target, options.tuning_trials,
            tmp, workdir / "tuning", repeat=options.tuning_repeat))
        summary = tvm_tuning.database_summary(entry)
        return Tuning(tuned=True, tuner=tvm_tuning.TUNER, trials_per_task=options.tuning_trials,
                      tasks=summary["tasks"], tasks_tuned=summary["tasks_tuned"], trials=summary["trials"],
                      database_sha256=tvm_tuning.database_sha256(entry), cache="warm" if hit else "cold")

    def prepare(
        self, model: Any, example: Any, *, device: str, dtype: str, variant: Variant, workdir: Path,
        cache_dir: Path,
    ) -> Prepared:
        del workdir  # everything worth keeping goes to cache_dir; the build uses its own temp dir
        options = _checked_options(variant, device)
        # CUDA cells run no CPU kernel: their pool is left as TVM makes it, if it ever does.
        threads = size_thread_pool(options.threads) if device == "cpu" else None
        import torch
        import tvm

        target = _target(device, options)
        database = None
        if device == "cpu" and options.tuning_trials > 0:
            database = _tuning_entry(model, example, target, dtype, variant.fusion, options, cache_dir)
            if not database.is_dir() or damage_of(database) is not None:
                raise BackendFailed(f"tvm: no intact tuning database for this model at {database}: Backend.tune runs "
                                    "before prepare (or set tuning_trials: 0 for untuned code)")
        from backends import tvm_tuning

        key = fingerprint(
            model, example, tvm=tvm.__version__, torch=torch.__version__, target=str(target), dtype=dtype,
            # The repeat reaches the compile only through the database, whose hash is in the key; the
            # threads only through the database and the run.
            fusion=variant.fusion, options=options.model_dump(exclude={"tuning_repeat", "threads"}), layout=CACHE_LAYOUT,
            tuning=tvm_tuning.database_sha256(database) if database is not None else None,
        )
        entry = cache_dir / "relax" / key
        hit = cached_dir(entry, lambda tmp: _build(*_host_copy(model, example), target, variant.fusion, options, tmp,
                                                   database))
        report = _read_report(entry / REPORT_FILE)
        try:
            module = tvm.runtime.load_module(str(entry / LIBRARY_FILE))
        except Exception as exc:  # a cached library that no longer loads must say so, not crash the worker
            raise BackendFailed(f"tvm: cannot load the compiled library {entry / LIBRARY_FILE}: {_first_line(exc)}") from exc
        passes = {
            "before the pipeline": ["unbroadcast_matmul_operands", "DecomposeOpsForInference", "CanonicalizeBindings",
                                    "DeadCodeElimination"],
            "pipeline": "relax default" + (" (CUDA stages, dlight schedules)" if device == "cuda" else " (LLVM)"),
            "left out": ["FuseOps", "FuseTIR"] if variant.fusion == "off" else [],
            "opt_level": options.opt_level,
            "schedules": (f"MetaSchedule database {tvm_tuning.database_sha256(database)[:16]} applied after FuseTIR"
                          if database is not None else "dlight default GPU rules" if device == "cuda" else "untuned"),
        }
        prepared = TVMPrepared(module, device, report, passes)
        prepared.prepare_cache = "warm" if hit else "cold"
        if threads is not None and (pool := prepared.thread_pool_threads()) != threads:
            prepared.close()
            raise BackendFailed(f"tvm: its thread pool has {pool} thread(s), not the {threads} asked: the pool was made "
                                "before the backend sized it (TVM sizes it once, at its first parallel loop)")
        return prepared


def size_thread_pool(threads: int) -> int | None:
    """Ask TVM's thread pool for `threads` threads and return the count it will have (`pool_threads`).
    TVM makes the pool once, at its first parallel loop, with TVM_NUM_THREADS threads, else
    OMP_NUM_THREADS, else half the logical CPUs on x86 (it takes every core for two hardware
    threads). With `threads` 0 a count the cell was given stays (a `--jobs` slot's OMP_NUM_THREADS,
    or a scenario's `env:`), and only that last guess is replaced: one thread per core this process
    may run on. Where this process may run on fewer CPUs than the machine has, the pool is also
    left unpinned (TVM_BIND_THREADS=0, unless set). The variables are set before the backend runs a
    kernel, and MetaSchedule's runner process inherits them."""
    cores = process_cores()
    if threads or _given_pool_threads() is None:
        os.environ["TVM_NUM_THREADS"] = str(threads or cores)
    if cores < (os.cpu_count() or 1):  # pinned, the pool would leave this process's cores
        os.environ.setdefault(BIND_VARIABLE, "0")
    return pool_threads(threads)


def pool_threads(threads: int) -> int | None:
    """The threads TVM's pool has in this process once the backend asks for `threads` (see
    `size_thread_pool`); None where the count TVM reads is no number."""
    given = str(threads) if threads else _given_pool_threads() or str(process_cores())
    return int(given) if given.isdigit() and int(given) > 0 else None


def _given_pool_threads() -> str | None:
    return next((os.environ[name].strip() for name in _POOL_VARIABLES if os.environ.get(name, "").strip()), None)


def _target(device: str, options: TVMOptions) -> Any:
    try:
        return current_cuda_target() if device == "cuda" else cpu_target(options.mcpu)
    except Exception as exc:  # TVM raises ValueError/RuntimeError when the CPU cannot be described
        raise BackendFailed(f"tvm: cannot build a {device} target here: {_first_line(exc)}") from exc


def _tuning_entry(model: Any, example: Any, target: Any, dtype: str, fusion: str, options: TVMOptions,
                  cache_dir: Path) -> Path:
    """Where the tuning database of this model's structure and shapes, target, variant and budget is
    kept: the weights do not change a schedule, so a model of other weights reuses it. torch's
    version is keyed with TVM's: its export is the graph TVM imports, so another torch may give other
    tasks, which a database tuned on the old ones would leave untuned without a word."""
    import torch
    import tvm

    from backends import tvm_tuning

    key = structure_fingerprint(model, example, tvm=tvm.__version__, torch=torch.__version__, target=str(target),
                                dtype=dtype, fusion=fusion,
                                opt_level=options.opt_level, trials=options.tuning_trials,
                                layout=tvm_tuning.TUNING_LAYOUT,
                                # keyed only where set, so the databases tuned before the option stay valid
                                **({"repeat": options.tuning_repeat} if options.tuning_repeat != 1 else {}),
                                # the runner's threads, keyed where not one per core (the target's num-cores)
                                **({"threads": pool} if (pool := pool_threads(options.threads)) != process_cores()
                                   else {}))
    return cache_dir / "tuning" / key


def _checked_options(variant: Variant, device: str) -> TVMOptions:
    options = expect("tvm", TVMOptions, variant.options)
    for name in ("mcpu", "tuning_trials", "tuning_repeat", "threads"):
        if device != "cpu" and name in options.model_fields_set:
            raise BackendFailed(f"tvm option {name} applies to cpu cells only")
    return options


def _host_copy(model: Any, example: Any) -> tuple[Any, Any]:
    """The model and example on the CPU (the model copied if it is elsewhere; the cell's own is
    left where it is)."""
    import copy

    if all(t.device.type == "cpu" for t in (*model.parameters(), *model.buffers(), example)):
        return model, example
    return copy.deepcopy(model).to("cpu"), example.detach().to("cpu")


def _imported(model: Any, example: Any) -> Any:
    """The model exported by torch.export, imported into Relax, batch norm decomposed and tidied."""
    import torch
    from tvm import relax

    try:
        with torch.no_grad():
            program = torch.export.export(model, (example,))
    except Exception as exc:  # torch.export raises many types; the reason is what matters
        raise BackendFailed(f"tvm: torch.export failed: {type(exc).__name__}: {_first_line(exc)}") from exc
    try:
        from tvm.relax.frontend.torch import from_exported_program

        # Parameters become constants (keep_params_as_input=False), so FoldConstant can fold what
        # depends on weights alone; a single output comes back as a tensor, not a 1-tuple.
        mod = from_exported_program(program, keep_params_as_input=False, unwrap_unit_return_tuple=True)
    except Exception as exc:  # unsupported operators surface as assertion or key errors
        raise BackendFailed(
            f"tvm: the Relax importer (from_exported_program) failed: {type(exc).__name__}: {_first_line(exc)}"
        ) from exc
    # A weight broadcast along a batch only to feed a matmul would be folded into a constant of
    # that size (backends/tvm_broadcast_matmul.py): the matmul is given the weight itself.
    mod = unbroadcast_matmul_operands(mod)
    for cleanup in (
        relax.transform.DecomposeOpsForInference(),
        relax.transform.CanonicalizeBindings(),
        relax.transform.DeadCodeElimination(),
    ):
        mod = cleanup(mod)  # outside the PassContext of the pipeline: opt_level and disabled_pass never skip them
    return mod


def _disabled(fusion: str) -> list[str]:
    return ["FuseOps", "FuseTIR"] if fusion == "off" else []


def _legalized(model: Any, example: Any, target: Any, fusion: str, options: TVMOptions) -> Any:
    """The module as the CPU pipeline has it right after FuseTIR (the tuning tasks are its PrimFuncs):
    the same passes under the same PassContext as `_build`'s, up to where the database is applied."""
    import tvm
    from tvm.relax.backend.cpu_generic import pipeline as cpu

    mod = _imported(model, example)
    try:
        with tvm.transform.PassContext(opt_level=options.opt_level, disabled_pass=_disabled(fusion)), target:
            return tvm.transform.Sequential(cpu.library_dispatch_passes(target) + cpu.legalize_passes(target))(mod)
    except Exception as exc:
        raise BackendFailed(f"tvm: lowering for tuning failed: {type(exc).__name__}: {_first_line(exc)}") from exc


def _build(model: Any, example: Any, target: Any, fusion: str, options: TVMOptions, out: Path,
           database: Path | None = None) -> None:
    """Export, import, compile (with the tuning database at `database`, CPU); write the library and
    the fusion report into `out`."""
    import tvm

    origins: dict[Any, Any] = {}  # each Relax variable the import bound -> the model's attention call it is part of
    with attention_origins(origins):
        mod = _imported(model, example)
    modules: dict[str, Any] = {}
    try:
        with tvm.transform.PassContext(
            opt_level=options.opt_level, disabled_pass=_disabled(fusion), instruments=[snapshot_instrument(modules)]
        ):
            with target:  # NVRTC takes the arch from the target, not from the device
                lowered = pipeline(target, database)(mod)
                executable = tvm.compile(lowered, target, relax_pipeline=None)
    except BackendFailed:
        raise
    except Exception as exc:
        raise BackendFailed(f"tvm: compilation for {target.kind.name} failed: {type(exc).__name__}: {_first_line(exc)}") from exc
    kernels = kernel_groups(modules, lowered, origins)
    try:
        executable.export_library(str(out / LIBRARY_FILE))
    except Exception as exc:
        raise BackendFailed(f"tvm: export_library failed: {type(exc).__name__}: {_first_line(exc)}") from exc
    fused = "after FuseOps" if fusion == "on" else "FuseOps/FuseTIR disabled"
    report = FusionReport(
        kernels=tuple(kernels),
        source=f"TVM Relax IR: PrimFunc calls of the lowered main function, ops read before LegalizeOps ({fused})",
        notes=(
            "ops computed only from weights are folded at compile time (FoldConstant) and do not appear; "
            "reshapes lowered to VM builtins run no kernel and do not appear"
        ),
    )
    (out / REPORT_FILE).write_text(json.dumps(report.to_json(), indent=1))


def _read_report(path: Path) -> FusionReport:
    data = json.loads(path.read_text())
    return FusionReport(
        kernels=tuple(KernelGroup(kernel=k["kernel"], ops=tuple(k["ops"])) for k in data["kernels"]),
        source=data["source"], approximate=data["approximate"], notes=data["notes"],
    )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else ""
