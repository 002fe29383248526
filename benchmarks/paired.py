"""Whether timing fusion on and off in one process, interleaved, gives a steadier speedup than
timing them in separate processes as the harness's cells do, measured side by side in one run.

For each model and backend (random weights, batch 1 by default, at the input size the model
catalogue gives the model unless `--input-size` gives one, the model's samples walked in order as
the harness's timing does), round after round:
- separate: one fresh process builds fusion on and times it, then another builds fusion off and
  times it; the speedup is the ratio of the two medians (off / on), as the harness reports it;
- paired: one fresh process builds both and times them in alternating windows (on, off, on, ...),
  so a drift of the machine hits both; the speedup is the ratio of the two medians over all windows.
Both time the same number of calls per variant. Printed: the machine, each method's speedups over the rounds
(min / median / max), their spread (max / min - 1) and the median on and off times over the rounds,
and the ratio of the two spreads. A spread is over processes a few seconds apart; cells of a real
run are minutes apart and drift more. The processes run in the caller's environment (glibc's
default allocator, the backend's default threads), not a cell's whitelisted one.

Usage: .venv/bin/python benchmarks/paired.py [--pairs onnxruntime:resnet18,...] [--rounds 4]
       [--windows 10] [--calls 10] [--batch 1] [--input-size N] [--option NAME=VALUE ...] [--json OUT]
       (--input-size: every model's; by default each model's own, as the model catalogue gives it)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from harness.errors import HarnessError
from harness.models.catalog import INPUT_SIZE_FLOOR, all_models, default_input_size, input_size_refusal
from harness.run.system import machine_line

REPO = Path(__file__).resolve().parents[1]
DEFAULT_PAIRS = "onnxruntime:resnet18,onnxruntime:mobilenet_v3_small"
FUSION = ("on", "off")


def _child(backend_name: str, model_name: str, variants: list[str], windows: int, calls: int, batch: int,
           input_size: int, options: dict[str, Any], cache: Path) -> dict[str, Any]:
    """In a fresh process: build each variant, then time them in alternating windows of `calls`.
    `cache` is shared by the run's processes, as a run's cells share theirs: one export per model."""
    import torch

    from harness import registry
    from harness.models import zoo

    torch.set_grad_enabled(False)
    model = zoo.build_model(model_name, pretrained=False, seed=0, device="cpu", dtype="fp32")
    samples = zoo.make_samples(64, seed=0, model=model_name,
                               input_size=input_size, device="cpu", dtype="fp32")
    batches = [torch.cat(samples[i:i + batch]) for i in range(0, len(samples) - batch + 1, batch)]
    backend = registry.load(backend_name)()
    with tempfile.TemporaryDirectory(prefix="fusionbench-paired-") as work:
        prepared = {}
        for fusion in variants:
            prepared[fusion] = backend.prepare(
                model, batches[0], device="cpu", dtype="fp32", variant=backend.variant(fusion, options),
                workdir=Path(work), cache_dir=cache / backend_name)
            for i in range(5):  # warm-up
                prepared[fusion](batches[i % len(batches)])
        times: dict[str, list[int]] = {fusion: [] for fusion in variants}
        call = 0
        for _ in range(windows):
            for fusion in variants:
                run = prepared[fusion]
                for _ in range(calls):
                    start = time.perf_counter_ns()
                    run(batches[call % len(batches)])
                    times[fusion].append(time.perf_counter_ns() - start)
                    call += 1
        for run in prepared.values():
            run.close()
    return {fusion: statistics.median(t) for fusion, t in times.items()}


def input_size_of(model: str, asked: int | None) -> int:
    """The input size `model` is timed at: `asked`, or the one the model catalogue gives it (a 224-pixel
    image for every model failed pattern_matmul_relu's 1024-feature matmul). A model the zoo lacks gets
    the floor, unread: the child refuses the model before it makes an input."""
    return asked if asked is not None else default_input_size(model) or INPUT_SIZE_FLOOR


def _spawn(args: argparse.Namespace, backend: str, model: str, variants: list[str]) -> dict[str, float]:
    command = [sys.executable, __file__, "--child", backend, model, ",".join(variants), str(args.windows),
               str(args.calls), str(args.batch), str(input_size_of(model, args.input_size)), json.dumps(args.options),
               str(args.cache)]
    # The repository first, then whatever the caller put on the path (a plugin backend's site).
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)}
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode == 2:  # the harness refused what it was given (the child's one line): no traceback to show
        sys.exit(f"paired: {backend}:{model}: {done.stderr.strip().splitlines()[-1] if done.stderr.strip() else 'exit 2'}")
    if done.returncode != 0:
        sys.exit(f"{backend} {model} {variants}: the timing process failed:\n{done.stderr[-3000:]}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _spread(values: list[float]) -> float:
    return max(values) / min(values) - 1


def _measure_pair(args: argparse.Namespace, backend: str, model: str) -> dict[str, Any]:
    """Both methods, round after round (the paired process's order alternating)."""
    medians: dict[str, list[dict[str, float]]] = {"separate": [], "paired": []}
    for number in range(args.rounds):
        print(f"  {backend}:{model}: round {number + 1} of {args.rounds}", file=sys.stderr, flush=True)
        medians["separate"].append({**_spawn(args, backend, model, ["on"]), **_spawn(args, backend, model, ["off"])})
        order = list(FUSION) if number % 2 == 0 else list(reversed(FUSION))
        medians["paired"].append(_spawn(args, backend, model, order))
    entry: dict[str, Any] = {"input_size": input_size_of(model, args.input_size), "medians_ns": medians}
    for method, rounds in medians.items():
        entry[method] = [m["off"] / m["on"] for m in rounds]
        entry[f"{method}_spread"] = _spread(entry[method])
    paired = entry["paired_spread"]
    entry["separate_spread_over_paired"] = entry["separate_spread"] / paired if paired > 0 else float("inf")
    return entry


def _print_pair(name: str, entry: dict[str, Any]) -> None:
    for method in ("separate", "paired"):
        values = sorted(entry[method])
        on_ms = statistics.median(m["on"] for m in entry["medians_ns"][method]) / 1e6
        off_ms = statistics.median(m["off"] for m in entry["medians_ns"][method]) / 1e6
        print(f"{name:34} {method:9} {values[0]:14.3f} / {statistics.median(values):8.3f} / {values[-1]:8.3f}"
              f"{'':16} {entry[method + '_spread'] * 100:6.1f}%   on {on_ms:.2f} ms, off {off_ms:.2f} ms")
    print(f"{name:34} spread separate / paired: {entry['separate_spread_over_paired']:.2f}x")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        backend, model, variants, windows, calls, batch, size, options, cache = sys.argv[2:11]
        try:
            print(json.dumps(_child(backend, model, variants.split(","), int(windows), int(calls), int(batch), int(size),
                                    json.loads(options), Path(cache))))
        except HarnessError as error:  # an unknown backend, model or option: expected, so one line (exit 2)
            print(error, file=sys.stderr)
            sys.exit(2)
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", default=DEFAULT_PAIRS, help="backend:model,... (default: %(default)s)")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--windows", type=int, default=10, help="windows per variant in a process")
    parser.add_argument("--calls", type=int, default=10, help="timed calls per window")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--input-size", type=int, help="every model's input size (default: each model's own)")
    parser.add_argument("--option", action="append", default=[], metavar="NAME=VALUE",
                        help="a backend option for both variants, its value read as YAML (repeatable)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    args.options = {}
    for item in args.option:
        name, sep, value = item.partition("=")
        if not sep or not name:
            parser.error(f"--option: {item!r} is not NAME=VALUE")
        args.options[name] = yaml.safe_load(value)
    counts = (args.rounds, args.windows, args.calls, args.batch, *([] if args.input_size is None else [args.input_size]))
    if min(counts) < 1 or args.rounds < 2:
        parser.error("--rounds must be at least 2, and the other counts at least 1")
    figures: dict[str, Any] = {"machine": machine_line(), "cpus": os.cpu_count(),
                               "rounds": args.rounds, "windows": args.windows, "calls": args.calls,
                               "batch": args.batch, "input_size": args.input_size, "options": args.options,
                               "pairs": {}}
    pairs = [tuple(pair.partition(":")[::2]) for pair in args.pairs.split(",")]
    for (backend, model), text in zip(pairs, args.pairs.split(","), strict=True):
        if not backend or not model:
            parser.error(f"--pairs: {text!r} is not backend:model")
        refusal = input_size_refusal(model, args.input_size) if args.input_size is not None and model in all_models() else None
        if refusal:  # before any process: its child would end in the model's shape error
            parser.error(f"--input-size: {refusal}")
    print(f"machine: {figures['machine']}")
    print(f"{'backend model':34} {'method':9} {'speedup off/on (min / median / max of rounds)':48} {'spread':>7}")
    with tempfile.TemporaryDirectory(prefix="fusionbench-paired-cache-") as cache:
        args.cache = Path(cache)
        for backend, model in pairs:
            entry = _measure_pair(args, backend, model)
            _print_pair(f"{backend}:{model}", entry)
            figures["pairs"][f"{backend}:{model}"] = entry
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
