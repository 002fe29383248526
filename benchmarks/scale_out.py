"""Cells per hour for one scenario file, run three ways side by side on this machine through the
real CLI: one cell at a time here (the default), on a local Ray instance with one cell per node
(`--cpus-per-cell` = all cores: what Ray adds per cell), and on Ray as many at a time as it has
room for (`--cpus-per-cell 1`).

Prints the machine, then per way: wall time, cells run, cells per hour; Ray's overhead per cell against the serial
run; and the ratio of throughputs. Every run uses the same warm artifact cache (one warm-up run
first, not counted), so compile time is the cache's, not the first compile's.

Usage: .venv/bin/python benchmarks/scale_out.py [--scenario scenarios/smoke.yaml] [--json OUT.json] [--quick]
(`--quick`: a tiny sweep of the null and eager backends, a smoke test of the benchmark itself).
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

REPO = Path(__file__).resolve().parents[1]
QUICK = """
models: [{name: resnet18, input_size: 32}]
backends: [null, eager]
scenarios: [SingleStream]
loadgen: {min_duration_s: 0.3}
timing: {warmup_iters: 2, min_iters: 10, min_time_s: 0.2, max_warmup_s: 0.5}
"""


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", type=Path, default=REPO / "scenarios" / "smoke.yaml")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    parser.add_argument("--quick", action="store_true", help="a tiny sweep instead (seconds)")
    args = parser.parse_args()
    if not args.quick and not args.scenario.is_file():  # before the warm-up, whose failure read as the serial run's
        parser.error(f"--scenario: {args.scenario}: no such scenario file")
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    with tempfile.TemporaryDirectory(prefix="fusionbench-scale-out-") as tmp:
        work = Path(tmp)
        scenario = args.scenario
        if args.quick:
            scenario = work / "quick.yaml"
            scenario.write_text(QUICK)
        cache = work / "cache"
        run(scenario, work / "warm-up", cache)  # fills the artifact cache; not counted
        ways = {
            "serial (local, 1 job)": run(scenario, work / "serial", cache),
            f"ray, one cell at a time ({cores} CPUs a cell)": run(scenario, work / "ray-whole", cache, "--executor", "ray",
                                                                  "--cpus-per-cell", str(cores)),
            "ray, 1 CPU a cell": run(scenario, work / "ray-1", cache, "--executor", "ray", "--cpus-per-cell", "1"),
        }
    serial = ways["serial (local, 1 job)"]
    machine = machine_line()
    print(f"machine: {machine}")
    print(f"{'way':<40} {'wall s':>8} {'cells':>6} {'cells/hour':>11} {'vs serial':>10}")
    for name, figures in ways.items():
        ratio = figures["cells_per_hour"] / serial["cells_per_hour"] if serial["cells_per_hour"] else 0.0
        figures["throughput_ratio_to_serial"] = ratio
        print(f"{name:<40} {figures['wall_s']:>8.1f} {figures['cells_run']:>6} {figures['cells_per_hour']:>11.1f} "
              f"{ratio:>10.2f}")
    whole = ways[f"ray, one cell at a time ({cores} CPUs a cell)"]
    overhead = (whole["wall_s"] - serial["wall_s"]) / max(serial["cells_run"], 1)
    print(f"Ray's overhead per cell (one at a time, against serial): {overhead:+.2f} s")
    if args.json:
        args.json.write_text(json.dumps({"machine": machine, "cores": cores, "ways": ways,
                                               "ray_overhead_per_cell_s": overhead}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
