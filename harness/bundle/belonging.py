"""Validate's check that every cell belongs to its bundle: a cell's config is one of the cells
bundle.json's stored scenario expands to on its device (harness/scenario/cells.py), and its label
is the one that config gets, and it ran in this bundle's run (not before it was made, not after
its run ended, not on a machine it does not list); a cell moved in from another bundle, or edited into a cell the
scenario never had, is named. So is a plugin model bundle.json records (`model_plugins`) that its scenario
does not name, or that takes a built-in's name: the report and compare name each as a model the run ran."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from harness.bundle.files import CELLS, HEADER
from harness.bundle.reader import LoadedBundle


def problems(loaded: LoadedBundle) -> list[str]:
    """Each cell's config among those bundle.json's stored scenario expands to on its device.
    Only the cell's own model, scenario and dtype are expanded, so the work is bounded by the
    cell, not by the product of the scenario's lists."""
    from harness.scenario.cells import expand

    scenario, device = loaded.header["scenario"], loaded.header["device"]
    lines = _plugins_not_run(loaded.header)
    listed = [entry["id"] for entry in loaded.header["cells"] if entry["id"] not in loaded.missing]
    # the cells of one model, scenario and dtype (every backend's, fusion on and off) share an expansion
    expanded: dict[str, Any] = {}
    for cell, listed_id in zip(loaded.cells, listed, strict=True):  # load() keeps bundle.json's order
        config, raw = cell["config"], loaded.raw_cells.get(listed_id)
        try:
            narrowed = {**scenario,
                        "models": [m for m in scenario["models"] if m == config.get("model")],
                        "scenarios": [s for s in scenario["scenarios"] if s == config.get("scenario")],
                        "dtypes": [d for d in scenario["dtypes"] if d == config.get("dtype")]}
            key = json.dumps([narrowed["models"], narrowed["scenarios"], narrowed["dtypes"]], sort_keys=True)
            candidates = (expanded[key] if key in expanded
                          else expanded.setdefault(key, expand(narrowed, device, loaded.model_plugins)))
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
        lines += [f"{where}: {line}" for line in _of_this_run(cell, loaded.header)]
    return lines


def _plugins_not_run(header: dict[str, Any]) -> list[str]:
    """Each plugin model `model_plugins` records that the run did not run as a plugin's: one its
    stored scenario does not name, or one named as a built-in model (a run records the plugin models
    its scenario names and never a built-in, which the zoo builds: harness/models/catalog.py
    `plugin_records`)."""
    from harness.models.catalog import CLASSIFICATION_MODELS
    from harness.models.extra_models import EXTRA_MODELS

    recorded = header.get("model_plugins")
    named = {str(m.get("name")) if isinstance(m, dict) else str(m) for m in header["scenario"].get("models") or []}
    lines = []
    for name in recorded if isinstance(recorded, dict) else {}:
        if name in CLASSIFICATION_MODELS or name in EXTRA_MODELS:
            lines.append(f"{HEADER}: model_plugins records {name!r}, a built-in model's name: a run records only "
                         "its plugins' models (a built-in is the zoo's, whatever a plugin names)")
        elif name not in named:
            lines.append(f"{HEADER}: model_plugins records {name!r}, which its scenario does not run")
    return lines


def _of_this_run(cell: dict[str, Any], header: dict[str, Any]) -> list[str]:
    """Why a cell of the bundle's own scenario was not run by it: it started before the bundle was
    made (a cell of an earlier run) or after its run last closed it (`ended`: a cell of a later run,
    its result put in place of this run's), or on a machine the bundle does not list (the header
    lists every machine its cells ran on, from schema 2 on). A bundle closed before 2026-12-05
    keeps no end, and a cell of a later run on the same machine passes there."""
    lines = []
    started, created, ended = (instant(cell.get("started")), instant(header.get("created")),
                               instant(header.get("ended")))
    if started is not None and created is not None and started < created:
        lines.append(f"started {cell['started']}, before its bundle was made ({header['created']}): "
                     "a cell of an earlier run")
    if started is not None and ended is not None and started > ended:
        lines.append(f"started {cell['started']}, after its run ended ({header['ended']}): a cell of a later run")
    nodes, hostname = header.get("nodes"), (cell.get("node") or {}).get("hostname")
    if isinstance(nodes, dict) and nodes and isinstance(hostname, str) and hostname not in nodes:
        lines.append(f"ran on {hostname!r}, a machine {HEADER} does not list among its nodes")
    return lines


def instant(value: Any) -> datetime | None:
    """An ISO 8601 time with its zone, or None where it is not one."""
    try:
        moment = datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        return None
    return moment if moment is not None and moment.tzinfo is not None else None


def _same_config(config: dict[str, Any], expanded: dict[str, Any], before_graphs: bool) -> bool:
    """Whether a cell's config is the expanded one. A cell written before schema v3 has no
    `variant.graphs` (the setting came with v3), and means graphs off."""
    if config == expanded:
        return True
    variant = expanded.get("variant") or {}
    if not before_graphs or "graphs" in (config.get("variant") or {}) or variant.get("graphs") != "off":
        return False
    return config == {**expanded, "variant": {k: v for k, v in variant.items() if k != "graphs"}}
