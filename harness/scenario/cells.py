"""Cells: one (model, backend, variant, scenario, device, dtype, batch) each, expanded from a
resolved scenario. A cell's id is a hash of everything that decides what it measures, so two
cells are comparable exactly when their ids match."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from harness import allocator
from harness.errors import ConfigError
from harness.models.catalog import all_models
from harness.scenario.rules import rule

ONLY_KEYS = ("model", "backend", "fusion", "graphs", "scenario", "dtype", "batch")


@dataclass(frozen=True)
class Cell:
    id: str
    config: dict[str, Any]

    @property
    def label(self) -> str:
        c = self.config
        return f"{c['model']['name']} {variant_label(c)} {c['scenario']} {c['device']} {c['dtype']} b{c['batch']}"

    def field(self, key: str) -> str:
        """The value `--only KEY=...` matches against."""
        c = self.config
        return str({
            "model": c["model"]["name"], "backend": c["backend"], "fusion": c["variant"]["fusion"],
            "graphs": c["variant"].get("graphs", "off"), "scenario": c["scenario"], "dtype": c["dtype"],
            "batch": c["batch"],
        }[key])


def variant_label(config: dict[str, Any]) -> str:
    """A cell's backend and variant as every table names them: `inductor fusion-off graphs`."""
    graphs = " graphs" if config["variant"].get("graphs") == "on" else ""
    return f"{config['backend']} fusion-{config['variant']['fusion']}{graphs}"


def cell_id(config: dict[str, Any]) -> str:
    canonical = json.dumps(config, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def batches(scenario: str, resolved: dict[str, Any], device: str) -> list[int]:
    """The batch sizes of a scenario's cells (harness/scenario/rules.py)."""
    return rule(scenario).batches(resolved["loadgen"], resolved["batch_sizes"][device])


def _loadgen_config(scenario: str, loadgen: dict[str, Any]) -> dict[str, Any]:
    config = {k: loadgen[k] for k in ("min_duration_s", "max_duration_s", "max_query_count")}
    config["min_query_count"] = rule(scenario).min_queries(loadgen["min_query_count"])
    config.update({k: loadgen[k] for k in rule(scenario).loadgen_keys})
    # Only where they differ from the defaults, so that a dev cell's id stays what it always was.
    if loadgen.get("profile", "dev") != "dev":
        config["profile"] = loadgen["profile"]
        config["overrides"] = loadgen.get("overrides") or {}
    if loadgen.get("accuracy"):
        config["accuracy"] = True
    if loadgen.get("compliance"):
        config["compliance"] = list(loadgen["compliance"])
    return config


def expand(resolved: dict[str, Any], device: str) -> list[Cell]:
    """Every cell of a resolved scenario on a concrete device ("cpu" or "cuda")."""
    inputs = resolved["inputs"]
    chosen = allocator.of(resolved)
    cells = []
    models = all_models()
    for model in resolved["models"]:
        input_size = model["input_size"] or models[model["name"]][1]
        for backend in resolved["backends"]:
            if backend.get("models") and model["name"] not in backend["models"]:
                continue
            for fusion, graphs in ((f, g) for f in backend["fusion"] for g in backend.get("graphs", ["off"])):
                for scenario in resolved["scenarios"]:
                    for dtype in resolved["dtypes"]:
                        for batch in batches(scenario, resolved, device):
                            config = {
                                "model": model,
                                "input_size": input_size,
                                "backend": backend["name"],
                                "variant": {"fusion": fusion, "graphs": graphs, "options": backend["options"]},
                                "scenario": scenario,
                                "device": device,
                                "dtype": dtype,
                                "batch": batch,
                                "inputs": inputs,
                                "seed": inputs.get("seed", 0),
                                "loadgen": _loadgen_config(scenario, resolved["loadgen"]),
                                "timing": resolved["timing"],
                                "passes": resolved["passes"],
                            }
                            if chosen != "system":  # ids of system cells stay what they were
                                config["allocator"] = chosen
                            cells.append(Cell(cell_id(config), config))
    return cells


def parse_only(text: str) -> dict[str, set[str]]:
    """`model=resnet18,backend=eager,model=vgg11` -> {"model": {...}, "backend": {...}}."""
    selected: dict[str, set[str]] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not value:
            raise ConfigError(f"--only: {item!r} is not KEY=VALUE; keys: {', '.join(ONLY_KEYS)}")
        if key not in ONLY_KEYS:
            raise ConfigError(f"--only: unknown key {key!r}; keys: {', '.join(ONLY_KEYS)}")
        selected.setdefault(key, set()).add(value)
    return selected


def select(cells: list[Cell], only: dict[str, set[str]]) -> list[Cell]:
    """Cells matching every key of `only` (any of the values given for a key)."""
    chosen = [c for c in cells if all(c.field(k) in values for k, values in only.items())]
    if only and not chosen:
        wanted = ", ".join(f"{k}={'|'.join(sorted(v))}" for k, v in only.items())
        raise ConfigError(f"--only {wanted} matches no cell of this scenario")
    return chosen
