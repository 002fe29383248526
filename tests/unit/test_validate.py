"""`fusionbench validate`: golden bundles pass; every kind of damage is one clear line and a
non-zero exit; validating never changes a file."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
import shutil
import signal
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.bundle import loadgen_check, manifest
from harness.bundle.loadgen_log import parse_detail
from harness.bundle.migrations import SCHEMA_VERSION
from harness.bundle.reader import load
from harness.bundle.validate import validate
from harness.cli.main import main
from harness.errors import SchemaVersionError
from harness.reporting.run_facts import facts
from tests.another_user import acting_as, root_folder_every_user_may_enter

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


def tree_digest(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        digest.update(path.relative_to(root).as_posix().encode())
        if path.is_file() and not path.is_symlink():
            digest.update(path.read_bytes())
    return digest.hexdigest()


@pytest.fixture(params=[f"v{v}" for v in range(1, SCHEMA_VERSION + 1)])
def bundle(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    root = tmp_path / "bundle"
    shutil.copytree(GOLDEN / request.param, root)
    return root


def cell_files(root: Path, status: str = "valid", backend: str = "eager") -> list[Path]:
    found = []
    for path in sorted((root / "cells").glob("*.json")):
        cell = json.loads(path.read_text())
        if cell["status"] == status and cell["config"]["backend"] == backend:
            found.append(path)
    return found


def edit_json(path: Path, change: Callable[[dict[str, Any]], None], *, remanifest: bool = True) -> None:
    """Change a record; re-checksum so that only the deeper checks can catch it."""
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data, indent=1))
    if remanifest:
        manifest.write(path.parents[1] if path.parent.name == "cells" else path.parent)


# Cells of each golden bundle: v7 on add TVM's fusion pair in both scenarios to golden.yaml's 10.
CELLS = {7: 14, 8: 14, 9: 14, 10: 14, 11: 14, 12: 14}


def fusionbench(*args: str) -> subprocess.CompletedProcess[str]:
    """The CLI in this process (its entry point as a program is what the integration tests run):
    its exit code and what it printed on each stream."""
    handler = signal.getsignal(signal.SIGTERM)  # main() sets its own, for a process of its own
    try:
        with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.redirect_stderr(io.StringIO()) as err:
            code = main(list(args))
    finally:
        signal.signal(signal.SIGTERM, handler)
    return subprocess.CompletedProcess(["fusionbench", *args], code, out.getvalue(), err.getvalue())


def listed_cells(bundle: Path) -> int:
    return CELLS.get(json.loads((bundle / "bundle.json").read_text())["schema_version"], 10)


@pytest.mark.slow
def test_golden_bundles_are_valid(bundle: Path) -> None:
    before = tree_digest(bundle)
    verdict = validate(bundle)
    assert verdict.ok, verdict.problems
    assert verdict.cells == listed_cells(bundle) and verdict.files > 10
    assert tree_digest(bundle) == before


@pytest.mark.slow
def test_cli_exit_codes(bundle: Path) -> None:
    done = fusionbench("validate", str(bundle))
    assert done.returncode == 0 and f"valid ({listed_cells(bundle)} cell(s)" in done.stdout
    (bundle / "cells" / "stray.json").write_text("{}")
    done = fusionbench("validate", str(bundle))
    assert done.returncode == 1
    assert f"{bundle}: cells/stray.json: added (not in MANIFEST.sha256)" in done.stdout
    assert "INVALID" in done.stderr and "Traceback" not in done.stderr
    done = fusionbench("validate", str(bundle / "cells"))
    assert done.returncode == 2 and "not a FusionBench result bundle" in done.stderr


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        (lambda root: cell_files(root)[0].unlink(), "listed in MANIFEST.sha256 but missing"),
        (lambda root: cell_files(root)[0].write_text(cell_files(root)[0].read_text()[:200]), "not valid JSON"),
        (lambda root: (root / "MANIFEST.sha256").write_text((root / "MANIFEST.sha256").read_text().replace("a", "b", 1)),
         "edited (its SHA-256 differs"),
        (lambda root: (root / "MANIFEST.sha256").write_text(f"{'0' * 64}  ../../etc/passwd\n"), "'..' component); refused"),
        (lambda root: (root / "MANIFEST.sha256").unlink(), "MANIFEST.sha256: missing"),
        (lambda root: (root / "extra.txt").symlink_to("/etc/hostname"), "a symbolic link or special file"),
    ],
)
@pytest.mark.slow
def test_damage_is_found_and_nothing_is_changed(bundle: Path, damage: Callable[[Path], Any], expected: str) -> None:
    damage(bundle)
    before = tree_digest(bundle)
    verdict = validate(bundle)
    assert not verdict.ok
    assert any(expected in line for line in verdict.problems), verdict.problems
    assert tree_digest(bundle) == before


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda c: c["metrics"]["loadgen"]["metric"].update(value=c["metrics"]["loadgen"]["metric"]["value"] * 0.5),
         "but its detail log says"),
        (lambda c: c["metrics"]["loadgen"].update(validity="INVALID"), "LoadGen validity 'INVALID' but its detail log says 'VALID'"),
        (lambda c: c["metrics"]["loadgen"]["results"].update({"result_90.00_percentile_latency_ns": 1000}),
         "LoadGen 'result_90.00_percentile_latency_ns' '1000' but its detail log says"),
        (lambda c: c["metrics"]["loadgen"]["settings"].update(effective_min_duration_ms=600000),
         "LoadGen 'effective_min_duration_ms' '600000' but its detail log says"),
        (lambda c: c["metrics"]["loadgen"]["results"].update(result_made_up=1),
         "LoadGen results 'result_made_up' is not in its detail log"),
        (lambda c: c["metrics"]["loadgen"].update(scenario="Server"), "LoadGen scenario 'Server' but the cell's is"),
        (lambda c: c["config"].update(batch=c["config"]["batch"] + 1), "is not the hash of its config"),
        (lambda c: c["metrics"]["device_time"]["summary"].update(median_ns=1.0), "summary median 1.0 but the samples'"),
        (lambda c: c["metrics"]["device_time"]["samples_ns"].append(5), "summary n"),
        (lambda c: c["metrics"]["device_time"]["summary"].update(p90_ns=1.0), "summary p90 1.0 but the samples'"),
        (lambda c: c["metrics"]["device_time"]["summary"].update(p99_ns=c["metrics"]["device_time"]["summary"]["p99_ns"] * 0.9),
         "summary p99"),
        (lambda c: c["metrics"]["device_time"]["summary"].update(cv=0.001), "summary cv 0.001 but the samples'"),
        (lambda c: c["metrics"]["device_time"]["summary"].update(mean_ns=2.0), "summary mean 2.0"),
        (lambda c: c["metrics"]["correctness"].update(max_abs_error=c["metrics"]["correctness"]["max_abs_error_limit"] * 100 + 1),
         "correctness: ok is True but max abs error"),
        (lambda c: c["metrics"]["memory"].update(peak_rss_bytes=10**17), "peak_rss_bytes"),
        (lambda c: c["metrics"]["device_time"]["samples_ns"].__setitem__(0, -3), "samples_ns/0"),
        (lambda c: c["metrics"]["correctness"].update(ok=False), "status valid without a passed correctness check"),
        (lambda c: c["metrics"]["correctness"].update(after_timing={**c["metrics"]["correctness"], "ok": False}),
         "status valid with a failed correctness check after timing"),
        (lambda c: c.update(status="exploded"), "status: 'exploded' is not one of"),
        (lambda c: c["metrics"]["fusion_report"].update(kernel_count=999), "kernel_count 999 but"),
        (lambda c: c["metrics"].update(dynamo={"graphs": 3, "graph_breaks": 2, "distinct_break_reasons": 1,
                                               "break_reasons": [{"reason": "print", "count": 3}]}),
         "break_reasons count 3 breaks of 2"),
        (lambda c: c["metrics"]["loadgen"].update(log_dir="../../../../etc"), "log_dir"),
        (lambda c: c["metrics"].update(prepare_s=c["metrics"]["prepare_s"] / 2), "is not the prepare phase's"),
        (lambda c: c.update(schema_version=SCHEMA_VERSION + 5), None),
    ],
)
@pytest.mark.slow
def test_inconsistent_figures_are_found_even_with_a_fresh_manifest(bundle: Path, change, expected: str | None) -> None:
    edit_json(cell_files(bundle)[0], change)
    if expected is None:
        with pytest.raises(SchemaVersionError, match="newer than this harness reads"):
            validate(bundle)
        return
    problems = validate(bundle).problems
    assert any(expected in line for line in problems), problems


@pytest.mark.parametrize(("version", "required"), [(11, False), (12, True)])
def test_a_v12_valid_cell_must_keep_its_check_after_timing(tmp_path: Path, version: int, required: bool) -> None:
    """Dropping the record of the check after timing would hide a failed one. From schema 12 every
    valid cell of a backend that computes the model records it; a v11 cell may lack it (written
    before the check), and the null backend's cells compare nothing."""
    root = tmp_path / "bundle"
    shutil.copytree(GOLDEN / f"v{version}", root)
    edit_json(cell_files(root)[0], lambda c: c["metrics"]["correctness"].pop("after_timing", None))
    missing = "status valid without the correctness check after timing"
    nulls = cell_files(root, backend="null")  # they lack the record, and are not found for it
    assert nulls and all(json.loads(path.read_text())["metrics"]["correctness"].get("after_timing") is None
                         for path in nulls)
    assert sum(missing in line for line in validate(root).problems) == (1 if required else 0)


@pytest.mark.slow
def test_a_detail_log_that_no_longer_matches_is_found(bundle: Path) -> None:
    cell = json.loads(cell_files(bundle)[0].read_text())
    detail = bundle / "cells" / cell["id"] / cell["metrics"]["loadgen"]["log_dir"] / "mlperf_log_detail.txt"
    detail.write_text(detail.read_text().replace('"result_validity", "value": "VALID"', '"result_validity", "value": "INVALID"'))
    manifest.write(bundle)
    assert any("detail log says 'INVALID'" in line for line in validate(bundle).problems)


@pytest.mark.parametrize(("change", "said"), [
    # ten times the work at the same speed: the throughput the call times imply, ten times over
    (lambda sut: sut.update(samples=sut["samples"] * 10, batches=sut["batches"] * 10),
     "LoadGen sut samples 2320, but its detail log's 1 queries of 232 samples are 232"),
    (lambda sut: sut.update(batches=7), "LoadGen sut batches 7, but 232 samples run 4 at a time are 58 batches at the fewest"),
    (lambda sut: sut.update(gathered_batches=59), "LoadGen sut gathered_batches 59, more than its 58 batches"),
])
def test_the_system_under_tests_own_counts_are_held_to_loadgens_detail_log(tmp_path: Path, change, said: str) -> None:
    """The samples the system under test counted itself answering are the queries LoadGen issued
    times the samples in each; an Offline eager cell's 232 samples made 2,320 (and its batches with
    them), re-hashed, was valid."""
    root = tmp_path / "bundle"
    shutil.copytree(GOLDEN / f"v{SCHEMA_VERSION}", root)
    path = next(p for p in cell_files(root) if json.loads(p.read_text())["config"]["scenario"] == "Offline")
    edit_json(path, lambda c: change(c["metrics"]["loadgen"]["sut"]))
    problems = validate(root).problems
    assert len(problems) == 1 and said in problems[0], problems


@pytest.mark.parametrize(("scenario", "change", "said"), [
    # the mean doubled: 58 calls of 22.7 ms in a query LoadGen answered within 661 ms
    ("Offline", lambda sut: sut.update(call_mean_ns=sut["call_mean_ns"] * 2),
     "LoadGen sut call_mean_ns 22661044 over 58 of its 58 calls is 1314340564 ns, more than the 661153267 ns its "
     "samples' latencies in its detail log cover"),
    ("Offline", lambda sut: sut.update(call_median_ns=sut["call_median_ns"] * 3),
     "LoadGen sut call_median_ns 33635493 over 29 of its 58 calls is 975429297 ns, more than the 661153267 ns"),
    # a median call longer than any query LoadGen timed
    ("SingleStream", lambda sut: sut.update(call_median_ns=sut["call_median_ns"] * 1.5),
     "LoadGen sut call_median_ns 10861659 is longer than the run's largest latency, 10793244 ns in its detail log"),
])
def test_the_system_under_tests_call_times_are_held_to_loadgens_latencies(tmp_path: Path, scenario: str, change,
                                                                         said: str) -> None:
    """The worker keeps the call times' mean and median alone, which the latency agreement's reason
    reads (the model ran slower inside LoadGen's run than in the timing pass); an Offline eager
    cell's doubled, re-hashed, was valid. Each call lies inside its samples' latencies in LoadGen's log."""
    root = tmp_path / "bundle"
    shutil.copytree(GOLDEN / f"v{SCHEMA_VERSION}", root)
    path = next(p for p in cell_files(root) if json.loads(p.read_text())["config"]["scenario"] == scenario)
    edit_json(path, lambda c: change(c["metrics"]["loadgen"]["sut"]))
    problems = validate(root).problems
    assert len(problems) == 1 and said in problems[0], problems


@pytest.mark.parametrize(("change", "said"), [
    # the check after timing said to run on the timing's second batch, where it ran on the example's own
    (lambda c: c["after_timing"].update(samples=[0, 1, 2, 3]),
     "correctness after timing: samples [0, 1, 2, 3], but 16 samples run 4 at a time are checked on [4, 5, 6, 7]"),
    (lambda c: c.update(samples=[0, 1, 2, 3, 16, 17, 18, 19]),
     "correctness: samples [0, 1, 2, 3, 16, 17, 18, 19], but 16 samples run 4 at a time are checked on [0, 1, 2, 3]"),
])
def test_the_samples_a_correctness_check_records_are_the_ones_its_config_gives(tmp_path: Path, change,
                                                                              said: str) -> None:
    """An Offline eager cell of 16 samples in batches of 4 checks samples 0-3, then 4-7 after its
    timing; either made other, re-hashed, was valid."""
    root = tmp_path / "bundle"
    shutil.copytree(GOLDEN / f"v{SCHEMA_VERSION}", root)
    path = next(p for p in cell_files(root) if json.loads(p.read_text())["config"]["scenario"] == "Offline")
    edit_json(path, lambda c: change(c["metrics"]["correctness"]))
    problems = validate(root).problems
    assert problems == [f"cells/{path.stem}.json: {said}"], problems


def test_a_folder_of_fewer_images_than_its_samples_is_checked_on_the_rows_it_holds() -> None:
    """A folder gives at most `inputs.samples` images: resnet18's eager cell read the 6 a folder held
    for `samples: 64` in batches of 4 and checked [0, 1, 2, 3], then [4, 5, 0, 1] after its timing,
    which validate refused as rows of 64 samples, so compare and report refused the honest bundle;
    rows no count up to 64 gives are still a problem, and drawn inputs are exactly their count."""
    from harness.bundle.validate import _checked_rows_problems

    folder = {"inputs": {"source": "folder", "path": "images", "samples": 64}, "batch": 4}
    checked = {"samples": [0, 1, 2, 3], "after_timing": {"samples": [4, 5, 0, 1]}}
    assert _checked_rows_problems(folder, checked) == []
    assert _checked_rows_problems({**folder, "inputs": {"source": "synthetic", "samples": 64}}, checked) == [
        "correctness after timing: samples [4, 5, 0, 1], but 64 samples run 4 at a time are checked on [4, 5, 6, 7]"]
    assert _checked_rows_problems(folder, {**checked, "after_timing": {"samples": [0, 1, 2, 3]}}) == [
        "correctness after timing: samples [0, 1, 2, 3], but 64 samples (or the fewer images of its folder) run 4 at a "
        "time are checked on [4, 5, 6, 7]"]


def test_a_valid_cell_whose_loadgen_run_logged_an_error_is_a_problem(bundle: Path) -> None:
    """LoadGen calls a run VALID that logged an error (a second config file read in one process);
    MLPerf's checker refuses it, and so does validate where the cell says valid."""
    cell = next(c for c in map(lambda p: json.loads(p.read_text()), cell_files(bundle)) if c["status"] == "valid")
    detail = bundle / "cells" / cell["id"] / cell["metrics"]["loadgen"]["log_dir"] / "mlperf_log_detail.txt"
    error = ':::MLLOG {"key": "error_invalid_config", "value": "Multiple conf files are used.", "metadata": {"is_error": true}}'
    detail.write_text(detail.read_text() + error + "\n")
    manifest.write(bundle)
    assert any("status valid, yet its LoadGen run logged an error ('error_invalid_config: Multiple conf files"
               in line for line in validate(bundle).problems), validate(bundle).problems


def _logs(bundle: Path, scenario: str) -> tuple[Path, Path]:
    cell = next(c for c in map(lambda p: json.loads(p.read_text()), cell_files(bundle)) if c["config"]["scenario"] == scenario)
    logs = bundle / "cells" / cell["id"] / cell["metrics"]["loadgen"]["log_dir"]
    return bundle / "cells" / f"{cell['id']}.json", logs


@pytest.mark.slow
@pytest.mark.parametrize("scenario", ["SingleStream", "Offline"])
def test_a_forgery_of_record_and_detail_log_is_caught_by_the_summary_log(bundle: Path, scenario: str) -> None:
    """A run LoadGen judged INVALID, or slower, made to look VALID or faster in
    the record and its detail log, then re-hashed; the summary log still tells the truth."""
    other = bundle.with_name("other")
    shutil.copytree(bundle, other)
    record, logs = _logs(bundle, scenario)
    summary = logs / "mlperf_log_summary.txt"
    summary.write_text(summary.read_text().replace("Result is : VALID", "Result is : INVALID"))
    manifest.write(bundle)
    assert any("LoadGen result 'VALID' but its summary log says 'INVALID'" in line for line in validate(bundle).problems)
    bundle = other
    record, logs = _logs(bundle, scenario)
    key = "result_50.00_percentile_latency_ns"
    detail = logs / "mlperf_log_detail.txt"
    value = json.loads(record.read_text())["metrics"]["loadgen"]["results"][key]
    forged = value // 2
    detail.write_text(detail.read_text().replace(f'"key": "{key}", "value": {value}', f'"key": "{key}", "value": {forged}'))
    edit_json(record, lambda c: c["metrics"]["loadgen"]["results"].update({key: forged}))
    problems = validate(bundle).problems
    assert problems == [f"cells/{record.name}: LoadGen '{key}' '{forged}' but its summary log says '{value}'"]


def _set_detail(detail: Path, key: str, value: Any) -> None:
    """The detail log with `key`'s entry set to `value`, its line otherwise as LoadGen wrote it."""
    lines = detail.read_text().splitlines(keepends=True)
    for number, line in enumerate(lines):
        record = json.loads(line[len(":::MLLOG "):]) if line.startswith(":::MLLOG ") else {}
        if record.get("key") == key:
            lines[number] = ":::MLLOG " + json.dumps({**record, "value": value}) + "\n"
    detail.write_text("".join(lines))


def test_a_forged_headline_latency_is_caught_by_the_summary_logs_estimate(bundle: Path) -> None:
    """SingleStream's metric is LoadGen's early-stopping estimate, which the summary log prints too:
    halved in the record and its detail log and re-hashed, the summary still tells the truth, and
    the detail log's own p90, which the estimate never falls under (harness/bundle/loadgen_conditions.py)."""
    record, logs = _logs(bundle, "SingleStream")
    key = "early_stopping_latency_ss"
    value = json.loads(record.read_text())["metrics"]["loadgen"]["results"][key]
    forged = value // 2
    _set_detail(logs / "mlperf_log_detail.txt", key, forged)

    def change(cell: dict[str, Any]) -> None:
        cell["metrics"]["loadgen"]["results"][key] = forged
        cell["metrics"]["loadgen"]["metric"]["value"] = float(forged)
    edit_json(record, change)
    p90 = json.loads(record.read_text())["metrics"]["loadgen"]["results"]["result_90.00_percentile_latency_ns"]
    assert validate(bundle).problems == [
        f"cells/{record.stem}/{json.loads(record.read_text())['metrics']['loadgen']['log_dir']}/mlperf_log_detail.txt: "
        f"{key} {forged} is under result_90.00_percentile_latency_ns {p90}: an early-stopping estimate is a latency "
        "ranked above its percentile's",
        f"cells/{record.name}: LoadGen '{key}' '{forged}' but its summary log says '{value}'"]


def test_a_metric_named_or_in_a_unit_other_than_its_logs_is_a_problem(tmp_path: Path) -> None:
    """An Offline cell's 351 samples/s recorded in ns, re-hashed, was valid, and `compare` then
    judged it a latency, lower better: a throughput that fell from 520 was no longer `worse`. A
    SingleStream estimate named the plain p90 hid that it is LoadGen's upper bound; a compliance
    test's metric likewise."""
    root = tmp_path / "bundle"
    shutil.copytree(GOLDEN / f"v{SCHEMA_VERSION}", root)
    offline, _ = _logs(root, "Offline")
    edit_json(offline, lambda c: c["metrics"]["loadgen"]["metric"].update(unit="ns"))
    single, _ = _logs(root, "SingleStream")
    edit_json(single, lambda c: c["metrics"]["loadgen"]["metric"].update(name="latency_p90_ns"))
    assert sorted(validate(root).problems) == sorted([
        f"cells/{offline.name}: LoadGen metric unit 'ns' but its detail log's figure is 'samples/s'",
        f"cells/{single.name}: LoadGen metric name 'latency_p90_ns' but its detail log's figure is "
        "'latency_p90_early_stopping_ns'"])
    root = tmp_path / "mlperf"
    shutil.copytree(GOLDEN / "mlperf", root)
    path = sorted((root / "cells").glob("*.json"))[0]
    edit_json(path, lambda c: c["metrics"]["compliance"]["TEST04"]["metric"].update(unit="ns"))
    assert [line for line in validate(root).problems if "TEST04" in line] == [
        f"cells/{path.name}: compliance TEST04 metric unit 'ns' but its detail log's figure is 'samples/s'"]


def test_a_detail_log_called_valid_beside_an_unmet_condition_is_a_problem(bundle: Path) -> None:
    """LoadGen's validity is every condition met: a log (and record) with one condition turned unmet
    but still VALID was edited, as is a summary that says a condition the record denies."""
    record, logs = _logs(bundle, "SingleStream")
    _set_detail(logs / "mlperf_log_detail.txt", "result_min_duration_met", False)
    edit_json(record, lambda c: c["metrics"]["loadgen"]["results"].update(result_min_duration_met=False))
    problems = validate(bundle).problems
    assert any("result_validity VALID, yet min duration not met" in line for line in problems), problems
    assert f"cells/{record.name}: LoadGen 'result_min_duration_met' 'False' but its summary log says 'True'" in problems


def parsed_detail(scenario: str, entries: tuple[tuple[str, Any], ...]) -> dict[str, Any]:
    """A detail log of `entries` (key, value), as validate parses one."""
    lines = [(":::MLLOG " + json.dumps({"key": key, "value": value, "metadata": {}}))
             for key, value in (("effective_scenario", scenario), *entries)]
    return parse_detail("\n".join(lines), scenario)


def test_a_server_log_whose_latency_condition_disagrees_with_its_p99_is_a_problem(tmp_path: Path) -> None:
    """Server's latency condition is its p99 within the bound, all three in one detail log."""
    parsed = parsed_detail("Server", (
        ("effective_target_latency_ns", 200_000_000),
        ("effective_target_latency_percentile", 0.99), ("result_validity", "VALID"),
        ("result_perf_constraints_met", True), ("result_min_duration_met", True), ("result_min_queries_met", True),
        ("early_stopping_met", True), ("result_99.00_percentile_latency_ns", 7_033_619_245)))
    assert loadgen_check._bound_against_its_condition("logs", parsed) == [
        "logs/mlperf_log_detail.txt: result_perf_constraints_met True, yet result_99.00_percentile_latency_ns "
        "7033619245 is over effective_target_latency_ns 200000000"]
    parsed["results"]["result_99.00_percentile_latency_ns"] = 150_000_000
    assert loadgen_check._bound_against_its_condition("logs", parsed) == []


def test_a_summary_log_figure_that_is_not_a_number_is_one_problem(bundle: Path) -> None:
    _, logs = _logs(bundle, "Offline")
    summary = logs / "mlperf_log_summary.txt"
    summary.write_text(re.sub(r"Max latency \(ns\)(\s*): \d+", r"Max latency (ns)\1: lots", summary.read_text()))
    manifest.write(bundle)
    assert any("'result_max_latency_ns' is 'lots', not a number" in line for line in validate(bundle).problems)


@pytest.mark.parametrize(("damage", "words"), [
    (lambda text: text.replace('"value": "VALID"', '"value": "VALID', 1), "not a JSON record"),  # truncated line
    (lambda text: text + ":::MLLOG [1, 2]\n", "not a LoadGen record"),
    (lambda text: re.sub(r'("key": "result_samples_per_second", "value": )[0-9.e+]+', r'\1"abc"', text), "not a number"),
])
@pytest.mark.slow
def test_a_damaged_detail_log_line_is_a_problem_not_a_traceback(bundle: Path, damage: Any, words: str) -> None:
    offline = [json.loads(p.read_text()) for p in cell_files(bundle)]
    cell = next(c for c in offline if c["config"]["scenario"] == "Offline")
    detail = bundle / "cells" / cell["id"] / cell["metrics"]["loadgen"]["log_dir"] / "mlperf_log_detail.txt"
    damaged = damage(detail.read_text())
    assert damaged != detail.read_text()
    detail.write_text(damaged)
    manifest.write(bundle)  # re-checksummed: only the log check can find it
    done = fusionbench("validate", str(bundle))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and words in done.stdout + done.stderr, done.stdout + done.stderr


@pytest.mark.slow
def test_a_path_that_looks_like_markup_is_printed_as_it_is(tmp_path: Path) -> None:
    root = tmp_path / "[red]run[/red]"
    shutil.copytree(GOLDEN / f"v{SCHEMA_VERSION}", root)
    done = fusionbench("validate", str(root))
    assert done.returncode == 0 and f"{root}: valid" in done.stdout, done.stdout + done.stderr


def test_a_rerun_of_another_scenario_than_its_own_is_a_problem(tmp_path: Path) -> None:
    """`compare` calls a bundle whose `rerun_of` names A a rerun of A: a rerun stores A's scenario
    unchanged, so one whose scenario is another was not made by `fusionbench rerun`."""
    root = tmp_path / "rerun"
    shutil.copytree(GOLDEN / f"v{SCHEMA_VERSION}", root)
    own = json.loads((root / "bundle.json").read_text())["scenario_sha256"]
    record = {"run_id": "20261206-000000-golden", "created": "2026-12-06T00:00:00+00:00", "scenario_sha256": own}
    edit_json(root / "bundle.json", lambda header: header.update(rerun_of=record))
    assert validate(root).ok
    edit_json(root / "bundle.json", lambda header: header.update(rerun_of={**record, "scenario_sha256": "1" * 64}))
    assert "bundle.json: rerun_of.scenario_sha256 is not the run's own: a rerun runs the scenario of the bundle it " \
           "reran, unchanged" in validate(root).problems


@pytest.mark.slow
def test_bundle_json_and_cell_lists_are_cross_checked(bundle: Path) -> None:
    def drop_first(header: dict[str, Any]) -> None:
        header["cells"] = header["cells"][1:]

    edit_json(bundle / "bundle.json", drop_first)
    problems = validate(bundle).problems
    assert any("a cell record bundle.json does not list" in line for line in problems), problems
    edit_json(bundle / "bundle.json", lambda h: h["scenario"].update(name="other"))
    assert any("scenario_sha256 does not match" in line for line in validate(bundle).problems)


@pytest.mark.slow
def test_an_unfinished_run_is_a_note_not_a_problem(tmp_path: Path) -> None:
    root = tmp_path / "bundle"
    shutil.copytree(GOLDEN / f"v{SCHEMA_VERSION}", root)
    # every cell with a record (a SIGTERM's run records each cell it stopped interrupted): the why alone
    edit_json(root / "bundle.json", lambda h: h.update(state="interrupted", interruption={"why": "why", "resume_runs": []}))
    assert "bundle.json: the run is interrupted (why); finish it with --resume" in validate(root).notes
    # stopped after the last cell's result: it said `--resume runs 0 cell(s): 0 with no result`
    assert dict(facts(load(root)))["interrupted"] == ("why; every cell has its result: --resume runs none, and closes "
                                                      "the bundle complete")
    cell_files(root)[0].unlink()
    edit_json(root / "bundle.json", lambda h: h.pop("interruption"))
    verdict = validate(root)
    assert verdict.ok, verdict.problems
    listed = listed_cells(root)
    assert any(f"the run is interrupted: 1 of {listed} listed cell(s) have no record" in note for note in verdict.notes)
    # a bundle before 2026-12-06 records no reason: its report says so, and counts what a resume runs
    assert ("why not recorded (bundles before 2026-12-06 keep no reason); --resume runs the 1 cell(s) with no result"
            in dict(facts(load(root)))["interrupted"])
    older = tmp_path / "older"  # a version --resume refuses: the report said a resume would run its cells
    shutil.copytree(GOLDEN / f"v{SCHEMA_VERSION - 1}", older)
    cell_files(older)[0].unlink()
    edit_json(older / "bundle.json", lambda h: h.update(state="interrupted"))
    assert dict(facts(load(older)))["interrupted"] == (
        f"why not recorded (bundles before 2026-12-06 keep no reason); 1 cell(s) with no result, which --resume will "
        f"not run in a bundle of schema {SCHEMA_VERSION - 1} (this harness writes {SCHEMA_VERSION}): `fusionbench "
        "rerun` runs its cells again in a bundle of its own")
    gone = json.loads((root / "bundle.json").read_text())["cells"][0]["id"]
    interruption = {"why": "stopped by SIGTERM (a timeout, docker stop or a scheduler's limit)", "resume_runs": [gone]}
    edit_json(root / "bundle.json", lambda h: h.update(interruption=interruption))
    verdict = validate(root)
    assert verdict.ok, verdict.problems
    assert any(f"the run is interrupted (stopped by SIGTERM (a timeout, docker stop or a scheduler's limit)): 1 of "
               f"{listed} listed cell(s) have no record" in note for note in verdict.notes), verdict.notes
    assert dict(facts(load(root)))["interrupted"] == ("stopped by SIGTERM (a timeout, docker stop or a scheduler's "
                                                      "limit); --resume runs 1 cell(s): 1 with no result")
    # a resume runs every cell with no result: a record that leaves one out says what a resume does not do
    edit_json(root / "bundle.json", lambda h: h.update(interruption={**interruption, "resume_runs": []}))
    assert (f"bundle.json: interruption.resume_runs leaves out cells with no result, which --resume runs ({gone})"
            in validate(root).problems)
    edit_json(root / "bundle.json", lambda h: h.update(interruption={**interruption, "resume_runs": ["0" * 16]}))
    assert f"bundle.json: interruption.resume_runs names cells it does not list ({'0' * 16})" in validate(root).problems
    edit_json(root / "bundle.json", lambda h: h.update(state="complete", interruption=interruption))
    problems = validate(root).problems
    assert "bundle.json: records why the run was interrupted, yet its state is complete" in problems
    assert any(f"1 of {listed} listed cell(s) have no record" in line for line in problems)
    # a cell the typed record refuses (its JSON schema passes) is that cell's problem beside the others, where
    # the check of resume_runs read the typed records and validate ended in `error: ... not a cell record`
    edit_json(cell_files(root)[0], lambda c: c["metrics"].update(dynamo={
        "graphs": 3, "graph_breaks": 2, "distinct_break_reasons": 1, "break_reasons": [{"reason": "print", "count": 3}]}))
    problems = validate(root).problems
    assert any("break_reasons count 3 breaks of 2" in line for line in problems), problems
    assert "bundle.json: records why the run was interrupted, yet its state is complete" in problems


@contextlib.contextmanager
def as_a_user_who_is_not_root() -> Iterator[None]:
    """The block as a user to whom a file's permissions apply: nobody where the tests run as root
    (whom no permission stops), else the user running them."""
    with acting_as() if os.geteuid() == 0 else contextlib.nullcontext():
        yield


@pytest.mark.slow
@pytest.mark.parametrize("closed", ["cells", "bundle.json"])
def test_a_bundle_this_user_cannot_read_is_refused_naming_what_it_cannot_read(closed: str) -> None:
    """A user who could not list cells/ got `validate` exit 1, INVALID, and 64 lines calling the
    files there "listed in MANIFEST.sha256 but missing"; an unreadable bundle.json was named twice.
    Files that were never read say nothing of the bundle: every command that reads it refuses it,
    exit 2, in one line naming the bundle and what could not be read."""
    with root_folder_every_user_may_enter() as folder:
        root = folder / "bundle"
        shutil.copytree(GOLDEN / f"v{SCHEMA_VERSION}", root)
        commands = [["validate", str(root)], ["compare", str(root), str(GOLDEN / "v11")],
                    ["report", str(root), "--out", str(folder / "report")]]
        for argv in commands:  # their lazy imports, from root's Python, which another user may not read
            fusionbench(*argv)
        (root / closed).chmod(0)
        with as_a_user_who_is_not_root():
            said = [fusionbench(*argv) for argv in commands]
    for done in said:
        assert (done.returncode, done.stdout) == (2, ""), done
        assert done.stderr == f"fusionbench: error: {root}: {closed}: unreadable (Permission denied)\n", done.stderr


@pytest.mark.slow
def test_unreadable_schema_versions_are_refused(bundle: Path) -> None:
    header = json.loads((bundle / "bundle.json").read_text())
    (bundle / "bundle.json").write_text(json.dumps({**header, "schema_version": SCHEMA_VERSION + 1}))
    done = fusionbench("validate", str(bundle))
    assert done.returncode == 2 and "newer than this harness reads" in done.stderr and "Traceback" not in done.stderr
    (bundle / "bundle.json").write_text(json.dumps({**header, "schema_version": 0}))
    assert any("unknown schema version 0" in line for line in validate(bundle).problems)


def test_huge_numbers_and_deep_nesting_are_problems_not_crashes(bundle: Path) -> None:
    path = cell_files(bundle)[0]
    path.write_text(path.read_text().replace('"wall_s": ', '"wall_s": 1' + "0" * 400 + ", \"x\": ", 1))
    assert any("out of range" in line for line in validate(bundle).problems)
    path.write_text('{"a": ' + "[" * 5000 + "]" * 5000 + "}")
    assert any("nested too deeply" in line for line in validate(bundle).problems)


def _forgeries(record: dict[str, Any]) -> list[tuple[str, Callable[[dict[str, Any]], None]]]:
    """Every figure and verdict of a valid cell that a forger would want to change, each changed."""
    def scale(*path: str) -> Callable[[dict[str, Any]], None]:
        def change(cell: dict[str, Any]) -> None:
            parent = cell
            for key in path[:-1]:
                parent = parent[key]
            parent[path[-1]] = parent[path[-1]] * 0.8 if parent[path[-1]] else 7
        return change

    metrics = record["metrics"]
    forged = [(f"summary {key}", scale("metrics", "device_time", "summary", key))
              for key in metrics["device_time"]["summary"] if key not in ("n", "noisy")]
    forged += [(f"loadgen {key}", scale("metrics", "loadgen", "results", key))
               for key, value in metrics["loadgen"]["results"].items()
               if isinstance(value, (int, float)) and not isinstance(value, bool)]
    forged += [("loadgen metric", scale("metrics", "loadgen", "metric", "value")),
               ("loadgen validity", lambda c: c["metrics"]["loadgen"].update(validity="INVALID")),
               ("correctness ok", lambda c: c["metrics"]["correctness"].update(ok=False)),
               ("max abs error", lambda c: c["metrics"]["correctness"].update(
                   max_abs_error=c["metrics"]["correctness"]["max_abs_error_limit"] * 2)),
               # an error twice the limit, passed by a limit ten times the dtype's, with its rtol or without
               ("tolerance", lambda c: _loosened(c["metrics"]["correctness"], rtol=True)),
               ("limit", lambda c: _loosened(c["metrics"]["correctness"], rtol=False)),
               # the same, with the figure that would show it left out: each check was done only where both were there
               *((f"limit without {key}", lambda c, key=key: _loosened(c["metrics"]["correctness"], rtol=False, drop=key))
                 for key in ("rtol", "reference_max_abs")),
               # a cosine far below the minimum, passed by leaving the minimum out
               ("min cosine", lambda c: (c["metrics"]["correctness"].update(cosine_similarity=0.5),
                                         c["metrics"]["correctness"].pop("min_cosine"))),
               ("weight bytes", lambda c: c["metrics"]["roofline"].update(weight_bytes=c["metrics"]["roofline"]["weight_bytes"] * 2)),
               # the same, with the part that would show it left out
               *((f"weight bytes without {key}", lambda c, key=key: (
                   c["metrics"]["roofline"].update(weight_bytes=c["metrics"]["roofline"]["weight_bytes"] * 2),
                   c["metrics"]["roofline"].pop(key))) for key in ("input_bytes", "output_bytes")),
               ("status", lambda c: c.update(status="invalid"))]
    return forged


def _loosened(check: dict[str, Any], *, rtol: bool, drop: str | None = None) -> None:
    check.update(max_abs_error=check["max_abs_error_limit"] * 2, max_abs_error_limit=check["max_abs_error_limit"] * 10)
    if rtol:
        check.update(rtol=check["rtol"] * 10)
    if drop is not None:
        del check[drop]


@pytest.mark.slow
def test_every_forged_figure_is_rejected_even_with_a_fresh_manifest(tmp_path: Path) -> None:
    """The invariant: a bundle whose statistics, LoadGen figures or verdicts were edited, and whose
    MANIFEST.sha256 was then re-hashed, fails validate, which re-derives what it can and checks the
    rest against LoadGen's own logs. (A figure LoadGen logs in neither log, like `result_query_count`
    in the summary, is held by the detail log alone.)"""
    source = next(p for p in sorted((GOLDEN / f"v{SCHEMA_VERSION}" / "cells").glob("*.json"))
                  if json.loads(p.read_text())["status"] == "valid" and json.loads(p.read_text())["config"]["backend"] == "eager")
    accepted = []
    forgeries = _forgeries(json.loads(source.read_text()))
    for number, (what, change) in enumerate(forgeries):
        root = tmp_path / str(number)
        shutil.copytree(GOLDEN / f"v{SCHEMA_VERSION}", root)
        edit_json(root / "cells" / source.name, change)
        if validate(root).ok:
            accepted.append(what)
    assert len(forgeries) > 20 and accepted == []


def test_a_kind_of_kernel_out_of_its_range_is_a_problem(tmp_path: Path) -> None:
    """Schema 11's kinds are figures a report sets side by side: a negative time, a kind that is no
    string or a count that is no count is refused, as any figure out of its range is."""
    source = next(p for p in sorted((GOLDEN / f"v{SCHEMA_VERSION}" / "cells").glob("*.json"))
                  if (json.loads(p.read_text())["metrics"] or {}).get("kernels", {}).get("by_kind"))
    damages = {"negative time": ("ns_per_inference", -1.0), "kind no string": ("kind", 7),
               "kernels no count": ("kernels", 2.5)}
    for what, (key, value) in damages.items():
        root = tmp_path / what.replace(" ", "-")
        shutil.copytree(GOLDEN / f"v{SCHEMA_VERSION}", root)
        edit_json(root / "cells" / source.name, lambda c, k=key, v=value: c["metrics"]["kernels"]["by_kind"][0].update({k: v}))
        assert not validate(root).ok, what
    assert validate(GOLDEN / f"v{SCHEMA_VERSION}").ok


def test_a_path_that_leaves_the_bundle_is_said_in_words_not_as_its_pattern(tmp_path: Path) -> None:
    """A `log_dir` of `../x` was refused as "does not match '^(?!/)(?!.*(^|/)\\.\\.(/|$))...'"."""
    root = tmp_path / "bundle"
    shutil.copytree(GOLDEN / "mlperf", root)
    cell_file = next((root / "cells").glob("*.json"))
    cell = json.loads(cell_file.read_text())
    cell["metrics"]["accuracy"]["log_dir"] = "../x"
    cell_file.write_text(json.dumps(cell))
    manifest.write(root)
    said = [line for line in validate(root).problems if "log_dir" in line]
    assert said and all("'../x' is not a path inside the bundle (relative, without '..'" in line for line in said), said
    assert not any("does not match" in line for line in said), said
