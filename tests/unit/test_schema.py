"""Every file in scenarios/ satisfies the generated JSON Schema and the pydantic model, and the
committed schema file is the generated one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

import jsonschema
import pytest
import yaml

from harness.bundle.cell_record import CellRecord
from harness.bundle.header_record import BundleHeader
from harness.bundle.migrations import SCHEMA_VERSION
from harness.bundle.schema import schema as bundle_schema
from harness.scenario import loading as scenario_file
from harness.scenario.schema import json_schema

SCENARIOS = sorted((Path(__file__).resolve().parents[2] / "scenarios").glob("*.yaml"))


def test_required_scenario_files_exist() -> None:
    names = {p.name for p in SCENARIOS}
    assert {"offline.yaml", "singlestream.yaml", "multistream.yaml", "server.yaml", "smoke.yaml"} <= names


def test_committed_schema_is_current(repo: Path) -> None:
    committed = json.loads((repo / "scenarios" / "scenario.schema.json").read_text())
    assert committed == json_schema(), "regenerate with: fusionbench schema --out scenarios/scenario.schema.json"


@pytest.mark.parametrize("kind", ["bundle", "cell"])
def test_committed_bundle_schemas_are_the_generated_ones(repo: Path, kind: str) -> None:
    committed = json.loads((repo / "docs" / "schemas" / f"{kind}.schema.json").read_text())
    assert committed == bundle_schema(kind), (
        f"regenerate with: fusionbench schema --file {kind} --out docs/schemas/{kind}.schema.json")


def test_the_typed_records_are_the_version_this_harness_writes() -> None:
    for record, kind in ((CellRecord, "cell"), (BundleHeader, "bundle")):
        assert record.model_fields["schema_version"].annotation == Literal[SCHEMA_VERSION]  # type: ignore[valid-type]
        assert bundle_schema(kind)["properties"]["schema_version"]["const"] == SCHEMA_VERSION


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.name)
def test_scenario_file_is_valid(path: Path) -> None:
    jsonschema.validate(yaml.safe_load(path.read_text()), json_schema())
    scenario_file.load(path)


def test_schema_rejects_what_pydantic_rejects() -> None:
    schema = json_schema()
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"models": ["resnet18"], "backends": ["eager"], "scenarios": ["Offline"], "extra": 1}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"models": [{"name": "nope"}], "backends": ["eager"], "scenarios": ["Offline"]}, schema)
    jsonschema.validate({"models": ["resnet18"], "backends": ["eager", {"name": "inductor", "fusion": True}],
                         "scenarios": "Offline"}, schema)


GOLDEN_CELL = sorted((Path(__file__).resolve().parents[2] / "tests" / "golden" / f"v{SCHEMA_VERSION}" / "cells").glob("*.json"))[0]


@pytest.mark.parametrize("sample", [-1, True, 1.0, 2.5, "7", None, 10**13 + 1, float("nan"), float("inf"), 5],
                         ids=repr)
def test_an_array_of_samples_is_judged_as_jsonschema_judges_it(sample: object) -> None:
    """validate checks arrays of plain scalars in one pass (harness/bundle/schema.py `_validator`):
    whatever one item of them is, the problems are word for word jsonschema's own, and none where it
    finds none."""
    from harness.bundle.schema import lines_of, problems

    record = json.loads(GOLDEN_CELL.read_text())
    samples = record["metrics"]["device_time"]["samples_ns"]
    assert len(samples) > 10
    samples[len(samples) // 2] = sample
    said = problems(record, "cell", SCHEMA_VERSION, "here")
    assert said == lines_of(jsonschema.Draft202012Validator(bundle_schema("cell")), record, "here")
    fits = (type(sample) is int and sample == 5) or (type(sample) is float and sample == 1.0)  # 1.0 is an integer to it
    assert bool(said) != fits
