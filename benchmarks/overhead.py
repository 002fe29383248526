"""The harness's own overhead, measured side by side in one run (CPU).

1. Null backend (identity) under LoadGen, SingleStream and Offline: what a query costs the
   harness alone (LoadGen + the system under test + synchronisation), per query and per sample.
   Target: at most 5 us each (LoadGen answering a trivial Python system under test costs about 2).
2. resnet18 eager on CPU: the harness's SingleStream p50 against a bare timed loop's p50 over the
   same model and inputs, interleaved (bare, harness, bare) so drift hits both. Target: ratio <= 1.05.

Usage: .venv/bin/python benchmarks/overhead.py [--json OUT.json] [--duration-s 10] [--input-size 224]
"""

from __future__ import annotations

import argparse
import json
import statistics
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

TARGET_NS = 5_000


def loadgen_cell(scenario: str, batch: int, duration_s: float, input_size: int = 224) -> CellConfig:
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


def measure(workdir: Path, duration_s: float, input_size: int = 224) -> dict[str, Any]:
    """The overhead figures (resnet18's at `input_size` pixels), LoadGen's logs written under `workdir`."""
    samples = zoo.make_samples(64, seed=0, model="resnet18", input_size=input_size,
                               device="cpu", dtype="fp32")
    figures: dict[str, Any] = {"machine": f"{machine_line()}, {torch.get_num_threads()} torch threads",
                               "torch": torch.__version__}

    null = NullBackend().prepare(
        None, samples[0], device="cpu", dtype="fp32", variant=Variant(), workdir=workdir, cache_dir=workdir
    )
    ss = loadgen.run_scenario(null, samples, loadgen_cell("SingleStream", 1, duration_s, input_size), 20_000, workdir / "null-ss")
    off = loadgen.run_scenario(null, samples, loadgen_cell("Offline", 8, duration_s, input_size), 40_000, workdir / "null-off")
    figures["null_singlestream_p50_ns"] = ss["results"]["result_50.00_percentile_latency_ns"]
    figures["null_singlestream_validity"] = ss["validity"]
    figures["null_offline_samples_per_s"] = off["results"]["result_samples_per_second"]
    figures["null_offline_ns_per_sample"] = 1e9 / off["results"]["result_samples_per_second"]
    figures["null_offline_validity"] = off["validity"]

    model = zoo.build_model("resnet18", pretrained=False, seed=0, device="cpu", dtype="fp32")
    eager = EagerBackend().prepare(
        model, samples[0], device="cpu", dtype="fp32", variant=Variant(), workdir=workdir, cache_dir=workdir
    )
    batch = samples[0]
    for _ in range(5):
        eager(batch)
    iters = max(50, int(duration_s * 1e9 / bare_p50_ns(eager, batch, 10) / 2))
    bare_before = bare_p50_ns(eager, batch, iters)
    harness_run = loadgen.run_scenario(eager, samples, loadgen_cell("SingleStream", 1, duration_s, input_size), bare_before,
                                       workdir / "eager-ss")
    bare_after = bare_p50_ns(eager, batch, iters)
    harness_p50 = harness_run["results"]["result_50.00_percentile_latency_ns"]
    bare = (bare_before + bare_after) / 2
    figures.update({
        "resnet18_bare_p50_ns_before": bare_before, "resnet18_bare_p50_ns_after": bare_after,
        "resnet18_harness_singlestream_p50_ns": harness_p50, "resnet18_harness_validity": harness_run["validity"],
        "resnet18_ratio_harness_to_bare": harness_p50 / bare, "target_ratio": 1.05,
    })
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--duration-s", type=float, default=10.0, help="LoadGen minimum duration per run")
    parser.add_argument("--input-size", type=int, default=224, help="resnet18's input height and width")
    args = parser.parse_args()
    if args.duration_s <= 0 or args.input_size < INPUT_SIZE_FLOOR:
        parser.error(f"--duration-s must be above 0 and --input-size at least {INPUT_SIZE_FLOOR}")
    torch.set_grad_enabled(False)
    with tempfile.TemporaryDirectory(prefix="fusionbench-overhead-") as tmp:
        figures = measure(Path(tmp), args.duration_s, args.input_size)
    f = figures
    print(f"machine: {f['machine']}, torch {f['torch']}, resnet18 at {args.input_size}x{args.input_size}")
    f["target_ns"] = TARGET_NS
    print(f"null SingleStream p50 per query : {f['null_singlestream_p50_ns'] / 1e3:8.1f} us "
          f"({f['null_singlestream_validity']}; ratio to the 5 us target {f['null_singlestream_p50_ns'] / TARGET_NS:.2f})")
    print(f"null Offline per sample         : {f['null_offline_ns_per_sample'] / 1e3:8.2f} us "
          f"({f['null_offline_samples_per_s']:.0f} samples/s, {f['null_offline_validity']}; "
          f"ratio to the 5 us target {f['null_offline_ns_per_sample'] / TARGET_NS:.2f})")
    print(f"resnet18 eager bare loop p50    : {f['resnet18_bare_p50_ns_before'] / 1e6:8.3f} ms before, "
          f"{f['resnet18_bare_p50_ns_after'] / 1e6:.3f} ms after")
    print(f"resnet18 eager harness SS p50   : {f['resnet18_harness_singlestream_p50_ns'] / 1e6:8.3f} ms "
          f"({f['resnet18_harness_validity']})")
    print(f"ratio harness / bare            : {f['resnet18_ratio_harness_to_bare']:8.3f} (target <= 1.05)")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1) + "\n")


if __name__ == "__main__":
    main()
