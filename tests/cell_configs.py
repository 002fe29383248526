"""Cell configs for the tests, made the way a run makes them: a scenario file's models, expanded."""

from __future__ import annotations

from typing import Any

from harness.scenario.cell_config import CellConfig
from harness.scenario.cells import expand
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
