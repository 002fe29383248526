"""How much of a TVM fusion-on/off ratio on CPU is the luck of MetaSchedule's random draws, measured
on one linear layer (x @ W + b, the shape of vit_b_16's first MLP layer by default) in one run.

The TVM backend tunes each task with `tuning_trials` candidates drawn at random from its design
space and keeps the fastest (backends/tvm_tuning.py; 2 by default). With fusion on, the layer is one
task (the matmul with its bias add fused in); with fusion off, two (the matmul, the add). Each
variant is tuned here once with `--trials` candidates a task (the backend's own tuning, cache and
compile), and from the candidates' times (MetaSchedule's runner: the mean of `--repeat` timed runs
each, one by default as in the backend's `tuning_repeat`, as recorded in the database) it prints, per task:
- n, its distinct candidates (an element-wise task draws nothing: one), and their times (min /
  median / max): the spread of the design space;
- the fastest of 2 candidates, over every pair of the candidates drawn (10th / 50th / 90th
  percentile): what the default budget keeps, draw by draw;
- the fastest of all.
Then the fusion speedup (fusion off's matmul + add over fusion on's fused kernel): at the fastest of
2 (its range pairs one side's 10th percentile with the other's 90th: a lucky draw against an
unlucky one) and at the fastest of all; for each draw both sides have (a fused task is seeded from
its anchor, so it draws the matmul's candidates), that one schedule's speedup, and for every two
such draws the speedup of each side's fastest of the two (what the default budget compares); and, to check the
runner's figures, both variants compiled with their fastest and timed in the backend's own virtual
machine, kernel by kernel (`--calls` inferences, median).

Usage: .venv/bin/python benchmarks/tvm_tuning_draws.py [--batch 1] [--tokens 197] [--features 768]
       [--hidden 3072] [--trials 32] [--repeat 1] [--calls 10] [--json OUT]
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--tokens", type=int, default=197, help="rows per sample (vit_b_16: 197)")
    parser.add_argument("--features", type=int, default=768, help="the layer's input width")
    parser.add_argument("--hidden", type=int, default=3072, help="the layer's output width")
    parser.add_argument("--trials", type=int, default=32, help="candidates drawn per task (at least 2)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="timed runs of each candidate (the backend's tuning_repeat), their mean ranks it")
    parser.add_argument("--calls", type=int, default=10, help="timed inferences of each compiled variant")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    if args.trials < 2 or min(args.repeat, args.calls, args.batch, args.tokens, args.features, args.hidden) < 1:
        parser.error("--trials must be at least 2, --repeat, --calls and the shape at least 1")
    return args


def _task_label(mod: Any) -> str:
    """A task's blocks by name ("matmul", "T_add"; "matmul+T_add" when fused), from its script."""
    import re

    names = re.findall(r'T\.s?block\("([^"]+)"\)', mod.script())
    return "+".join(name for name in names if name != "root") or "?"


def _candidates(database: Path) -> dict[str, dict[str, float]]:
    """Each task's candidates that built and ran: their loop structure and draws (backends/tvm_tuning.py
    `trace_label`, the same string for the same candidate in any task) and times in seconds (the
    runner's mean)."""
    from tvm.s_tir import meta_schedule as ms

    from backends import tvm_tuning

    tvm_tuning.import_tensor_intrinsics("llvm")
    records = ms.database.JSONDatabase(
        path_workload=str(database / tvm_tuning.DATABASE_FILES[0]),
        path_tuning_record=str(database / tvm_tuning.DATABASE_FILES[1]), allow_missing=False).get_all_tuning_records()
    by_task: dict[str, dict[str, float]] = {}
    for record in records:
        seconds = [float(s) for s in (record.run_secs or [])]
        if seconds and all(s < 1e9 for s in seconds):  # a failed candidate is recorded at 1e10 s
            by_task.setdefault(_task_label(record.workload.mod), {})[tvm_tuning.trace_label(record.trace)] = (
                statistics.fmean(seconds))
    return by_task


def _deciles(values: list[float]) -> list[float]:
    """The 10th, 50th and 90th percentiles (interpolated, as the harness's timing summaries are)."""
    from harness.stats.summary import percentile

    ordered = sorted(values)
    return [percentile(ordered, q) for q in (10, 50, 90)]


def _best_of_two(times: list[float]) -> list[float]:
    return [min(a, b) for a, b in itertools.combinations(times, 2)]


def _tuned_and_timed(fusion: str, args: argparse.Namespace, cache: Path) -> tuple[dict[str, dict[str, float]], dict[str, float]]:
    """Tune the layer with `fusion` at `--trials` candidates a task; its candidates' times by task, and
    its compiled kernels' median times (ns) in the virtual machine."""
    import torch

    from backends.tvm import TVMBackend, TVMOptions, _target, _tuning_entry
    from harness.contract import Variant

    torch.manual_seed(0)
    model = torch.nn.Linear(args.features, args.hidden).eval()
    example = torch.randn(args.batch, args.tokens, args.features)
    backend = TVMBackend()
    variant = Variant(fusion=fusion, options=TVMOptions(tuning_trials=args.trials, tuning_repeat=args.repeat))
    with tempfile.TemporaryDirectory() as work:
        backend.tune(model, example, device="cpu", dtype="fp32", variant=variant, workdir=Path(work), cache_dir=cache)
        prepared = backend.prepare(model, example, device="cpu", dtype="fp32", variant=variant, workdir=Path(work),
                                   cache_dir=cache)
    try:
        by_kernel: dict[str, list[float]] = {}
        for _ in range(args.calls):
            for name, ns in prepared.cpu_kernel_times(example).calls:
                by_kernel.setdefault(name, []).append(ns)
    finally:
        prepared.close()
    database = _tuning_entry(model, example, _target("cpu", variant.options), "fp32", fusion, variant.options, cache)
    return _candidates(database), {name: statistics.median(times) for name, times in by_kernel.items()}


def main() -> int:
    from harness.run.system import machine_line

    args = _arguments()
    with tempfile.TemporaryDirectory() as cache_text:
        cache = Path(cache_text)
        on_tasks, on_kernels = _tuned_and_timed("on", args, cache / "on")
        off_tasks, off_kernels = _tuned_and_timed("off", args, cache / "off")
    print(f"x @ W + b: x {args.batch}x{args.tokens}x{args.features}, W {args.features}x{args.hidden}; "
          f"{args.trials} candidates a task, each timed {args.repeat} time(s); {machine_line()}")
    print(f"{'fusion':<7}{'task':<14}{'n':>4}  {'every candidate ms (min / median / max)':<42}"
          f"{'fastest of 2 ms (p10 / p50 / p90)':<36}{'fastest ms':>10}")
    figures: dict[str, Any] = {"shape": [args.batch, args.tokens, args.features, args.hidden], "trials": args.trials,
                               "repeat": args.repeat, "tasks": {}}
    for fusion, tasks in (("on", on_tasks), ("off", off_tasks)):
        for label, drawn in sorted(tasks.items()):
            ms = [t * 1e3 for t in drawn.values()]
            pairs = _best_of_two(ms) if len(ms) >= 2 else ms
            row = {"n": len(ms), "every": [min(ms), statistics.median(ms), max(ms)],
                   "best_of_2": _deciles(pairs), "best": min(ms)}
            figures["tasks"][f"{fusion} {label}"] = row
            figures.setdefault("candidates_ms", {})[f"{fusion} {label}"] = {d: t * 1e3 for d, t in drawn.items()}
            every = " / ".join(f"{v:.2f}" for v in row["every"])
            two = " / ".join(f"{v:.2f}" for v in row["best_of_2"])
            print(f"{fusion:<7}{label:<14}{len(ms):>4}  {every:<42}{two:<36}{row['best']:>10.2f}")
    fused_label = next((label for label in on_tasks if "+" in label), None)
    blocks = fused_label.split("+") if fused_label is not None else []
    parts = [figures["tasks"].get(f"off {block}") for block in blocks]
    if fused_label is None or any(part is None for part in parts):
        print("the tasks were not one fused kernel against its parts: no speedup to print", file=sys.stderr)
        return 1
    fused = figures["tasks"][f"on {fused_label}"]
    # The range pairs the sides' percentiles: low = off's p10 over on's p90 (a lucky unfused draw
    # against an unlucky fused one), high = off's p90 over on's p10.
    at_two = [sum(p["best_of_2"][i] for p in parts) / fused["best_of_2"][2 - i] for i in range(3)]
    at_all = sum(p["best"] for p in parts) / fused["best"]
    # The same draw on both sides (a fused task is seeded from its anchor, backends/tvm_tuning.py):
    # the anchor's time (the first block, the matmul) plus its epilogue's (the other parts' medians)
    # over the fused kernel's.
    epilogue = sum(p["every"][1] for p in parts[1:])
    fused_drawn, anchor_drawn = on_tasks[fused_label], off_tasks[blocks[0]]
    shared = [d for d in fused_drawn if d in anchor_drawn]
    paired = [(anchor_drawn[d] * 1e3 + epilogue) / (fused_drawn[d] * 1e3) for d in shared]
    # What the default budget now compares: the fastest of the same 2 draws on each side.
    paired_two = [(min(anchor_drawn[a], anchor_drawn[b]) * 1e3 + epilogue) / (min(fused_drawn[a], fused_drawn[b]) * 1e3)
                  for a, b in itertools.combinations(shared, 2)]
    on_ns, off_ns = sum(on_kernels.values()), sum(off_kernels.values())
    figures.update(speedup_best_of_2=at_two, speedup_best=at_all, paired_speedups=paired,
                   paired_best_of_2=_deciles(paired_two) if paired_two else None,
                   vm_on_kernels_ns=on_kernels,
                   vm_off_kernels_ns=off_kernels, vm_speedup=off_ns / on_ns)
    print(f"fusion speedup (off / on), fastest of 2: {at_two[1]:.2f}x (range {at_two[0]:.2f}x to {at_two[2]:.2f}x); "
          f"fastest of {args.trials}: {at_all:.2f}x")
    if not paired:
        print("no draw is on both sides: the fused task was not seeded from its anchor")
    else:
        print(f"the same draw on both sides ({len(paired)} of {len(fused_drawn)} candidates): fusion speedup "
              f"{min(paired):.2f}x / {statistics.median(paired):.2f}x / {max(paired):.2f}x (min / median / max)")
    if paired_two:
        low, mid, high = figures["paired_best_of_2"]
        print(f"the fastest of the same 2 draws on each side (every pair): fusion speedup {low:.2f}x / {mid:.2f}x / "
              f"{high:.2f}x (p10 / p50 / p90)")
    print(f"compiled with the fastest of {args.trials}, in the VM ({args.calls} calls, median): fusion on "
          f"{on_ns / 1e6:.2f} ms ({', '.join(on_kernels)}), off {off_ns / 1e6:.2f} ms ({', '.join(off_kernels)}): "
          f"{off_ns / on_ns:.2f}x")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
