"""How noisy the harness's figures are, against its targets, on this machine: a fixed set of cells
run twice through the real CLI, a minute's work apart.

It prints the machine (its GPU too with `--device cuda`), then for each cell, as ratios to the targets (at most 1
meets the target):
- the device-time CV: at most 3% for a CPU cell whose median is 10 ms or more; on a GPU at most
  1% for a batch of 32 or more and 3% for batch 1 (launch-bound);
- the run-to-run spread of the median (same cell, two runs): at most 3%;
- the gap between LoadGen's figure and the device timing: at most 5%.
Under each cell, the warnings either run's record carries (noisy, drift, LoadGen against the device
timing, ...), one a line. A cell that failed or was skipped in either run (TensorRT without its
package) is listed with its two statuses, and counted apart from the cells that meet the targets or
not. The last line counts the cells that meet every target, those with warnings and those not
measured.

Usage: .venv/bin/python benchmarks/noise.py [--device cpu|cuda] [--json OUT.json] [--quick]
(`--quick`: one small cell, seconds instead of minutes: a smoke test of the benchmark itself).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from harness.plain_text import one_line
from harness.run.system import machine_line

REPO = Path(__file__).resolve().parents[1]
CELLS = {
    "cpu": """
models: [resnet18, mobilenet_v3_small]
backends:
  - eager
  - {name: inductor, models: [resnet18]}
  - {name: onnxruntime, models: [mobilenet_v3_small]}
scenarios: [Offline]
batch_sizes: {cpu: [8]}
loadgen: {min_duration_s: 5}
timing: {min_time_s: 2}
""",
    "cuda": """
models: [resnet18]
backends: [eager, inductor, onnxruntime, tensorrt]
scenarios: [SingleStream, Offline]
batch_sizes: {cuda: [32]}
loadgen: {min_duration_s: 5}
timing: {min_time_s: 2}
""",
    "quick": """
models: [{name: resnet18, input_size: 32}]
backends: [eager]
scenarios: [Offline]
batch_sizes: {cpu: [4], cuda: [4]}
loadgen: {min_duration_s: 0.5}
timing: {min_time_s: 0.3, max_warmup_s: 0.5}
""",
}
SPREAD_TARGET = 0.03
GAP_TARGET = 0.05


def cv_target(device: str, batch: int, median_ns: float) -> float | None:
    """The CV target of a cell, or None where there is none (a CPU cell under 10 ms)."""
    if device == "cuda":
        return 0.03 if batch == 1 else 0.01 if batch >= 32 else None
    return 0.03 if median_ns >= 10e6 else None


def run_once(scenario: Path, device: str, out: Path) -> dict[str, dict[str, Any]]:
    done = subprocess.run([sys.executable, "-m", "harness.cli", "run", str(scenario), "--device", device, "--out", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=3600)
    if done.returncode not in (0, 1):
        raise SystemExit(f"the run failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
    bundle = max((p for p in out.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime)
    cells = [json.loads(p.read_text()) for p in (bundle / "cells").glob("*.json")]
    return {c["label"]: c for c in cells}


def measured(cell: dict[str, Any] | None) -> bool:
    return cell is not None and cell["status"] in ("valid", "invalid")


def ratios(first: dict[str, Any], second: dict[str, Any], device: str) -> dict[str, Any]:
    runs = [first, second]
    medians = [c["metrics"]["device_time"]["summary"]["median_ns"] for c in runs]
    cvs = [c["metrics"]["device_time"]["summary"]["cv"] for c in runs]
    gaps = [abs(c["metrics"].get("latency_agreement", {}).get("gap") or 0.0) for c in runs]
    batch = first["config"]["batch"]
    target = cv_target(device, batch, statistics.median(medians))
    spread = abs(medians[0] - medians[1]) / statistics.mean(medians)
    return {
        "cell": first["label"], "median_ms": [round(m / 1e6, 3) for m in medians], "cv": cvs,
        "cv_target": target, "cv_ratio": None if target is None else max(cvs) / target,
        "spread": spread, "spread_ratio": spread / SPREAD_TARGET,
        "gap": gaps, "gap_ratio": max(gaps) / GAP_TARGET,
        "warnings": sorted(set(first.get("warnings", []) + second.get("warnings", []))),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--quick", action="store_true", help="one small cell (a smoke test of this script)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="fusionbench-noise-") as tmp:
        work = Path(tmp)
        scenario = work / "noise.yaml"
        scenario.write_text(CELLS["quick" if args.quick else args.device])
        first = run_once(scenario, args.device, work / "first")
        second = run_once(scenario, args.device, work / "second")
    machine = machine_line(device=args.device)
    print(f"machine: {machine}")
    labels = sorted(first.keys() | second.keys())
    rows = [ratios(first[label], second[label], args.device) for label in labels
            if measured(first.get(label)) and measured(second.get(label))]
    # A cell that failed or was skipped in either run has no figures, but is said, not dropped from the count.
    unmeasured = [{"cell": label, "status": [run[label]["status"] if label in run else "absent" for run in (first, second)]}
                  for label in labels if not (measured(first.get(label)) and measured(second.get(label)))]
    print(f"{'cell':<58}{'median ms (1st, 2nd)':>22}{'CV/target':>11}{'spread/3%':>11}{'gap/5%':>9}")
    for row in rows:
        cv_ratio = "-" if row["cv_ratio"] is None else f"{row['cv_ratio']:.2f}"
        medians = ", ".join(f"{m:.2f}" for m in row["median_ms"])
        print(f"{row['cell']:<58}{medians:>22}{cv_ratio:>11}{row['spread_ratio']:>11.2f}{row['gap_ratio']:>9.2f}")
        for warning in row["warnings"]:  # the harness's own word on why a figure may not be trusted, under it
            print(f"  warning: {one_line(warning)}")
    met = sum(1 for r in rows if (r["cv_ratio"] or 0) <= 1 and r["spread_ratio"] <= 1 and r["gap_ratio"] <= 1)
    for cell in unmeasured:
        print(f"{cell['cell']:<58}not measured in both runs ({', '.join(cell['status'])})")
    warned = sum(1 for r in rows if r["warnings"])
    print(f"{met} of {len(rows)} cells meet every target" + (f"; {warned} with warnings" if warned else "")
          + (f"; {len(unmeasured)} not measured" if unmeasured else ""))
    if args.json:
        args.json.write_text(json.dumps({"machine": machine, "device": args.device, "rows": rows,
                                         "not_measured": unmeasured}, indent=1) + "\n")


if __name__ == "__main__":
    main()
