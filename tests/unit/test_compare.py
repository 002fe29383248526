"""`fusionbench compare`: labels per pair, the rank test, geometric means, the systems'
differences, and an exit code CI pipelines can use."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness import metric_table
from harness.bundle import manifest
from harness.bundle.cell_record import CellRecord
from harness.bundle.header_record import BundleHeader
from harness.bundle.migrations import SCHEMA_VERSION
from harness.fusion import FusionReport, KernelGroup
from harness.metric_table import Metric
from harness.reporting.fusion_verdicts import FusionVerdict, verdict_line
from harness.reporting.judging import Figure, compare_cells
from harness.reporting.system_differences import system_differences
from harness.stats.intervals import paired_speedup
from harness.stats.summary import geometric_mean, mann_whitney_u, median, summarize_ns
from tests.bundle_edits import without_backend

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
REPO = GOLDEN.parents[1]


TEMPLATE = next(c for c in (json.loads(p.read_text()) for p in sorted((GOLDEN / f"v{SCHEMA_VERSION}" / "cells").glob("*.json")))
                if c["status"] == "valid" and c["config"]["backend"] == "eager" and c["config"]["scenario"] == "Offline")
ACCURACY = {"top1_percent": 50.0, "good": 8, "total": 16, "log_dir": "loadgen/accuracy"}


def record(data: dict[str, Any]) -> CellRecord:
    return CellRecord.model_validate(data)


def cell_data(status: str = "valid", samples: list[int] | None = None, reason: str = "", math: str | None = "ieee",
              **fields: Any) -> dict[str, Any]:
    """A measured cell of the golden bundle (eager Offline), of one round, with its timing samples, status and math
    mode as given: the figures `compare` judges are all there, and stay what the golden cell measured."""
    data = json.loads(json.dumps(TEMPLATE))
    data.update(status=status, reasons=[reason] if reason else [], **fields)
    metrics = data["metrics"]
    metrics["device_time"]["samples_ns"] = samples or []
    if samples:
        metrics["device_time"]["summary"]["median_ns"] = median(samples)  # as a worker records it
        metrics["device_time"]["summary"]["noisy"] = False  # the golden cell's own spread is not the samples'
        metrics.pop("first_call_ratio")  # derived from the golden cell's median
    del metrics["rounds"]  # one round: the samples given are the cell's all
    data["config"]["timing"]["rounds"] = 1
    metrics["accuracy"] = dict(ACCURACY)
    if math is None:
        del metrics["math_mode"]
    else:
        metrics["math_mode"]["effective"] = math
    return data


def cell(status: str = "valid", samples: list[int] | None = None, reason: str = "", math: str | None = "ieee",
         **fields: Any) -> CellRecord:
    return record(cell_data(status, samples, reason, math, **fields))


BASE = [1000 + (i * 37) % 50 for i in range(40)]
HEADER = json.loads((GOLDEN / f"v{SCHEMA_VERSION}" / "bundle.json").read_text())


def header(**fields: Any) -> BundleHeader:
    """The golden bundle's header with `fields` (each whole) as given."""
    return BundleHeader.model_validate({**HEADER, **fields})


@pytest.mark.parametrize(
    ("a", "b", "verdict"),
    [
        (cell(samples=BASE), cell(samples=[int(v * 1.3) for v in BASE]), "regressed"),
        (cell(samples=BASE), cell(samples=[int(v * 0.7) for v in BASE]), "improved"),
        (cell(samples=BASE), cell(samples=[v + 1 for v in BASE]), "not significant"),
        (cell(samples=BASE), cell("failed", reason="prepare: boom"), "new failure"),
        (cell("invalid", reason="correctness"), cell(samples=BASE), "fixed"),
        (cell("skipped", reason="no GPU"), cell("skipped", reason="no GPU"), "not comparable"),
        (cell("failed", reason="x"), cell("invalid", reason="y"), "not comparable"),
        (cell(samples=BASE[:5]), cell(samples=[]), "not comparable"),
        # three samples a side: the exact test's smallest p is 0.1, so even 30% slower is not significant
        (cell(samples=BASE[:3]), cell(samples=[int(v * 1.3) for v in BASE[:3]]), "not significant"),
    ],
)
def test_verdicts(a: CellRecord, b: CellRecord, verdict: str) -> None:
    pair = compare_cells(a, b, 0.05, 0.01)
    assert pair.verdict == verdict, pair


def test_cells_of_different_math_modes_are_never_paired() -> None:
    pair = compare_cells(cell(samples=BASE), cell(samples=[int(v * 0.7) for v in BASE], math="tf32"), 0.05, 0.01)
    assert pair.verdict == "not comparable" and pair.why == "math modes differ: A ieee, B tf32"
    unrecorded = cell(samples=BASE, math=None)
    pair = compare_cells(unrecorded, cell(samples=BASE), 0.05, 0.01)
    assert pair.verdict == "not comparable" and "A unrecorded" in pair.why


def test_a_big_but_noisy_change_needs_the_rank_test_too() -> None:
    # Medians 10% apart, but the two sample sets overlap so much that the rank test cannot tell.
    a = [100, 300, 100, 300, 100, 300, 100, 300, 200, 200]
    b = [110, 290, 110, 290, 110, 290, 110, 290, 220, 220]
    pair = compare_cells(cell(samples=a), cell(samples=b), 0.05, 0.01)
    assert pair.ratio == pytest.approx(1.1) and pair.verdict == "not significant"
    # "(needs < 0.01)" read "(needs &lt; 0.01)" in the Markdown compare prints
    assert re.fullmatch(r"p = [0-9.]+, not below 0\.01", pair.why), pair.why


def test_why_names_both_sides() -> None:
    pair = compare_cells(cell("skipped", reason="no GPU"), cell("skipped", reason="no GPU"), 0.05, 0.01)
    assert pair.why == "both skipped: no GPU"
    pair = compare_cells(cell(samples=BASE), cell("failed", reason="prepare: boom"), 0.05, 0.01)
    assert pair.why == "B failed: prepare: boom"


@pytest.mark.parametrize(
    ("a", "b", "u", "p"),
    [  # reference values from scipy 1.17.1: mannwhitneyu(a, b, method="asymptotic", use_continuity=True)
        ([10, 12, 11, 13, 12, 14, 11, 12], [15, 16, 14, 17, 15, 16, 18, 15], 0.5, 0.0010296125441885782),
        ([3, 1, 4, 1, 5, 9, 2, 6, 5, 3], [5, 8, 9, 7, 9, 3, 2, 3, 8, 4, 6], 32.5, 0.11854895009989554),
        ([100] * 6 + [101] * 4, [100] * 5 + [101] * 5, 45.0, 0.6933763617576532),
        ([7] * 5, [7] * 5, 12.5, 1.0),
    ],
)
def test_mann_whitney_u_matches_scipy(a: list[int], b: list[int], u: float, p: float) -> None:
    got_u, got_p = mann_whitney_u(a, b)
    assert got_u == u and got_p == pytest.approx(p, rel=1e-9)


def test_a_cell_only_one_run_has_says_what_the_other_never_ran() -> None:
    """Against a GPU run every CPU cell said "only in A" and "not run in B", as if B had left it out."""
    from harness.reporting.pairing import not_in, settings_ran

    on_cpu, on_cuda = cell_data(samples=BASE), cell_data(samples=BASE)
    on_cuda["config"]["device"] = "cuda"
    other_model = cell_data(samples=BASE)
    other_model["config"]["model"]["name"] = "mobilenet_v2"
    assert not_in(record(on_cpu), settings_ran([record(on_cuda)]), "B") == "B ran no cell on cpu"
    assert not_in(record(on_cpu), settings_ran([record(other_model)]), "B") == "B ran no cell of resnet18"
    other_size = cell_data(samples=BASE)
    other_size["config"]["input_size"] = 64
    assert not_in(record(on_cpu), settings_ran([record(other_size)]), "B") == "B ran no cell at input size 32"  # the size it ran at
    mixed = [record(on_cuda), record(other_model)]  # each setting somewhere, never together
    assert not_in(record(on_cpu), settings_ran(mixed), "B") == "B ran no cell of these settings together"


def test_a_cell_the_other_run_listed_but_never_recorded_is_said_to_be_not_run(tmp_path: Path) -> None:
    from harness.bundle.reader import load
    from harness.reporting.compare import compare

    stopped = tmp_path / "stopped"
    shutil.copytree(GOLDEN / f"v{SCHEMA_VERSION}", stopped)
    header = json.loads((stopped / "bundle.json").read_text())
    header["state"] = "interrupted"
    (stopped / "bundle.json").write_text(json.dumps(header))
    gone = next(e["id"] for e in header["cells"]
                if json.loads((stopped / "cells" / f"{e['id']}.json").read_text())["status"] == "valid")
    (stopped / "cells" / f"{gone}.json").unlink()
    shutil.rmtree(stopped / "cells" / gone)
    manifest.write(stopped)
    comparison = compare(load(GOLDEN / f"v{SCHEMA_VERSION}"), load(stopped))
    assert [line for line in comparison.unpaired if "not run in B (listed there, no record" in line], comparison.unpaired


def test_packages_that_differ_by_the_hundred_come_last() -> None:
    """183 package rows stood between the reader and the summary."""
    from harness.reporting.compare import Comparison
    from harness.reporting.compare_output import MOST_PACKAGES_AHEAD, to_markdown

    packages = [(f"package p{i}", "1", "2") for i in range(MOST_PACKAGES_AHEAD + 1)]
    text = to_markdown(Comparison(a="a", b="b", threshold=0.05, alpha=0.01, systems=[("device", "cpu", "cuda"), *packages]))
    assert text.index("| packages | 11 differ, listed at the end |") < text.index("## Summary")
    assert text.index("## Summary") < text.index("## Packages that differ (11)") < text.index("| p10 | 1 | 2 |")
    few = to_markdown(Comparison(a="a", b="b", threshold=0.05, alpha=0.01, systems=packages[:2]))
    assert few.index("| package p1 | 1 | 2 |") < few.index("## Summary") and "## Packages that differ" not in few


def test_geometric_mean() -> None:
    assert geometric_mean([0.5, 2.0]) == pytest.approx(1.0)
    with pytest.raises(ValueError):
        geometric_mean([1.0, 0.0])


def test_system_differences_list_what_changed() -> None:
    a = header(device="cuda",
               system={"gpu": {"driver": "550", "gpus": [{"name": "H100"}]}, "packages": {"torch": "2.11.0", "onnx": "1.0"}})
    b = header(device="cuda",
               system={"gpu": {"driver": "560", "gpus": [{"name": "H200"}]}, "packages": {"torch": "2.14.1", "tvm": "0.27"}})
    rows = system_differences(a, b)
    assert ("GPU driver", "550", "560") in rows and ("GPUs", "H100", "H200") in rows
    assert ("package torch", "2.11.0", "2.14.1") in rows and ("package onnx", "1.0", "-") in rows
    assert ("package tvm", "-", "0.27") in rows
    assert system_differences(a, a) == []
    # a plugin's model at two versions is two models: said beside the backends, not among the packages alone
    plugin = {"distribution": "acme-models", "version": "1.0", "entry_point": "acme_models.blocks:CONV_BLOCK",
              "family": "acme", "input_kind": "planes", "input_size": 16}
    assert system_differences(header(model_plugins={"acme_conv_block": plugin}),
                              header(model_plugins={"acme_conv_block": {**plugin, "version": "1.1"}})) == [
        ("model acme_conv_block", "acme-models 1.0", "acme-models 1.1")]
    # one model name, two generations: Zen 3 with AVX2 against Zen 4 with AVX-512
    milan, genoa = ({"cpu": {"model": "AMD EPYC", "identity": f"vendor_id AuthenticAMD, cpu family 25, model {m}, stepping 1",
                             "vector_extensions": ext}} for m, ext in ((1, ["avx2", "fma"]), (17, ["avx2", "avx512f", "fma"])))
    assert system_differences(header(system=milan), header(system=genoa)) == [
        ("CPU identity", "vendor_id AuthenticAMD, cpu family 25, model 1, stepping 1",
         "vendor_id AuthenticAMD, cpu family 25, model 17, stepping 1"),
        ("CPU vector extensions", "avx2 fma", "avx2 avx512f fma")]
    other_images = system_differences(header(inputs_sha256="a" * 64), header(inputs_sha256="b" * 64))
    assert other_images == [("input images (SHA-256)", "a" * 12, "b" * 12)]
    # synthetic inputs record no digest: shown as "-", as a package one run lacks (it printed Python's "None")
    assert system_differences(header(inputs_sha256="a" * 64), header(inputs_sha256=None)) == [
        ("input images (SHA-256)", "a" * 12, "-")]
    # a serial run against a --jobs one opened with "The systems are the same", then paired nothing
    serial, jobs = header(executor={"name": "local"}), header(executor={"name": "local", "jobs": 2, "slots": []})
    assert system_differences(serial, jobs) == [("executor", "local", "local, 2 jobs")]
    ray = header(executor={"name": "ray", "address": None, "cpus_per_cell": 1})
    assert system_differences(jobs, ray) == [("executor", "local, 2 jobs", "ray, 1 CPU(s) a cell")]
    # memory in binary units and in bytes: 25276059648 read as nothing, and 23.5 GiB alone hid the difference
    assert system_differences(header(system={"cpu": {"memory_bytes": 25_276_059_648}}),
                              header(system={"cpu": {"memory_bytes": 25_276_510_208}})) == [
        ("memory", "23.5 GiB (25,276,059,648 bytes)", "23.5 GiB (25,276,510,208 bytes)")]


def test_a_runs_jobs_are_read_from_bundle_json_in_one_place_alike_for_each_reader() -> None:
    """`executor.jobs` was read in three places, each with its own guards (a resume's refusal took
    `jobs: 0` for one cell at a time, compare read a Ray executor's `jobs`): one reader now, a local
    executor's whole count of 1 or more, or none."""
    from harness.bundle.header_record import local_jobs
    from harness.run.resume_refusals import _options_of

    executors = [{"name": "local", "jobs": 2}, {"name": "local"}, {"name": "local", "jobs": 0}, {"name": "local", "jobs": True},
                 {"name": "local", "jobs": "2"}, {"name": "ray", "cpus_per_cell": 1, "jobs": 2}, None]
    assert [local_jobs(executor) for executor in executors] == [2, 1, None, None, None, None, None]
    assert _options_of({"name": "local", "jobs": 0}) == "bundle.json `executor`: --jobs, or --executor ray with --cpus-per-cell"
    assert _options_of({"name": "local"}).startswith("no --jobs, one cell at a time")
    assert system_differences(header(executor={"name": "local", "jobs": 0}), header(executor={"name": "local", "jobs": 3})) == [
        ("executor", "local", "local, 3 jobs")]


def test_two_images_differ_by_the_layers_that_differ() -> None:
    def ran_in(base: str, layers: list[str]) -> BundleHeader:
        return header(system={"container": {"in_container": True, "image": "fusionbench-cpu:abc", "base": base,
                                            "layers": layers}})

    one, two, three = ("sha256:" + c * 64 for c in "123")
    rows = system_differences(ran_in("debian bookworm (lock 1)", [one, two]), ran_in("debian bookworm (lock 1)", [one, three]))
    assert rows == [("container layer 2 of 2", two, three)]  # the same base layer, another packages layer
    rows = system_differences(ran_in("debian bookworm (lock 1)", [one]), ran_in("registry python@sha256:x", [two, three]))
    assert ("container base", "debian bookworm (lock 1)", "registry python@sha256:x") in rows
    assert ("container layer 2 of 2", "-", three) in rows
    assert system_differences(ran_in("b", [one]), header(system={"container": {"in_container": False}})) == [
        ("in a container", "True", "False"), ("container image", "fusionbench-cpu:abc", "-"), ("container base", "b", "-")]


def slowed(tmp_path: Path, factor: float) -> Path:
    """A copy of the golden v2 bundle whose eager timing samples are `factor` times longer."""
    root = tmp_path / f"slow-{factor}"
    shutil.copytree(GOLDEN / "v2", root)
    for path in (root / "cells").glob("*.json"):
        record = json.loads(path.read_text())
        if record["config"]["backend"] == "eager" and record["status"] == "valid":
            timing = record["metrics"]["device_time"]
            timing["samples_ns"] = [int(v * factor) for v in timing["samples_ns"]]
            timing["summary"] = summarize_ns(timing["samples_ns"])
            path.write_text(json.dumps(record))
    manifest.write(root)
    return root


def fusionbench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, cwd=REPO, timeout=120)


def test_a_regression_beside_unpaired_cells_is_said_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Unpaired cells returned before the regression's line: a CI log of standard error saw only them."""
    from harness.cli.main import main

    slow = slowed(tmp_path, 1.5)
    without_backend(slow, "null", ["eager", "inductor"])  # B ran with `--only`, the null backend left out
    assert main(["compare", str(GOLDEN / "v2"), str(slow)]) == 1
    err = capsys.readouterr().err
    assert "could not be paired" in err and "2 cell(s) of B regressed or newly failed against A" in err, err



def test_a_regression_between_two_systems_says_they_differ(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The line said a plain regression where B ran on another torch: a CI job that keeps only
    standard error could not tell the harness's or the model's slowdown from the system's."""
    from harness.cli.main import main

    slow = slowed(tmp_path, 1.5)
    header = json.loads((slow / "bundle.json").read_text())
    header["system"]["torch"]["version"] = "9.9.9"
    (slow / "bundle.json").write_text(json.dumps(header))
    manifest.write(slow)
    assert main(["compare", str(GOLDEN / "v2"), str(slow)]) == 1
    assert capsys.readouterr().err.splitlines()[-1] == ("fusionbench: 2 cell(s) of B regressed or newly failed against A "
                                                        "(listed above); the two systems differ (torch: listed above), "
                                                        "which may be why")

@pytest.mark.slow
def test_cli_exits_1_on_a_regression_and_0_otherwise(tmp_path: Path) -> None:
    slow = slowed(tmp_path, 1.5)
    done = fusionbench("compare", str(GOLDEN / "v2"), str(slow), "--format", "json")
    assert done.returncode == 1, done.stderr
    result = json.loads(done.stdout)
    assert result["counts"]["regressed"] == 2 and result["worse"]
    # the last line (the line before it says the slowed bundle is a copy of the golden run, as it is)
    assert done.stderr.splitlines()[-1] == "fusionbench: 2 cell(s) of B regressed or newly failed against A (listed above)"
    assert result["geomean_by_backend"]["eager"]["geomean_ratio"] == pytest.approx(1.5, rel=0.01)
    done = fusionbench("compare", str(slow), str(GOLDEN / "v2"))
    assert done.returncode == 0 and "regressed" not in done.stderr, done.stderr
    assert "improved: 2" in done.stdout and "| eager | 2 | 0.667 |" in done.stdout


@pytest.mark.slow
def test_cli_compares_across_schema_versions_and_shows_the_systems() -> None:
    done = fusionbench("compare", str(GOLDEN / "v1"), str(GOLDEN / "v2"))
    assert done.returncode in (0, 1), done.stderr
    assert "## The systems differ" in done.stdout and "harness git sha" in done.stdout
    assert "A skipped: inductor fusion=off is not implemented yet" in done.stdout  # v1's skip, v2 runs it


@pytest.mark.slow
def test_cli_refuses_a_damaged_bundle_and_a_bad_threshold(tmp_path: Path) -> None:
    damaged = tmp_path / "damaged"
    shutil.copytree(GOLDEN / "v2", damaged)
    (damaged / "report.md").write_text("edited")
    done = fusionbench("compare", str(GOLDEN / "v2"), str(damaged))
    assert done.returncode == 2 and "fails validation: report.md: edited" in done.stderr
    done = fusionbench("compare", str(GOLDEN / "v2"), str(GOLDEN / "v2"), "--threshold", "5")
    assert done.returncode == 2 and "--threshold 5.0" in done.stderr


def test_cells_that_ran_on_different_hardware_are_never_paired() -> None:
    def on(model: str, gpus: list[str]) -> CellRecord:
        return cell(samples=[100] * 20, node={"hostname": "n", "cpu": {"model": model, "logical_cores": 8}, "gpus": gpus})

    pair = compare_cells(on("EPYC", ["H100"]), on("EPYC", ["H200"]), 0.05, 0.01)
    assert pair.verdict == "not comparable" and "ran on different hardware" in pair.why and "H200" in pair.why
    same = compare_cells(on("EPYC", ["H100"]), on("EPYC", ["H100"]), 0.05, 0.01)
    assert same.verdict == "not significant"



def test_cells_on_two_generations_under_one_cpu_name_are_never_paired() -> None:
    """A VM calls Zen 3 and Zen 4 alike "AMD EPYC", and may hide AVX-512 the host has: oneDNN and MLAS
    run other kernels there. Cells that recorded their CPU's identity (since 2026-12-04) are paired
    only on the same one; a cell that did not record it is paired as before."""
    def on(identity: str | None, extensions: list[str] | None) -> CellRecord:
        cpu = {"model": "AMD EPYC", "logical_cores": 2, "identity": identity, "vector_extensions": extensions}
        return cell(samples=[100] * 20, node={"hostname": "n", "cpu": cpu, "gpus": []})

    milan, genoa = (f"vendor_id AuthenticAMD, cpu family 25, model {m}, stepping 1" for m in (1, 17))
    pair = compare_cells(on(milan, ["avx2"]), on(genoa, ["avx2", "avx512f"]), 0.05, 0.01)
    assert pair.verdict == "not comparable" and pair.why == f"ran on different hardware: A a CPU of {milan}, B a CPU of {genoa}"
    masked = compare_cells(on(genoa, ["avx2"]), on(genoa, ["avx2", "avx512f"]), 0.05, 0.01)
    assert masked.verdict == "not comparable" and "B a CPU with the vector extensions avx2 avx512f" in masked.why
    for older in (on(None, None), cell(samples=[100] * 20, node={"hostname": "n", "cpu": {"model": "AMD EPYC", "logical_cores": 2}})):
        assert compare_cells(older, on(genoa, ["avx2"]), 0.05, 0.01).verdict == "not significant"
    assert compare_cells(on(genoa, ["avx2"]), on(genoa, ["avx2"]), 0.05, 0.01).verdict == "not significant"


def test_a_run_over_machines_of_different_kinds_says_so() -> None:
    from harness.reporting.run_facts import machines

    node = {"cpu": {"model": "EPYC", "logical_cores": 8}, "gpus": ["H100"]}
    assert machines({"a": node}) == ""
    assert "all EPYC x8, H100" in machines({"a": node, "b": node})
    mixed = machines({"a": node, "b": {**node, "gpus": ["H200"]}})
    assert "2 machines (a, b) of 2 different kinds" in mixed
    # One model name over two generations of CPU, or one that hides vector extensions: two kinds.
    milan, genoa = "vendor_id AuthenticAMD, cpu family 25, model 1", "vendor_id AuthenticAMD, cpu family 25, model 17"
    def with_cpu(identity: str | None, extensions: list[str] | None) -> dict[str, Any]:
        return {**node, "cpu": {**node["cpu"], "identity": identity, "vector_extensions": extensions}}
    assert "of 2 different kinds" in machines({"a": with_cpu(milan, ["avx2"]), "b": with_cpu(genoa, ["avx2"])})
    assert "of 2 different kinds" in machines({"a": with_cpu(genoa, ["avx2"]), "b": with_cpu(genoa, ["avx2", "avx512f"])})
    assert f"all EPYC x8, H100 ({genoa})" in machines({"a": with_cpu(genoa, ["avx2"]), "b": with_cpu(genoa, ["avx2"])})
    # A node that recorded no identity (an older harness) is not told apart by it.
    for older_first in (True, False):
        pair = [("a", node), ("b", with_cpu(genoa, ["avx2"]))][:: 1 if older_first else -1]
        assert machines(dict(pair)).endswith("all EPYC x8, H100")


def copy_of(name: str, tmp_path: Path) -> Path:
    """A golden bundle copied: `compare` refuses one bundle given as both sides."""
    copy = tmp_path / f"{name}-copy"
    if not copy.exists():
        shutil.copytree(GOLDEN / name, copy)
    return copy


@pytest.mark.slow
def test_valid_cells_that_cannot_be_paired_are_listed_and_exit_1_unless_allowed(tmp_path: Path) -> None:
    done = fusionbench("compare", str(GOLDEN / "v3"), str(GOLDEN / "mlperf"))
    assert done.returncode == 1, done.stderr
    assert "## Unpaired:" in done.stdout and "valid in A; B ran no cell of resnet18" in done.stdout
    assert "valid in B; A ran no cell of mobilenet\\_v3\\_small" in done.stdout and "--allow-missing" in done.stderr
    allowed = fusionbench("compare", str(GOLDEN / "v3"), str(GOLDEN / "mlperf"), "--allow-missing", "--format", "json")
    assert allowed.returncode == 0, allowed.stderr
    assert len(json.loads(allowed.stdout)["unpaired"]) >= 2
    same = fusionbench("compare", str(GOLDEN / "v3"), str(copy_of("v3", tmp_path)))
    assert same.returncode == 0 and "Unpaired" not in same.stdout


def with_figure(row: Metric, figure: float | None, **settings: Any) -> CellRecord:
    """A valid cell (enough timing samples) whose figure of `row` is `figure` (None: the record lacks it)."""
    data = cell_data(samples=BASE)
    metrics = data["metrics"]
    metrics.update(json.loads(json.dumps(settings)))
    if row.name == "cpu_cores":  # made from what ran beside the timed repetitions, on a CPU
        data["config"]["device"] = "cpu"
        metrics["device_time"]["repetitions"] = [] if figure is None else [
            {"when": "before", "n": 5, "median_ns": 1000, "beside": {"cpu": {"wall_s": 2.0, "process_cpu_s": figure}}},
            {"when": "after", "n": 5, "median_ns": 1000, "beside": {"cpu": {"wall_s": 2.0, "process_cpu_s": 3 * figure}}}]
        return record(data)
    if row.only_if is not None:  # the LoadGen rows hold where the recorded unit is theirs
        *parents, key = row.only_if[0][1:]
        node = metrics
        for name in parents:
            node = node[name]
        node[key] = row.only_if[1]
    if row.name == "tuning_time":  # a tuned cell's record, its time the worker's tune phase
        if figure is not None:
            metrics["tuning"] = {"tuned": True, "cache": "cold", "database_sha256": "0" * 64, "tuning_s": figure}
            data["phases_s"]["tune"] = figure
        return record(data)
    if row.name == "compile_time" and figure is not None:  # the compile time is the worker's prepare phase
        data["phases_s"]["prepare"] = figure
    if row.name == "dram_bytes":  # a measured record comes whole: its reads and writes make the total
        metrics["memory_traffic"] = None if figure is None else {
            "method": "counters", "caches_flushed": True, "dram_read_bytes_per_inference": figure / 2,
            "dram_write_bytes_per_inference": figure / 2, "dram_bytes_per_inference": figure}
        return record(data)
    if row.name == "peak_rss":  # a peak comes with its delta over the baseline, never below it, or neither
        memory = metrics["memory"]
        if figure is None:
            memory.update(peak_rss_bytes=None, peak_rss_delta_bytes=None)
            return record(data)
        # the lifetime peak holds the inference pass's peak and the baseline (validate holds it to both)
        memory["inference_peak_rss_bytes"] = inference = min(memory["inference_peak_rss_bytes"], int(figure))
        # one baseline whatever the figure (the smallest a test gives is 100 bytes), as the cells of one run
        # have: compare sets peak RSS side by side only where the baselines agree
        memory["rss_baseline_bytes"] = baseline = min(memory["rss_baseline_bytes"], inference, 64)
        memory.update(peak_rss_bytes=int(figure), peak_rss_delta_bytes=int(figure) - baseline,
                      inference_peak_rss_delta_bytes=inference - baseline)
        return record(data)
    if row.name in ("graph_breaks", "recompiles"):  # a Dynamo record comes whole: its breaks are its reasons' counts
        breaks = int(figure or 0) if row.name == "graph_breaks" else 0
        metrics["dynamo"] = None if figure is None else {
            "graphs": breaks + 1, "graph_breaks": breaks, "distinct_break_reasons": 1 if breaks else 0,
            "break_reasons": [{"reason": "Unsupported Tensor.item() call", "count": breaks}] if breaks else [],
            "recompiles_timed": int(figure) if row.name == "recompiles" else 0, "method": "test"}
        return record(data)
    if row.name == "fusions":  # the count is its kernels': a report of that many fused kernels
        kernels = tuple(KernelGroup(f"k{i}", ("aten.convolution", "aten.relu")) for i in range(int(figure or 0)))
        metrics["fusion_report"] = None if figure is None else FusionReport(kernels=kernels, source="test").to_json()
        return record(data)
    *parents, key = row.path[1:]
    node = metrics
    for name in parents:
        node = node[name]
    node[key] = figure
    if row.name == "first_call_ratio" and figure is not None:  # a derived figure comes with what it derives from
        metrics["first_call_s"] = data["phases_s"]["first_call"] = figure * metrics["device_time"]["summary"]["median_ns"] / 1e9
    if figure is None and parents and key in ("top1_percent", "fusion_count"):  # a required figure: the record it belongs to goes
        metrics[parents[0]] = None
    return record(data)


def judged(row: Metric, a: float | None, b: float | None, **settings: Any) -> Figure:
    pair = compare_cells(with_figure(row, a, **settings), with_figure(row, b, **settings), 0.05, 0.01)
    (found,) = [f for f in pair.figures if f.metric == row.name]
    return found


SINGLE = [row for row in metric_table.compared() if row.rule != "rank test"]


def scaled(row: Metric, value: float) -> float:
    """`value` within the row's range: a percentage is at most 100."""
    return value * 0.4 if row.unit == "percent" else value


@pytest.mark.parametrize("row", SINGLE, ids=[row.name for row in SINGLE])
def test_each_figure_is_judged_in_its_own_direction(row: Metric) -> None:
    one, two = scaled(row, 100.0), scaled(row, 200.0)
    up = judged(row, one, two)
    assert up.verdict == ("changed" if row.better is None else "worse" if row.better == "lower" else "better")
    assert up.ratio == 2.0
    down = judged(row, two, one)
    assert down.verdict == ("changed" if row.better is None else "better" if row.better == "lower" else "worse")
    assert judged(row, one, one).verdict == "same"
    assert up.a_shown == row.figure(with_figure(row, one)) and up.a_shown != "-"
    missing = judged(row, one, None)
    assert missing.verdict == "not comparable" and missing.why == "only A has it"
    assert judged(row, None, one).why == "only B has it"
    pair = compare_cells(with_figure(row, None), with_figure(row, None), 0.05, 0.01)
    assert row.name not in {f.metric for f in pair.figures}, "a figure neither cell has is not listed"


def test_a_recompile_in_a_further_round_is_a_change_in_timed_recompiles() -> None:
    """Every round's median enters a cell's time, yet the row read round 1's record alone: a cell of two
    rounds that compiled 6 frames again in round 2's timed calls compared as `0` beside `0`, `same`."""
    recompiles = metric_table.metric("recompiles")

    def two_rounds(round_2: int | None) -> CellRecord:
        data = with_figure(recompiles, 0).model_dump(mode="json", exclude_unset=True)
        data["config"]["timing"]["rounds"] = 2
        timing = data["metrics"]["device_time"]["summary"]
        data["metrics"]["rounds"] = [
            {"round": 1, "status": "valid", "median_ns": timing["median_ns"], "cv": timing["cv"], "n": timing["n"]},
            {"round": 2, "status": "valid", "median_ns": 1010.0, "cv": 0.01, "n": 40, "samples_ns": BASE,
             **({} if round_2 is None else {"recompiles_timed": round_2})}]
        return record(data)

    pair = compare_cells(two_rounds(0), two_rounds(6), 0.05, 0.01)
    (found,) = [f for f in pair.figures if f.metric == "recompiles"]
    assert (found.a_shown, found.b_shown, found.verdict) == ("0", "6", "worse")
    # a further round recorded before its recompiles were watched adds none: round 1's figure stands
    assert recompiles.value(two_rounds(None)) == 0


@pytest.mark.parametrize("row", SINGLE, ids=[row.name for row in SINGLE])
def test_one_figure_a_side_gets_a_ratio_and_a_threshold_or_counts_any_change(row: Metric) -> None:
    small = judged(row, scaled(row, 100.0), scaled(row, 103.0))  # 3%: inside the 5% threshold
    assert small.verdict == ("same" if row.rule == "ratio" else "changed" if row.better is None
                             else "worse" if row.better == "lower" else "better")
    assert small.ratio == pytest.approx(1.03)


def test_device_time_keeps_its_rank_test_and_leads_the_figures() -> None:
    pair = compare_cells(cell(samples=BASE), cell(samples=[int(v * 1.3) for v in BASE]), 0.05, 0.01)
    device = pair.figures[0]
    assert device.metric == "device_time" and device.rule == "rank test"
    assert pair.verdict == "regressed" and device.verdict == "worse" and device.ratio == pair.ratio
    noisy = compare_cells(cell(samples=[100, 300] * 4 + [200, 200]), cell(samples=[110, 290] * 4 + [220, 220]), 0.05, 0.01)
    assert noisy.figures[0].verdict == "same" and "p =" in noisy.figures[0].why


def _rounds(*sides: list[int]) -> CellRecord:
    """A cell timed over one round per list of samples, as `timing: {rounds: N}` records it."""
    data = cell_data(samples=sides[0])
    data["config"]["timing"]["rounds"] = len(sides)
    data["metrics"]["rounds"] = [
        {"round": i, "status": "valid", "median_ns": median(samples), "cv": 0.02, "n": len(samples),
         **({"samples_ns": samples} if i > 1 else {})} for i, samples in enumerate(sides, 1)]
    return record(data)


def test_a_cell_of_several_rounds_is_judged_on_them_all() -> None:
    """Round 1 alone judged it: a first round 30% faster than the two after it made B `improved`,
    where its rounds' median (as the report shows it) is A's."""
    fast = [int(v * 0.7) for v in BASE]
    b = _rounds(fast, BASE, [v + 3 for v in BASE])
    pair = compare_cells(cell(samples=BASE), b, 0.05, 0.01)
    assert pair.median_b_ns == median([median(fast), median(BASE), median(BASE) + 3]) == median(BASE)
    assert pair.verdict == "not significant" and pair.ratio == 1.0, pair
    assert "over 3 rounds" in pair.figures[0].b_shown and pair.figures[0].b == pair.median_b_ns
    slower = _rounds(*[[int(v * 1.3) + i for v in BASE] for i in range(3)])  # every round slower: the test agrees
    judged = compare_cells(cell(samples=BASE), slower, 0.05, 0.01)
    assert judged.verdict == "regressed" and judged.test == "t test on 1 and 3 round(s)' medians", judged


def test_rounds_are_tested_on_their_medians_so_a_process_to_process_spread_is_no_change() -> None:
    """The rank test on the pooled samples of three rounds a side called most equal pairs of a
    machine whose processes differ by 5% changed at p < 0.01 (85 of 100 in test_intervals.py): each round's samples are tight, so any
    two sets of processes differ. Here A's and B's rounds are the same three processes' levels,
    shuffled: no change, where the pooled rank test says p < 0.01."""
    levels = (0.95, 1.0, 1.07)
    tight = [1_000_000 + 100 * ((i * 37) % 50) for i in range(40)]  # 0.5% within a process
    a = _rounds(*[[int(v * level) for v in tight] for level in levels])
    b = _rounds(*[[int(v * level) + 1 for v in tight] for level in (levels[2], levels[0], levels[2])])
    pair = compare_cells(a, b, 0.05, 0.01)
    pooled = [v for r in (a.metrics.device_time.samples_ns, *(x.samples_ns for x in a.metrics.rounds[1:])) for v in r]
    pooled_b = [v for r in (b.metrics.device_time.samples_ns, *(x.samples_ns for x in b.metrics.rounds[1:])) for v in r]
    assert mann_whitney_u(pooled, pooled_b)[1] < 0.01, "the pooled samples would have called it"
    assert pair.ratio is not None and pair.ratio > 1.05 and pair.p_value is not None and pair.p_value > 0.01
    assert pair.verdict == "not significant" and pair.why.startswith("p = "), pair


def test_rounds_of_one_median_a_side_are_left_to_the_rank_test_not_to_a_t_of_rounding() -> None:
    """Three rounds of 1 ms a side against three of 1.2 ms (a coarse clock's medians) read `t test on 3 and 3
    round(s)' medians`, p = 1e-56: the pooled spread of their logs was rounding, not 0."""
    pair = compare_cells(_rounds(*[[1_000_000] * 40] * 3), _rounds(*[[1_200_000] * 40] * 3), 0.05, 0.01)
    assert pair.test == "normal approximation" and pair.verdict == "regressed", pair


def test_a_rank_test_pointing_against_the_medians_confirms_no_change() -> None:
    """A's median is 5 ms and B's 6 ms, yet B's samples rank below A's (A's 45% at 100 ms): the
    two-sided test is significant, the other way: B was called `regressed`."""
    a = cell(samples=[5_000_000 + i for i in range(55)] + [100_000_000 + i for i in range(45)])
    b = cell(samples=[4_000_000 + i for i in range(45)] + [6_000_000 + i for i in range(55)])
    pair = compare_cells(a, b, 0.05, 0.01)
    assert pair.ratio is not None and pair.ratio > 1.05 and pair.p_value is not None and pair.p_value < 0.01
    assert pair.verdict == "not significant" and "points the other way" in pair.why, pair


def test_the_threshold_is_5_percent_either_way_as_a_speedup_reads() -> None:
    """B 1.0515x faster than A was `within 5%` (B/A 0.951 > 0.95) where 1.0515x slower was `regressed`."""
    faster = compare_cells(cell(samples=BASE), cell(samples=[round(v / 1.0515) for v in BASE]), 0.05, 0.01)
    slower = compare_cells(cell(samples=BASE), cell(samples=[round(v * 1.0515) for v in BASE]), 0.05, 0.01)
    assert (faster.verdict, slower.verdict) == ("improved", "regressed"), (faster, slower)


def test_a_figure_that_depends_on_a_setting_the_cells_differ_in_is_not_comparable() -> None:
    compile_time = metric_table.metric("compile_time")
    a = with_figure(compile_time, 30.0, prepare_cache="cold")
    b = with_figure(compile_time, 0.5, prepare_cache="warm")
    (found,) = [f for f in compare_cells(a, b, 0.05, 0.01).figures if f.metric == "compile_time"]
    assert found.verdict == "not comparable" and found.why == "prepare_cache differs: A cold, B warm"
    # Under 100 ms a prepare compiles nothing: eager's 30 us against 300 us is no change.
    assert judged(compile_time, 30e-6, 300e-6, prepare_cache="none").verdict == "same"


def test_peak_rss_is_compared_only_between_workers_that_started_the_same_way() -> None:
    peak_rss = metric_table.metric("peak_rss")
    fresh, forked = with_figure(peak_rss, 801e6), with_figure(peak_rss, 519e6)
    assert fresh.metrics.memory is not None
    data = fresh.model_dump(mode="json", exclude_unset=True)
    del data["metrics"]["memory"]["worker_start"]
    fresh = record(data)
    assert fresh.metrics.memory is not None and "worker_start" not in fresh.metrics.memory.model_fields_set
    assert fresh.metrics.memory.worker_start == "fresh"  # a record from before preloaded parents: a fresh worker
    forked.metrics.memory.worker_start = "preloaded"
    (found,) = [f for f in compare_cells(fresh, forked, 0.05, 0.01).figures if f.metric == "peak_rss"]
    assert found.verdict == "not comparable" and found.why == "worker_start differs: A fresh, B preloaded"
    (same,) = [f for f in compare_cells(forked, forked, 0.05, 0.01).figures if f.metric == "peak_rss"]
    assert same.verdict == "same"


def test_peak_rss_is_compared_only_between_cells_whose_compile_ran_alike() -> None:
    """A compile in the worker counts in its peak: TVM's convnext_tiny read 1.56 GiB cold against
    1.14 GiB warm, and compare called the warm cell better."""
    peak_rss = metric_table.metric("peak_rss")
    cold, warm = with_figure(peak_rss, 1675e6, prepare_cache="cold"), with_figure(peak_rss, 1224e6, prepare_cache="warm")
    (found,) = [f for f in compare_cells(cold, warm, 0.05, 0.01).figures if f.metric == "peak_rss"]
    assert found.verdict == "not comparable" and found.why == "prepare_cache differs: A cold, B warm"


def test_pairs_that_are_not_both_valid_judge_no_figure() -> None:
    assert compare_cells(cell(samples=BASE), cell("failed", reason="prepare: boom"), 0.05, 0.01).figures == []
    tf32 = compare_cells(cell(samples=BASE), cell(samples=BASE, math="tf32"), 0.05, 0.01)
    assert tf32.verdict == "not comparable" and tf32.figures == []


@pytest.mark.slow
def test_the_cli_lists_the_other_figures_and_keeps_its_exit_code(tmp_path: Path) -> None:
    root = tmp_path / "more-memory"
    shutil.copytree(GOLDEN / "v2", root)
    grown = 0
    for path in (root / "cells").glob("*.json"):
        record = json.loads(path.read_text())
        if record["status"] == "valid":
            memory = record["metrics"]["memory"]
            memory["peak_rss_delta_bytes"] += memory["peak_rss_bytes"]  # the delta over the baseline grows with it
            memory["peak_rss_bytes"] *= 2
            path.write_text(json.dumps(record))
            grown += 1
    manifest.write(root)
    done = fusionbench("compare", str(GOLDEN / "v2"), str(root), "--format", "json")
    assert done.returncode == 0, done.stderr  # memory informs; device time and failures decide the code
    result = json.loads(done.stdout)
    assert result["figure_counts"]["peak_rss"] == {"worse": grown, "better": 0, "changed": 0, "same": 0,
                                                       "not comparable": 0}
    assert result["figures"]["peak_rss"]["rule"] == "ratio" and result["figures"]["device_time"]["rule"] == "rank test"
    text = fusionbench("compare", str(GOLDEN / "v2"), str(root)).stdout
    assert "## Other figures" in text and ("| peak RSS | lower | one reading a side, its round 1's whatever its rounds "
                                           "(no spread to judge by): B/A beyond 5% |") in text
    assert "| resnet18 inductor fusion-on Offline cpu fp32 b4 input 32 | peak RSS | 952 MiB | 1.86 GiB | 2.000 | **worse** |" in text


def test_fusion_verdicts_agree_where_both_bundles_judge_alike_and_not_otherwise() -> None:
    faster = paired_speedup([10.0, 10.2, 9.9], [12.0, 12.1, 11.8])
    also_faster = paired_speedup([10.0, 10.1, 10.3], [12.5, 12.2, 12.9])
    slower = paired_speedup([10.0, 10.1, 10.0], [9.0, 9.1, 8.9])
    one_round = paired_speedup([10.0], [12.0])
    assert (faster.verdict, slower.verdict, one_round.verdict) == ("faster", "slower", "one round")
    same = FusionVerdict("m b on/off", faster, also_faster)
    flipped = FusionVerdict("m b on/off", faster, slower)
    unjudged = FusionVerdict("m b on/off", faster, one_round)
    missing = FusionVerdict("m b on/off", faster, None)
    assert (same.agree, same.overlap) == (True, True)
    assert (flipped.agree, flipped.overlap) == (False, False)
    assert (unjudged.judged, unjudged.agree, unjudged.overlap) == (False, False, False)
    assert verdict_line([same, flipped, unjudged, missing]) == (
        "verdicts agree: 1 of 3 pairs; intervals overlap: 1 of 3 (1 with one round, or rounds alike, in a bundle: no verdict)")
    alike = FusionVerdict("m b on/off", paired_speedup([10.0] * 3, [12.0] * 3), paired_speedup([10.0] * 3, [12.0] * 3))
    assert (alike.judged, alike.agree, alike.overlap) == (False, False, False)  # "faster" twice, from no spread
    assert flipped.recorded()["b"]["verdict"] == "slower" and missing.recorded()["b"] is None
    # the JSON said `"agree": false, "overlap": false` where the table says `-`: no verdict, no interval to set apart
    assert [(v.recorded()["agree"], v.recorded()["overlap"]) for v in (same, flipped, unjudged, missing)] == [
        (True, True), (False, False), (None, None), (None, None)]



def test_fusion_verdicts_of_cells_that_ran_unlike_in_a_and_b_are_not_set_side_by_side() -> None:
    """The cells' pairs refuse two runs on other torch thread counts (or env: values, hardware, share,
    math mode), but "Fusion speedups" set their verdicts side by side: `agree yes` of a run on one
    thread against one on two."""
    from dataclasses import replace

    from harness.bundle.reader import load
    from harness.reporting.compare import compare
    from harness.reporting.compare_output import to_markdown

    a = load(GOLDEN / "v6")
    cells = json.loads(json.dumps(a.cells))
    for cell in cells:
        if isinstance(cell.get("environment"), dict):
            cell["environment"]["torch_threads"] = 1
    comparison = compare(a, replace(a, cells=cells))
    assert comparison.fusion and all(v.unlike and not v.judged and not v.intervals for v in comparison.fusion)
    assert comparison.fusion[0].shown()[2:] == ("not comparable", "not comparable")
    assert comparison.fusion[0].unlike.startswith("fusion on: ran with other threads or variables: torch threads A 2, B 1")
    assert comparison.fusion[0].recorded()["agree"] is None
    text = to_markdown(comparison)
    assert f"; {len(comparison.fusion)} not compared, their cells ran unlike in A and B (listed below)" in text
    assert all(v.agree and not v.unlike for v in compare(a, a).fusion), "alike runs are still set side by side"


def test_fusion_verdicts_of_cells_apart_in_their_hardware_alone_are_set_side_by_side() -> None:
    """A lab reproducing a run on its own machine asks whether fusion's verdict holds there: each
    bundle's verdict was reached on one machine, so they are set side by side (`yes (other hardware)`),
    counted apart; every fusion pair of such a rerun read `not comparable` in both columns. The
    intervals stay not comparable, and other threads beside the hardware still keep both apart."""
    from dataclasses import replace

    from harness.bundle.reader import load
    from harness.reporting.compare import compare
    from harness.reporting.compare_output import to_json, to_markdown

    a = load(GOLDEN / "v6")
    elsewhere = json.loads(json.dumps(a.cells))
    for record in elsewhere:
        record["node"]["cpu"]["model"] = "Intel Xeon"
    comparison = compare(a, replace(a, cells=elsewhere))
    assert comparison.fusion and all(v.unlike and v.across_hardware and not v.judged for v in comparison.fusion)
    assert comparison.fusion[0].shown()[2:] == ("yes (other hardware)", "not comparable")
    assert comparison.fusion[0].recorded()["agree"] is None and comparison.fusion[0].recorded()["overlap"] is None
    assert comparison.fusion[0].recorded()["agree_across_hardware"] is True
    line = (f"verdicts agree: 0 of 0 pairs; intervals overlap: 0 of 0; on other hardware, verdicts agree: "
            f"{len(comparison.fusion)} of {len(comparison.fusion)} pairs, their directions {len(comparison.fusion)} of "
            f"{len(comparison.fusion)}, intervals not compared (a speedup's size is its machine's)")
    assert json.loads(to_json(comparison))["fusion_verdicts_line"] == line
    text = to_markdown(comparison)
    assert f"{line}\n\nOn other hardware, their verdicts set side by side, their intervals not:\n" in text
    assert "Not comparable, A's cells and B's ran unlike" not in text
    # a verdict that does not reproduce, and one of a single round, read so
    first = comparison.fusion[0]
    assert first.a is not None
    flipped = replace(first, b=paired_speedup([10.0, 10.1, 10.0], [9.0, 9.1, 8.9]))
    one_round = replace(first, b=paired_speedup([10.0], [12.0]))
    assert first.a.verdict == "no effect seen"  # its interval holds 1: no direction, which B's below 1 is not
    assert flipped.shown()[2] == "no (other hardware), direction no" and flipped.recorded()["agree_across_hardware"] is False
    assert one_round.shown()[2] == "-" and one_round.recorded()["agree_across_hardware"] is None
    assert one_round.recorded()["direction_agrees_across_hardware"] is None
    assert verdict_line([flipped, one_round]).endswith(
        "on other hardware, verdicts agree: 0 of 2 pairs (1 with no verdict in a bundle), their directions 0 of 2, "
        "intervals not compared (a speedup's size is its machine's)")
    # fusion helped on both machines, by 30% on one and 2% on the other: the words differ, the direction held
    faster = replace(first, a=paired_speedup([10.0, 10.1, 9.9], [13.0, 13.2, 12.9]),
                     b=paired_speedup([10.0, 10.1, 10.0], [10.2, 10.3, 10.25]))
    assert faster.a is not None and faster.b is not None
    assert (faster.a.verdict, faster.b.verdict) == ("faster", "under 5%")
    assert faster.shown()[2] == "no (other hardware), direction yes"
    assert faster.recorded()["agree_across_hardware"] is False
    assert faster.recorded()["direction_agrees_across_hardware"] is True
    # one word, `under 5%`, above 1 on one machine and below it on the other: the direction did not hold
    both_ways = replace(faster, a=paired_speedup([10.0, 10.1, 10.0], [9.8, 9.9, 9.85]))
    assert both_ways.shown()[2] == "yes (other hardware), direction no"
    assert both_ways.recorded()["direction_agrees_across_hardware"] is False
    assert "their directions 1 of 2," in verdict_line([faster, both_ways])
    # another share of the other machine, or other threads as well: not comparable, as before
    bound = json.loads(json.dumps(elsewhere))
    for record in bound:
        record["environment"]["cpu_affinity"] = [0]
    assert all(v.unlike and not v.across_hardware for v in compare(a, replace(a, cells=bound)).fusion)
    for record in elsewhere:
        record["environment"]["torch_threads"] = 1
    threads = compare(a, replace(a, cells=elsewhere)).fusion
    assert all(v.unlike and not v.across_hardware for v in threads)
    assert threads[0].shown()[2:] == ("not comparable", "not comparable")
    # why, in full: the hardware alone, which the caption says is compared, read as the reason
    assert threads[0].unlike.startswith("fusion on: ran on different hardware: A AMD EPYC x2, no GPU, B Intel Xeon x2, "
                                        "no GPU; ran with other threads or variables: torch threads A 2, B 1; fusion off:")
    assert threads[0].recorded()["agree_across_hardware"] is None

@pytest.mark.slow
def test_the_cli_shows_each_fusion_pairs_speedup_in_both_bundles(tmp_path: Path) -> None:
    """Golden v6 ran two rounds: compared with a copy of itself, every pair agrees and overlaps."""
    text = fusionbench("compare", str(GOLDEN / "v6"), str(copy_of("v6", tmp_path))).stdout
    section = text[text.index("## Fusion speedups"):]
    assert "| resnet18 inductor Offline b4 fp32 cpu input 32 | 1.06x \\[0.42-2.72, 95%\\] no effect seen |" in section
    assert "verdicts agree: 2 of 2 pairs; intervals overlap: 2 of 2\n" in section
    data = json.loads(fusionbench("compare", str(GOLDEN / "v6"), str(copy_of("v6", tmp_path)), "--format", "json").stdout)
    assert data["fusion_verdicts_line"] == "verdicts agree: 2 of 2 pairs; intervals overlap: 2 of 2"
    assert [v["a"]["verdict"] for v in data["fusion_verdicts"]] == ["no effect seen", "no effect seen"]


@pytest.mark.slow
def test_the_json_names_the_rank_test_each_pair_got(tmp_path: Path) -> None:
    data = json.loads(fusionbench("compare", str(GOLDEN / "v6"), str(copy_of("v6", tmp_path)), "--format", "json").stdout)
    assert "Student's t on the logs of the rounds' medians" in data["test"] and "exact where" in data["test"]
    tests = {p["test"] for p in data["pairs"] if p["p_value"] is not None}
    assert tests == {"t test on 2 and 2 round(s)' medians"}, "the golden cells have two rounds each"
    one_round = compare_cells(cell(samples=list(range(1000, 1020))), cell(samples=list(range(1100, 1120))), 0.05, 0.01)
    assert one_round.test == "exact"
    from harness.stats.summary import u_test_method

    assert u_test_method([1, 2, 3], [4, 5, 6]) == "exact" and u_test_method([1, 1, 2], [3, 4]) == "normal approximation"
    assert u_test_method(list(range(30)), list(range(100, 130))) == "normal approximation"
    # 20 samples against 1,001 get the normal approximation: the JSON's rule said exact (it left the product out)
    assert u_test_method(list(range(20)), list(range(100, 1101))) == "normal approximation"
    assert "product is at most 20,000" in data["test"] and "no two samples of either side are equal" in data["test"]


def test_a_backend_one_run_recorded_and_the_other_not_is_a_system_difference() -> None:
    a = header()
    b = header(backends={**HEADER["backends"], "myplugin": {"available": True, "reason": "", "versions": {"mylib": "1.2.3"}}})
    rows = system_differences(a, b)
    assert ("backend myplugin", "-", "available, mylib 1.2.3") in rows
    assert system_differences(a, a) == []


def test_cells_pair_whatever_rounds_they_were_timed_over_and_the_pair_says_so() -> None:
    """A run of two rounds (golden v6, whose ids hashed them) against one of one (golden v5) pairs
    cell by cell: rounds say how a cell was measured, not what it is."""
    from harness.bundle.reader import load
    from harness.reporting.compare import compare

    comparison = compare(load(GOLDEN / "v5"), load(GOLDEN / "v6"))
    paired = [p for p in comparison.pairs if not p.why.startswith(("only in A", "only in B"))]
    assert len(paired) == 10 and not comparison.unpaired
    assert all("timed over 1 round(s) in A, 2 in B" in p.why for p in paired)


def test_a_valid_cell_whose_counterpart_was_interrupted_or_ran_unlike_it_is_unpaired() -> None:
    """Each judged nothing, so a CI gate on `compare` must not pass on it (exit 1 unless
    --allow-missing): a counterpart interrupted, or valid but of another math mode or hardware."""
    from dataclasses import replace

    from harness.bundle.reader import load
    from harness.reporting.compare import compare

    a = load(GOLDEN / f"v{SCHEMA_VERSION}")
    first = next(i for i, c in enumerate(a.cells) if c["status"] == "valid")
    label = a.records[first].config.shown_label

    def b_with(change: Any) -> list[str]:
        cells = json.loads(json.dumps(a.cells))
        change(cells[first])
        return compare(a, replace(a, cells=cells)).unpaired

    assert compare(a, a).unpaired == []
    assert b_with(lambda c: c.update(status="interrupted", reasons=["interrupted"])) == [
        f"{label}: valid in A, interrupted in B"]
    assert b_with(lambda c: c["metrics"]["math_mode"].update(effective="tf32")) == [
        f"{label}: valid in both, but math modes differ: A ieee, B tf32"]
    other_gpu = {"hostname": "n", "cpu": {"model": "EPYC", "logical_cores": 8}, "gpus": ["H200"]}
    unpaired = b_with(lambda c: c.update(node=other_gpu))
    assert len(unpaired) == 1 and unpaired[0].startswith(f"{label}: valid in both, but ran on different hardware")
    in_a_slot = {**(a.cells[first]["node"] or {}), "slot": {"index": 1, "cpus": [2, 3], "gpu": None}}
    assert b_with(lambda c: c.update(node=in_a_slot)) == [  # a --jobs cell against a whole-machine one
        f"{label}: valid in both, but ran on different shares of the machine: A the whole machine, "
        "B a slot of 2 core(s)"]
    bound = {**a.cells[first]["environment"], "cpu_affinity": [1]}  # `taskset -c 1` on the golden's 2 CPUs
    assert b_with(lambda c: c.update(environment=bound)) == [
        f"{label}: valid in both, but ran on different shares of the machine: A the whole machine, "
        "B 1 of the machine's 2 CPUs"]
    # the golden's cells are older than the quota's record: A's cell says it had none from here on
    none = {**a.cells[first]["environment"], "cpu_quota": None}
    a = replace(a, cells=[{**c, "environment": none} if i == first else c for i, c in enumerate(a.cells)])
    quota = {**none, "cpu_quota": 0.5}  # `docker --cpus 0.5`
    assert b_with(lambda c: c.update(environment=quota)) == [
        f"{label}: valid in both, but ran on different shares of the machine: A the whole machine, "
        "B the whole machine under a CPU quota of 0.5"]
    loose = {**none, "cpu_quota": 4.0}  # more than its 2 CPUs: no bound, the same share
    assert b_with(lambda c: c.update(environment=loose)) == []
    for hostile in (10 ** 400, float("nan"), float("inf"), "2", True, -1):  # none of them a quota: no bound, no raise
        environment = {**none, "cpu_quota": hostile}
        assert b_with(lambda c, given=environment: c.update(environment=given)) == []
    unknown = {k: v for k, v in none.items() if k != "cpu_quota"}  # a cell from before quotas were recorded
    a = replace(a, cells=[{**c, "environment": unknown} if i == first else c for i, c in enumerate(a.cells)])
    assert b_with(lambda c: c.update(environment=quota)) == [], "a quota one side did not record is not held to"


def test_cells_that_ran_on_other_threads_or_with_other_env_values_are_unpaired() -> None:
    """A run on torch's default threads against one under `OMP_NUM_THREADS=1` (the scenario's `env:`
    passing the shell's value on, a reproducer's shell without it) shares every cell id: compare
    judged the thread count as a speed change, said nothing of it, and exited 0 on an improvement."""
    from dataclasses import replace

    from harness.bundle.reader import load
    from harness.reporting.compare import compare

    a = load(GOLDEN / f"v{SCHEMA_VERSION}")
    first = next(i for i, c in enumerate(a.cells) if c["status"] == "valid" and c["config"]["backend"] == "eager")
    label = a.records[first].config.shown_label
    environment = a.cells[first]["environment"]

    def b_with(changed: dict[str, Any], env: list[str] | None = None) -> list[str]:
        cells = json.loads(json.dumps(a.cells))
        cells[first]["environment"] = {**environment, **changed}
        header = {**a.header, "scenario": {**a.header["scenario"], "env": env or []}}
        return compare(a, replace(a, cells=cells, header=header)).unpaired

    one_thread = {"torch_threads": 1, "variables": {**environment["variables"], "OMP_NUM_THREADS": "1"}}
    assert b_with(one_thread, ["OMP_NUM_THREADS"]) == [
        f"{label}: valid in both, but ran with other threads or variables: torch threads A 2, B 1; "
        "OMP_NUM_THREADS A unset, B 1"]
    bound = {"variables": {**environment["variables"], "KMP_AFFINITY": "compact"}}  # the same thread count
    assert b_with(bound, ["KMP_AFFINITY=compact"]) == [
        f"{label}: valid in both, but ran with other threads or variables: KMP_AFFINITY A unset, B compact"]
    # a variable no scenario passed on (another checkout's PYTHONPATH, say) is not a setting of the cells
    elsewhere = {"variables": {**environment["variables"], "PYTHONPATH": "/elsewhere"}}
    assert b_with(elsewhere) == []
    assert b_with({"torch_threads": True}) == [], "a count is an integer, never a boolean"
    pair = next(p for p in compare(a, a).pairs if p.label == label)
    assert pair.verdict != "not comparable"


@pytest.mark.parametrize(("threshold", "shown"), [(0.05, "5%"), (0.025, "2.5%"), (0.001, "0.1%")])
def test_the_threshold_is_written_as_given_not_rounded_to_a_whole_percent(threshold: float, shown: str) -> None:
    from harness.reporting.compare import Comparison
    from harness.reporting.compare_output import to_markdown

    pair = compare_cells(cell(samples=BASE), cell(samples=[v + 2 for v in BASE]), threshold, 0.01)  # B/A about 1.002
    if threshold > 0.002:
        assert pair.why.startswith(f"within {shown} (B/A 1.00")
    text = to_markdown(Comparison(a="A", b="B", threshold=threshold, alpha=0.01, pairs=[pair]))
    assert f"B/A is beyond {shown} either way and a test agrees" in text


def test_pairs_and_fusion_verdicts_name_a_cells_options_and_input_size() -> None:
    """Two cells that differ only in an option (or an input size not the model's own) read alike
    under `label`; `compare` names them as the run printed them."""
    from harness.bundle.reader import load
    from harness.reporting.compare import compare

    comparison = compare(load(GOLDEN / "v7"), load(GOLDEN / "v7"))
    labels = {p.label for p in comparison.pairs}
    assert "resnet18 tvm fusion-on tuning_trials=1 Offline cpu fp32 b4 input 32" in labels
    assert "resnet18 tvm tuning_trials=1 Offline b4 fp32 cpu input 32" in {v.name for v in comparison.fusion}


def test_a_cell_the_other_bundle_ran_with_other_settings_is_named_so_not_not_run() -> None:
    from dataclasses import replace

    from harness.bundle.reader import load
    from harness.reporting.compare import compare

    a = load(GOLDEN / f"v{SCHEMA_VERSION}")
    cells = json.loads(json.dumps(a.cells))
    for cell in cells:
        cell["config"]["inputs"]["samples"] = 8
    comparison = compare(a, replace(a, cells=cells))
    unpaired = comparison.unpaired
    valid = sum(c["status"] == "valid" for c in a.cells)
    assert len(unpaired) == 2 * valid and not any("not run" in line for line in unpaired)
    # the cells table's two rows of one name say why too (both read "B ran no cell of these settings together")
    whys = {p.why for p in comparison.pairs}
    assert whys == {"only in A: B ran it with other settings (inputs.samples 16 in A, 8 in B)",
                    "only in B: A ran it with other settings (inputs.samples 8 in B, 16 in A)"}, whys
    assert all(line.endswith("ran it with other settings (inputs.samples 16 in A, 8 in B)") for line in unpaired[:valid])
    assert unpaired[valid].endswith("A ran it with other settings (inputs.samples 8 in B, 16 in A)")
    for cell in cells:  # every setting apart is named: "and 5 more" hid the LoadGen settings behind the inputs
        cell["config"]["inputs"]["seed"] = 7
        cell["config"]["passes"]["traffic_iters"] = 3  # left out of the pairing: never a setting apart
        cell["config"]["loadgen"].update(max_query_count=500, min_duration_s=1.0)
    unpaired = compare(a, replace(a, cells=cells)).unpaired
    assert unpaired[0].endswith("ran it with other settings (inputs.samples 16 in A, 8 in B; inputs.seed 0 in A, 7 in B; "
                                "loadgen.max_query_count null in A, 500 in B; loadgen.min_duration_s 0.5 in A, 1.0 in B)"
                                ), unpaired[0]


def test_accuracy_is_not_compared_between_runs_that_read_other_images() -> None:
    """The same folder path and image names, another content: the times still pair (the shape is the
    config), the top-1 figures measured nothing alike."""
    from dataclasses import replace

    from harness.bundle.reader import load
    from harness.reporting.compare import compare

    a = load(GOLDEN / "mlperf")

    def reading(digest: str | None) -> Any:
        return replace(a, header={**a.header, "inputs_sha256": digest})

    def accuracy(comparison: Any) -> list[Figure]:
        return [f for pair in comparison.pairs for f in pair.figures if f.metric == "accuracy"]

    same = accuracy(compare(reading("a" * 64), reading("a" * 64)))
    assert same and all(f.verdict == "same" for f in same)
    other = compare(reading("a" * 64), reading("b" * 64))
    assert accuracy(other) and all(f.verdict == "not comparable" and f.why == (
        "the runs read other images (inputs_sha256 A aaaaaaaaaaaa, B bbbbbbbbbbbb)") for f in accuracy(other))
    assert any(p.median_a_ns for p in other.pairs)  # the times are still judged
    unknown = accuracy(compare(reading(None), reading("b" * 64)))  # a run before schema 10 recorded none
    assert all(f.verdict == "same" for f in unknown)


def test_a_change_from_a_noisy_cell_says_so_beside_its_verdict() -> None:
    """Two back-to-back runs of one scenario: `compare` said 'regressed' (B/A 3.57, p = 4e-10) from
    cells whose own records said CV 169%, and a CI gate failed on it with nothing said of the noise."""
    spread = [1000 + (i * 37) % 50 for i in range(40)]
    noisy_b = cell(samples=[v * 4 for v in spread])
    assert noisy_b.metrics.device_time is not None
    noisy_b.metrics.device_time.summary.noisy = True
    pair = compare_cells(cell(samples=spread), noisy_b, 0.05, 0.01)
    assert pair.verdict == "regressed" and pair.noisy
    assert pair.why.startswith("noisy: B's timing samples spread beyond 10% of their mean"), pair.why
    steady = compare_cells(cell(samples=spread), cell(samples=[v * 4 for v in spread]), 0.05, 0.01)
    assert steady.verdict == "regressed" and not steady.noisy and not steady.why.startswith("noisy")


def test_the_summary_advises_rounds_for_noisy_changes_only_where_a_side_had_one() -> None:
    """Cells of three rounds a side, judged on their rounds' medians, read 'a guess, not a figure, until rerun
    or timed over rounds' in the summary, where their whys (rightly) advised only a quieter machine."""
    from harness.reporting.compare import Comparison
    from harness.reporting.compare_output import to_markdown

    def noisy_rounds(factor: float) -> CellRecord:
        sides = [[int(v * factor) + i for v in BASE] for i in range(3)]
        data = cell_data(samples=sides[0])
        data["config"]["timing"]["rounds"] = 3
        data["metrics"]["rounds"] = [{"round": i, "status": "valid", "median_ns": median(samples), "cv": 0.2,
                                      "n": len(samples), **({"samples_ns": samples} if i > 1 else {})}
                                     for i, samples in enumerate(sides, 1)]
        return record(data)

    rounds = compare_cells(noisy_rounds(1.0), noisy_rounds(1.5), 0.05, 0.01)
    assert rounds.verdict == "regressed" and rounds.noisy, rounds
    assert "time over rounds" not in rounds.why
    summary = to_markdown(Comparison(a="A", b="B", threshold=0.05, alpha=0.01, pairs=[rounds]))
    assert "a guess, not a figure, until rerun.\n" in summary, summary
    one = cell(samples=[v * 4 for v in BASE])
    assert one.metrics.device_time is not None
    one.metrics.device_time.summary.noisy = True
    single = compare_cells(cell(samples=BASE), one, 0.05, 0.01)
    assert single.noisy and "time over rounds (--rounds)" in single.why
    summary = to_markdown(Comparison(a="A", b="B", threshold=0.05, alpha=0.01, pairs=[rounds, single]))
    assert "2 of the improved and regressed pairs rest on noisy cells" in summary
    assert "until rerun or timed over rounds." in summary
    assert (rounds.valid_rounds, single.valid_rounds) == ((3, 3), (1, 1))


def test_a_change_the_machine_itself_moved_with_says_so() -> None:
    """Three runs of one file minutes apart on the 2-core VM: `compare` called 5 of 6 cells
    regressed (up to 1.29x) where the round trip between the two cores had grown 3x between the
    runs, which the cells' own reference loops recorded and nothing said."""
    spread = [1000 + (i * 37) % 50 for i in range(40)]
    a = cell_data(samples=spread)
    b = cell_data(samples=[int(v * 1.3) for v in spread])
    for repetition in b["metrics"]["device_time"]["repetitions"]:
        for read in repetition["beside"]["machine_speed"].values():
            read["cross_core_ns"] *= 3  # the host moved the two cores apart
    pair = compare_cells(record(a), record(b), 0.05, 0.01)
    assert pair.verdict == "regressed" and pair.machine_moved
    assert "in B against A, the reference loops were" in pair.why and "the machine's speed moved (cross-core)" in pair.why
    same = compare_cells(record(a), record(cell_data(samples=[int(v * 1.3) for v in spread])), 0.05, 0.01)
    assert same.verdict == "regressed" and not same.machine_moved
    assert "the machine's own speed does not explain it" in same.why, same.why


def test_a_bundle_given_as_both_sides_is_refused_and_copies_of_one_run_are_said(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """`compare A A` called every figure the same and exited 0: a typo that reads as a pass."""
    from harness.cli.main import main

    assert main(["compare", str(GOLDEN / "v9"), f"{GOLDEN / 'v9'}/"]) == 2
    assert capsys.readouterr().err.strip() == (f"fusionbench: error: {GOLDEN / 'v9'} is given as both A and B; "
                                               "compare sets two runs side by side")
    copy = tmp_path / "copy"
    shutil.copytree(GOLDEN / "v9", copy)
    assert main(["compare", str(GOLDEN / "v9"), str(copy)]) == 0
    err = capsys.readouterr().err
    assert f"are copies of one run ({json.loads((copy / 'bundle.json').read_text())['run_id']})" in err, err
    assert main(["compare", str(GOLDEN / "v9"), str(GOLDEN / "v10"), "--allow-missing"]) == 0
    assert "copies of one run" not in capsys.readouterr().err
    header = json.loads((copy / "bundle.json").read_text())  # one run id, another start: two runs of one second
    header["created"] = "2026-01-01T00:00:00+00:00"  # before its cells: they stay its own
    (copy / "bundle.json").write_text(json.dumps(header))
    manifest.write(copy)
    assert main(["compare", str(GOLDEN / "v9"), str(copy)]) == 0
    assert "copies of one run" not in capsys.readouterr().err


def test_compare_names_the_machine_and_each_runs_noise_floor() -> None:
    """"The systems are the same" named no machine, and two runs whose machines' own noise differed
    (a pinned spread of 2.53x against 1.44x) were compared with no word of it."""
    from harness.bundle.reader import load
    from harness.reporting.compare import compare
    from harness.reporting.compare_output import to_json, to_markdown
    from harness.reporting.run_facts import machine_noise

    a, b = load(GOLDEN / "v9"), load(GOLDEN / "v10")
    comparison = compare(a, b)
    cpu = a.header["system"]["cpu"]
    assert comparison.machines[0] == f"{cpu['model']} x{cpu['logical_cores']}, no GPU"
    floors = tuple(machine_noise(loaded.header["system"]["machine_noise"]) for loaded in (a, b))
    assert comparison.noise == floors and floors[0] != floors[1] and "CV 21.5%" in floors[0]
    text = to_markdown(comparison)
    assert f"- A: {floors[0]}" in text.replace("\\", "") and f"- B: {floors[1]}" in text.replace("\\", "")
    assert json.loads(to_json(comparison))["machine_noise"] == {"a": floors[0], "b": floors[1]}
    same = to_markdown(compare(a, load(GOLDEN / "v9")))
    assert f"Same harness, hardware ({comparison.machines[0]}), driver and library versions." in same


def test_another_fusion_count_is_a_change_that_names_the_fused_groups_each_side_lacks() -> None:
    """A compiler change that stops fusing one batch norm showed only as one kernel more; the
    fused groups were in each record, unsaid."""
    golden = next(json.loads(p.read_text()) for p in sorted((GOLDEN / f"v{SCHEMA_VERSION}" / "cells").glob("*.json"))
                  if json.loads(p.read_text())["label"].startswith("resnet18 inductor fusion-on Offline"))
    a = record(golden)
    changed = json.loads(json.dumps(golden))
    report = changed["metrics"]["fusion_report"]
    dropped = next(i for i, k in enumerate(report["kernels"]) if k["class"] != "single")
    lost = " + ".join(report["kernels"][dropped]["ops"])
    report["kernels"][dropped]["class"] = "single"
    report["kernels"][dropped]["ops"] = report["kernels"][dropped]["ops"][:1]
    report["fusion_count"] -= 1
    for key in ("fusions_by_class", "kernels_by_class", "fusions_by_mapping"):
        report.pop(key, None)
    figure = next(f for f in compare_cells(a, record(changed), 0.05, 0.01).figures if f.metric == "fusions")
    assert figure.verdict == "changed" and figure.a - figure.b == 1
    assert figure.why.startswith(f"B lacks: {lost}") and "B adds" not in figure.why
    same = next(f for f in compare_cells(a, a, 0.05, 0.01).figures if f.metric == "fusions")
    assert same.verdict == "same"


def test_a_rerun_is_said_to_be_one_and_of_which_copy_of_the_run(tmp_path: Path) -> None:
    """`fusionbench rerun` records the bundle it ran again (`rerun_of`); compare set the two side by
    side as any two runs, saying nothing of it."""
    from harness.bundle.reader import load
    from harness.reporting.compare import compare
    from harness.reporting.compare_output import to_json, to_markdown

    original = GOLDEN / f"v{SCHEMA_VERSION}"
    header = json.loads((original / "bundle.json").read_text())
    record = {"run_id": header["run_id"], "created": header["created"], "scenario_sha256": header["scenario_sha256"],
              "manifest_sha256": manifest.sha256_file(original / "MANIFEST.sha256")}
    rerun = tmp_path / "rerun"
    shutil.copytree(original, rerun)

    def rerun_of(recorded: dict[str, Any]) -> None:
        (rerun / "bundle.json").write_text(json.dumps({**header, "run_id": "20261206-120000-golden",
                                                       "rerun_of": recorded}, indent=1))
        manifest.write(rerun)

    rerun_of(record)
    said = compare(load(original), load(rerun))
    assert said.rerun == "B is a rerun of A: A's cells, run again from the scenario it stores"
    assert "B is a rerun of A" in to_markdown(said) and json.loads(to_json(said))["rerun"] == said.rerun
    assert compare(load(rerun), load(original)).rerun.startswith("A is a rerun of B")
    rerun_of({**record, "manifest_sha256": "0" * 64})  # reran from a copy of the run edited, reported or resumed since
    assert compare(load(original), load(rerun)).rerun.endswith(
        f"made from another copy of A's run: its MANIFEST.sha256 then was 000000000000..., A's is "
        f"{record['manifest_sha256'][:12]}...")
    rerun_of({**record, "run_id": "20261201-000000-other"})
    assert compare(load(original), load(rerun)).rerun == ""


def test_cells_whose_backends_pools_ran_other_threads_are_unpaired() -> None:
    """ONNX Runtime sizes its intra-op pool itself (a thread per physical core where its options say
    0) and TVM by its own rules, apart from torch's threads: a TVM cell on a pool of 1 against one
    on 2, re-hashed into a copy of a bundle, was paired and judged."""
    from dataclasses import replace

    from harness.bundle.reader import load
    from harness.reporting.compare import compare

    a = load(GOLDEN / f"v{SCHEMA_VERSION}")
    first = next(i for i, c in enumerate(a.cells) if c["status"] == "valid" and c["config"]["backend"] == "tvm")
    label = a.records[first].config.shown_label
    assert a.cells[first]["metrics"]["kernels"]["backend_figures"]["thread_pool_threads"] == 2

    def b_with(pool: object) -> list[str]:
        cells = json.loads(json.dumps(a.cells))
        figures = cells[first]["metrics"]["kernels"]["backend_figures"]
        if pool is None:
            figures.pop("thread_pool_threads")
        else:
            figures["thread_pool_threads"] = pool
        return compare(a, replace(a, cells=cells)).unpaired

    assert b_with(1) == [f"{label}: valid in both, but ran with other threads or variables: tvm pool threads A 2, B 1"]
    assert b_with(2) == []
    assert b_with(None) == [], "a cell that recorded no pool (an older one) is not held to one"


def test_peak_rss_is_compared_only_between_workers_whose_baselines_agree() -> None:
    """One eager resnet18 cell read 528 MiB peak in a run of eager alone and 695 MiB in a run whose
    preloaded parent had also imported ONNX Runtime's and TVM's modules before forking it: baselines
    424 and 590 MiB, deltas over them 104 and 105 MiB. compare called the same cell 1.32x worse."""
    peak_rss = metric_table.metric("peak_rss")

    def of(peak_mib: float, baseline_mib: float) -> CellRecord:
        data = with_figure(peak_rss, peak_mib * 2**20).model_dump(mode="json", exclude_unset=True)
        memory = data["metrics"]["memory"]
        baseline = int(baseline_mib * 2**20)
        memory.update(rss_baseline_bytes=baseline, peak_rss_delta_bytes=memory["peak_rss_bytes"] - baseline,
                      inference_peak_rss_bytes=baseline, inference_peak_rss_delta_bytes=0)
        return record(data)

    def peak(a: CellRecord, b: CellRecord) -> Figure:
        (found,) = [f for f in compare_cells(a, b, 0.05, 0.01).figures if f.metric == "peak_rss"]
        return found

    alone, beside = of(527.5, 423.5), of(695.0, 590.0)
    found = peak(alone, beside)
    assert found.verdict == "not comparable", found
    assert found.why.startswith("rss_baseline_bytes differs beyond 5%: A 424 MiB, B 590 MiB"), found.why
    grown = of(695.0, 424.0)  # the same imports: the 167 MiB more are the cell's own
    assert peak(alone, grown).verdict == "worse"


def test_a_figure_of_a_cell_of_several_rounds_is_said_to_be_its_round_1s_one_reading() -> None:
    """Golden v6 ran two rounds a cell: its device time has two medians, its peak RSS one reading (a
    further round runs no memory pass). compare said `one figure a side` of both bundles' peak RSS,
    which a reader of a run of rounds took for a figure the rounds stood behind."""
    from harness.bundle.reader import load
    from harness.reporting.compare import compare
    from harness.reporting.compare_output import to_json, to_markdown

    a = load(GOLDEN / "v6")
    assert {len(r.metrics.rounds) for r in a.records if r.status == "valid"} == {2}
    comparison = compare(a, a)
    said = "one reading a side, its round 1's whatever its rounds (no spread to judge by): B/A beyond 5%"
    assert f"| peak RSS | lower | {said} |" in to_markdown(comparison)
    figures = json.loads(to_json(comparison))["figures"]
    assert figures["peak_rss"]["test"] == figures["arena_peak"]["test"] == said
    assert figures["kernels_per_inference"]["test"] == "one reading a side, its round 1's: any change"


def test_cells_a_reruns_only_left_out_are_said_not_rerun_not_unpaired(tmp_path: Path) -> None:
    """A `rerun --only backend=null` of a bundle listed every cell of its other backends as unpaired
    (`B ran no cell on eager`) and exited 1: cells the rerun was asked not to run read as gaps in it."""
    from harness.bundle.reader import load
    from harness.reporting.compare import compare
    from harness.reporting.compare_output import to_json, to_markdown

    original = GOLDEN / f"v{SCHEMA_VERSION}"
    rerun = tmp_path / "rerun"
    shutil.copytree(original, rerun)
    for backend in ("eager", "inductor", "onnxruntime", "tvm"):
        without_backend(rerun, backend, ["null"])
    header = json.loads((rerun / "bundle.json").read_text())
    as_run = {**header, "run_id": "20261206-120000-golden"}
    (rerun / "bundle.json").write_text(json.dumps(as_run))
    manifest.write(rerun)
    assert len(compare(load(original), load(rerun)).unpaired) == 10  # another run's --only: gaps, as before
    (rerun / "bundle.json").write_text(json.dumps({**as_run, "rerun_of": {
        "run_id": header["run_id"], "created": header["created"], "scenario_sha256": header["scenario_sha256"]}}))
    manifest.write(rerun)
    said = compare(load(original), load(rerun))
    assert said.unpaired == [] and len(said.not_rerun) == 10
    assert "resnet18 eager fusion-on Offline cpu fp32 b4 input 32: valid in A, not rerun in B (--only backend=null)" \
        in said.not_rerun
    eager = next(p for p in said.pairs if p.label == "resnet18 eager fusion-on Offline cpu fp32 b4 input 32")
    assert eager.why == "only in A: not rerun in B (--only backend=null)"
    assert "## Not rerun: 10 valid cell(s) the rerun's --only left out" in to_markdown(said)
    assert json.loads(to_json(said))["not_rerun"] == said.not_rerun
    backwards = compare(load(rerun), load(original))  # the rerun as A
    assert backwards.unpaired == [] and backwards.not_rerun[0].endswith("valid in B, not rerun in A (--only backend=null)")


def test_cells_on_other_hardware_are_set_side_by_side_and_judged_not_at_all() -> None:
    """A lab rerunning a bundle on its own machine saw each cell's row blank ('ran on different
    hardware', no figure): now each figure stands beside the original's, the ratio for information
    only, and no verdict either way; the geometric means and the exit code hold judged pairs only."""
    from harness.reporting.compare import Comparison
    from harness.reporting.compare_output import to_json, to_markdown

    def on(model: str, samples: list[int]) -> CellRecord:
        return cell(samples=samples, node={"hostname": "n", "cpu": {"model": model, "logical_cores": 2}, "gpus": []})

    pair = compare_cells(on("AMD EPYC", BASE), on("Intel Xeon", [2 * v for v in BASE]), 0.05, 0.01)
    assert pair.verdict == "not comparable" and pair.ratio is None and pair.p_value is None
    assert pair.not_judged == "other hardware (AMD EPYC x2, no GPU vs Intel Xeon x2, no GPU)"
    assert pair.median_a_ns == median(BASE) and pair.median_b_ns == 2 * median(BASE) and pair.ratio_not_judged == 2.0
    assert pair.figures and all(f.verdict == "not comparable" and f.why == f"not judged: {pair.not_judged}"
                                for f in pair.figures)
    assert {f.metric for f in pair.figures} >= {"device_time", "peak_rss", "accuracy"}
    comparison = Comparison(a="A", b="B", threshold=0.05, alpha=0.01, pairs=[pair])
    assert comparison.geomeans() == {} and not comparison.worse
    text = to_markdown(comparison)
    assert "1 pair(s) ran on other hardware: their figures are set side by side below, not judged" in text
    assert ("| (2.000) | - | **not comparable** | not judged: other hardware (AMD EPYC x2, no GPU vs Intel Xeon x2, "
            "no GPU); B/A for information only |") in text
    (shown,) = json.loads(to_json(comparison))["pairs"]
    assert shown["ratio"] is None and shown["ratio_not_judged"] == 2.0 and shown["not_judged"] == pair.not_judged
    # math modes apart as well: nothing is set side by side, as before
    tf32 = record({**cell_data(samples=BASE), "node": {"hostname": "n", "cpu": {"model": "Intel Xeon", "logical_cores": 2}}})
    tf32.metrics.math_mode.effective = "tf32"  # type: ignore[union-attr]
    apart = compare_cells(on("AMD EPYC", BASE), tf32, 0.05, 0.01)
    assert apart.not_judged == "" and apart.median_a_ns is None and apart.figures == []
    same = compare_cells(on("AMD EPYC", BASE), on("AMD EPYC", [2 * v for v in BASE]), 0.05, 0.01)
    assert same.verdict == "regressed" and same.ratio == 2.0 and same.not_judged == "" and same.ratio_not_judged is None
    four = on("Intel Xeon", BASE).model_copy(update={"environment": {**TEMPLATE["environment"], "torch_threads": 4}})
    threads = compare_cells(on("AMD EPYC", BASE), four, 0.05, 0.01).not_judged
    assert threads == (f"other hardware (AMD EPYC x2, no GPU vs Intel Xeon x2, no GPU), and other threads or variables "
                       f"(torch threads A {TEMPLATE['environment']['torch_threads']}, B 4)")
    # a taskset on the other machine read as its hardware alone
    bound = on("Intel Xeon", BASE).model_copy(update={"environment": {**TEMPLATE["environment"], "cpu_affinity": [0]}})
    share = compare_cells(on("AMD EPYC", BASE), bound, 0.05, 0.01).not_judged
    assert share == ("other hardware (AMD EPYC x2, no GPU vs Intel Xeon x2, no GPU), and other shares of the machines "
                     "(the whole machine vs 1 of the machine's 2 CPUs)")


def test_compares_line_says_how_many_unpaired_cells_ran_on_other_hardware(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A lab's rerun on its own machine is unpaired cell by cell; the one line on standard error said
    only 'could not be paired', as for cells missing from B, though each is set side by side."""
    from harness.cli.main import main

    other = copy_of(f"v{SCHEMA_VERSION}", tmp_path)
    for path in (other / "cells").glob("*.json"):
        data = json.loads(path.read_text())
        if isinstance(data.get("node"), dict):
            data["node"]["cpu"].update(model="Intel Xeon", identity=None, vector_extensions=None)
            path.write_text(json.dumps(data))
    manifest.write(other)
    assert main(["compare", str(GOLDEN / f"v{SCHEMA_VERSION}"), str(other)]) == 1
    said = capsys.readouterr()
    # fusion's verdict, reached on each machine, is set beside the other's: each pair read `not comparable`
    assert "; on other hardware, verdicts agree: 4 of 4 pairs, their directions 4 of 4, intervals not compared" in said.out
    assert said.err.splitlines()[-1] == (
        "fusionbench: 12 valid cell(s) could not be paired (listed under 'Unpaired'), 12 of them run on other hardware "
        "(set side by side under 'Cells', not judged); --allow-missing accepts that")
