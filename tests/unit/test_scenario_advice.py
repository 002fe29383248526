"""What a scenario file sets that it will not get is said before the run starts: each of these
was accepted in silence (a user's first scenario files, 2026-12-01)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.cli.main import main
from harness.run import plan
from harness.scenario import advice, loading
from tests.shared_probe import SharedProbe

HEAD = "models: [resnet18]\nbackends: [eager]\n"


def _warnings(tmp_path: Path, text: str, device: str = "cpu") -> list[str]:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    return advice.warnings(loading.load(path), device)


def test_a_setting_no_scenario_of_the_file_reads_is_named(tmp_path: Path) -> None:
    found = _warnings(tmp_path, HEAD + "scenarios: [Offline]\nloadgen: {target_qps: 50, samples_per_query: 16}\n")
    assert found == ["loadgen.samples_per_query is a MultiStream setting and this file runs Offline: it is ignored",
                     "loadgen.target_qps is a Server setting and this file runs Offline: it is ignored"]
    assert _warnings(tmp_path, HEAD + "scenarios: [Server]\nloadgen: {target_qps: 50}\n") == []


def test_batch_sizes_of_a_file_that_runs_no_batched_scenario_are_named(tmp_path: Path) -> None:
    found = _warnings(tmp_path, HEAD + "scenarios: [SingleStream]\nbatch_sizes: {cpu: [8, 16]}\n")
    assert len(found) == 1 and found[0].startswith("batch_sizes is read by Server and Offline only")
    assert _warnings(tmp_path, HEAD + "scenarios: [SingleStream, Offline]\nbatch_sizes: {cpu: [8]}\n") == []


def test_a_bundles_stored_scenario_run_again_as_a_file_draws_no_warning_of_defaults() -> None:
    """bundle.json's `scenario` gives every default (`loading.resolved`), so a reproducer running it
    as a file was told of settings the original file never gave: `loadgen.samples_per_query is a
    MultiStream setting and this file runs Offline: it is ignored` and three more, and of a
    SingleStream file the batch sizes."""
    for scenarios in ("[Offline]", "[SingleStream]", "[SingleStream, Offline]"):
        file = loading.parse((HEAD + f"scenarios: {scenarios}\n").encode(), "s.yaml")
        stored = loading.resolved(file, "s")
        assert advice.warnings(file, "cpu") == []
        assert advice.warnings(loading.parse(json.dumps(stored).encode(), "bundle.json"), "cpu") == [], scenarios
    stored = loading.resolved(loading.parse((HEAD + "scenarios: [Offline]\nloadgen: {target_qps: 50}\n").encode(),
                                            "s.yaml"), "s")
    assert advice.warnings(loading.parse(json.dumps(stored).encode(), "bundle.json"), "cpu") == [
        "loadgen.target_qps is a Server setting and this file runs Offline: it is ignored"]


def test_an_mlperf_run_whose_settings_the_file_overrides_is_said_to_be_unofficial_before_it_starts(
        tmp_path: Path) -> None:
    """Only pack said so, after a run of ten minutes or more."""
    mlperf = HEAD + "scenarios: [Offline]\ninputs: {samples: 1024}\nloadgen: {profile: mlperf"
    found = _warnings(tmp_path, mlperf + ", min_duration_s: 1, max_query_count: 900}\n")
    assert found == ["loadgen.max_query_count, loadgen.min_duration_s under profile mlperf override mlperf.conf's: the "
                     "run is not an official one (pack says so, and refuses it for the closed division)"]
    assert _warnings(tmp_path, mlperf + ", min_duration_s: 1}\n") == [
        "loadgen.min_duration_s under profile mlperf overrides mlperf.conf's: the run is not an official one (pack says "
        "so, and refuses it for the closed division)"]
    assert _warnings(tmp_path, mlperf + "}\n") == []
    assert _warnings(tmp_path, HEAD + "scenarios: [Offline]\nloadgen: {min_duration_s: 1}\n") == []  # dev: no mlperf.conf


def test_a_query_count_below_early_stoppings_is_named_with_what_follows(tmp_path: Path) -> None:
    found = _warnings(tmp_path, HEAD + "scenarios: [MultiStream, Offline]\nloadgen: {min_query_count: 20}\n")
    assert found == ["loadgen.min_query_count 20 is below the 662 queries LoadGen's early stopping needs for "
                     "MultiStream: expect its cells INVALID (early stopping not met)"]
    assert _warnings(tmp_path, HEAD + "scenarios: [SingleStream]\nloadgen: {min_query_count: 64}\n") == []
    assert len(_warnings(tmp_path, HEAD + "scenarios: [SingleStream]\nloadgen: {min_query_count: 63}\n")) == 1
    # Server's too: a file of min_query_count 300 ran every Server cell INVALID (early stopping not met) unwarned
    assert _warnings(tmp_path, HEAD + "scenarios: [Server]\nbatch_sizes: {cpu: [1]}\nloadgen: {min_query_count: 458}\n") == [
        "loadgen.min_query_count 458 is below the 459 queries LoadGen's early stopping needs for Server: expect its "
        "cells INVALID (early stopping not met)"]
    assert _warnings(tmp_path, HEAD + "scenarios: [Server]\nbatch_sizes: {cpu: [1]}\nloadgen: {min_query_count: 459}\n") == []


@pytest.mark.slow
@pytest.mark.parametrize("scenario", ["SingleStream", "MultiStream", "Server"])
def test_the_early_stopping_floors_are_loadgens(tmp_path: Path, scenario: str) -> None:
    """One query fewer than the floor is INVALID for early stopping alone; the floor is VALID."""
    from harness.measure import loadgen
    from tests.unit.test_loadgen import Sleeper, cell, samples

    floor = advice.EARLY_STOPPING_FLOOR[scenario]
    found = {}
    for count in (floor - 1, floor):
        # a minimum duration the query count outlasts: the count alone decides how many queries run
        settings: dict[str, Any] = {"min_duration_s": 0.005, "min_query_count": count, "samples_per_query": 2}
        if scenario == "Server":  # no query over its latency target, however loaded the machine: the count alone decides
            settings["target_latency_ms"] = 60_000
        result = loadgen.run_scenario(Sleeper(0.001), samples(), cell(scenario, 2 if scenario == "MultiStream" else 1,
                                                                        **settings), 1e6, tmp_path / f"lg{count}")
        found[count] = (result["validity"], result["invalid_reasons"])
    (reason,) = found[floor - 1][1]  # LoadGen's own account of it beside the condition (a run of 40 queries: at least 64)
    assert found[floor - 1][0] == "INVALID" and reason.startswith("early stopping not met (") and f"{floor - 1} queries" in reason
    assert found[floor] == ("VALID", []), found


@pytest.mark.parametrize(("text", "device", "over"), [
    ("scenarios: [Offline]\nbatch_sizes: {cpu: [64]}\ninputs: {samples: 32}\n", "cpu", "64"),
    ("scenarios: [Offline]\nbatch_sizes: {cuda: [64]}\ninputs: {samples: 32}\n", "cpu", None),  # another device's
    ("scenarios: [Offline]\nbatch_sizes: {cuda: [64]}\ninputs: {samples: 32}\n", "auto", "64"),
    ("scenarios: [MultiStream]\nloadgen: {samples_per_query: 64}\ninputs: {samples: 4}\n", "cpu", "64"),
])
def test_a_batch_larger_than_the_sample_library_is_named(tmp_path: Path, text: str, device: str, over: str | None) -> None:
    found = _warnings(tmp_path, HEAD + text, device)
    if over is None:
        assert found == []
    else:
        assert found == [f"batches of {over} from inputs.samples {text.split('samples: ')[1].split('}')[0]}: each "
                         "batch holds the same inputs more than once, warm in the caches, which flatters the figures; "
                         "give inputs.samples at least the largest batch"]


def test_the_shipped_scenarios_draw_no_warning() -> None:
    for path in sorted((Path(__file__).resolve().parents[2] / "scenarios").glob("*.yaml")):
        assert advice.warnings(loading.load(path), "auto") == [], path.name


def test_a_run_prints_them_before_it_starts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(HEAD + "scenarios: [Offline]\nloadgen: {target_latency_ms: 20}\n")
    main(["run", str(path), "--out", str(tmp_path / "out"), "--device", "cpu", "--only", "batch=99"])  # refused after
    printed = " ".join(capsys.readouterr().out.split())
    assert "fusionbench: warning: loadgen.target_latency_ms is a Server setting and this file runs Offline" in printed


@pytest.mark.slow
def test_a_dry_run_lists_what_would_run_and_be_skipped_and_writes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A user could check a file only by starting it (the cell count came after the probe, as the
    run began) or by an --only that matched nothing."""
    # Both dry runs ask the probe the same (smoke.yaml's six backends, no system): the second gets the
    # first's answer (tests/shared_probe.py); what it checks is how the line writes a long duration.
    monkeypatch.setattr(plan, "run_probe", SharedProbe())
    smoke = Path(__file__).resolve().parents[2] / "scenarios" / "smoke.yaml"
    odd = tmp_path / "smoke.yaml"  # the dry run wrote "at least 2 s ... (1 x 1.55556 s)"
    odd.write_text(smoke.read_text().replace("min_duration_s: 2", "min_duration_s: 1.55556"))
    out = tmp_path / "out"
    code = main(["run", str(odd), "--dry-run", "--device", "cpu", "--out", str(out),
                 "--only", "backend=null,backend=tensorrt"])
    printed = " ".join(capsys.readouterr().out.split())
    assert code == 0 and not out.exists()
    assert "3 cell(s) on cpu" in printed
    assert "resnet18 tensorrt fusion-off Offline cpu fp32 b4 input 32 │ be skipped: TensorRT runs only on NVIDIA GPUs" in printed
    assert ("1 of 3 cell(s) would run: at least 1.56 s of LoadGen's minimum duration (1 x 1.56 s)" in printed
            and "nothing was run or written" in printed), printed
    long = tmp_path / "long.yaml"  # three figures by `:.3g` read "at least 1e+03 min ... (1 x 6e+04 s)"
    long.write_text(smoke.read_text().replace("min_duration_s: 2", "min_duration_s: 60000")
                    .replace("cell_timeout_s: 300", "cell_timeout_s: 70000"))
    assert main(["run", str(long), "--dry-run", "--device", "cpu", "--out", str(out), "--only", "backend=null"]) == 0
    printed = " ".join(capsys.readouterr().out.split())
    assert "1 of 1 cell(s) would run: at least 1,000 min of LoadGen's minimum duration (1 x 60,000 s)" in printed, printed
    assert main(["run", "--resume", str(tmp_path), "--dry-run"]) == 2  # no bundle: a resume's dry run reads one
    assert "not a FusionBench result bundle (no bundle.json); --resume takes a result bundle" in capsys.readouterr().err
