"""What glibc's allocator settings do to CPU figures, measured side by side in one run.

Each model runs eagerly (random weights, batch 8, at the input size the model catalogue gives it
by default: 224 pixels for most torchvision models, 1024 features for pattern_matmul_relu; the 64
samples walked in order as the harness's timing does) in a fresh process per allocator setting
(harness/allocator.py: `system`, glibc's defaults, and `steady`), the settings interleaved round
after round so a drift of the machine hits both. Per process: the median and CV of the timed calls
and the page faults per call. Printed: the machine, each setting's median over the rounds (min,
median, max), and the ratio system / steady of the medians with the model's input size; faults per
call say why.

Usage: .venv/bin/python benchmarks/allocator.py [--models resnet18,...] [--rounds 3] [--calls 40] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

from harness import allocator
from harness.models.catalog import all_models
from harness.run.system import machine_line

from rounds import warn_if_one_round

DEFAULT_MODELS = ("resnet18", "mobilenet_v3_small", "efficientnet_b0")
SETTINGS: tuple[allocator.Allocator, ...] = ("system", "steady")

LOOP = """
import json, resource, statistics, sys, time
import torch
from harness.models import zoo
name, calls, input_size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
torch.set_grad_enabled(False)
model = zoo.build_model(name, pretrained=False, seed=0, device="cpu", dtype="fp32")
samples = zoo.make_samples(64, seed=0, model=name, input_size=input_size,
                           device="cpu", dtype="fp32")
batches = [torch.cat(samples[i:i + 8]) for i in range(0, 64, 8)]
for i in range(5):
    model(batches[i % 8])
times = []
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for i in range(calls):
    start = time.perf_counter_ns()
    model(batches[i % 8])
    times.append(time.perf_counter_ns() - start)
faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
print(json.dumps({"median_ns": statistics.median(times), "cv": statistics.stdev(times) / statistics.mean(times),
                  "faults_per_call": faults / calls}))
"""


def one(model: str, setting: allocator.Allocator, calls: int, input_size: int) -> dict[str, Any]:
    """The figures of one timing process: `calls` timed calls of `model` at `input_size` under `setting`."""
    env = {k: v for k, v in os.environ.items() if k != allocator.VARIABLE}
    env.update(item.split("=", 1) for item in allocator.environment(setting))
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1])
    done = subprocess.run([sys.executable, "-c", LOOP, model, str(calls), str(input_size)], env=env, capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:  # its stderr says why, where CalledProcessError would show the loop's code instead
        sys.exit(f"allocator: {model} under `{setting}`: the timing process exited {done.returncode}:\n"
                 f"{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    if args.rounds < 1 or args.calls < 2:  # a CV needs two calls
        parser.error("--rounds must be at least 1 and --calls at least 2")
    warn_if_one_round("allocator", args.rounds)
    unknown = [name for name in args.models.split(",") if name not in all_models()]
    if unknown:
        parser.error(f"--models: unknown model {', '.join(map(repr, unknown))}; `fusionbench models` lists the zoo's")
    if platform.libc_ver()[0] != "glibc":
        sys.exit("the allocator setting is a glibc tunable; this C library is " + (platform.libc_ver()[0] or "unknown"))
    # Each model's own input (a 224-pixel image fed to every model failed pattern_matmul_relu's 1024-feature
    # matmul, and timed efficientnet_b1 to b7 at a size they are not run at).
    input_sizes = {model: all_models()[model][1] for model in args.models.split(",")}
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for model in args.models.split(","):
        runs[model] = {s: [] for s in SETTINGS}
        for _ in range(args.rounds):
            for setting in SETTINGS:
                runs[model][setting].append(one(model, setting, args.calls, input_sizes[model]))
    figures: dict[str, Any] = {"machine": machine_line(), "cpus": os.cpu_count(),
                               "libc": " ".join(platform.libc_ver()), "rounds": args.rounds, "calls": args.calls,
                               "models": {}}
    print(f"machine: {figures['machine']}; {figures['libc']}")
    print(f"{'model':20} {'setting':8} {'median ms (min/median/max of rounds)':38} {'CV in a run':12} "
          f"{'faults/call':>11}")
    for model, by_setting in runs.items():
        entry: dict[str, Any] = {"input_size": input_sizes[model]}
        for setting, results in by_setting.items():
            medians = sorted(r["median_ns"] / 1e6 for r in results)
            entry[setting] = {"median_ms": medians, "cv": [r["cv"] for r in results],
                              "faults_per_call": [r["faults_per_call"] for r in results]}
            print(f"{model:20} {setting:8} {medians[0]:8.1f} / {statistics.median(medians):8.1f} / "
                  f"{medians[-1]:8.1f}{'':12} {statistics.median(r['cv'] for r in results) * 100:5.1f}%"
                  f"{'':6} {statistics.median(r['faults_per_call'] for r in results):11.0f}")
        ratio = statistics.median(entry["system"]["median_ms"]) / statistics.median(entry["steady"]["median_ms"])
        entry["system_over_steady"] = ratio
        figures["models"][model] = entry
        print(f"{model:20} system / steady: {ratio:.2f}x (input size {input_sizes[model]})")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
