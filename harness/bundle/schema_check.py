"""Checking a record of a bundle's files against its version's JSON Schema (harness/bundle/schema.py):
one compiled validator per schema, its references inlined and arrays of plain scalars checked in
one pass, and one line per problem, in words where a pattern alone would say nothing to a reader.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from harness.bundle.record_base import HEX16, INNER_PATH
from harness.bundle.schema import schema
from harness.bundle.schema_predicate import compile_schema, plain_items

#: The keywords whose value maps names to schemas, and those whose value is data, not a schema.
_NAMED_SCHEMAS = ("properties", "patternProperties", "dependentSchemas")
_DATA = ("enum", "const", "default", "examples")


def inlined(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` with every `{"$ref": "#/$defs/NAME"}` replaced by that definition, and no `$defs`:
    the same rules, which jsonschema checks without resolving a reference at each of a record's
    nested objects (a fifth of its time on a cell). A reference with siblings, to anywhere else or
    to itself (a recursive schema) leaves the schema as it is."""
    definitions = schema.get("$defs", {})

    def inline(node: Any, within: tuple[str, ...]) -> Any:
        if isinstance(node, list):
            return [inline(item, within) for item in node]
        if not isinstance(node, dict):
            return node
        reference = node.get("$ref")
        if reference is not None:
            prefix = "#/$defs/"
            name = reference[len(prefix):] if isinstance(reference, str) and reference.startswith(prefix) else ""
            if len(node) > 1 or name not in definitions or name in within:
                raise LookupError(reference)
            return inline(definitions[name], (*within, name))
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key == "$defs":
                continue
            if key in _NAMED_SCHEMAS and isinstance(value, dict):
                out[key] = {name: inline(inner, within) for name, inner in value.items()}
            else:
                out[key] = value if key in _DATA else inline(value, within)
        return out

    try:
        return dict(inline(schema, ()))
    except LookupError:
        return schema


@functools.cache
def _validator(kind: str, version: int) -> Any:
    """One validator per schema a process checks against: building the schema from the typed
    records and compiling it cost more than checking a record does, and validate checks every cell.
    Its `items` keyword checks an array of plain scalars (a cell's thousands of timing samples) in
    one pass, and hands the array to the keyword as jsonschema has it the moment any item might fail,
    so the problems found, and their words, are jsonschema's own: the pass took half of validate's
    time on a bundle of 14 cells. The schema it checks has its references inlined (`inlined`)."""
    import jsonschema
    from jsonschema import validators

    every_item = jsonschema.Draft202012Validator.VALIDATORS["items"]

    def items(validator: Any, items: Any, instance: Any, parent: dict[str, Any]) -> Any:
        passes = plain_items(items)
        if passes is not None and isinstance(instance, list) and all(map(passes, instance[len(parent.get("prefixItems", ())):])):
            return
        yield from every_item(validator, items, instance, parent)

    checker = validators.extend(jsonschema.Draft202012Validator, {"items": items})
    return checker(inlined(schema(kind, version)))


@functools.cache
def _passes(kind: str, version: int) -> Callable[[Any], bool] | None:
    """Whether a record passes `_validator(kind, version)`, as a predicate compiled once a process
    (harness/bundle/schema_predicate.py): on a passing cell, a twentieth of jsonschema's time."""
    validator = _validator(kind, version)
    return compile_schema(validator.schema, validator)


def problems(record: Any, kind: str, version: int, where: str) -> list[str]:
    """One line per place where `record` breaks the schema, `where` first: jsonschema's own, asked
    for only where the compiled predicate says the record fails."""
    passes = _passes(kind, version)
    if passes is not None and passes(record):
        return []
    return lines_of(_validator(kind, version), record, where)


def lines_of(validator: Any, record: Any, where: str) -> list[str]:
    """`problems`' lines, by any jsonschema validator."""
    lines = []
    for error in sorted(validator.iter_errors(record), key=lambda e: list(map(str, e.absolute_path))):
        while error.context:  # a nullable record (anyOf: the record, null): say what is wrong deepest inside it
            error = max(error.context, key=lambda inner: len(inner.absolute_path))
        location = "/".join(str(part) for part in error.absolute_path) or "(top)"
        said = PATTERNS_IN_WORDS.get(error.schema.get("pattern")) if error.validator == "pattern" else None
        message = f"{str(error.instance)[:100]!r} is not {said}" if said else error.message[:200]
        lines.append(f"{where}: {location}: {message}")
    return lines


#: What a pattern of the records asks for, in words: the pattern itself said nothing to a reader.
PATTERNS_IN_WORDS = {
    INNER_PATH: "a path inside the bundle (relative, without '..', a backslash or a control character)",
    HEX16: "16 hexadecimal digits",
}
