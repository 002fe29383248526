"""MetaSchedule tuning for the TVM backend's CPU cells: a bounded search for each kernel's schedule.

Untuned, TVM's CPU code is plain loops (no parallel loop, no vector instructions), tens of times
slower than a tuned compiler's; comparing that with Inductor or ONNX Runtime compares a tuned
compiler with an untuned one. With `tuning_trials: N` each task (one PrimFunc of the module after
FuseOps and FuseTIR, structurally equal ones counted once) gets N candidates drawn at random from
MetaSchedule's design space for the target (multi-level tiling, parallel, vectorize, unroll:
`replay-trace`), each built and timed on this machine, and the fastest is kept in a schedule
database that `prepare` compiles with (`MetaScheduleApplyDatabase`). The budget is per task, so
fusion off, which has more and smaller tasks, gets as many candidates for each of its kernels as
fusion on; its tuning takes longer, and the cell records how long.

Random candidates rather than the evolutionary search: at a few trials per task the evolutionary
search spends about 10 s a task generating and evolving a population of 512 before its first
measurement (checked on TVM 0.27, 2 cores), while a random draw of the design space reaches
most of the gain (mobilenet_v3_small at batch 1: untuned 40 ms, 51 tasks at 2 random candidates
each 15 ms in 96 s of tuning, eager 12 ms).

Each task's draws are seeded from its function's structure (`task_seed`), not from its place in
the task list: a function both variants have (a convolution whose output only feeds a
concatenation, which fusion on leaves alone too) is offered the same candidates on both sides, so
that a fusion-on/off pair differs by what fusion changed, not by the luck of each side's draws.
Seeds by the tasks' order gave densenet121's unfused 3x3 convolutions 58 and 47 ms with fusion on
against 105 ms each with fusion off (docs/results/cpu-2core-amd-2026-11-28-vision.md). A fused
function is seeded from its anchor, the matmul or convolution at its heart (`anchor_block`), and
draws the same tile sizes as that anchor alone with fusion off. Seeded by their whole functions,
vit_b_16's first MLP layer drew a fused kernel whose fastest of 2 candidates ranged over 5x from
draw to draw, as the unfused matmul's did (benchmarks/tvm_tuning_draws.py): at 2 trials a task, a
pair compared one draw's luck with another's.

Same draws are not yet the same candidates. Replay-trace's first draw for each candidate picks one
of the task's design spaces by its place in the list, and the lists come in different orders: a
convolution alone lists its write stage at the inner tile level, at the outer one, then not tiled
at all, while the fused function lists its epilogue untiled first. So the same draw gave the fused
function another loop structure with the same tile sizes, and times 9x apart (ResNeXt-101's 1x1
convolution: 6 ms against 51 ms, checked on TVM 0.27). The design spaces are therefore put in one
order before the draws (`design_space_key`, `_ordered_replay_trace`): the two sides' candidates
then differ by the fused epilogue only.

Candidates are built in this process (sequentially) and timed by MetaSchedule's local runner in a
worker process of its own, with a time limit, so a candidate that hangs or crashes fails alone.
The database and its seal live in the backend's cache folder (harness/artifact_cache.py), keyed by
the model's structure and shapes, the target, the variant, the budget and TVM's and torch's versions: a later
cell or run with the same key reuses it and its tuning takes a fraction of a second.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import linecache
import logging
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any, Iterator

from harness.errors import BackendFailed

#: Bumped when what a database holds or how it is searched changes (v2: seeds from each task's structure;
#: v3: the tasks of a model imported with its matmuls' batch-only broadcasts removed,
#: backends/tvm_broadcast_matmul.py, so an older database may lack one of them; v4: a fused task
#: seeded from its anchor, `task_seed`, and the candidates drawn in one thread, `_contexts`; v5: the
#: design spaces in one order, `design_space_key`; v6: the runner times candidates with one thread per
#: core, backends/tvm.py `size_thread_pool`, where TVM's default gave a 2-core machine one).
TUNING_LAYOUT = "tvm-metaschedule-replay-trace-v6"
#: Seeds are drawn in [1, SEED_RANGE]; MetaSchedule takes any positive seed.
SEED_RANGE = 2**30 - 1
DATABASE_FILES = ("database_workload.json", "database_tuning_record.json")
TUNER = (f"MetaSchedule replay-trace ({TUNING_LAYOUT}): candidates drawn at random from each task's design "
         "spaces (multi-level tiling, parallel, vectorize, unroll), seeded from its anchor and the spaces in one "
         "order, each built and timed on this machine, the fastest kept")
#: A candidate that runs longer than this is abandoned (it is not the fastest).
RUNNER_TIMEOUT_S = 30
_LOGGER = "tvm.s_tir.meta_schedule"


def _quick_stack(context: int = 1) -> list[inspect.FrameInfo]:
    """`inspect.stack()` without its search of sys.modules for each frame of the import machinery
    (see `import_tensor_intrinsics`): each frame with its file, line and that line's text."""
    del context
    frames = []
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        filename, lineno = frame.f_code.co_filename, frame.f_lineno
        line = linecache.getline(filename, lineno)
        frames.append(inspect.FrameInfo(frame, filename, lineno, frame.f_code.co_name,
                                        [line] if line else None, 0 if line else None))
        frame = frame.f_back
    return frames


#: The modules of `tvm.s_tir.tensor_intrin` that hold a target kind's intrinsics (for llvm the CPU
#: ones, whatever the CPU's architecture; for cuda its own and the dot products' dp4a); a kind not
#: named here gets the whole package.
TARGET_INTRINSICS = {"llvm": ("x86", "arm_cpu", "riscv_cpu"), "cuda": ("cuda", "dot_product_common")}
_INTRINSICS = "tvm.s_tir.tensor_intrin"


def import_tensor_intrinsics(target_kind: str) -> None:
    """Import the tensor intrinsics MetaSchedule may use for `target_kind` (TVM's name: llvm, cuda).

    MetaSchedule imports `tvm.s_tir.tensor_intrin` before its first task, and that package imports
    every target's intrinsics, 496 TVMScript functions. Each of them calls `inspect.stack()`, which
    for every frame of the import machinery (files that do not exist, `<frozen
    importlib._bootstrap>`) scans all of sys.modules: 45 to 55 s with torch loaded (TVM 0.27); the
    stack is read directly while they are imported here. Even so the package took 7.5 CPU-s on the
    2-core VM, 5.5 of them CUDA's, which a CPU target never uses: so the package is entered in
    sys.modules without running its `__init__` (MetaSchedule's own import then finds it) and only
    the target kind's modules are imported into it. Where TVM is laid out otherwise, the whole
    package is imported as before."""
    from importlib import import_module, util

    stack = inspect.stack
    inspect.stack = _quick_stack
    try:
        if _INTRINSICS not in sys.modules:
            spec = util.find_spec(_INTRINSICS)
            if spec is None or spec.submodule_search_locations is None or target_kind not in TARGET_INTRINSICS:
                import_module(_INTRINSICS)
                return
            package = util.module_from_spec(spec)
            sys.modules[_INTRINSICS] = package
            import_module("tvm.s_tir").tensor_intrin = package
        for name in TARGET_INTRINSICS.get(target_kind, ()):
            import_module(f"{_INTRINSICS}.{name}")
    finally:
        inspect.stack = stack


def _in_process_builder(folder: Path) -> Any:
    """A MetaSchedule builder that compiles each candidate in this process, one after another, into a
    folder of its own under `folder` (the runner's clean-up removes the candidate's folder). TVM's
    local builder starts a fresh pool of worker processes for every batch, each importing TVM and its
    tensor intrinsics again (the import above, unpatched there: 35 s, past its time limit)."""
    import tvm
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.builder import BuilderResult, PyBuilder
    from tvm.s_tir.transform import RemoveWeightLayoutRewriteBlock
    from tvm.support.tar import tar

    @derived_object
    class InProcessBuilder(PyBuilder):  # type: ignore[misc]
        def build(self, build_inputs: list[Any]) -> list[Any]:
            results = []
            for build_input in build_inputs:
                try:
                    mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(build_input.mod)
                    library = tvm.compile(mod, target=build_input.target)
                    path = Path(tempfile.mkdtemp(dir=folder)) / "candidate.tar"
                    library.export_library(str(path), fcompile=tar)
                    results.append(BuilderResult(str(path), None))
                except Exception as exc:  # noqa: BLE001 - a candidate that does not build is a failed trial
                    results.append(BuilderResult(None, f"{type(exc).__name__}: {exc}"[:2000]))
            return results

    return InProcessBuilder()


@contextmanager
def _quiet_tuner() -> Iterator[None]:
    """MetaSchedule logs every task's design space and a table after every batch at INFO: pages per
    task in the worker's log. Its warnings and errors still show."""
    logger = logging.getLogger(_LOGGER)
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(level)


def tune(legalized: Any, target: Any, trials_per_task: int, out: Path, scratch: Path, repeat: int = 1) -> None:
    """Tune every task of `legalized` (a Relax module after FuseOps/FuseTIR, before lowering) for
    `target`, `trials_per_task` candidates each, each candidate timed `repeat` times (their mean
    ranks it); the database goes into `out`, logs and candidates into `scratch`."""
    import_tensor_intrinsics(target.kind.name)
    from tvm.s_tir import meta_schedule as ms

    tasks = ms.relax_integration.extract_tasks(legalized, target)
    if not tasks:
        raise BackendFailed("tvm: MetaSchedule found no task to tune in the module")
    scratch.mkdir(parents=True, exist_ok=True)
    with _quiet_tuner():
        contexts, weights = _contexts(tasks)
        ms.tune.tune_tasks(
            tasks=contexts, task_weights=weights, work_dir=str(scratch),
            max_trials_global=trials_per_task * len(contexts), max_trials_per_task=trials_per_task,
            num_trials_per_iter=trials_per_task,
            builder=_in_process_builder(scratch),
            runner=ms.runner.LocalRunner(timeout_sec=RUNNER_TIMEOUT_S, evaluator_config=ms.runner.EvaluatorConfig(
                number=1, repeat=repeat, min_repeat_ms=10)),
            database=ms.database.JSONDatabase(
                path_workload=str(out / DATABASE_FILES[0]), path_tuning_record=str(out / DATABASE_FILES[1])),
            cost_model="random", task_scheduler="round-robin")
    summary = {"tasks": len(contexts), "trials_per_task": trials_per_task}
    (out / "tuning.json").write_text(json.dumps(summary))
    # Not one candidate that ran: a database of failures, which was cached and reused as tuned (a
    # noexec scratch folder, where no candidate's library can be loaded, made every one fail).
    if database_summary(out)["tasks_tuned"] == 0:
        raise BackendFailed(f"tvm: none of the {len(contexts) * trials_per_task} tuning candidates ran (built and "
                            f"loaded in {scratch}; the worker's log has MetaSchedule's reasons); nothing was cached")


def task_seed(mod: Any) -> int:
    """The seed of a task's random draws: from TVM's structural hash of the task's anchor (`anchor_block`:
    its matmul or convolution) where it has one, else of its module (its one function, which
    MetaSchedule names `main` whatever the model called it). A function gets the same seed, and the
    same candidates, in whichever module and at whichever place it is tuned; and a fused function
    gets its anchor's seed, so it draws the candidates that its anchor draws alone with fusion off."""
    import tvm_ffi

    anchor = anchor_block(mod)
    if anchor is None:
        return 1 + int(tvm_ffi.structural_hash(mod)) % SEED_RANGE
    # Buffers as free variables: the anchor's output is a parameter alone and an allocation fused.
    return 1 + int(tvm_ffi.structural_hash(anchor, map_free_vars=True)) % SEED_RANGE


def anchor_block(mod: Any) -> Any | None:
    """The block of a task's function that reduces over the most iterations (a matmul's or a
    convolution's; the first of equals), or None where no block reduces or the function cannot be
    read as blocks under a root. With the same seed, a fused function and its anchor alone draw the
    same tile sizes, unrolling and compute locations, draw by draw: the element-wise blocks fused
    after the anchor are inlined by rules that draw nothing (checked on TVM 0.27 for a linear layer's
    matmul + bias and a convolution + batch norm + ReLU, tests/backends/test_tvm.py). Where a check
    after the draw rejects a candidate on one side only, that side draws again and the two part from
    there."""
    from tvm import s_tir, tirx

    try:
        schedule = s_tir.Schedule(mod)
        blocks = [schedule.get(rv) for rv in schedule.get_child_blocks(schedule.get_sblock("root"))]
    except Exception:  # noqa: BLE001 - a function of another form keeps the seed of its whole structure
        return None
    anchor, most = None, 0
    for block in blocks:
        if not any(int(var.iter_type) == tirx.IterVar.CommReduce for var in block.iter_vars):
            continue
        iterations = 1
        for var in block.iter_vars:
            extent = var.dom.extent
            if not isinstance(extent, tirx.IntImm):
                return None  # a shape known only at run time: no size to compare
            iterations *= int(extent)
        if iterations > most:
            anchor, most = block, iterations
    return anchor


def design_space_key(trace: Any) -> tuple[int, ...]:
    """Where a design space's trace (or a candidate's, drawn from it) computes the stages it moves
    into its anchor's tiled loops: for each compute-at or reverse-compute-at, the place of the loop it
    goes under in the tiled loops' order (the trace's first reorder), -1 for a loop outside them. A
    convolution alone and fused get the same keys: its write stage at the inner tile level is (7,)
    alone (a cache of its output) and fused (its epilogue); not tiled, ()."""
    insts = list(trace.insts)
    tiled = next((list(inst.inputs) for inst in insts if inst.kind.name == "Reorder"), [])
    key = []
    for inst in insts:
        if inst.kind.name in ("ComputeAt", "ReverseComputeAt"):
            loop = inst.inputs[1]
            key.append(next((place for place, tile in enumerate(tiled) if tile.same_as(loop)), -1))
    return tuple(key)


def trace_label(trace: Any) -> str:
    """A candidate's loop structure (`design_space_key`) and draws (tile sizes, unrolling, compute
    locations) as one string: the same for the same candidate in any task, fused or alone."""
    decisions = trace.decisions
    return f"stages at {design_space_key(trace)}: " + " ".join(
        f"{inst.kind.name}={decisions[inst]}" for inst in trace.insts if inst in decisions)


def drawn_candidates(context: Any, trials: int) -> list[Any]:
    """The first `trials` candidates a fresh tuning context draws (its design spaces as its search
    strategy orders them), unbuilt: what the tests and benchmarks compare across variants."""
    context.pre_tuning(max_trials=trials, num_trials_per_iter=trials, design_spaces=context.generate_design_space(),
                       database=None, cost_model=None)
    try:
        return list(context.generate_measure_candidates() or [])
    finally:
        context.post_tuning()


def _ordered_replay_trace(inner: Any = None) -> Any:
    """MetaSchedule's replay-trace with each task's design spaces sorted by `design_space_key` (a
    stable sort: spaces of one key keep their order) before it draws from them; all else is
    replay-trace's own (`inner`, a new one by default)."""
    return _ordered_replay_trace_class()(inner)


@functools.cache
def _ordered_replay_trace_class() -> Any:
    """The search strategy class of `_ordered_replay_trace`, made once (TVM imported on first use)."""
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.search_strategy import PySearchStrategy, SearchStrategy

    @derived_object
    class OrderedReplayTrace(PySearchStrategy):  # type: ignore[misc]
        def __init__(self, inner: Any) -> None:
            self.inner = inner if inner is not None else SearchStrategy.create("replay-trace")

        def _initialize_with_tune_context(self, context: Any) -> None:
            self.inner._initialize_with_tune_context(context)

        def pre_tuning(self, max_trials: int, num_trials_per_iter: int, design_spaces: list[Any],
                       database: Any = None, cost_model: Any = None) -> None:
            spaces = sorted(design_spaces, key=lambda space: design_space_key(space.trace))
            self.inner.pre_tuning(max_trials, num_trials_per_iter, spaces, database, cost_model)

        def post_tuning(self) -> None:
            self.inner.post_tuning()

        def generate_measure_candidates(self) -> list[Any] | None:
            return self.inner.generate_measure_candidates()  # type: ignore[no-any-return]

        def notify_runner_results(self, measure_candidates: list[Any], results: list[Any]) -> None:
            self.inner.notify_runner_results(measure_candidates, results)

        def clone(self) -> Any:
            return _ordered_replay_trace(self.inner.clone())

    return OrderedReplayTrace


def _contexts(tasks: list[Any], ordered: bool = True) -> tuple[list[Any], list[float]]:
    """A tuning context per task: seeded by `task_seed`, its design spaces put in one order
    (`_ordered_replay_trace`; with `ordered` false, left in MetaSchedule's, for
    benchmarks/tvm_design_space_order.py), so the candidates drawn are the same run to run and
    variant to variant; logging to a child of MetaSchedule's logger. Its candidates are drawn in one
    thread: each of MetaSchedule's threads draws from a seed of its own and takes whichever
    candidates come free, so with two threads the same seed gave two sides different draws at times
    (a cheap step: the building and timing are not threaded by it). TVM's own helper gives each task
    a log file by reconfiguring Python's logging for the whole process (`logging.config.dictConfig`),
    which fails when a process tunes a second time (a None format string)."""
    from tvm.s_tir.meta_schedule.tune_context import TuneContext

    logger = logging.getLogger(f"{_LOGGER}.fusionbench")
    contexts, weights = [], []
    for task in tasks:
        if task.mod.attrs.get("tirx.is_scheduled", False):
            continue  # already scheduled by its lowering: nothing to search
        contexts.append(TuneContext(mod=task.dispatched[0], target=task.target, space_generator="post-order-apply",
                                    search_strategy=_ordered_replay_trace() if ordered else "replay-trace",
                                    task_name=task.task_name, logger=logger,
                                    rand_state=task_seed(task.dispatched[0]), num_threads=1).clone())
        weights.append(task.weight)
    if not contexts:
        raise BackendFailed("tvm: every task MetaSchedule found is already scheduled; nothing to tune")
    return contexts, weights


def database_sha256(entry: Path) -> str:
    """The hash of a database's two files, in order."""
    digest = hashlib.sha256()
    for name in DATABASE_FILES:
        digest.update((entry / name).read_bytes())
    return digest.hexdigest()


def database_summary(entry: Path) -> dict[str, int]:
    """Tasks searched, tasks with a candidate that built and ran, and candidates measured in all."""
    try:
        summary = json.loads((entry / "tuning.json").read_text())
        records = [json.loads(line) for line in (entry / DATABASE_FILES[1]).read_text().splitlines() if line.strip()]
    except (OSError, ValueError) as exc:
        raise BackendFailed(f"tvm: the tuning database {entry} cannot be read: {exc}") from exc
    # A record is [workload index, [trace, run seconds, target, args]]; a candidate that failed to
    # build or run has no run seconds (MetaSchedule records it as a failed run, 1e10 s).
    timed = [record for record in records if _ran(record)]
    return {"tasks": int(summary["tasks"]), "tasks_tuned": len({record[0] for record in timed}),
            "trials": len(records)}


def _ran(record: Any) -> bool:
    try:
        seconds = record[1][1]
    except (IndexError, TypeError):
        return False
    return isinstance(seconds, list) and bool(seconds) and all(isinstance(s, (int, float)) and s < 1e9 for s in seconds)


def apply_database(entry: Path, target_kind: str) -> Any:
    """A pass that replaces each tuned task's PrimFunc by its best schedule in the database at `entry`
    (the others stay as they are), and the database, which must be the current one while it runs."""
    from tvm import relax
    from tvm.s_tir import meta_schedule as ms

    import_tensor_intrinsics(target_kind)
    database = ms.database.JSONDatabase(
        path_workload=str(entry / DATABASE_FILES[0]), path_tuning_record=str(entry / DATABASE_FILES[1]),
        allow_missing=False)
    return relax.transform.MetaScheduleApplyDatabase(enable_warning=False), database
