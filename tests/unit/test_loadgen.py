"""The LoadGen adapter: settings from the cell and the measured latency, log parsing, and the
retry when a run went faster than its hint."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import mlperf_loadgen as lg
import pytest
import torch

from harness.contract import Prepared
from harness.errors import HarnessError
from harness.fusion import FusionReport
from harness.measure import loadgen
from harness.scenario import rules
from harness.scenario.advice import EARLY_STOPPING_FLOOR
from harness.scenario.cell_config import CellConfig
from tests.cell_configs import cell_config


class Sleeper(Prepared):
    """Takes `seconds` per call: a model with a known latency."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.batches: list[int] = []

    def __call__(self, batch: Any) -> Any:
        self.batches.append(batch.shape[0])
        time.sleep(self.seconds)
        return batch

    def synchronize(self) -> None:
        pass

    def fusion_report(self) -> FusionReport:
        return FusionReport(kernels=(), source="test")


def cell(scenario: str, batch: int, **loadgen_settings: Any) -> CellConfig:
    return cell_config(scenario, batch, **{"min_duration_s": 0.5, "min_query_count": 20, **loadgen_settings})


def samples(n: int = 8) -> list[Any]:
    return [torch.full((1, 2), float(i)) for i in range(n)]


def test_settings_use_the_hint_with_headroom() -> None:
    s = loadgen.settings_for(lg, cell("Offline", 4), latency_ns=2e6, sample_count=8)
    assert s.offline_expected_qps == pytest.approx(4 * 1e9 / (2e6 / rules.HINT_HEADROOM), rel=1e-6)
    assert s.performance_sample_count_override == 8 and s.min_duration_ms == 500
    s = loadgen.settings_for(lg, cell("SingleStream", 1), latency_ns=10.0, sample_count=8)
    assert s.single_stream_expected_latency_ns == rules.MIN_HINT_NS_PER_QUERY
    s = loadgen.settings_for(lg, cell("Server", 1, target_latency_ms=50), latency_ns=1e6, sample_count=8)
    assert s.server_target_qps == 0.5 * 1000 and s.server_target_latency_ns == 50_000_000
    s = loadgen.settings_for(lg, cell("Server", 1, target_qps=7.0), latency_ns=1e6, sample_count=8)
    assert s.server_target_qps == 7.0


def test_singlestream_run_and_parse(tmp_path: Path) -> None:
    model = Sleeper(0.002)
    # The queries early stopping needs, whatever the machine's speed: at the cell's 20, a loaded machine
    # (its 2 ms sleeps 8 ms and more) ran under 64 in the 0.5 s, and the run was INVALID, "early stopping not met".
    floor = EARLY_STOPPING_FLOOR["SingleStream"]
    result = loadgen.run_scenario(model, samples(), cell("SingleStream", 1, min_query_count=floor), 2e6, tmp_path / "loadgen")
    assert result["validity"] == "VALID" and result["invalid_reasons"] == [], result["invalid_reasons"]
    assert result["metric"]["name"] == "latency_p90_early_stopping_ns"
    assert 2e6 <= result["metric"]["value"] < 1e9  # in ns: a 2 ms call, late by whatever the machine's load adds
    assert result["results"]["result_query_count"] >= floor
    assert set(model.batches) == {1}
    summary = tmp_path / result["log_dir"] / "mlperf_log_summary.txt"
    assert "Result is : VALID" in summary.read_text()
    assert not (tmp_path / result["log_dir"] / "mlperf_log_trace.json").exists()


def test_offline_batches_are_padded_to_the_fixed_size(tmp_path: Path) -> None:
    model = Sleeper(0.001)
    result = loadgen.run_scenario(model, samples(), cell("Offline", 4), 1e6, tmp_path / "loadgen")
    assert result["validity"] == "VALID"
    assert set(model.batches) == {4}, "every call sees the static batch shape"


@pytest.mark.slow
def test_too_fast_run_is_retried_with_the_measured_rate(tmp_path: Path) -> None:
    model = Sleeper(0.001)
    # Hinting 20x slower than reality makes LoadGen generate too few samples for the minimum duration.
    result = loadgen.run_scenario(model, samples(), cell("Offline", 1, min_duration_s=1.0), 20e6, tmp_path / "loadgen")
    attempts = result["attempts"]
    # A third where the first's sleeps woke late on a noisy host: the speed it measured was too slow, and the
    # second ran faster than that hint and fell short again.
    assert [a["validity"] for a in attempts] in (["INVALID", "VALID"], ["INVALID", "INVALID", "VALID"]), attempts
    assert all("min duration not met" in a["invalid_reasons"] for a in attempts[:-1]), attempts
    assert attempts[1]["hint_latency_ns"] < 5e6, "the retune hints with the speed measured, not the 20 ms given"
    assert result["log_dir"] == f"loadgen/attempt-{len(attempts)}" and result["validity"] == "VALID"


@pytest.mark.slow
def test_a_run_loadgen_stopped_at_its_maximum_duration_is_not_retuned(tmp_path: Path) -> None:
    """Short of its minimum query count because `max_duration_s` stopped it, the run was retuned
    twice as if it had gone too fast: three runs of the maximum duration for the same INVALID."""
    settings = {"min_duration_s": 0.1, "max_duration_s": 0.3, "min_query_count": 500}
    result = loadgen.run_scenario(Sleeper(0.005), samples(), cell("SingleStream", 1, **settings), 5e6, tmp_path / "lg")
    assert [a["validity"] for a in result["attempts"]] == ["INVALID"], result["attempts"]
    assert any("Max test duration reached" in reason for reason in result["invalid_reasons"]), result["invalid_reasons"]


def test_a_machine_that_keeps_getting_faster_gets_a_second_retune(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each run ends too fast for its hint (the model ran 4x faster than hinted, then 4x faster
    again): the second retune, hinted from the second run, is the run kept."""
    hints: list[float] = []

    def run_once(lg_: Any, prepared: Any, samples_: Any, cell_: Any, settings: Any, logdir: Path) -> dict[str, Any]:
        hint = settings.offline_expected_qps
        hints.append(hint)
        valid = len(hints) == 3
        return {"scenario": "Offline", "validity": "VALID" if valid else "INVALID",
                "invalid_reasons": [] if valid else ["min duration not met"],
                "results": {"result_min_duration_met": valid, "result_samples_per_second": hint * 4}, "sut": {}}

    monkeypatch.setattr(loadgen, "_run_once", run_once)
    result = loadgen.run_scenario(Sleeper(0.001), samples(), cell("Offline", 1, min_duration_s=1.0), 20e6, tmp_path / "lg")
    assert [a["validity"] for a in result["attempts"]] == ["INVALID", "INVALID", "VALID"]
    assert result["log_dir"] == "lg/attempt-3" and hints[1] > hints[0] and hints[2] > hints[1]
    assert [a["hint_latency_ns"] for a in result["attempts"]][1:] == [pytest.approx(1e9 / (h * 4)) for h in hints[:2]]


def test_model_error_during_loadgen_is_raised(tmp_path: Path) -> None:
    class Broken(Sleeper):
        def __call__(self, batch: Any) -> Any:
            raise ValueError("bad kernel")

    try:
        loadgen.run_scenario(Broken(0), samples(), cell("SingleStream", 1), 1e6, tmp_path / "loadgen")
    except RuntimeError as exc:
        assert "bad kernel" in str(exc)
    else:
        raise AssertionError("a model failure inside the LoadGen run must not pass silently")


def test_multistream_runs_each_query_as_one_batch(tmp_path: Path) -> None:
    model = Sleeper(0.001)
    result = loadgen.run_scenario(model, samples(), cell("MultiStream", 4, min_query_count=662, min_duration_s=0.2),
                                  1e6, tmp_path / "loadgen")
    assert result["validity"] == "VALID", result["invalid_reasons"]
    assert result["metric"]["name"] == "latency_p99_per_query_early_stopping_ns" and result["metric"]["value"] >= 1e6
    assert result["settings"]["effective_samples_per_query"] == 4
    assert set(model.batches) == {4}


@pytest.mark.slow
def test_server_meets_its_latency_bound_at_a_fixed_rate(tmp_path: Path) -> None:
    model = Sleeper(0.001)
    result = loadgen.run_scenario(model, samples(), cell("Server", 1, target_qps=300.0, min_query_count=500,
                                                         min_duration_s=0.5, target_latency_ms=100.0),
                                  1e6, tmp_path / "loadgen")
    assert result["validity"] == "VALID", result["invalid_reasons"]
    assert result["metric"]["name"] == "server_completed_samples_per_s"
    assert 200 < result["metric"]["value"] < 400
    assert result["metric"]["latency_p99_ns"] < 100e6


@pytest.mark.slow
def test_server_over_its_latency_bound_is_invalid(tmp_path: Path) -> None:
    model = Sleeper(0.004)  # 4 ms per query against a 2 ms bound
    result = loadgen.run_scenario(model, samples(), cell("Server", 1, target_qps=50.0, min_query_count=100,
                                                         min_duration_s=0.5, target_latency_ms=2.0),
                                  4e6, tmp_path / "loadgen")
    assert result["validity"] == "INVALID"
    assert any("latency bound" in r or "early stopping" in r for r in result["invalid_reasons"])
    assert len(result["attempts"]) == 1, "a Server run over its bound is not retried"


@pytest.mark.slow
def test_a_model_slower_than_the_min_duration_still_fills_it(tmp_path: Path) -> None:
    # 0.06 s a sample and a 0.1 s minimum: the plain hint (1.2 / 0.06 s x 0.1 s x 1.1 = 2.2) truncates
    # to 2 samples = 0.12 s, but at 0.09 s a sample it would be 1 sample and INVALID. The hint must
    # ask for enough samples at the measured speed. (The rule is the same at any scale: this one
    # sleeps a tenth of what the same case at 1 s would.)
    for per_sample_s in (0.06, 0.09):
        s = loadgen.settings_for(lg, cell("Offline", 1, min_duration_s=0.1), latency_ns=per_sample_s * 1e9,
                                 sample_count=8)
        samples_per_query = int(s.offline_expected_qps * 0.1 * rules.OFFLINE_QUERY_FACTOR)
        assert samples_per_query * per_sample_s >= rules.HINT_HEADROOM * 0.1
    model = Sleeper(0.09)
    result = loadgen.run_scenario(model, samples(), cell("Offline", 1, min_duration_s=0.1), 0.09e9, tmp_path / "loadgen")
    assert [a["validity"] for a in result["attempts"]] == ["VALID"], result["invalid_reasons"]
    assert result["results"]["result_query_count"] == 1 and len(model.batches) >= 2


@pytest.mark.parametrize("batch, latency_s", [(8, 10.8), (8, 15.4), (8, 1.45), (4, 0.0021), (1, 0.09), (64, 3.0)])
def test_an_offline_query_holds_whole_batches_and_fills_the_minimum_duration(batch: int, latency_s: float) -> None:
    """A slow model's query of 10 samples at batch 8 ran as two batches, the second padded, and
    LoadGen's rate charged the padding to the model (+53%): the hint now asks for whole batches."""
    latency_ns = latency_s * 1e9
    qps = rules.offline_expected_qps(batch, rules.hinted_ns(latency_ns, batch), latency_ns, 10.0)
    samples_per_query = int(qps * 10.0 * rules.OFFLINE_QUERY_FACTOR)  # as LoadGen truncates it
    assert samples_per_query % batch == 0, samples_per_query
    assert samples_per_query / batch * latency_ns >= rules.HINT_HEADROOM * 10.0 * 1e9 or latency_s < 0.01
    assert qps >= batch * 1e9 / rules.hinted_ns(latency_ns, batch)  # never below the measured rate's hint


def test_a_near_free_model_keeps_the_offline_hint_floor() -> None:
    # The fill rule must not undo the floor: a 10 ns "model" would ask LoadGen for millions of samples.
    s = loadgen.settings_for(lg, cell("Offline", 4, min_duration_s=2.0), latency_ns=10.0, sample_count=8)
    floor_ns = max(rules.MIN_HINT_NS_PER_SAMPLE * 4, rules.MIN_HINT_NS_PER_QUERY)
    at_the_floor = loadgen.settings_for(lg, cell("Offline", 4, min_duration_s=2.0), latency_ns=floor_ns, sample_count=8)
    # as a model that takes the floor's time: the floor's rate, with the fill rule's rounding above it
    assert s.offline_expected_qps == at_the_floor.offline_expected_qps
    assert 4 * 1e9 / floor_ns <= s.offline_expected_qps <= 1.1 * 4 * 1e9 / floor_ns


@pytest.mark.parametrize(("error", "retuned"), [
    ("error_runtime: IssueQueryThread 0 Ending early: Ran out of generated queries to issue before the minimum query "
     "count and test duration were reached.", True),  # too fast for its hint: what the retune is for
    ("error_runtime: IssueQueryThread 0 Ending early: Max test duration reached. duration_ns 1002089645", False),
    ("error_runtime: IssueQueryThread 0 Ending early: Max query count reached. query_count 200", False),
])
def test_only_a_run_loadgen_stopped_at_a_maximum_is_not_retuned(error: str, retuned: bool) -> None:
    """Every LoadGen error once stopped the retune, among them the one a too-fast SingleStream or
    MultiStream run logs: no such run was retuned."""
    result = {"scenario": "SingleStream", "invalid_reasons": ["min duration not met", error],
              "results": {"result_min_duration_met": False}}
    assert loadgen._too_fast(result) is retuned


def test_a_server_rate_far_above_the_capacity_is_refused_before_it_outlasts_the_time_limit(tmp_path: Path) -> None:
    """target_qps 20000 on a model of about 300 samples/s ran its LoadGen pass into the cell's time
    limit ("time limit of 40 s exceeded (in phase loadgen)"): LoadGen schedules its queries at the
    rate, and each is answered before the run ends. The run is not started where that cannot end in time."""
    overloaded = cell("Server", 1, target_qps=2000.0, min_query_count=100, min_duration_s=0.1, target_latency_ms=100.0)
    assert rules.overload_s(2000.0, 0.1, 100, 0, 1, 2e6) == pytest.approx(0.4)  # 200 queries at 500 a second
    assert rules.overload_s(400.0, 0.1, 100, 0, 1, 2e6) is None  # within the capacity: no queue to outlast anything
    model = Sleeper(0.002)
    with pytest.raises(HarnessError, match=r"target_qps 2000 is 4x the 500 samples/s .* at least 0.4 s, beyond the 0.2 s "
                                           r".*lower loadgen.target_qps, or use auto"):
        loadgen.run_scenario(model, samples(), overloaded, 2e6, tmp_path / "refused", seconds_left=0.2)
    assert model.batches == [] and not list((tmp_path / "refused").rglob("mlperf_log_detail.txt"))
    # With the time to answer every query, LoadGen runs it and calls it INVALID, saying why.
    result = loadgen.run_scenario(model, samples(), overloaded, 2e6, tmp_path / "run", seconds_left=60.0)
    assert result["validity"] == "INVALID"
    assert "performance constraints (latency bound) not met" in result["invalid_reasons"]


def test_an_early_stopping_failure_says_what_loadgen_asks_for(tmp_path: Path) -> None:
    """A Server cell read 'INVALID (early stopping not met)' beside 'p99 33.1 ms within 100 ms', with
    nothing of what LoadGen's summary said: 500 queries processed, at least 657 more needed."""
    result = loadgen.run_scenario(Sleeper(0.001), samples(), cell("SingleStream", 1, min_duration_s=0.01, min_query_count=40),
                                  1e6, tmp_path / "loadgen")
    assert result["validity"] == "INVALID"
    assert result["invalid_reasons"] == ["early stopping not met (Only processed 40 queries. Need to process at least 64 "
                                         "queries for early stopping.)"]
    assert result["metric"]["name"] == "latency_p90_ns"  # no estimate: the plain percentile, named as such
