"""The harness's own overhead, measured side by side in one run (CPU).

1. Null backend (identity) under LoadGen, SingleStream and Offline: what a query costs the
   harness alone (LoadGen + the system under test + synchronisation), per query and per sample.
   Target: at most 5 us each (LoadGen answering a trivial Python system under test costs about 2).
2. resnet18 eager on CPU: the harness's SingleStream p50 against a bare timed loop's p50 over the
   same model and inputs, interleaved (bare, harness, bare) so drift hits both. Target: ratio <= 1.05.

Each round runs all of them once, `--rounds` rounds in all. Printed: the machine, then each figure's
median over the rounds with its min and max, how many of its LoadGen runs were VALID, and its
target; on standard error, a warning where one round has no spread, where LoadGen called a run
other than VALID, and where the bare loop moved by more than 3% across the harness's run.

Usage: .venv/bin/python benchmarks/overhead.py [--json OUT.json] [--duration-s 10] [--input-size 224] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from backends.eager import EagerBackend
from backends.null import NullBackend
from harness.contract import Variant
from harness.measure import loadgen
from harness.models import zoo
from harness.models.catalog import INPUT_SIZE_FLOOR
from harness.run.system import machine_line
from harness.scenario.cell_config import CellConfig
from harness.scenario.cells import expand
from harness.scenario.loading import resolved
from harness.scenario.schema import ScenarioFile
from harness.stats.thresholds import DRIFT_LIMIT

from rounds import spread, warn_if_one_round

TARGET_NS = 5_000


def loadgen_cell(scenario: str, batch: int, duration_s: float, input_size: int) -> CellConfig:
    """The cell LoadGen runs: `scenario` at `batch`, at least `duration_s` and 100 queries long."""
    data = {"models": [{"name": "resnet18", "input_size": input_size}], "backends": ["null"], "scenarios": [scenario],
            "batch_sizes": {"cpu": [batch]}, "loadgen": {"min_duration_s": duration_s, "min_query_count": 100}}
    (cell,) = expand(resolved(ScenarioFile.model_validate(data), "overhead"), "cpu")
    return cell.config


def bare_p50_ns(prepared: Any, batch: Any, iters: int) -> float:
    samples = [0] * iters
    for i in range(iters):
        t0 = time.perf_counter_ns()
        prepared(batch)
        prepared.synchronize()
        samples[i] = time.perf_counter_ns() - t0
    return statistics.median(samples)


#: The figures printed: the key of each round's figure, the words it is printed with, its unit and
#: what it is divided by for it, and the LoadGen run it comes from (None: a bare loop's, or a ratio).
FIGURES = (("null_singlestream_p50_ns", "null SingleStream p50 per query", "us", 1e3, "null_singlestream"),
           ("null_offline_ns_per_sample", "null Offline per sample", "us", 1e3, "null_offline"),
           ("resnet18_bare_p50_ns", "resnet18 eager bare loop p50", "ms", 1e6, None),
           ("resnet18_harness_singlestream_p50_ns", "resnet18 eager harness SS p50", "ms", 1e6, "resnet18_harness"),
           ("resnet18_ratio_harness_to_bare", "ratio harness / bare", "", 1, None))
#: LoadGen's runs of a round: the key its validity is kept under, and what the warning calls it.
RUNS = (("null_singlestream", "null SingleStream"), ("null_offline", "null Offline"),
        ("resnet18_harness", "resnet18 eager SingleStream"))


def one_round(null: Any, eager: Any, samples: list[Any], duration_s: float, input_size: int, iters: int,
              workdir: Path) -> dict[str, Any]:
    """One round's figures: the null backend's two scenarios, then resnet18's harness run between two
    bare loops (bare, harness, bare), each LoadGen run's logs under `workdir`."""
    batch = samples[0]
    ss = loadgen.run_scenario(null, samples, loadgen_cell("SingleStream", 1, duration_s, input_size), 20_000, workdir / "null-ss")
    off = loadgen.run_scenario(null, samples, loadgen_cell("Offline", 8, duration_s, input_size), 40_000, workdir / "null-off")
    bare_before = bare_p50_ns(eager, batch, iters)
    harness_run = loadgen.run_scenario(eager, samples, loadgen_cell("SingleStream", 1, duration_s, input_size), bare_before,
                                       workdir / "eager-ss")
    bare_after = bare_p50_ns(eager, batch, iters)
    harness_p50 = harness_run["results"]["result_50.00_percentile_latency_ns"]
    bare = (bare_before + bare_after) / 2
    figures: dict[str, Any] = {
        "null_singlestream_p50_ns": ss["results"]["result_50.00_percentile_latency_ns"],
        "null_offline_samples_per_s": off["results"]["result_samples_per_second"],
        "null_offline_ns_per_sample": 1e9 / off["results"]["result_samples_per_second"],
        "resnet18_bare_p50_ns_before": bare_before, "resnet18_bare_p50_ns_after": bare_after, "resnet18_bare_p50_ns": bare,
        "resnet18_harness_singlestream_p50_ns": harness_p50, "resnet18_ratio_harness_to_bare": harness_p50 / bare,
    }
    for (key, _), result in zip(RUNS, (ss, off, harness_run)):
        figures[f"{key}_validity"] = result["validity"]
        figures[f"{key}_invalid_reasons"] = result["invalid_reasons"]
    return figures


def measure(workdir: Path, duration_s: float, input_size: int = 224, rounds: int = 1) -> dict[str, Any]:
    """The overhead figures (resnet18's at `input_size` pixels) of `rounds` rounds, each figure's
    min, median and max over them; LoadGen's logs written under `workdir`."""
    samples = zoo.make_samples(64, seed=0, model="resnet18", input_size=input_size,
                               device="cpu", dtype="fp32")
    null = NullBackend().prepare(
        None, samples[0], device="cpu", dtype="fp32", variant=Variant(), workdir=workdir, cache_dir=workdir
    )
    model = zoo.build_model("resnet18", pretrained=False, seed=0, device="cpu", dtype="fp32")
    eager = EagerBackend().prepare(
        model, samples[0], device="cpu", dtype="fp32", variant=Variant(), workdir=workdir, cache_dir=workdir
    )
    for _ in range(5):
        eager(samples[0])
    iters = max(50, int(duration_s * 1e9 / bare_p50_ns(eager, samples[0], 10) / 2))
    done = [one_round(null, eager, samples, duration_s, input_size, iters, workdir / f"round-{number + 1}")
            for number in range(rounds)]
    return summarise(done)


def summarise(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """The rounds, each figure's min, median and max over them (its median also under its own key,
    as one round's figure was), and what makes them unreliable (`warnings_of`)."""
    figures: dict[str, Any] = {"machine": f"{machine_line()}, {torch.get_num_threads()} torch threads",
                               "torch": torch.__version__, "rounds": rounds, "spread": {}, "target_ns": TARGET_NS,
                               "target_ratio": 1.05}
    for key in [key for key, value in rounds[0].items() if isinstance(value, (int, float))]:
        figures["spread"][key] = spread([one[key] for one in rounds])
        figures[key] = figures["spread"][key]["median"]
    figures["warnings"] = warnings_of(rounds)
    return figures


def warnings_of(rounds: list[dict[str, Any]]) -> list[str]:
    """What makes the figures unreliable, one line each: a kind of LoadGen run that was not VALID in
    every round, or logged an error though VALID (MLPerf's checker refuses such a run, as a cell's
    worker does), whose p50s are in the figures all the same; and rounds whose bare loops before and
    after the harness's run differ by more than a cell's repetitions may (`DRIFT_LIMIT`), whose
    ratio is against a machine that moved under it."""
    warnings = []
    for key, name in RUNS:
        bad = [one for one in rounds if one[f"{key}_validity"] != "VALID" or one[f"{key}_invalid_reasons"]]
        if bad:
            reasons = sorted({reason for one in bad for reason in one[f"{key}_invalid_reasons"]}) or ["no reason given"]
            validities = "/".join(sorted({one[f"{key}_validity"] for one in bad}))
            warnings.append(f"{name}: LoadGen called {len(bad)} of {len(rounds)} run(s) {validities} ({'; '.join(reasons)}): "
                            "their figures are not ones LoadGen stands behind; give a longer --duration-s")
    drifts = [abs(one["resnet18_bare_p50_ns_before"] - one["resnet18_bare_p50_ns_after"]) / one["resnet18_bare_p50_ns"]
              for one in rounds]
    drifted = [drift for drift in drifts if drift > DRIFT_LIMIT]
    if drifted:
        warnings.append(f"resnet18's bare loop moved by up to {max(drifted):.0%} from before the harness's run to after it "
                        f"in {len(drifted)} of {len(rounds)} round(s) (over {DRIFT_LIMIT:.0%}): the ratio harness / bare "
                        "is against a machine that changed under it; run it on a quiet machine")
    return warnings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--duration-s", type=float, default=10.0, help="LoadGen minimum duration per run")
    parser.add_argument("--input-size", type=int, default=224, help="resnet18's input height and width")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of every run, one after the other")
    args = parser.parse_args()
    if args.duration_s <= 0 or args.input_size < INPUT_SIZE_FLOOR:
        parser.error(f"--duration-s must be above 0 and --input-size at least {INPUT_SIZE_FLOOR}")
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    warn_if_one_round("overhead", args.rounds)
    torch.set_grad_enabled(False)
    with tempfile.TemporaryDirectory(prefix="fusionbench-overhead-") as tmp:
        figures = measure(Path(tmp), args.duration_s, args.input_size, args.rounds)
    print_figures(figures, args.input_size)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1) + "\n")


def print_figures(figures: dict[str, Any], input_size: int) -> None:
    """The table, each figure as its median with its min and max over the rounds; then the warnings,
    on standard error, each beside the table that would otherwise read as trustworthy."""
    rounds = len(figures["rounds"])
    print(f"machine: {figures['machine']}, torch {figures['torch']}, resnet18 at {input_size}x{input_size}, "
          f"{rounds} round(s): median (min to max)")
    targets = {"null_singlestream_p50_ns": f"ratio to the 5 us target {figures['null_singlestream_p50_ns'] / TARGET_NS:.2f}",
               "null_offline_ns_per_sample": f"ratio to the 5 us target {figures['null_offline_ns_per_sample'] / TARGET_NS:.2f}",
               "resnet18_ratio_harness_to_bare": "target <= 1.05"}
    for key, words, unit, divisor, run in FIGURES:
        low, high = figures["spread"][key]["min"] / divisor, figures["spread"][key]["max"] / divisor
        notes = [f"{low:.4g} to {high:.4g}"]
        if run is not None:
            valid = sum(one[f"{run}_validity"] == "VALID" for one in figures["rounds"])
            notes.append(f"{valid} of {rounds} VALID")
        notes += [targets[key]] if key in targets else []
        print(f"{words:<32}: {figures[key] / divisor:8.3f}{' ' + unit if unit else ''} ({'; '.join(notes)})")
    for warning in figures["warnings"]:
        print(f"overhead: warning: {warning}", file=sys.stderr)


if __name__ == "__main__":
    main()
