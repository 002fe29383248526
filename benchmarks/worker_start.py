"""Cells' workers forked from a preloaded parent against fresh Pythons, side by side in one run.

Runs the scenario with `fusionbench run` twice a round, the two ways alternating (preloaded first in
odd rounds, fresh first in even ones, so a drift of the machine hits both), and prints the machine, each run's
wall time and CPU time (the run's and every process it started, waited for), the median of each
over the rounds with its min and max, and the ratios preloaded / fresh of the medians. The cells are the same both ways; only how each
worker starts differs (`--fresh-workers`).

Usage: .venv/bin/python benchmarks/worker_start.py [SCENARIO] [--rounds 2] [--jobs 1] [--device cpu]
       [--json OUT]    (SCENARIO: scenarios/smoke.yaml by default)
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from harness.run.system import machine_line

from rounds import warn_if_one_round

REPO = Path(__file__).resolve().parents[1]
WAYS = ("preloaded", "fresh")


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def one_run(scenario: Path, way: str, jobs: int, device: str, out: Path) -> dict[str, Any]:
    command = [sys.executable, "-m", "harness.cli", "run", str(scenario), "--device", device, "--jobs", str(jobs),
               "--out", str(out), "--no-cache"]
    if way == "fresh":
        command.append("--fresh-workers")
    cpu_before, start = children_cpu_s(), time.perf_counter()
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, check=False)
    wall_s, cpu_s = time.perf_counter() - start, children_cpu_s() - cpu_before
    if done.returncode not in (0, 1):  # 1: a cell failed or was invalid, which both ways share
        raise SystemExit(f"worker_start: the {way} run exited {done.returncode}:\n{done.stderr[-3000:]}")
    return {"wall_s": wall_s, "cpu_s": cpu_s, "exit": done.returncode}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenario", nargs="?", type=Path, default=REPO / "scenarios" / "smoke.yaml")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    warn_if_one_round("worker_start", args.rounds)
    machine = machine_line(device=args.device)
    print(f"machine: {machine}", flush=True)
    runs: dict[str, list[dict[str, Any]]] = {way: [] for way in WAYS}
    with tempfile.TemporaryDirectory(prefix="fusionbench-worker-start-") as tmp:
        for round_ in range(args.rounds):
            for way in WAYS if round_ % 2 == 0 else WAYS[::-1]:
                run = one_run(args.scenario.resolve(), way, args.jobs, args.device, Path(tmp) / f"{way}-{round_}")
                runs[way].append(run)
                print(f"round {round_ + 1} {way:9s}: {run['wall_s']:7.1f} s wall, {run['cpu_s']:7.1f} CPU-s "
                      f"(exit {run['exit']})", flush=True)
    figures: dict[str, Any] = {"machine": machine, "scenario": str(args.scenario), "jobs": args.jobs, "rounds": args.rounds,
                               "runs": runs}
    for what in ("wall_s", "cpu_s"):
        medians = {way: statistics.median(run[what] for run in runs[way]) for way in WAYS}
        figures[f"median_{what}"] = medians
        figures[f"ratio_{what}"] = medians["preloaded"] / medians["fresh"]
        spread = {way: (min(r[what] for r in runs[way]), max(r[what] for r in runs[way])) for way in WAYS}
        print(f"{what[:-2]:4s} median preloaded {medians['preloaded']:7.1f} (min {spread['preloaded'][0]:.1f}, max "
              f"{spread['preloaded'][1]:.1f}), fresh {medians['fresh']:7.1f} (min {spread['fresh'][0]:.1f}, max "
              f"{spread['fresh'][1]:.1f}); ratio preloaded / fresh {figures[f'ratio_{what}']:.3f}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1) + "\n")


if __name__ == "__main__":
    main()
