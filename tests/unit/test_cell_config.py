"""The typed cell: what `expand` makes, what the bundle records and the id hashes, what crosses to
the worker and back, and the backend's options handed over parsed."""

from __future__ import annotations

import json
from pathlib import Path

import pydantic
import pytest

from backends.inductor import InductorBackend, InductorOptions
from backends.onnxruntime import OnnxRuntimeBackend, OnnxRuntimeOptions
from harness.bundle.cell_record import Metrics
from harness.contract import Variant
from harness.errors import BackendFailed
from harness.measure.protocol import ProtocolError, WorkerAnswer, WorkerRequest
from harness.options import BackendOptions, expect
from harness.scenario.cell_config import CellConfig
from harness.scenario.cells import cell_id, expand
from tests.cell_configs import cell_config

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


@pytest.mark.parametrize("name", ["v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9", "v10", "v11", "v12", "mlperf"])
def test_a_golden_bundles_scenario_expands_to_the_ids_and_configs_it_recorded(name: str) -> None:
    header = json.loads((GOLDEN / name / "bundle.json").read_text())
    expanded = [c.config.recorded() for c in expand(header["scenario"], header["device"])]
    paths = sorted((GOLDEN / name / "cells").glob("*.json"))
    for path in paths:
        cell = json.loads(path.read_text())
        if "graphs" not in cell["config"]["variant"]:  # v1 and v2 cells: written before the setting (graphs off)
            for config in expanded:
                config["variant"].pop("graphs", None)
        assert cell["config"] in expanded, path.name
        assert cell_id(cell["config"], cell.get("schema_version", 1)) == cell["id"]
    assert paths


def test_a_cells_id_leaves_out_how_it_was_measured() -> None:
    """Rounds (from v8) and the calls its DRAM traffic is read over (from v9) are how a cell was
    measured, not what it is: cells that differ only in them share an id, so compare pairs them, and
    a v9 cell has the id a v8 cell of the same settings had; a v7 bundle's ids, computed with the
    rounds, still check."""
    once, thrice = (cell_config("Offline", 4, timing={"rounds": n}).recorded() for n in (1, 3))
    assert once != thrice
    assert cell_id(once) == cell_id(thrice) == cell_id(once, 9)
    assert cell_id(once, 8) == cell_id(thrice, 8) and cell_id(once, 7) != cell_id(thrice, 7)
    counted, off = (cell_config("Offline", 4, passes={"traffic_iters": n}).recorded() for n in (2, 0))
    assert counted["passes"]["traffic_iters"] == 2 and cell_id(counted) == cell_id(off)
    as_v8_wrote_it = {**counted, "passes": {k: v for k, v in counted["passes"].items() if k != "traffic_iters"}}
    assert cell_id(counted) == cell_id(as_v8_wrote_it, 8) != cell_id(counted, 8)


def test_recorded_leaves_out_what_the_cell_did_not_ask_for() -> None:
    offline = cell_config("Offline", 4, target_qps=7.0).recorded()
    assert set(offline["loadgen"]) == {"min_duration_s", "max_duration_s", "max_query_count", "min_query_count"}
    assert "allocator" in offline and offline["allocator"] == "steady"
    server = cell_config("Server", 4, target_qps=7.0).recorded()
    assert server["loadgen"]["target_qps"] == 7.0 and server["loadgen"]["target_qps_fraction"] == 0.5
    mlperf = cell_config("Offline", 4, samples=1024, profile="mlperf", accuracy=False).recorded()
    assert mlperf["loadgen"]["profile"] == "mlperf" and mlperf["loadgen"]["overrides"] == {}
    assert "accuracy" not in mlperf["loadgen"] and "compliance" not in mlperf["loadgen"]


def test_the_config_reads_back_as_itself_with_its_id() -> None:
    config = cell_config("MultiStream", 8, backend="inductor")
    again = CellConfig.model_validate(json.loads(json.dumps(config.recorded())))
    assert again == config and cell_id(again.recorded()) == cell_id(config.recorded())
    assert (again.variant.fusion, again.variant.graphs, again.loadgen.samples_per_query) == ("on", "off", 8)
    with pytest.raises(pydantic.ValidationError):
        config.batch = 2  # type: ignore[misc]


def test_the_request_carries_the_typed_config_and_refuses_one_it_cannot_read(tmp_path: Path) -> None:
    config = cell_config("Offline", 4, backend="onnxruntime")
    request = WorkerRequest(cell=config, artifact_dir=str(tmp_path))
    assert WorkerRequest.from_json(request.to_json()) == request
    data = json.loads(request.to_json())
    data["cell"]["variant"]["fusion"] = "sometimes"
    with pytest.raises(ProtocolError, match="the cell's config is not one this version reads") as refused:
        WorkerRequest.from_json(json.dumps(data))
    # one line naming the field and why, which a failed cell's reason quotes, where pydantic's ran over
    # four, its field on one, its reason on the next, and the reason quoted `variant.fusion` alone
    assert "\n" not in str(refused.value) and "For further information" not in str(refused.value)
    assert str(refused.value).startswith(
        "WorkerRequest: the cell's config is not one this version reads: variant.fusion: Input should be "), refused.value


def test_a_backend_gets_its_options_parsed_into_its_own_model() -> None:
    variant = InductorBackend.variant("off", {"freezing": True})
    assert isinstance(variant.options, InductorOptions) and variant.options.freezing is True
    assert expect("inductor", InductorOptions, variant.options) is variant.options
    assert expect("inductor", InductorOptions, Variant("on").options) == InductorOptions()  # the defaults
    with pytest.raises(BackendFailed, match="inductor options: unknown option freezin "):
        InductorBackend.variant("on", {"freezin": True})
    with pytest.raises(BackendFailed, match="inductor options: got OnnxRuntimeOptions, not InductorOptions"):
        expect("inductor", InductorOptions, OnnxRuntimeBackend.variant("on", {"level": "basic"}).options)
    with pytest.raises(BackendFailed, match="eager options: got OnnxRuntimeOptions"):
        expect("eager", BackendOptions, OnnxRuntimeOptions())


def test_the_answer_carries_typed_metrics_and_refuses_what_it_cannot_read() -> None:
    answer = WorkerAnswer(status="valid", metrics=Metrics(prepare_s=2.5, prepare_cache="cold"))
    again = WorkerAnswer.from_json(answer.to_json())
    assert again == answer and again.metrics.prepare_s == 2.5 and again.metrics.loadgen is None
    assert again.record()["metrics"] == {"prepare_s": 2.5, "prepare_cache": "cold"}  # what was not measured stays out
    data = json.loads(answer.to_json())
    data["metrics"]["prepare_s"] = -1
    with pytest.raises(ProtocolError, match="metrics this version cannot read"):
        WorkerAnswer.from_json(json.dumps(data))
    with pytest.raises(pydantic.ValidationError):  # assignment is checked: a pass cannot record a wrong type
        answer.metrics.prepare_cache = "lukewarm"  # type: ignore[assignment]
