"""Whether a fused TVM function and its anchor alone get the same candidates, loop structure and all,
with the design spaces in MetaSchedule's order and in the backend's, side by side in one run.

A fused task is seeded from its anchor (its matmul or convolution, backends/tvm_tuning.py
`task_seed`), so it draws the tile sizes its anchor draws alone with fusion off. Each candidate's
first draw picks one of the task's design spaces by its place in the list; MetaSchedule lists a
convolution's alone (its output stage tiled at the inner level, the outer one, not tiled) in
another order than the fused function's, so the same draw can give the two sides different loop
structures. The backend sorts the design spaces (`design_space_key`) before the draws.

For a torchvision model (random weights) at `--batch` and the input size the model catalogue gives
it (224 pixels for most, 299 for inception_v3), each fused task of fusion on whose anchor is
a task of fusion off (the same seed; `--tasks` keeps those whose names hold one of its words)
draws `--trials` candidates on both sides, once with MetaSchedule's order and once with the
backend's. Each candidate is built and timed on this machine (TVM's time evaluator, the median of
`--repeat` runs of at least 20 ms). After a line naming the model, its batch and input size and
the machine, per task and order it prints each candidate's structure on
both sides, the fused time, the anchor's time alone and alone / fused (above 1: the fused function
is faster; the epilogue fused in is cheap, so a pair that runs the same schedule stays near 1).
The last lines give, per order, the candidates whose structures differ and the spread of alone /
fused (min / median / max).

Usage: .venv/bin/python benchmarks/tvm_design_space_order.py [--model resnet18] [--batch 1]
       [--trials 4] [--repeat 5] [--tasks conv2d3,conv2d14]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet18", help="a torchvision classification model")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--trials", type=int, default=4, help="candidates drawn per task")
    parser.add_argument("--repeat", type=int, default=5, help="timed runs of each candidate (their median)")
    parser.add_argument("--tasks", default="", help="comma-separated words: keep the fused tasks whose names hold one")
    args = parser.parse_args()
    if min(args.batch, args.trials, args.repeat) < 1:
        parser.error("--batch, --trials and --repeat must be at least 1")
    from harness.models.catalog import CLASSIFICATION_MODELS

    if args.model not in CLASSIFICATION_MODELS:
        parser.error(f"--model: {args.model!r} is no torchvision classification model; `fusionbench models` lists them")
    return args


def _tasks(model: Any, example: Any, fusion: str) -> tuple[list[Any], Any]:
    """MetaSchedule's tasks of `model` compiled by the TVM backend with `fusion`, and the target."""
    from tvm.s_tir import meta_schedule as ms

    from backends import tvm as tvm_backend

    options = tvm_backend._checked_options(tvm_backend.TVMBackend.variant(fusion, {"tuning_trials": 2}), "cpu")
    target = tvm_backend._target("cpu", options)
    legalized = tvm_backend._legalized(model, example, target, fusion, options)
    return ms.relax_integration.extract_tasks(legalized, target), target


def _milliseconds(candidate: Any, target: Any, repeat: int) -> float:
    """One candidate built and run on random inputs: the median of `repeat` timed runs, in ms."""
    import numpy as np
    import tvm

    device = tvm.cpu()
    library = tvm.compile(candidate.sch.mod, target=target)
    rng = np.random.default_rng(0)
    arguments = [tvm.runtime.tensor(rng.random([int(n) for n in info.shape]).astype(str(info.dtype)), device)
                 for info in candidate.args_info]
    timer = library.mod.time_evaluator("main", device, number=1, repeat=repeat, min_repeat_ms=20)
    return float(statistics.median(timer(*arguments).results)) * 1e3


def main() -> int:
    args = _arguments()
    import torch
    import torchvision

    from backends import tvm as tvm_backend
    from backends import tvm_tuning
    from harness.models.catalog import CLASSIFICATION_MODELS
    from harness.run.system import machine_line

    tvm_backend.size_thread_pool(0)  # candidates run on the pool a cell's kernels run on: a thread per core
    tvm_tuning.import_tensor_intrinsics("llvm")
    torch.manual_seed(0)
    model = getattr(torchvision.models, args.model)(weights=None).eval()
    # The size the model is run at (a 224-pixel image for every model took inception_v3's tasks at
    # another size than a cell's, and vit_h_14 takes 518 pixels only).
    size = CLASSIFICATION_MODELS[args.model][1]
    example = torch.randn(args.batch, 3, size, size)
    on_tasks, target = _tasks(model, example, "on")
    off_tasks, _ = _tasks(model, example, "off")
    words = [word for word in args.tasks.split(",") if word]
    print(f"{args.model} at batch {args.batch}, {size}x{size}: {args.trials} candidates a fused task and its anchor alone, "
          f"each the median of {args.repeat} runs; {machine_line()}")
    print(f"{'order':<14}{'fused task':<48}{'#':>2}  {'stages fused / alone':<24}{'fused ms':>10}{'alone ms':>10}"
          f"{'alone/fused':>12}")
    # Fusion off's tasks by seed: a fused task's anchor alone is the first of its seed but itself. A
    # context is drawn from once (its draws move its state on), so each pair below gets a fresh one.
    off_by_name = {task.task_name: task for task in off_tasks}
    by_seed: dict[int, list[Any]] = {}
    for context in tvm_tuning._contexts(off_tasks)[0]:
        by_seed.setdefault(context.rand_state, []).append(off_by_name[context.task_name])
    summary: dict[str, list[tuple[bool, float]]] = {}
    for order, ordered in (("MetaSchedule", False), ("backend", True)):
        fused_contexts, _ = tvm_tuning._contexts(on_tasks, ordered=ordered)
        for fused in fused_contexts:
            if not fused.task_name.startswith("fused_") or (words and not any(w in fused.task_name for w in words)):
                continue
            anchor = next((task for task in by_seed.get(fused.rand_state, []) if task.task_name != fused.task_name), None)
            if anchor is None:
                continue  # its anchor is no task of fusion off (a function fusion on left whole)
            alone = tvm_tuning._contexts([anchor], ordered=ordered)[0][0]
            drawn = zip(tvm_tuning.drawn_candidates(fused, args.trials), tvm_tuning.drawn_candidates(alone, args.trials))
            for index, (on, off) in enumerate(drawn):
                key_on, key_off = tvm_tuning.design_space_key(on.sch.trace), tvm_tuning.design_space_key(off.sch.trace)
                fused_ms, alone_ms = _milliseconds(on, target, args.repeat), _milliseconds(off, target, args.repeat)
                summary.setdefault(order, []).append((key_on != key_off, alone_ms / fused_ms))
                print(f"{order:<14}{fused.task_name[:46]:<48}{index:>2}  {f'{key_on} / {key_off}':<24}"
                      f"{fused_ms:>10.2f}{alone_ms:>10.2f}{alone_ms / fused_ms:>11.2f}x", flush=True)
    if not summary:
        print("no fused task with its anchor alone among fusion off's tasks" + (f" matching {args.tasks}" if words else ""))
        return 1
    for order, pairs in summary.items():
        ratios = sorted(ratio for _, ratio in pairs)
        print(f"{order} order: {sum(apart for apart, _ in pairs)} of {len(pairs)} candidates in other structures "
              f"fused and alone; alone / fused {ratios[0]:.2f}x / {statistics.median(ratios):.2f}x / {ratios[-1]:.2f}x "
              "(min / median / max)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
