"""Validate's check that every cell belongs to its bundle: a cell's config is one of the cells
bundle.json's stored scenario expands to on its device (harness/scenario/cells.py), and its label
is the one that config gets; a cell moved in from another bundle, or edited into a cell the
scenario never had, is named."""

from __future__ import annotations

from typing import Any

from harness.bundle.files import CELLS, HEADER
from harness.bundle.reader import LoadedBundle


def problems(loaded: LoadedBundle) -> list[str]:
    """Each cell's config among those bundle.json's stored scenario expands to on its device.
    Only the cell's own model, scenario and dtype are expanded, so the work is bounded by the
    cell, not by the product of the scenario's lists."""
    from harness.scenario.cells import expand

    scenario, device = loaded.header["scenario"], loaded.header["device"]
    lines = []
    listed = [entry["id"] for entry in loaded.header["cells"] if entry["id"] not in loaded.missing]
    for cell, listed_id in zip(loaded.cells, listed, strict=True):  # load() keeps bundle.json's order
        config, raw = cell["config"], loaded.raw_cells.get(listed_id)
        try:
            narrowed = {**scenario,
                        "models": [m for m in scenario["models"] if m == config.get("model")],
                        "scenarios": [s for s in scenario["scenarios"] if s == config.get("scenario")],
                        "dtypes": [d for d in scenario["dtypes"] if d == config.get("dtype")]}
            candidates = expand(narrowed, device)
        except (LookupError, TypeError, AttributeError, ValueError) as exc:
            return [f"{HEADER}: its scenario does not expand into cells ({type(exc).__name__}: {str(exc)[:80]}), "
                    "so no cell can be shown to belong to it"]
        before_graphs = isinstance(raw, dict) and isinstance(raw.get("schema_version"), int) and raw["schema_version"] < 3
        where = f"{CELLS}/{cell['id']}.json"
        match = next((other for other in candidates if _same_config(config, other.config.recorded(), before_graphs)), None)
        if match is None:
            lines.append(f"{where}: not a cell of this bundle: its config is none of the cells bundle.json's "
                         f"scenario expands to on {device}")
        elif cell["label"] != match.label:
            lines.append(f"{where}: label {cell['label']!r} but its config's is {match.label!r}")
    return lines


def _same_config(config: dict[str, Any], expanded: dict[str, Any], before_graphs: bool) -> bool:
    """Whether a cell's config is the expanded one. A cell written before schema v3 has no
    `variant.graphs` (the setting came with v3), and means graphs off."""
    if config == expanded:
        return True
    variant = expanded.get("variant") or {}
    if not before_graphs or "graphs" in (config.get("variant") or {}) or variant.get("graphs") != "off":
        return False
    return config == {**expanded, "variant": {k: v for k, v in variant.items() if k != "graphs"}}
