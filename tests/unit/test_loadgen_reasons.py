"""Why a LoadGen run was not VALID, and the runs before a retune, are held to LoadGen's own logs
(harness/bundle/loadgen_check.py): a reason dropped from a record, or an INVALID attempt made
VALID or left out, re-hashed, was valid."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.bundle import loadgen_check, loadgen_conditions
from harness.bundle.loadgen_record import invalid_run_reason
from harness.bundle.validate import validate
from harness.scenario.advice import EARLY_STOPPING_FLOOR
from tests.unit.test_validate import _set_detail, edit_json, parsed_detail

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
#: The v11 golden bundle's Inductor cell whose first LoadGen run went too fast for its hint (INVALID:
#: min duration not met) and whose retune was VALID: two attempts, each with its logs.
RETUNED = "2bba637ab841261e"


def _retuned(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "bundle"
    shutil.copytree(GOLDEN / "v11", root)
    return root, root / "cells" / f"{RETUNED}.json"


def _problems(root: Path, path: Path, change: Callable[[dict[str, Any]], None]) -> list[str]:
    edit_json(path, change)
    return validate(root).problems


def test_the_attempts_before_a_retune_are_held_to_their_own_logs(tmp_path: Path) -> None:
    root, path = _retuned(tmp_path)
    original = json.loads(path.read_text())
    attempts = original["metrics"]["loadgen"]["attempts"]
    assert [a["validity"] for a in attempts] == ["INVALID", "VALID"] and validate(root).problems == []
    where = f"cells/{RETUNED}.json"

    def attempts_as(changed: list[dict[str, Any]]) -> Callable[[dict[str, Any]], None]:
        return lambda cell: cell["metrics"]["loadgen"].update(attempts=changed)

    dropped = [{**attempts[0], "invalid_reasons": attempts[0]["invalid_reasons"][1:]}, attempts[1]]
    assert _problems(root, path, attempts_as(dropped)) == [
        f"{where}: LoadGen attempt 1's invalid_reasons lack 'min duration not met', which its detail log gives"]
    made_valid = [{**attempts[0], "validity": "VALID", "invalid_reasons": []}, attempts[1]]
    assert _problems(root, path, attempts_as(made_valid))[:2] == [
        f"{where}: LoadGen attempt 1 VALID, yet another followed it: LoadGen is run again only after an INVALID run",
        f"{where}: LoadGen attempt 1 'VALID' but its detail log says 'INVALID'"]
    for kept in ([attempts[1]], []):  # the retune hidden: its first run left out, or every run
        assert _problems(root, path, attempts_as(kept)) == [
            f"{where}: LoadGen attempts list {len(kept)} run(s), but its log_dir is attempt 2"]
    shutil.copytree(root / "cells" / RETUNED / "loadgen" / "attempt-2", root / "cells" / RETUNED / "loadgen" / "attempt-3")
    assert _problems(root, path, attempts_as(attempts)) == [
        f"{where}: its folder holds the logs of LoadGen attempt 3, which its attempts do not list"]


def _made_invalid(root: Path) -> Path:
    """The v12 golden bundle's eager SingleStream cell as LoadGen and the worker would have written
    it had its run fallen short of its minimum duration: both logs, its record and its reasons."""
    path = next(p for p in sorted((root / "cells").glob("*.json"))
                if (c := json.loads(p.read_text()))["config"]["backend"] == "eager" and c["config"]["scenario"] == "SingleStream")
    logs = root / "cells" / path.stem / "loadgen" / "attempt-1"
    _set_detail(logs / "mlperf_log_detail.txt", "result_min_duration_met", False)
    _set_detail(logs / "mlperf_log_detail.txt", "result_validity", "INVALID")
    summary = logs / "mlperf_log_summary.txt"
    summary.write_text(re.sub(r"Min duration satisfied : Yes", "Min duration satisfied : NO",
                              summary.read_text().replace("Result is : VALID", "Result is : INVALID")))

    def invalid(cell: dict[str, Any]) -> None:
        loadgen = cell["metrics"]["loadgen"]
        loadgen["results"].update(result_min_duration_met=False, result_validity="INVALID")
        loadgen.update(validity="INVALID", invalid_reasons=["min duration not met"])
        loadgen["attempts"][0].update(validity="INVALID", invalid_reasons=["min duration not met"])
        cell.update(status="invalid", reasons=[invalid_run_reason("INVALID", ["min duration not met"])])

    edit_json(path, invalid)
    return path


def test_an_invalid_runs_reasons_are_its_logs_none_dropped_or_added(tmp_path: Path) -> None:
    root = tmp_path / "bundle"
    shutil.copytree(GOLDEN / "v12", root)
    path = _made_invalid(root)
    assert validate(root).problems == []
    where = f"cells/{path.stem}.json"

    def reasons(given: list[str], said: list[str]) -> Callable[[dict[str, Any]], None]:
        def change(cell: dict[str, Any]) -> None:
            cell["metrics"]["loadgen"].update(invalid_reasons=given)
            cell["metrics"]["loadgen"]["attempts"][0].update(invalid_reasons=given)
            cell.update(reasons=said)
        return change

    assert _problems(root, path, reasons([], [invalid_run_reason("INVALID", [])])) == [
        f"{where}: LoadGen invalid_reasons lack 'min duration not met', which its detail log gives",
        f"{where}: LoadGen attempt 1's invalid_reasons lack 'min duration not met', which its detail log gives"]
    added = ["min duration not met", "error_runtime: a reason LoadGen never gave"]
    assert _problems(root, path, reasons(added, [invalid_run_reason("INVALID", added)])) == [
        f"{where}: LoadGen invalid_reasons give 'error_runtime: a reason LoadGen never gave', which its detail log does not",
        f"{where}: LoadGen attempt 1's invalid_reasons give 'error_runtime: a reason LoadGen never gave', which its "
        "detail log does not"]
    # the record kept, the reason the report shows softened
    assert _problems(root, path, reasons(["min duration not met"], ["loadgen: INVALID (a slow machine)"])) == [
        f"{where}: status invalid, but its reasons do not say its LoadGen run's: 'loadgen: INVALID (min duration not met)'"]


def test_min_queries_called_met_under_the_minimum_is_a_problem() -> None:
    """An INVALID SingleStream run stopped at its maximum duration after 2 of its 1,000,000 queries,
    made VALID in its record and both logs consistently (its error line, LoadGen's reason and the
    unmet conditions' flags edited, re-hashed), was valid: the flag was read, never its counts."""
    parsed = parsed_detail("SingleStream", (
        ("effective_min_query_count", 1_000_000), ("result_validity", "VALID"), ("result_min_duration_met", True),
        ("result_min_queries_met", True), ("early_stopping_met", True), ("result_query_count", 2)))
    assert loadgen_check._queries_against_their_condition("logs", parsed) == [
        "logs/mlperf_log_detail.txt: result_min_queries_met True, yet result_query_count 2 is under "
        "effective_min_query_count 1000000"]
    parsed["results"]["result_query_count"] = 1_000_000
    assert loadgen_check._queries_against_their_condition("logs", parsed) == []


def test_min_duration_called_met_against_its_own_rate_is_a_problem(tmp_path: Path) -> None:
    """A SingleStream run of 0.72 s (100 queries at 139.597 a second) said to have met an MLPerf
    minimum of 600 s in its record and both logs, re-hashed, was valid: the flag was read, never
    the rate LoadGen logs of the time it judged. Offline's is its samples over its rate."""
    root = tmp_path / "bundle"
    shutil.copytree(GOLDEN / "v12", root)
    path = next(p for p in sorted((root / "cells").glob("*.json"))
                if (c := json.loads(p.read_text()))["config"]["backend"] == "eager" and c["config"]["scenario"] == "SingleStream")
    logs = root / "cells" / path.stem / "loadgen" / "attempt-1"
    for key in ("effective_min_duration_ms", "requested_min_duration_ms"):
        _set_detail(logs / "mlperf_log_detail.txt", key, 600_000)
    summary = logs / "mlperf_log_summary.txt"
    summary.write_text(summary.read_text().replace("min_duration (ms): 500", "min_duration (ms): 600000"))
    assert _problems(root, path, lambda cell: cell["metrics"]["loadgen"]["settings"].update(
        effective_min_duration_ms=600_000, requested_min_duration_ms=600_000)) == [
        f"cells/{path.stem}/loadgen/attempt-1/mlperf_log_detail.txt: result_min_duration_met True, yet its 100 samples "
        "at result_qps_with_loadgen_overhead 139.597 took 0.7164 s at the most, under effective_min_duration_ms 600000"]
    parsed = parsed_detail("SingleStream", (
        ("effective_samples_per_query", 1), ("effective_min_duration_ms", 600_000), ("result_validity", "VALID"),
        ("result_min_duration_met", True), ("result_query_count", 100), ("result_qps_with_loadgen_overhead", 139.597)))
    assert loadgen_conditions.problems("logs", parsed) == [
        "logs/mlperf_log_detail.txt: result_min_duration_met True, yet its 100 samples at "
        "result_qps_with_loadgen_overhead 139.597 took 0.7164 s at the most, under effective_min_duration_ms 600000"]
    parsed["settings"]["effective_min_duration_ms"] = 500
    assert loadgen_conditions.problems("logs", parsed) == []
    offline = parsed_detail("Offline", (
        ("effective_samples_per_query", 232), ("effective_min_duration_ms", 10_000), ("result_min_duration_met", True),
        ("result_query_count", 1), ("result_samples_per_second", 232.0)))
    assert [line.split(", yet ")[1] for line in loadgen_conditions.problems("logs", offline)] == [
        "its 232 samples at result_samples_per_second 232 took 1 s at the most, under effective_min_duration_ms 10000"]
    offline["settings"]["effective_min_duration_ms"] = 1_000  # the rate's six digits: 1 s is met
    assert loadgen_conditions.problems("logs", offline) == []


def test_early_stopping_called_met_against_its_counts_or_latencies_is_a_problem() -> None:
    """Early stopping said met by 40 SingleStream queries (its minimum query count lowered to 40 to
    match), or its estimate, SingleStream's headline latency, lowered to the p50 in the record and
    both logs, re-hashed, was valid: the flag and the estimate were read as logged."""
    entries = (("effective_target_latency_percentile", 0.9), ("early_stopping_met", True),
               ("result_query_count", 100), ("early_stopping_latency_ss", 8618406), ("early_stopping_latency_ms", 0),
               ("result_90.00_percentile_latency_ns", 8162368), ("result_99.00_percentile_latency_ns", 10793244),
               ("result_max_latency_ns", 10793244))
    assert loadgen_conditions.problems("logs", parsed_detail("SingleStream", entries)) == []
    parsed = parsed_detail("SingleStream", (*entries, ("result_query_count", 40)))
    assert loadgen_conditions.problems("logs", parsed) == [
        "logs/mlperf_log_detail.txt: early_stopping_met True, yet result_query_count 40 is under the 64 queries "
        "LoadGen's early stopping needs at the 90th percentile"]
    parsed = parsed_detail("SingleStream", (*entries, ("early_stopping_latency_ss", 7284496)))
    assert loadgen_conditions.problems("logs", parsed) == [
        "logs/mlperf_log_detail.txt: early_stopping_latency_ss 7284496 is under result_90.00_percentile_latency_ns "
        "8162368: an early-stopping estimate is a latency ranked above its percentile's"]
    parsed = parsed_detail("SingleStream", (*entries, ("result_query_count", 700), ("early_stopping_latency_ms", 10793245)))
    assert loadgen_conditions.problems("logs", parsed) == [
        "logs/mlperf_log_detail.txt: early_stopping_latency_ms 10793245 is over result_max_latency_ns 10793244, "
        "the run's largest"]
    server = parsed_detail("Server", (("effective_target_latency_percentile", 0.99), ("early_stopping_met", True),
                                      ("result_query_count", 458)))
    assert "under the 459 queries" in loadgen_conditions.problems("logs", server)[0]


def test_the_early_stopping_rule_gives_the_floors_loadgen_was_seen_to_keep() -> None:
    """The binomial rebuilt here gives the query counts at which LoadGen 6.0.17 was seen to turn
    each scenario's early stopping from INVALID to VALID (harness/scenario/advice.py)."""
    assert {scenario: loadgen_conditions.least_passing(over, percentile) + over
            for scenario, over, percentile in (("SingleStream", 1, 0.9), ("MultiStream", 1, 0.99), ("Server", 0, 0.99))
            } == EARLY_STOPPING_FLOOR


def test_each_attempts_hint_is_held_to_what_it_was_made_from(tmp_path: Path) -> None:
    """The hint LoadGen's first run was given halved, or a retune's made slower than the run
    before it went, re-hashed, was valid: `hint_latency_ns` was held to nothing."""
    root, path = _retuned(tmp_path)
    attempts = json.loads(path.read_text())["metrics"]["loadgen"]["attempts"]
    assert [a["hint_latency_ns"] for a in attempts] == [4635218.0, 2758774.0]
    where = f"cells/{RETUNED}.json"

    def hints(first: float, second: float) -> Callable[[dict[str, Any]], None]:
        return lambda cell: cell["metrics"]["loadgen"].update(attempts=[
            {**attempts[0], "hint_latency_ns": first}, {**attempts[1], "hint_latency_ns": second}])

    assert _problems(root, path, hints(4635218.0 / 2, 2758774.0)) == [
        f"{where}: LoadGen attempt 1's hint_latency_ns 2317609.0, but the median of the 30 device-timing calls "
        "before LoadGen is 4635218.0"]
    assert _problems(root, path, hints(4635218.0, 4635218.0)) == [
        f"{where}: LoadGen attempt 2's hint_latency_ns 4635218.0 is slower than the 3099478 ns a batch LoadGen's "
        "attempt 1 ran at, which a retune hints with at the slowest"]
