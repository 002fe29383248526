"""Cells: one (model, backend, variant, scenario, device, dtype, batch) each, expanded from a
resolved scenario. A cell's id is a hash of everything that decides what it measures, so two
cells are comparable exactly when their ids match."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter

from harness import allocator
from harness.did_you_mean import closest
from harness.errors import ConfigError
from harness.models.catalog import RECORD, all_models
from harness.scenario.cell_config import CellConfig, CellLoadGen, CellVariant
from harness.scenario.rules import rule
from harness.scenario.settings import Inputs, LoadGenSettings, PassSettings, TimingSettings
from harness.scenario.specs import ModelSpec

ONLY_KEYS = ("model", "backend", "fusion", "graphs", "scenario", "dtype", "batch")


@dataclass(frozen=True)
class Cell:
    id: str
    config: CellConfig

    @property
    def label(self) -> str:
        return self.config.label

    def field(self, key: str) -> str:
        """The value `--only KEY=...` matches against."""
        c = self.config
        return str({
            "model": c.model.name, "backend": c.backend, "fusion": c.variant.fusion, "graphs": c.variant.graphs,
            "scenario": c.scenario, "dtype": c.dtype, "batch": c.batch,
        }[key])


#: The first schema version whose cell ids leave out each setting that says how a cell was measured,
#: not what it is (harness/bundle/migrations.py): how often it was timed, and over how many calls its
#: DRAM traffic was read.
ROUNDS_LEFT_OUT_OF_ID = 8
TRAFFIC_LEFT_OUT_OF_ID = 9
LEFT_OUT_OF_ID = {("timing", "rounds"): ROUNDS_LEFT_OUT_OF_ID, ("passes", "traffic_iters"): TRAFFIC_LEFT_OUT_OF_ID}


def cell_id(config: dict[str, Any], version: int = TRAFFIC_LEFT_OUT_OF_ID) -> str:
    """The id of a cell whose recorded config is `config`, as a bundle of schema `version` computed
    it: from v8 on without `timing.rounds`, from v9 on without `passes.traffic_iters` (as
    `allocator`'s default is left out of the recorded config itself)."""
    for (part, key), since in LEFT_OUT_OF_ID.items():
        if version >= since and isinstance(config.get(part), dict) and key in config[part]:
            config = {**config, part: {k: v for k, v in config[part].items() if k != key}}
    canonical = json.dumps(config, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def _loadgen_settings(resolved: dict[str, Any]) -> tuple[LoadGenSettings, dict[str, Any]]:
    """The scenario's LoadGen settings and the user.conf overrides `resolved` adds to them."""
    given = dict(resolved["loadgen"])
    overrides = given.pop("overrides", None) or {}
    return LoadGenSettings.model_validate(given), overrides


def _loadgen_config(scenario: str, loadgen: LoadGenSettings, overrides: dict[str, Any]) -> CellLoadGen:
    own = {key: getattr(loadgen, key) for key in rule(scenario).loadgen_keys}
    return CellLoadGen(
        min_duration_s=loadgen.min_duration_s, max_duration_s=loadgen.max_duration_s,
        max_query_count=loadgen.max_query_count, min_query_count=rule(scenario).min_queries(loadgen.min_query_count),
        profile=loadgen.profile, overrides=overrides if loadgen.profile != "dev" else {}, accuracy=loadgen.accuracy,
        compliance=tuple(loadgen.compliance), **own,
    )


def expand(resolved: dict[str, Any], device: str, recorded: object = None) -> list[Cell]:
    """Every cell of a resolved scenario (harness/scenario/loading.py `resolved`) on a concrete
    device ("cpu" or "cuda"). A bundle's stored scenario is expanded with `recorded`, its
    bundle.json `model_plugins`: its plugin models at the sizes it ran them, installed here or not."""
    context = {RECORD: recorded}
    inputs = TypeAdapter(Inputs).validate_python(resolved["inputs"])
    loadgen, overrides = _loadgen_settings(resolved)
    timing = TimingSettings.model_validate(resolved["timing"])
    passes = PassSettings.model_validate(resolved["passes"])
    chosen = allocator.of(resolved)
    cells = []
    models = all_models(recorded)
    # Per scenario: its LoadGen settings and its batch sizes (harness/scenario/rules.py).
    per_scenario = {scenario: (_loadgen_config(scenario, loadgen, overrides),
                               rule(scenario).batches(loadgen, resolved["batch_sizes"][device]))
                    for scenario in resolved["scenarios"]}
    for model in (ModelSpec.model_validate(m, context=context) for m in resolved["models"]):
        input_size = model.input_size or models[model.name][1]
        for backend in resolved["backends"]:
            if backend.get("models") and model.name not in backend["models"]:
                continue
            for fusion, graphs in ((f, g) for f in backend["fusion"] for g in backend.get("graphs", ["off"])):
                for scenario in resolved["scenarios"]:
                    cell_loadgen, scenario_batches = per_scenario[scenario]
                    for dtype in resolved["dtypes"]:
                        for batch in scenario_batches:
                            config = CellConfig.model_validate(dict(
                                model=model, input_size=input_size, backend=backend["name"],
                                variant=CellVariant(fusion=fusion, graphs=graphs, options=backend["options"]),
                                scenario=scenario, device=device, dtype=dtype, batch=batch, inputs=inputs,
                                seed=getattr(inputs, "seed", 0), loadgen=cell_loadgen,
                                timing=timing, passes=passes, allocator=chosen,
                            ), context=context)
                            cells.append(Cell(cell_id(config.recorded()), config))
    return cells


def twin_id(config: CellConfig) -> str:
    """The id of the cell `config`'s twin: its config with the other fusion setting, all else alike."""
    other = "off" if config.variant.fusion == "on" else "on"
    flipped = config.model_copy(update={"variant": config.variant.model_copy(update={"fusion": other})})
    return cell_id(flipped.recorded())


def parse_only(text: str) -> dict[str, set[str]]:
    """`model=resnet18,backend=eager,model=vgg11` -> {"model": {...}, "backend": {...}}."""
    selected: dict[str, set[str]] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not value:
            raise ConfigError(f"--only: {item!r} is not KEY=VALUE; keys: {', '.join(ONLY_KEYS)}")
        if key not in ONLY_KEYS:
            raise ConfigError(f"--only: unknown key {key!r}; keys: {', '.join(ONLY_KEYS)}")
        if "=" in value or any(ch.isspace() for ch in value):  # no name or number holds one
            raise ConfigError(f"--only: {item!r} is not one KEY=VALUE; join the pairs with commas, no spaces "
                              "(model=resnet18,backend=eager)")
        selected.setdefault(key, set()).add(value)
    if not selected:  # an unset shell variable, say: running every cell instead would surprise
        raise ConfigError(f"--only {text!r}: give at least one KEY=VALUE; keys: {', '.join(ONLY_KEYS)}")
    return selected


def only_option(given: list[str] | None) -> dict[str, set[str]] | None:
    """The selection of `--only` as the command line gave it (argparse's `append`: each time it was
    given), None where it was not; refused where it was given more than once, since the last alone
    would count and the others' cells run too, and where it is empty (an unset shell variable:
    running every cell instead would surprise)."""
    if given is None:
        return None
    if len(given) > 1:
        raise ConfigError(f"--only is given {len(given)} times; give it once, its KEY=VALUE pairs joined by commas "
                          f"(--only {','.join(given)})")
    return parse_only(given[0])


def only_text(only: dict[str, Any]) -> str:
    """A selection as the refusals write it: `model=resnet18|vgg11, backend=eager`."""
    return ", ".join(f"{k}={'|'.join(sorted(v))}" for k, v in only.items())


def matches(cell: Cell, only: dict[str, Any]) -> bool:
    """Whether `cell` matches every key of `only` (any of the values given for a key): a run's
    `--only` chose it."""
    return all(cell.field(key) in values for key, values in only.items())


def select(cells: list[Cell], only: dict[str, set[str]]) -> list[Cell]:
    """Cells matching every key of `only` (any of the values given for a key); ConfigError where none
    does."""
    chosen = [c for c in cells if matches(c, only)]
    if only and not chosen:
        check_values(cells, only)  # a value no cell has, named with the values there are
        raise ConfigError(f"--only {only_text(only)} matches no cell of this scenario")
    return chosen


def check_values(cells: list[Cell], only: dict[str, set[str]]) -> None:
    """Refuse a value of `only` that no cell of `cells` has, naming the values there are: beside a
    value that matches, a typo (`model=resnt18,model=resnet18`) was dropped silently."""
    for key, values in only.items():
        there = sorted({c.field(key) for c in cells})
        unknown = sorted(values - set(there))
        if unknown:
            hint = closest(unknown[0], there) if key in ("model", "backend") else ""  # 64 is no typo of 4
            raise ConfigError(f"--only {key}={unknown[0]} matches no cell of this scenario{hint}; "
                              f"its {key} values: {', '.join(there)}")
