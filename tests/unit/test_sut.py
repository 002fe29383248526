"""The system under test: it runs on the thread that started LoadGen, feeds MultiStream and Offline
batches as views of the samples stacked in LoadGen's load order (no copy), gathers only what is
not such a run, and answers every query even when the model fails."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from harness.contract import Prepared
from harness.fusion import FusionReport
from harness.measure import loadgen
from harness.measure.sut import SampleRing
from harness.scenario.cell_config import CellConfig
from tests.cell_configs import cell_config


class Recorder(Prepared):
    """Remembers, per call, the sample ids it was given (each sample holds its index) and where;
    takes about half a millisecond a call, so LoadGen's hint can be right."""

    def __init__(self, fail_after: int | None = None) -> None:
        self.batches: list[list[int]] = []
        self.threads: set[int] = set()
        self.fail_after = fail_after

    def __call__(self, batch: Any) -> Any:
        self.threads.add(threading.get_native_id())
        if self.fail_after is not None and len(self.batches) >= self.fail_after:
            raise ValueError("kernel fault")
        self.batches.append([int(v) for v in batch[:, 0]])
        time.sleep(0.0005)
        return batch

    def synchronize(self) -> None:
        pass

    def fusion_report(self) -> FusionReport:
        return FusionReport(kernels=(), source="test")


def samples(n: int) -> list[Any]:
    return [torch.full((1, 3), float(i)) for i in range(n)]


def cell(scenario: str, batch: int, **settings: Any) -> CellConfig:
    return cell_config(scenario, batch, **{"min_duration_s": 0.2, "min_query_count": 50, "target_qps": 200.0, **settings})


@pytest.mark.parametrize("scenario", ["Offline", "MultiStream"])
def test_batches_are_views_of_the_right_samples_on_the_calling_thread(tmp_path: Path, scenario: str) -> None:
    model = Recorder()
    settings = {"min_query_count": 662} if scenario == "MultiStream" else {}
    result = loadgen.run_scenario(model, samples(20), cell(scenario, 4, **settings), 6e5, tmp_path)
    assert result["validity"] == "VALID", result["invalid_reasons"]
    assert result["sut"]["gathered_batches"] == 0 and 0 < result["sut"]["batches"] <= len(model.batches)
    assert model.threads == {threading.get_native_id()}
    assert all(len(b) == 4 for b in model.batches)  # static shapes: a short last batch is padded


def test_a_batch_that_is_not_a_run_of_the_load_order_is_gathered() -> None:
    ring = SampleRing(samples(10), 4, depth=1)
    ring.load([3, 1, 4, 0, 2, 5, 9, 6, 8, 7])
    view, copied = ring.batch_of([4, 0, 2, 5], 0)
    assert not copied and view[:, 0].tolist() == [4, 0, 2, 5]
    wrapped, copied = ring.batch_of([8, 7, 3], 0)  # the run wraps past the end of the order; padded to 4
    assert not copied and wrapped[:, 0].tolist() == [8, 7, 3, 1]
    gathered, copied = ring.batch_of([9, 2, 5, 1], 0)
    assert copied and gathered[:, 0].tolist() == [9, 2, 5, 1]
    # a short gathered batch in the same buffer: padded with its own samples, not what the buffer held
    gathered, copied = ring.batch_of([9, 3, 3], 0)
    assert copied and gathered[:, 0].tolist() == [9, 3, 3, 9]


def test_server_batches_what_arrived_while_the_model_was_busy(tmp_path: Path) -> None:
    model = Recorder()
    result = loadgen.run_scenario(model, samples(8), cell("Server", 4, min_query_count=100, min_duration_s=0.3),
                                  1e6, tmp_path)
    assert result["settings"]["requested_server_coalesce_queries"] is True
    assert result["sut"]["samples"] >= 100 and all(len(b) == 4 for b in model.batches)


def test_a_failing_model_still_answers_every_query_then_fails_the_pass(tmp_path: Path) -> None:
    """LoadGen's test returns only once every query it issued is answered: its summary is written,
    and only then is the model's fault raised, from the fourth call."""
    model = Recorder(fail_after=3)
    with pytest.raises(RuntimeError, match="kernel fault") as failed:
        loadgen.run_scenario(model, samples(16), cell("Offline", 4), 1e5, tmp_path)
    assert isinstance(failed.value.__cause__, ValueError) and len(model.batches) == 3
    (summary,) = tmp_path.rglob("mlperf_log_summary.txt")
    assert "Scenario : Offline" in summary.read_text()
