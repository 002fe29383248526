"""The compiled predicate schema_check asks before jsonschema (harness/bundle/schema_predicate.py):
it passes a value exactly where jsonschema finds no problem, keyword by keyword (the golden records,
damaged, in tests/unit/test_schema.py), and a record it passes is not walked by jsonschema at all."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from harness.bundle import schema_check
from harness.bundle.migrations import SCHEMA_VERSION
from harness.bundle.schema_predicate import compile_schema

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
NAN = float("nan")

#: (schema, instances): each instance judged by the predicate as by jsonschema, whichever way that goes.
CASES: list[tuple[dict[str, Any], list[Any]]] = [
    ({"type": "integer"}, [1, 1.0, 1.5, True, "1", None]),
    ({"type": "number", "minimum": 0, "maximum": 1}, [0, 1, 1.5, -0.1, NAN, True, "x"]),
    ({"exclusiveMinimum": 0, "exclusiveMaximum": 2}, [0, 1, 2, NAN, "not a number"]),
    ({"type": ["string", "null"], "minLength": 2, "maxLength": 3, "pattern": "^a"}, ["ab", "a", "abcd", "ba", None, 3]),
    ({"enum": [1, "a", None, [1, 2], {"k": False}]}, [1, 1.0, True, "a", None, [1, 2], [True, 2], {"k": False}, {"k": 0}]),
    ({"const": False}, [False, 0, None]),
    ({"type": "array", "prefixItems": [{"type": "string"}], "items": False}, [[], ["a"], ["a", 1], [1]]),
    ({"type": "array", "items": {"type": "integer", "minimum": 0}, "minItems": 1, "maxItems": 2},
     [[0], [0, 1.0], [], [0, 1, 2], [-1], [True]]),
    ({"type": "array", "uniqueItems": True}, [[1, 2], [1, 1], [1, True]]),
    ({"type": "object", "properties": {"a": {"type": "integer"}, "b": True}, "required": ["a"],
      "patternProperties": {"^x": {"type": "string"}, "^a": {"minimum": 5}}, "additionalProperties": False},
     [{"a": 5}, {"a": 1}, {"b": 1}, {"a": 5, "xy": "s"}, {"a": 5, "xy": 1}, {"a": 5, "z": 1}, [], "x"]),
    ({"additionalProperties": {"type": "integer"}, "propertyNames": {"maxLength": 2}}, [{"ab": 1}, {"abc": 1}, {"a": "s"}]),
    ({"anyOf": [{"type": "object", "required": ["k"]}, {"type": "null"}]}, [None, {"k": 1}, {}, 3]),
    ({"allOf": [{"minimum": 1}, {"maximum": 2}], "anyOf": [{"type": "integer"}, {"type": "string"}]}, [1, 3, 1.5, "s"]),
    ({"oneOf": [{"type": "integer"}, {"minimum": 0}], "title": "ignored", "discriminator": {"propertyName": "k"}},
     [1, -1, 0.5, -0.5]),
    ({"not": {"type": "string"}}, ["s", 1]),
]


@pytest.mark.parametrize(("schema", "instances"), CASES, ids=[json.dumps(schema)[:40] for schema, _ in CASES])
def test_each_keyword_is_judged_as_jsonschema_judges_it(schema: dict[str, Any], instances: list[Any]) -> None:
    validator = jsonschema.Draft202012Validator(schema)
    passes = compile_schema(schema, validator)
    assert passes is not None
    for instance in instances:
        assert passes(instance) == validator.is_valid(instance), instance


def test_a_schema_that_still_refers_elsewhere_is_left_to_jsonschema() -> None:
    recursive = {"$defs": {"node": {"properties": {"next": {"$ref": "#/$defs/node"}}}}, "$ref": "#/$defs/node"}
    assert compile_schema(recursive, jsonschema.Draft202012Validator(recursive)) is None
    nested = {"properties": {"a": {"$ref": "#/properties/b"}, "b": {"type": "integer"}}}
    assert compile_schema(nested, jsonschema.Draft202012Validator(nested)) is None


def test_a_record_that_passes_is_not_walked_by_jsonschema(monkeypatch: pytest.MonkeyPatch) -> None:
    """jsonschema is asked for a record's problems only where the predicate fails it: a passing cell
    cost twenty times the predicate's time there."""
    cell = json.loads(sorted((GOLDEN / f"v{SCHEMA_VERSION}" / "cells").glob("*.json"))[0].read_text())
    walked: list[object] = []
    monkeypatch.setattr(schema_check, "lines_of", lambda validator, record, where: walked.append(record) or ["x"])
    assert schema_check.problems(cell, "cell", SCHEMA_VERSION, "here") == []
    assert walked == []
    cell["status"] = 3
    assert schema_check.problems(cell, "cell", SCHEMA_VERSION, "here") == ["x"]
    assert walked == [cell]
