"""How long a helper process takes to end once its work is done: Python's own teardown against
`quick_exit` (harness/quick_exit.py), side by side in one run.

Each round starts two Pythons that import what a preloaded parent imports first (torch,
torchvision, numpy), say so on standard output and wait; the benchmark then closes their standard
input and times from that moment to their exit. One ends as a script does (`sys.exit`, with the
interpreter's teardown), the other by `quick_exit`; which goes first alternates by round, so a
drift of the machine hits both. It prints the machine, each round's two times, the median, min and max of each
way over the rounds, and the ratio quick / teardown.

Usage: .venv/bin/python benchmarks/helper_exit.py [--rounds 5] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from harness.run.system import machine_line

from rounds import warn_if_one_round

REPO = Path(__file__).resolve().parents[1]
WAYS = ("teardown", "quick")
ENDINGS = {"teardown": "sys.exit(0)", "quick": "from harness.quick_exit import quick_exit\nquick_exit(0)"}


def time_to_exit(way: str) -> float:
    """Seconds from closing the helper's input to its exit."""
    code = f"import sys, numpy, torch, torchvision\nprint('ready', flush=True)\nsys.stdin.read()\n{ENDINGS[way]}\n"
    helper = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    assert helper.stdin is not None and helper.stdout is not None
    if helper.stdout.readline().strip() != "ready":
        helper.kill()
        raise SystemExit(f"helper_exit: the {way} helper did not start (exit {helper.wait()})")
    start = time.perf_counter()
    helper.stdin.close()
    code_at_exit = helper.wait()
    elapsed = time.perf_counter() - start
    if code_at_exit != 0:
        raise SystemExit(f"helper_exit: the {way} helper exited {code_at_exit}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    warn_if_one_round("helper_exit", args.rounds)
    machine = machine_line()
    print(f"machine: {machine}", flush=True)
    times: dict[str, list[float]] = {way: [] for way in WAYS}
    for round_ in range(args.rounds):
        for way in WAYS if round_ % 2 == 0 else WAYS[::-1]:
            times[way].append(time_to_exit(way))
        print(f"round {round_ + 1}: teardown {times['teardown'][-1]:.3f} s, quick {times['quick'][-1]:.3f} s", flush=True)
    medians = {way: statistics.median(times[way]) for way in WAYS}
    figures: dict[str, Any] = {"machine": machine, "rounds": args.rounds, "exit_s": times, "median_exit_s": medians,
                               "ratio_quick_to_teardown": medians["quick"] / medians["teardown"]}
    for way in WAYS:
        print(f"{way:8s}: median {medians[way]:.3f} s (min {min(times[way]):.3f}, max {max(times[way]):.3f})")
    print(f"ratio quick / teardown: {figures['ratio_quick_to_teardown']:.3f}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1) + "\n")


if __name__ == "__main__":
    main()
