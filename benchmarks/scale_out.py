"""Cells per hour for one scenario file, run three ways side by side on this machine through the
real CLI: one cell at a time here (the default), on a local Ray instance with one cell per node
(`--cpus-per-cell` = all cores: what Ray adds per cell), and on Ray as many at a time as it has
room for (`--cpus-per-cell 1`).

Every run uses the same warm artifact cache (one warm-up run first, not counted), so compile time
is the cache's, not the first compile's. Each round runs the three ways, in the other order in
every second round, so a drift of the machine hits all three. Prints the machine, then per way: the
median wall time and cells run over the rounds, cells per hour and its ratio to the serial run's of
the same round (min / median / max of the rounds); then Ray's overhead per cell against the serial
run (median, min and max of the rounds).

Usage: .venv/bin/python benchmarks/scale_out.py [--scenario scenarios/smoke.yaml] [--rounds 3] [--json OUT.json]
       [--quick]    (`--quick`: a tiny sweep of the null and eager backends, a smoke test of the benchmark itself)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness.run.system import machine_line

from rounds import spread, warn_if_one_round

REPO = Path(__file__).resolve().parents[1]
QUICK = """
models: [{name: resnet18, input_size: 32}]
backends: [null, eager]
scenarios: [SingleStream]
loadgen: {min_duration_s: 0.3}
timing: {warmup_iters: 2, min_iters: 10, min_time_s: 0.2, max_warmup_s: 0.5}
"""
SERIAL = "serial (local, 1 job)"


def run(scenario: Path, out: Path, cache: Path, *extra: str) -> dict[str, Any]:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "harness.cli", "run", str(scenario), "--out", str(out),
                           "--cache-dir", str(cache), "--device", "cpu", *extra],
                          cwd=REPO, capture_output=True, text=True, timeout=7200)
    wall = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise SystemExit(f"run {' '.join(extra) or 'serial'} exited {done.returncode}: {done.stderr[-2000:]}")
    (bundle,) = [p for p in out.iterdir() if p.is_dir()]
    cells = [json.loads(p.read_text()) for p in (bundle / "cells").glob("*.json")]
    ran = [c for c in cells if c["status"] != "skipped"]
    return {"wall_s": wall, "cells": len(cells), "cells_run": len(ran),
            "cells_per_hour": 3600 * len(ran) / wall if ran else 0.0,
            "statuses": {s: sum(c["status"] == s for c in cells) for s in {c["status"] for c in cells}}}


def summarise(rounds: list[dict[str, dict[str, Any]]], whole: str) -> tuple[dict[str, dict[str, Any]], dict[str, float]]:
    """Each way's rounds and the spread of its figures over them, each round's throughput set against
    the serial run's of the same round (a drift between rounds moves both alike); and the overhead
    per cell of way `whole` (Ray, one cell at a time) against serial over the rounds."""
    ways: dict[str, dict[str, Any]] = {}
    for name in rounds[0]:
        runs = [one[name] for one in rounds]
        ratios = [run["cells_per_hour"] / one[SERIAL]["cells_per_hour"] if one[SERIAL]["cells_per_hour"] else 0.0
                  for run, one in zip(runs, rounds)]
        ways[name] = {"rounds": runs, "wall_s": spread([run["wall_s"] for run in runs]),
                      "cells_run": spread([run["cells_run"] for run in runs]),
                      "cells_per_hour": spread([run["cells_per_hour"] for run in runs]),
                      "throughput_ratio_to_serial": spread(ratios)}
    overhead = spread([(one[whole]["wall_s"] - one[SERIAL]["wall_s"]) / max(one[SERIAL]["cells_run"], 1) for one in rounds])
    return ways, overhead


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", type=Path, default=REPO / "scenarios" / "smoke.yaml")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each way, the order alternating by round")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    parser.add_argument("--quick", action="store_true", help="a tiny sweep instead (seconds)")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    if not args.quick and not args.scenario.is_file():  # before the warm-up, whose failure read as the serial run's
        parser.error(f"--scenario: {args.scenario}: no such scenario file")
    warn_if_one_round("scale_out", args.rounds)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    whole = f"ray, one cell at a time ({cores} CPUs a cell)"
    extras = {SERIAL: (), whole: ("--executor", "ray", "--cpus-per-cell", str(cores)),
              "ray, 1 CPU a cell": ("--executor", "ray", "--cpus-per-cell", "1")}
    rounds: list[dict[str, dict[str, Any]]] = []
    with tempfile.TemporaryDirectory(prefix="fusionbench-scale-out-") as tmp:
        work = Path(tmp)
        scenario = args.scenario
        if args.quick:
            scenario = work / "quick.yaml"
            scenario.write_text(QUICK)
        cache = work / "cache"
        run(scenario, work / "warm-up", cache)  # fills the artifact cache; not counted
        for number in range(args.rounds):
            order = list(extras) if number % 2 == 0 else list(extras)[::-1]
            done = {name: run(scenario, work / f"round-{number + 1}-{index}", cache, *extras[name])
                    for index, name in enumerate(order)}
            rounds.append({name: done[name] for name in extras})
    ways, overhead = summarise(rounds, whole)
    machine = machine_line()
    print(f"machine: {machine}")
    print(f"{'way':<40} {'wall s':>8} {'cells':>6} {'cells/hour (min / median / max)':>33} "
          f"{'vs serial (min / median / max)':>32}")
    for name, figures in ways.items():
        rate, ratio = figures["cells_per_hour"], figures["throughput_ratio_to_serial"]
        print(f"{name:<40} {figures['wall_s']['median']:>8.1f} {figures['cells_run']['median']:>6g} "
              f"{rate['min']:>9.1f} / {rate['median']:>9.1f} / {rate['max']:>9.1f} "
              f"{ratio['min']:>8.2f} / {ratio['median']:>8.2f} / {ratio['max']:>8.2f}")
    print(f"Ray's overhead per cell (one at a time, against serial): median {overhead['median']:+.2f} s "
          f"(min {overhead['min']:+.2f}, max {overhead['max']:+.2f}; {args.rounds} round(s))")
    if args.json:
        args.json.write_text(json.dumps({"machine": machine, "cores": cores, "rounds": args.rounds, "ways": ways,
                                         "ray_overhead_per_cell_s": overhead}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
