"""Cell configs and records for the tests, made the way a run makes them: a scenario file's models,
expanded, and a record of the version this harness writes around one."""

from __future__ import annotations

from typing import Any

from harness.bundle.cell_record import CellRecord
from harness.bundle.migrations import SCHEMA_VERSION
from harness.scenario.cell_config import CellConfig
from harness.scenario.cells import cell_id, expand
from harness.scenario.loading import resolved
from harness.scenario.schema import ScenarioFile


def cell_config(scenario: str = "SingleStream", batch: int = 1, *, backend: str = "eager", model: str = "resnet18",
                input_size: int = 32, samples: int = 4, timing: dict[str, Any] | None = None,
                passes: dict[str, Any] | None = None, **loadgen: Any) -> CellConfig:
    """The one cpu cell of a scenario file running `model` on `backend` in `scenario` with `batch`
    (MultiStream: `batch` samples a query) and these `loadgen` settings."""
    if scenario == "MultiStream":
        loadgen = {"samples_per_query": batch, **loadgen}
    data = {
        "models": [{"name": model, "input_size": input_size}],
        "backends": [backend],
        "scenarios": [scenario],
        "batch_sizes": {"cpu": [batch]},
        "inputs": {"samples": samples},
        "loadgen": loadgen,
        "timing": timing or {},
        "passes": passes or {},
    }
    (cell,) = expand(resolved(ScenarioFile.model_validate(data), "tests"), "cpu")
    return cell.config


def cell_record(config: CellConfig | None = None, status: str = "valid", reasons: list[str] | None = None,
                metrics: dict[str, Any] | None = None, **fields: Any) -> CellRecord:
    """A cell record of `config` (default: an eager Offline cell of batch 8) with these metrics,
    each a whole record of its pass (a field of harness/bundle/cell_record.py `Metrics`), and these other fields."""
    config = config or cell_config("Offline", 8)
    return CellRecord.model_validate({
        "schema_version": SCHEMA_VERSION, "id": cell_id(config.recorded()), "label": config.label, "status": status,
        "reasons": reasons or [], "config": config.recorded(), "metrics": metrics or {}, **fields})
