"""Whether two runs of one scenario on the same machine give the same fusion verdicts.

Runs SCENARIO twice, one run after the other, each into a bundle of its own (the CLI's `run`, so
with the scenario's own `timing: {rounds: N}`), then prints for every fusion pair (the same cell
with fusion on and off, both valid) each run's speedup, its confidence interval over the paired
rounds and its verdict (faster, slower, under 5%, faster or slower with its size unclear, no effect
seen; harness/stats/intervals.py), whether the two verdicts agree and the two intervals overlap,
each run's machine-noise probe and wall time, and as its last line `verdicts agree: K of N pairs;
intervals overlap: M of N` (N: the pairs valid in both runs; a pair of one round has no verdict and
agrees with nothing). The same table is `compare`'s "Fusion speedups" section (harness/reporting/fusion_verdicts.py).
Where neither run has a fusion pair it says so and exits 1.

Usage: .venv/bin/python benchmarks/verdicts.py SCENARIO [--only KEY=VALUE,...] [--device cpu|cuda]
       [--out DIR] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness.bundle.reader import load, lookup
from harness.reporting.fusion_verdicts import fusion_verdicts, verdict_line
from harness.reporting.run_facts import machine_noise
from harness.run.system import machine_line

REPO = Path(__file__).resolve().parents[1]


def run_once(scenario: Path, out: Path, only: str | None, device: str | None) -> tuple[Path, float]:
    """One run of the scenario into `out`; its bundle and wall time. A run that fails outright
    (exit 2 or worse: bad input, no bundle) stops the benchmark; exit 1 (a cell failed) does not."""
    command = [sys.executable, "-m", "harness.cli", "run", str(scenario), "--out", str(out)]
    command += ["--only", only] if only else []
    command += ["--device", device] if device else []
    start = time.monotonic()
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    wall_s = time.monotonic() - start
    bundles = sorted(p for p in out.iterdir() if p.is_dir()) if out.is_dir() else []
    if done.returncode not in (0, 1) or not bundles:
        sys.exit(f"verdicts: the run exited {done.returncode}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return bundles[-1], wall_s


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scenario", type=Path)
    parser.add_argument("--only", help="run only matching cells, as `fusionbench run --only`")
    parser.add_argument("--device", choices=("cpu", "cuda"), help="override the scenario's device")
    parser.add_argument("--out", type=Path, help="where the two bundles go (default: a temporary folder, kept)")
    parser.add_argument("--json", type=Path, help="write the figures here as well")
    args = parser.parse_args()
    if not args.scenario.is_file():
        parser.error(f"{args.scenario}: no such scenario file")
    root = args.out or Path(tempfile.mkdtemp(prefix="fusionbench-verdicts-"))
    runs = [run_once(args.scenario, root / f"run-{i}", args.only, args.device) for i in (1, 2)]
    first, second = (load(bundle) for bundle, _ in runs)
    verdicts = fusion_verdicts(first, second)
    print(f"machine: {platform.node()}, {machine_line(device=first.header['device'])}; scenario {args.scenario}")
    for i, (loaded, (bundle, wall_s)) in enumerate(zip((first, second), runs), start=1):
        print(f"run {i}: {bundle} ({wall_s:.0f} s); machine noise: "
              f"{machine_noise(lookup(loaded.header, 'system', 'machine_noise'))}")
    if not verdicts:  # "verdicts agree: 0 of 0 pairs", exit 0, read as a pass
        print("verdicts: neither run has a fusion pair (a cell with fusion on and off, both valid): nothing to judge; "
              "give a scenario whose backends run fusion on and off, or see why its cells failed in the bundles above",
              file=sys.stderr)
        return 1
    width = max((len(v.name) for v in verdicts), default=4)
    print(f"{'pair':<{width}}  {'run 1':<40}  {'run 2':<40}  agree  overlap")
    for v in verdicts:
        a, b, agree, overlap = v.shown()
        print(f"{v.name:<{width}}  {a:<40}  {b:<40}  {agree:<5}  {overlap}")
    line = verdict_line(verdicts)
    if args.json:
        args.json.write_text(json.dumps({
            "scenario": str(args.scenario), "bundles": [str(b) for b, _ in runs], "wall_s": [w for _, w in runs],
            "machine_noise": [lookup(x.header, "system", "machine_noise") for x in (first, second)],
            "pairs": [v.recorded() for v in verdicts], "line": line,
        }, indent=1) + "\n")
    print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
