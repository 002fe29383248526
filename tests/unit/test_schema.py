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

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = sorted((REPO / "scenarios").glob("*.yaml"))
#: The files docs/results's figures were run from: a reader's new check must not leave them unrunnable.
RECORDED = sorted((REPO / "docs" / "results" / "scenarios").glob("*.yaml"))


def test_required_scenario_files_exist() -> None:
    names = {p.name for p in SCENARIOS}
    assert {"offline.yaml", "singlestream.yaml", "multistream.yaml", "server.yaml", "smoke.yaml"} <= names


def test_committed_schema_is_current(repo: Path) -> None:
    committed = json.loads((repo / "scenarios" / "scenario.schema.json").read_text())
    assert committed == json_schema(), "regenerate with: fusionbench schema --out scenarios/scenario.schema.json"


@pytest.mark.parametrize("settings", [
    "batch_sizes: {cpu: [-4]}", "batch_sizes: {cpu: 0}", "batch_sizes: {cpu: []}", "batch_sizes: {cuda: [65537]}",
    "loadgen: {target_qps: -5}", "loadgen: {target_qps: 0}",
])
def test_the_schema_file_refuses_what_the_loader_refuses(settings: str) -> None:
    """An editor or a CI check that read the schema file took batch -4 and target_qps -5, which the
    harness refuses: the bounds were in the validators, not in the schema generated from them."""
    text = f"models: [resnet18]\nbackends: [eager]\nscenarios: [Offline, Server]\n{settings}\n"
    assert list(jsonschema.Draft202012Validator(json_schema()).iter_errors(yaml.safe_load(text)))
    with pytest.raises(Exception, match="batch_sizes|target_qps"):
        scenario_file.parse(text.encode(), "s.yaml")
    good = "models: [resnet18]\nbackends: [eager]\nscenarios: [Server]\nbatch_sizes: {cpu: 4}\nloadgen: {target_qps: 40}\n"
    assert not list(jsonschema.Draft202012Validator(json_schema()).iter_errors(yaml.safe_load(good)))


@pytest.mark.parametrize(("models", "backends"), [
    ("[ResNet18]", "[eager]"), ("ResNet18", "eager"), ("[resnet18, {name: vgg11}, resnt50]", "[eager]"),
    ("[resnet18]", "[{name: eager, models: [ResNet18]}]"),
])
def test_the_schema_file_refuses_a_misspelt_model_however_it_is_named(models: str, backends: str) -> None:
    """The schema spelt out the model names in `{name: ...}` only: `models: [ResNet18]` and a
    backend's `models: [ResNet18]` passed it, and failed only when the harness read the file."""
    text = f"models: {models}\nbackends: {backends}\nscenarios: [Offline]\n"
    assert list(jsonschema.Draft202012Validator(json_schema()).iter_errors(yaml.safe_load(text)))
    with pytest.raises(Exception, match="unknown model|not in the file's models"):
        scenario_file.parse(text.encode(), "s.yaml")
    good = "models: [resnet18, {name: vgg11}]\nbackends: [{name: eager, models: [vgg11]}]\nscenarios: [Offline]\n"
    assert not list(jsonschema.Draft202012Validator(json_schema()).iter_errors(yaml.safe_load(good)))


@pytest.mark.parametrize("kind", ["bundle", "cell"])
def test_committed_bundle_schemas_are_the_generated_ones(repo: Path, kind: str) -> None:
    committed = json.loads((repo / "docs" / "schemas" / f"{kind}.schema.json").read_text())
    assert committed == bundle_schema(kind), (
        f"regenerate with: fusionbench schema --file {kind} --out docs/schemas/{kind}.schema.json")


def test_the_typed_records_are_the_version_this_harness_writes() -> None:
    for record, kind in ((CellRecord, "cell"), (BundleHeader, "bundle")):
        assert record.model_fields["schema_version"].annotation == Literal[SCHEMA_VERSION]  # type: ignore[valid-type]
        assert bundle_schema(kind)["properties"]["schema_version"]["const"] == SCHEMA_VERSION


@pytest.mark.parametrize("path", SCENARIOS + RECORDED, ids=lambda p: str(p.relative_to(REPO)))
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


def golden_cell() -> Path:
    """A cell of the golden bundle of this harness's schema version: read when a test needs it, so that
    between a version's bump and its golden bundle only those tests fail, and say why."""
    cells = sorted((Path(__file__).resolve().parents[2] / "tests" / "golden" / f"v{SCHEMA_VERSION}" / "cells").glob("*.json"))
    assert cells, (f"no golden bundle of schema version {SCHEMA_VERSION} in tests/golden/v{SCHEMA_VERSION} "
                   "(docs/adding_a_metric.md, Bumping the schema version, step 5)")
    return cells[0]


@pytest.mark.parametrize("sample", [-1, True, 1.0, 2.5, "7", None, 10**13 + 1, float("nan"), float("inf"), 5],
                         ids=repr)
def test_an_array_of_samples_is_judged_as_jsonschema_judges_it(sample: object) -> None:
    """validate checks arrays of plain scalars in one pass (harness/bundle/schema_check.py `_validator`):
    whatever one item of them is, the problems are word for word jsonschema's own, and none where it
    finds none."""
    from harness.bundle.schema_check import lines_of, problems

    record = json.loads(golden_cell().read_text())
    samples = record["metrics"]["device_time"]["samples_ns"]
    assert len(samples) > 10
    samples[len(samples) // 2] = sample
    said = problems(record, "cell", SCHEMA_VERSION, "here")
    assert said == lines_of(jsonschema.Draft202012Validator(bundle_schema("cell")), record, "here")
    fits = (type(sample) is int and sample == 5) or (type(sample) is float and sample == 1.0)  # 1.0 is an integer to it
    assert bool(said) != fits


def _damaged(record: object, path: tuple = ()) -> list[tuple[tuple, object]]:
    """Where to damage `record` and with what (path, value): each key's value replaced by one of
    another type, a key too many in each object, the first item of each list replaced."""
    found: list[tuple[tuple, object]] = []
    if isinstance(record, dict):
        for key, value in record.items():
            found.append(((*path, key), "wrong"))
            found += _damaged(value, (*path, key))
        found.append(((*path, "not_a_field"), 1))
    elif isinstance(record, list) and record:
        found.append(((*path, 0), {"wrong": True}))
        found += _damaged(record[0], (*path, 0))
    return found


def _shortened(record: object) -> object:
    """`record` with each list cut to its first three items (thousands of timing samples)."""
    if isinstance(record, dict):
        return {key: _shortened(value) for key, value in record.items()}
    if isinstance(record, list):
        return [_shortened(item) for item in record[:3]]
    return record


def _with(record: object, path: tuple, value: object) -> object:
    copied = json.loads(json.dumps(record))
    node = copied
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return copied


@pytest.mark.parametrize("version", range(4, SCHEMA_VERSION + 1))
def test_the_inlined_schema_finds_what_the_schema_finds_word_for_word(version: int) -> None:
    """validate checks against the schema with its references inlined (harness/bundle/schema_check.py
    `inlined`): a value of the wrong type or an unknown key anywhere in a golden bundle's header
    and cell gives the problems, word for word, that jsonschema gives on the schema as written; the
    predicate asked first (`_passes`) passes exactly the records that jsonschema passes."""
    from harness.bundle.schema_check import _passes, inlined, lines_of, problems

    golden = Path(__file__).resolve().parents[2] / "tests" / "golden" / f"v{version}"
    for kind, path in (("bundle", golden / "bundle.json"), ("cell", sorted((golden / "cells").glob("*.json"))[0])):
        written = bundle_schema(kind, version)
        assert "$defs" in written and "$defs" not in inlined(written) and '"$ref"' not in json.dumps(inlined(written))
        plain = jsonschema.Draft202012Validator(written)
        record = _shortened(json.loads(path.read_text()))
        damages = _damaged(record)[::11]  # every eleventh, spread through the record
        assert len(damages) > 20, kind
        passes = _passes(kind, version)
        assert passes is not None
        for where, value in damages:
            broken = _with(record, where, value)
            said = lines_of(plain, broken, "here")
            assert problems(broken, kind, version, "here") == said, (kind, where)
            assert passes(broken) == (not said), (kind, where)
        assert problems(record, kind, version, "here") == [] == lines_of(plain, record, "here")
        assert passes(record)


def test_a_schema_that_refers_to_itself_is_checked_as_written() -> None:
    from harness.bundle.schema_check import inlined

    recursive = {"$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}}},
                 "$ref": "#/$defs/node"}
    assert inlined(recursive) is recursive
    elsewhere = {"properties": {"a": {"$ref": "other.json#/a"}}}
    assert inlined(elsewhere) is elsewhere
    flat = {"$defs": {"n": {"type": "integer"}}, "properties": {"$ref": {"$ref": "#/$defs/n"}}, "default": {"$ref": "x"}}
    assert inlined(flat) == {"properties": {"$ref": {"type": "integer"}}, "default": {"$ref": "x"}}


def test_a_version_without_its_builder_says_where_it_goes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A version bumped without its schema builders ended `fusionbench schema` with a KeyError."""
    from harness.bundle import schema as schemas

    monkeypatch.delitem(schemas._BUILDERS, ("cell", SCHEMA_VERSION))
    with pytest.raises(ValueError, match=f"no cell schema of version {SCHEMA_VERSION} in harness/bundle/schema.py _BUILDERS"):
        schemas.schema("cell")
