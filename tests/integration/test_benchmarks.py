"""The benchmarks under benchmarks/ still run against the current contract (briefly: their figures
are recorded from full runs in docs/results/, not asserted here)."""

from __future__ import annotations

import importlib.util
import json
import re
import runpy
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.precision import PRECISIONS
from harness.run.system import machine_line
from harness.stats.intervals import VERDICTS_OF_ROUNDS
from tests.fakes.nvml import fake_pynvml

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]


def test_overhead_benchmark_runs_and_writes_its_figures(tmp_path: Path) -> None:
    """One round, where the script's default is three: what a further round adds (each figure's
    spread over the rounds, the warnings a round earns) is the faked rounds' test below; a real round
    runs every LoadGen run and bare loop of the script."""
    out = tmp_path / "overhead.json"
    done = subprocess.run(
        [sys.executable, "benchmarks/overhead.py", "--duration-s", "0.3", "--input-size", "64", "--rounds", "1",
         "--json", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "warning: one round has no spread" in done.stderr  # --rounds 1, as asked
    figures = json.loads(out.read_text())
    assert len(figures["rounds"]) == 1, figures["rounds"]
    assert figures["null_singlestream_p50_ns"] > 0 and figures["null_offline_samples_per_s"] > 0
    assert figures["resnet18_ratio_harness_to_bare"] > 0
    assert "ratio harness / bare" in done.stdout and f"machine: {machine_line()}, " in done.stdout


@pytest.mark.skipif(__import__("platform").libc_ver()[0] != "glibc", reason="the allocator setting is a glibc tunable")
def test_allocator_benchmark_runs_and_writes_its_figures(tmp_path: Path) -> None:
    """On pattern_matmul_relu, fed its own input: it takes 1024 features, and fed a 224-pixel image
    whatever the model it failed in its first timing process (the test of that failure below), and
    efficientnet_b1 to b7 were timed at a size they are not run at. One run checks both the figures
    and the input, where a run of mobilenet_v3_small checked the figures and a second run this model's
    input: each timing process imports torch."""
    out = tmp_path / "allocator.json"
    done = subprocess.run(
        [sys.executable, "benchmarks/allocator.py", "--models", "pattern_matmul_relu", "--rounds", "1", "--calls", "3",
         "--json", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads(out.read_text())["models"]["pattern_matmul_relu"]
    assert figures["input_size"] == 1024 and figures["system_over_steady"] > 0
    # How many pages each setting faults in depends on the machine (one CI machine's glibc defaults
    # faulted none for this model): that the steady setting stops the churn is shown in
    # tests/unit/test_allocator.py, with allocations of known sizes.
    for setting in ("system", "steady"):
        faults = figures[setting]["faults_per_call"]
        assert len(faults) == 1 and faults[0] >= 0 and faults[0] * 3 == pytest.approx(round(faults[0] * 3)), (setting, faults)
    assert done.stdout.splitlines()[-1].startswith("pattern_matmul_relu  system / steady: ")
    assert done.stdout.splitlines()[-1].endswith("x (input size 1024)")
    assert f"machine: {machine_line()}; glibc" in done.stdout
    assert json.loads(out.read_text())["machine"] == machine_line()
    assert "warning: one round has no spread" in done.stderr  # --rounds 1: its min, median and max are one figure


def test_paired_benchmark_runs_and_writes_its_figures(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On the example plugin's backend (tests/conftest.py puts its site on PYTHONPATH): the
    benchmark's processes find a backend installed outside the repository. Its model is
    pattern_matmul_relu, timed at its own input size: without --input-size every model was fed a
    224-pixel image, and this one (1024 features) failed in its first timing process with a shape
    error. (One run for both: each of its six timing processes imports torch.)"""
    out = tmp_path / "paired.json"
    done = subprocess.run(
        [sys.executable, "benchmarks/paired.py", "--pairs", "torchscript:pattern_matmul_relu", "--rounds", "2",
         "--windows", "2", "--calls", "2", "--json", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads(out.read_text())["pairs"]["torchscript:pattern_matmul_relu"]
    assert json.loads(out.read_text())["input_size"] is None and figures["input_size"] == 1024
    for method in ("separate", "paired"):
        speedups = figures[method]
        assert len(speedups) == 2 and all(speedup > 0 for speedup in speedups)
        assert figures[f"{method}_spread"] == pytest.approx(max(speedups) / min(speedups) - 1)
    ratio = figures["separate_spread"] / figures["paired_spread"] if figures["paired_spread"] > 0 else float("inf")
    assert figures["separate_spread_over_paired"] == pytest.approx(ratio)
    assert f"spread separate / paired: {ratio:.2f}x" in done.stdout
    assert done.stdout.splitlines()[0] == f"machine: {machine_line()}" == f"machine: {json.loads(out.read_text())['machine']}"
    # --input-size, where given, is every model's (its refusals are the tests below)
    assert _benchmark("paired", monkeypatch).input_size_of("pattern_conv_bn_relu", 32) == 32


def test_paired_benchmark_refuses_a_malformed_pair() -> None:
    done = subprocess.run([sys.executable, "benchmarks/paired.py", "--pairs", "resnet18"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "is not backend:model" in done.stderr


@pytest.mark.parametrize(("script", "arguments", "message"), [
    ("helper_exit.py", ["--rounds", "0"], "--rounds must be at least 1"),
    ("worker_start.py", ["--rounds", "0"], "--rounds must be at least 1"),
    ("scale_out.py", ["--rounds", "0"], "--rounds must be at least 1"),
    ("ort_skip_layer_norm.py", ["--calls", "0"], "--calls must be at least 1"),
    ("ort_skip_layer_norm.py", ["--tokens", "0"], "--tokens, --hidden"),
    ("allocator.py", ["--calls", "1"], "--calls at least 2"),
    ("allocator.py", ["--rounds", "0"], "--rounds must be at least 1"),
    ("overhead.py", ["--duration-s", "0"], "--duration-s must be above 0"),
    ("overhead.py", ["--input-size", "8"], "--input-size at least 16"),
    ("overhead.py", ["--rounds", "0"], "--rounds must be at least 1"),
])
def test_benchmarks_refuse_a_count_too_small_in_one_line(script: str, arguments: list[str], message: str,
                                                         monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """Before anything runs: a round count of 0 ended in a traceback after the work (no median of
    nothing), a call count of 0 divided by zero, a single call had no CV."""
    assert message in _refusal(script, arguments, monkeypatch, capsys)


@pytest.mark.parametrize(("script", "arguments", "message"), [
    ("allocator.py", ["--models", "resnet18,resnet_18"], "--models: unknown model 'resnet_18'"),
    ("tf32_tolerance.py", ["--models", "resnet_18"], "--models: unknown model 'resnet_18'"),
    ("tf32_tolerance.py", ["--models", "resnet18", "--batches", "1,x"], "--batches: '1,x' is not"),
    ("tvm_design_space_order.py", ["--model", "resnet_18"], "--model: 'resnet_18' is no torchvision classification model"),
    ("scale_out.py", ["--scenario", "scenarios/no-such.yaml"], "--scenario: scenarios/no-such.yaml: no such scenario file"),
    ("paired.py", ["--pairs", "eager:pattern_matmul_relu", "--input-size", "224"],
     "--input-size: pattern_matmul_relu takes input size 1024 only; input_size is 224"),
])
def test_benchmarks_refuse_an_unknown_model_batch_or_scenario_in_one_line(script: str, arguments: list[str], message: str,
                                                                         monkeypatch: pytest.MonkeyPatch,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """Before anything runs: allocator.py timed the models before the bad name and ended in the
    child's CalledProcessError, tf32_tolerance.py in the zoo's HarnessError or int()'s ValueError,
    tvm_design_space_order.py in torchvision's AttributeError; scale_out.py said its warm-up's refusal
    of a missing scenario was the serial run's."""
    assert message in _refusal(script, arguments, monkeypatch, capsys)


def _benchmark(name: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    """benchmarks/NAME.py as a module, its folder first on `sys.path` as `python benchmarks/NAME.py` has it."""
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    spec = importlib.util.spec_from_file_location(f"{name}_benchmark", REPO / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_one_round_warning_is_one_function_the_benchmarks_share(monkeypatch: pytest.MonkeyPatch,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """Four scripts wrote its three lines each (`duplicates` flagged them): one said otherwise would
    have gone unseen, and a fifth would have copied them again."""
    rounds = _benchmark("rounds", monkeypatch)
    rounds.warn_if_one_round("allocator", 2)
    assert capsys.readouterr().err == ""
    rounds.warn_if_one_round("allocator", 1)
    assert capsys.readouterr().err == ("allocator: warning: one round has no spread (its min, median and max are one "
                                       "figure), so the ratio cannot be told from the machine's noise; give --rounds 2 or more\n")
    copies = [path.name for path in (REPO / "benchmarks").glob("*.py")
              if path.name != "rounds.py" and "warning: one round has no spread" in path.read_text()]
    assert copies == []


def _refusal(script: str, arguments: list[str], monkeypatch: pytest.MonkeyPatch,
             capsys: pytest.CaptureFixture[str]) -> str:
    """The last line `benchmarks/SCRIPT ARGUMENTS` says as it ends with exit 2, run in this process
    (as `python benchmarks/SCRIPT`: each refuses before its work, so a process of its own would
    only add its start): an exception in place of the refusal fails the test as a traceback would."""
    monkeypatch.chdir(REPO)
    monkeypatch.setattr(sys, "argv", [f"benchmarks/{script}", *arguments])
    monkeypatch.setattr(sys, "path", [str(REPO / "benchmarks"), *sys.path])
    with pytest.raises(SystemExit) as ended:
        runpy.run_path(str(REPO / "benchmarks" / script), run_name="__main__")
    stderr = capsys.readouterr().err
    assert ended.value.code == 2, stderr[-3000:]
    return stderr.splitlines()[-1]


@pytest.mark.parametrize(("arguments", "message"), [
    (["--pairs", "nosuch:pattern_conv_bn_relu"], "paired: nosuch:pattern_conv_bn_relu: unknown backend 'nosuch'"),
    (["--pairs", "eager:resnet_18"], "paired: eager:resnet_18: unknown model 'resnet_18'"),
    (["--pairs", "eager:pattern_conv_bn_relu", "--option", "bogus=1"], "eager options: unknown option bogus"),
])
def test_paired_benchmark_says_what_its_timing_process_refused_in_one_line(arguments: list[str], message: str) -> None:
    """The harness's refusal in the child, not the child's traceback (17 lines ending in it)."""
    done = subprocess.run([sys.executable, "benchmarks/paired.py", *arguments, "--input-size", "32"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.stderr.splitlines()[-1].startswith("paired: ") and message in done.stderr.splitlines()[-1], done.stderr


@pytest.mark.skipif(__import__("platform").libc_ver()[0] != "glibc", reason="the allocator setting is a glibc tunable")
def test_allocator_benchmark_shows_why_its_timing_process_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    """A model given an input it does not take (a 224-pixel image to a 1024-feature matmul) fails in
    the child: its error is shown, where CalledProcessError showed the loop's source and hid the
    child's stderr."""
    allocator = _benchmark("allocator", monkeypatch)
    monkeypatch.chdir(REPO)
    with pytest.raises(SystemExit) as ended:
        allocator.one("pattern_matmul_relu", "system", 2, 224)
    said = str(ended.value.code)
    assert "CalledProcessError" not in said and "allocator: pattern_matmul_relu under `system`: the timing process exited 1:" in said
    assert said.strip().splitlines()[-1].startswith("RuntimeError: mat1 and mat2 shapes cannot be multiplied"), said


def test_worker_start_benchmark_runs_and_writes_its_figures(tmp_path: Path) -> None:
    scenario = tmp_path / "one-cell.yaml"
    scenario.write_text("models: [{name: resnet18, input_size: 32}]\nbackends: [null]\nscenarios: [SingleStream]\n"
                        "loadgen: {min_duration_s: 0.2}\ntiming: {min_time_s: 0.1, max_warmup_s: 0.5}\n")
    out = tmp_path / "worker_start.json"
    done = subprocess.run(
        [sys.executable, "benchmarks/worker_start.py", str(scenario), "--rounds", "1", "--json", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads(out.read_text())
    assert [len(figures["runs"][way]) for way in ("preloaded", "fresh")] == [1, 1]
    assert all(run["exit"] == 0 and run["cpu_s"] > 0 for runs in figures["runs"].values() for run in runs)
    assert figures["ratio_wall_s"] > 0 and figures["ratio_cpu_s"] > 0
    assert "ratio preloaded / fresh" in done.stdout and "warning: one round has no spread" in done.stderr
    assert done.stdout.splitlines()[0] == f"machine: {machine_line()}" and figures["machine"] == machine_line()


def test_helper_exit_benchmark_times_both_endings_and_writes_its_figures(tmp_path: Path) -> None:
    out = tmp_path / "helper_exit.json"
    done = subprocess.run([sys.executable, "benchmarks/helper_exit.py", "--rounds", "1", "--json", str(out)],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads(out.read_text())
    assert [len(figures["exit_s"][way]) for way in ("teardown", "quick")] == [1, 1]
    assert all(seconds > 0 for times in figures["exit_s"].values() for seconds in times)
    ratio = figures["median_exit_s"]["quick"] / figures["median_exit_s"]["teardown"]
    assert figures["ratio_quick_to_teardown"] == pytest.approx(ratio)
    assert done.stdout.splitlines()[-1] == f"ratio quick / teardown: {ratio:.3f}"
    assert "warning: one round has no spread" in done.stderr
    assert done.stdout.splitlines()[0] == f"machine: {machine_line()}" and figures["machine"] == machine_line()


def test_verdicts_benchmark_runs_a_scenario_twice_and_ends_with_the_agreement_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """On the example plugin's backend, as the paired benchmark's test: it traces in a fraction of a
    second, with no ONNX export, and the runs' probes import no ONNX Runtime (8 CPU-s less). The
    first run is the real CLI's; the second is a copy of its bundle in the second run's folder, as
    the two runs are one function called twice: a second real run (its probe, preloaded parent and
    four cells, about 20 CPU-s) would check nothing the first does not."""
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text("""
device: cpu
models: [{name: pattern_conv_bn_relu, input_size: 32}]
backends: [{name: torchscript, fusion: [on, off]}]
scenarios: SingleStream
inputs: {source: synthetic, seed: 0, samples: 8}
loadgen: {min_duration_s: 0.3}
timing: {warmup_iters: 2, min_iters: 10, min_time_s: 0.2, max_warmup_s: 0.5, rounds: 2}
passes: {memory_iters: 1, profile_iters: 1}
""")
    verdicts = _benchmark("verdicts", monkeypatch)
    runs: list[tuple[Path, float]] = []

    def run_once(scenario: Path, out: Path, only: str | None, device: str | None) -> tuple[Path, float]:
        if not runs:
            runs.append(real_run_once(scenario, out, only, device))
        else:
            first, wall_s = runs[0]
            runs.append((Path(shutil.copytree(first, out / first.name)), wall_s))
        return runs[-1]

    real_run_once = verdicts.run_once
    monkeypatch.setattr(verdicts, "run_once", run_once)
    out = tmp_path / "verdicts.json"
    monkeypatch.setattr(sys, "argv", ["verdicts.py", str(scenario), "--out", str(tmp_path / "runs"), "--json", str(out)])
    assert verdicts.main() == 0, capsys.readouterr()
    stdout = capsys.readouterr().out
    assert [bundle.parent.name for bundle, _ in runs] == ["run-1", "run-2"]
    figures = json.loads(out.read_text())
    [pair] = figures["pairs"]
    assert pair["pair"] == "pattern_conv_bn_relu torchscript SingleStream b1 fp32 cpu input 32"
    for side in ("a", "b"):  # two rounds each: an interval and a verdict
        assert pair[side] is not None, f"the pair is not valid in run {side}: {pair}"
        assert pair[side]["rounds"] == 2 and pair[side]["interval"]["low"] <= pair[side]["speedup"] <= pair[side]["interval"]["high"]
        assert pair[side]["verdict"] in VERDICTS_OF_ROUNDS
    agree, overlap = int(pair["agree"]), int(pair["overlap"])
    assert stdout.splitlines()[-1] == f"verdicts agree: {agree} of 1 pairs; intervals overlap: {overlap} of 1"
    assert figures["bundles"] == [str(bundle) for bundle, _ in runs] and "machine noise:" in stdout
    assert f", {machine_line()}; scenario " in stdout.splitlines()[0]


def test_tvm_tuning_draws_benchmark_pairs_the_fused_kernel_with_its_anchor(tmp_path: Path) -> None:
    pytest.importorskip("tvm", reason="apache-tvm is not installed (pip install apache-tvm)")
    out = tmp_path / "draws.json"
    done = subprocess.run(
        [sys.executable, "benchmarks/tvm_tuning_draws.py", "--tokens", "16", "--features", "32", "--hidden", "64",
         "--trials", "2", "--repeat", "2", "--calls", "1", "--json", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    figures = json.loads(out.read_text())
    assert {"on matmul+T_add", "off matmul", "off T_add"} <= set(figures["tasks"])
    # The fused kernel is seeded from its matmul, so the two sides share draws (backends/tvm_tuning.py;
    # tests/backends/test_tvm.py checks the seeding itself).
    shared = figures["candidates_ms"]["on matmul+T_add"].keys() & figures["candidates_ms"]["off matmul"].keys()
    assert len(figures["paired_speedups"]) == len(shared) >= 1
    assert figures["speedup_best"] > 0 and figures["vm_speedup"] > 0
    assert machine_line() in done.stdout
    assert "the same draw on both sides" in done.stdout and "each timed 2 time(s)" in done.stdout and figures["repeat"] == 2


def test_tvm_design_space_order_benchmark_gives_a_fused_task_its_anchors_structures() -> None:
    """squeezenet1_0's first fused convolution (conv, bias add, ReLU): MetaSchedule's order gives it
    and its convolution alone other loop structures, the backend's the same, as resnet18's stem
    (conv and batch norm) shows, at half the CPU (12 CPU-s where resnet18 took 24: its two TVM
    compiles of the whole model and its candidates' builds and runs at 224 pixels)."""
    pytest.importorskip("tvm", reason="apache-tvm is not installed (pip install apache-tvm)")
    done = subprocess.run(
        [sys.executable, "benchmarks/tvm_design_space_order.py", "--model", "squeezenet1_0", "--trials", "3",
         "--repeat", "1", "--tasks", "fused_conv2d_"],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    metaschedule, backend = done.stdout.splitlines()[-2:]
    assert metaschedule.startswith("MetaSchedule order: ") and backend.startswith("backend order: "), done.stdout
    # With the design spaces sorted, every candidate has the same structure fused and alone; in MetaSchedule's
    # order some have another (3 of 3 here), so the model shows what the sort changes.
    apart = re.match(r"MetaSchedule order: (\d+) of 3 candidates in other structures", metaschedule)
    assert apart and int(apart.group(1)) >= 1, done.stdout
    assert backend.startswith("backend order: 0 of 3 candidates in other structures"), done.stdout
    assert machine_line() in done.stdout


def test_tvm_design_space_order_benchmark_takes_the_model_at_its_own_input_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """Its tasks' extraction faked at its first call (the tuning after it takes minutes): every model
    was compiled from a 224-pixel image, efficientnet_b1's tasks at another size than a cell's (240)."""
    pytest.importorskip("tvm", reason="apache-tvm is not installed (pip install apache-tvm)")
    design_space_order = _benchmark("tvm_design_space_order", monkeypatch)
    shapes = []

    class Stop(Exception):
        """No further: what the extraction was given is what is tested."""

    def tasks(model: Any, example: Any, fusion: str) -> Any:
        shapes.append(tuple(example.shape))
        raise Stop

    monkeypatch.setattr(design_space_order, "_tasks", tasks)
    monkeypatch.setattr(sys, "argv", ["tvm_design_space_order.py", "--model", "efficientnet_b1"])
    with pytest.raises(Stop):
        design_space_order.main()
    assert shapes == [(1, 3, 240, 240)]


def test_ort_skip_layer_norm_benchmark_times_the_fused_kind_beside_its_parts(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    out = tmp_path / "skip_layer_norm.json"
    done = subprocess.run(
        [sys.executable, "benchmarks/ort_skip_layer_norm.py", "--tokens", "4", "--hidden", "32", "--rounds", "2",
         "--calls", "3", "--json", str(out)],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads(out.read_text())
    assert {kind: len(times) for kind, times in figures["per_call_ms"].items()} == {"fused": 2, "parts": 2, "floor": 2}
    assert figures["max_abs_err"] < 1e-4  # the two graphs compute the same
    assert "warning" not in done.stderr  # two rounds have a spread
    medians = figures["median_ms"]
    ratio = (medians["fused"] - medians["floor"]) / (medians["parts"] - medians["floor"])
    assert figures["ratio_fused_to_parts"] == pytest.approx(ratio)
    assert done.stdout.splitlines()[-1] == f"ratio fused / parts, the floor taken off: {ratio:.2f}"
    assert done.stdout.splitlines()[0].startswith(f"machine: {machine_line()}; onnxruntime ")
    assert figures["machine"] == machine_line()


def test_tf32_tolerance_benchmark_measures_a_micro_model_under_both_roundings(tmp_path: Path) -> None:
    """One convolution (a few seconds): both roundings move the output, by less than the `tf32`
    tolerance and more than fp32's own error against float64."""
    out = tmp_path / "tf32.json"
    done = subprocess.run([sys.executable, "benchmarks/tf32_tolerance.py", "--models", "pattern_conv_bn_relu",
                           "--batches", "1", "--json", str(out)], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    [row] = json.loads(out.read_text())["rows"]
    assert row["rounded_ops"] == 1 and row["fp32_relative_error"] < row["rne_relative_error"] < PRECISIONS["tf32"].rtol
    assert done.stdout.splitlines()[0].startswith(f"machine: {machine_line()}, torch ")


def test_noise_benchmark_says_which_cells_it_could_not_measure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """Its quick sweep, the null backend beside TensorRT (skipped on a CPU): the skipped cell is said
    and counted, where it left the table and the count without a word. The first run is the real
    CLI's and the second reads its cells again, as the two runs are one function called twice: a
    second real run (its probe and preloaded parent, about 10 CPU-s) would check nothing the first
    does not."""
    spec = importlib.util.spec_from_file_location("noise_benchmark", REPO / "benchmarks" / "noise.py")
    assert spec is not None and spec.loader is not None
    noise = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(noise)
    monkeypatch.setitem(noise.CELLS, "quick", noise.CELLS["quick"].replace("backends: [eager]", "backends: [null, tensorrt]"))
    runs: list[tuple[Path, dict[str, dict[str, Any]]]] = []

    def run_once(scenario: Path, device: str, out: Path) -> dict[str, dict[str, Any]]:
        runs.append((out, runs[0][1] if runs else real_run_once(scenario, device, out)))
        return runs[-1][1]

    real_run_once = noise.run_once
    monkeypatch.setattr(noise, "run_once", run_once)
    monkeypatch.setenv("FUSIONBENCH_NOISE_PROBE_S", "0.2")
    out = tmp_path / "noise.json"
    monkeypatch.setattr(sys, "argv", ["noise.py", "--quick", "--json", str(out)])
    noise.main()
    lines = capsys.readouterr().out.splitlines()
    figures = json.loads(out.read_text())
    assert [row["cell"] for row in figures["rows"]] == ["resnet18 null fusion-on Offline cpu fp32 b4"]
    assert figures["not_measured"] == [{"cell": "resnet18 tensorrt fusion-on Offline cpu fp32 b4", "status": ["skipped", "skipped"]}]
    assert "not measured in both runs (skipped, skipped)" in lines[-2] and lines[-1].endswith("; 1 not measured")
    assert [out.name for out, _ in runs] == ["first", "second"]


def test_verdicts_benchmark_with_no_fusion_pair_says_so_and_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Two runs whose scenario has no fusion pair (eager beside the null backend: the golden MLPerf
    bundle stands in for each) printed `verdicts agree: 0 of 0 pairs` and exited 0."""
    spec = importlib.util.spec_from_file_location("verdicts_benchmark", REPO / "benchmarks" / "verdicts.py")
    assert spec is not None and spec.loader is not None
    verdicts = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(verdicts)
    monkeypatch.setattr(verdicts, "run_once", lambda *args: (REPO / "tests" / "golden" / "mlperf", 1.0))
    monkeypatch.setattr(sys, "argv", ["verdicts.py", str(REPO / "scenarios" / "smoke.yaml"), "--json", str(tmp_path / "v.json")])
    assert verdicts.main() == 1
    captured = capsys.readouterr()
    assert "neither run has a fusion pair" in captured.err and "verdicts agree" not in captured.out
    assert not (tmp_path / "v.json").exists()


def test_scale_out_benchmark_takes_rounds_and_prints_each_ways_spread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """Its runs faked (each a Ray instance and a sweep: minutes): it ran each way once and printed one
    ratio, which no reader could tell from the machine's noise. Each round's ratio is against the
    serial run of that round, the order turned round every second round."""
    scale_out = _benchmark("scale_out", monkeypatch)
    calls: list[str] = []
    walls = {"serial": [10.0, 20.0, 12.0], "2": [11.0, 24.0, 15.0], "1": [5.0, 10.0, 8.0]}

    def run(scenario: Path, out: Path, cache: Path, *extra: str) -> dict[str, Any]:
        way = extra[-1] if extra else "serial"
        calls.append(f"{out.name} {way}")
        wall = 1.0 if out.name == "warm-up" else walls[way][int(out.name.split("-")[1]) - 1]
        return {"wall_s": wall, "cells": 2, "cells_run": 2, "cells_per_hour": 7200 / wall, "statuses": {"valid": 2}}

    monkeypatch.setattr(scale_out, "run", run)
    monkeypatch.setattr(scale_out.os, "sched_getaffinity", lambda pid: {0, 1})
    out = tmp_path / "scale_out.json"
    monkeypatch.setattr(sys, "argv", ["scale_out.py", "--quick", "--rounds", "3", "--json", str(out)])
    assert scale_out.main() == 0
    assert calls[:7] == ["warm-up serial", "round-1-0 serial", "round-1-1 2", "round-1-2 1",
                         "round-2-0 1", "round-2-1 2", "round-2-2 serial"]
    figures = json.loads(out.read_text())
    ray_1 = figures["ways"]["ray, 1 CPU a cell"]
    assert [run["wall_s"] for run in ray_1["rounds"]] == [5.0, 10.0, 8.0] and figures["rounds"] == 3
    assert ray_1["throughput_ratio_to_serial"] == {"min": 1.5, "median": 2.0, "max": 2.0}
    assert figures["ray_overhead_per_cell_s"] == {"min": 0.5, "median": 1.5, "max": 2.0}
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"machine: {machine_line()}" and "vs serial (min / median / max)" in lines[1]
    assert lines[4].startswith("ray, 1 CPU a cell") and lines[4].endswith("1.50 /     2.00 /     2.00")
    assert lines[-1] == "Ray's overhead per cell (one at a time, against serial): median +1.50 s (min +0.50, max +2.00; 3 round(s))"


def _noise_cell(label: str, median_ms: float, warnings: list[str]) -> dict[str, Any]:
    """A measured cell as a run's bundle keeps it, with what benchmarks/noise.py reads of it."""
    return {"label": label, "status": "valid", "config": {"batch": 32}, "warnings": warnings,
            "metrics": {"device_time": {"summary": {"median_ns": median_ms * 1e6, "cv": 0.004}},
                        "latency_agreement": {"gap": 0.01}}}


def test_noise_benchmark_on_the_gpu_names_the_gpu(monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Its runs faked, and NVML (tests/unit/test_system.py's fake): a CUDA run printed the CPU alone."""
    noise = _benchmark("noise", monkeypatch)
    monkeypatch.setattr(noise, "run_once", lambda *args: {"cell": _noise_cell("cell", 5.0, [])})
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml())
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(sys, "argv", ["noise.py", "--device", "cuda"])
    noise.main()
    first = capsys.readouterr().out.splitlines()[0]
    assert first == f"machine: {machine_line(device='cuda')}"
    assert first.endswith("; GPU NVIDIA H100 80GB HBM3 (NVML index 0), driver 580.65.06")


def _overhead_round(harness_p50_ns: float, bare_before_ns: float, bare_after_ns: float,
                    validity: str = "VALID", reasons: tuple[str, ...] = ()) -> dict[str, Any]:
    """One round's figures as benchmarks/overhead.py's `one_round` gives them, its resnet18 run's
    validity and reasons as given (the null runs VALID)."""
    bare = (bare_before_ns + bare_after_ns) / 2
    return {"null_singlestream_p50_ns": 2_000.0, "null_offline_samples_per_s": 250_000.0, "null_offline_ns_per_sample": 4_000.0,
            "resnet18_bare_p50_ns_before": bare_before_ns, "resnet18_bare_p50_ns_after": bare_after_ns,
            "resnet18_bare_p50_ns": bare, "resnet18_harness_singlestream_p50_ns": harness_p50_ns,
            "resnet18_ratio_harness_to_bare": harness_p50_ns / bare,
            "null_singlestream_validity": "VALID", "null_singlestream_invalid_reasons": [],
            "null_offline_validity": "VALID", "null_offline_invalid_reasons": [],
            "resnet18_harness_validity": validity, "resnet18_harness_invalid_reasons": list(reasons)}


def test_overhead_benchmark_prints_each_figures_spread_and_warns_where_it_is_unreliable(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Its rounds faked (LoadGen and resnet18: seconds each): it printed one p50 a figure, and an
    INVALID run or a bare loop that moved under the harness's run only as a word in parentheses,
    or not at all, beside a ratio that read like any other."""
    overhead = _benchmark("overhead", monkeypatch)
    rounds = [_overhead_round(10.4e6, 10e6, 10e6),
              _overhead_round(11e6, 10e6, 12e6, "INVALID", ("min duration not met",)),
              _overhead_round(10.2e6, 10e6, 10e6)]
    monkeypatch.setattr(overhead, "measure", lambda workdir, duration_s, input_size, count: overhead.summarise(rounds[:count]))
    out = tmp_path / "overhead.json"
    monkeypatch.setattr(sys, "argv", ["overhead.py", "--rounds", "3", "--json", str(out)])
    overhead.main()
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[0].startswith(f"machine: {machine_line()}, ") and lines[0].endswith("3 round(s): median (min to max)")
    assert lines[-1] == "ratio harness / bare            :    1.020 (1 to 1.04; target <= 1.05)"
    assert lines[-2] == "resnet18 eager harness SS p50   :   10.400 ms (10.2 to 11; 2 of 3 VALID)"
    assert captured.err.splitlines() == [
        "overhead: warning: resnet18 eager SingleStream: LoadGen called 1 of 3 run(s) INVALID (min duration not met): "
        "their figures are not ones LoadGen stands behind; give a longer --duration-s",
        "overhead: warning: resnet18's bare loop moved by up to 18% from before the harness's run to after it in 1 of 3 "
        "round(s) (over 3%): the ratio harness / bare is against a machine that changed under it; run it on a quiet machine"]
    figures = json.loads(out.read_text())
    assert figures["spread"]["resnet18_ratio_harness_to_bare"] == {"min": 1.0, "median": pytest.approx(1.02), "max": 1.04}
    assert figures["resnet18_ratio_harness_to_bare"] == pytest.approx(1.02) and len(figures["warnings"]) == 2

    monkeypatch.setattr(sys, "argv", ["overhead.py", "--rounds", "1"])  # one clean round: only the one-round warning
    overhead.main()
    assert capsys.readouterr().err.splitlines() == [
        "overhead: warning: one round has no spread (its min, median and max are one figure), so the ratio cannot be told "
        "from the machine's noise; give --rounds 2 or more"]


def test_noise_benchmark_prints_each_cells_warnings_under_it(monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """Its runs faked: a cell's warnings (a noisy CV, LoadGen's figure far from the device timing's)
    were in its JSON only, so its row in the printed table read as clean as any other."""
    noise = _benchmark("noise", monkeypatch)
    runs = iter([{"a": _noise_cell("a", 20.0, ["noisy: device-time CV 15% (over 10%)"]), "b": _noise_cell("b", 20.0, [])},
                 {"a": _noise_cell("a", 20.1, ["drift: the timed repetitions' medians spread 8%"]),
                  "b": _noise_cell("b", 20.1, [])}])
    monkeypatch.setattr(noise, "run_once", lambda *args: next(runs))
    monkeypatch.setattr(sys, "argv", ["noise.py"])
    noise.main()
    lines = capsys.readouterr().out.splitlines()
    assert lines[2].startswith("a ") and lines[3:5] == ["  warning: drift: the timed repetitions' medians spread 8%",
                                                        "  warning: noisy: device-time CV 15% (over 10%)"]
    assert lines[5].startswith("b ") and lines[6] == "2 of 2 cells meet every target; 1 with warnings"
