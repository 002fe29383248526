"""A JSON Schema compiled to one Python predicate that says whether a record passes it, exactly as
jsonschema's Draft 2020-12 validator judges it: schema_check asks it first and asks jsonschema for
the problems only of a record it fails. jsonschema walks a passing cell through about 500 nested
validator objects (`descend` and `evolve` at each property and each item of its arrays), which was
half of validate's time; the predicate is a tree of plain closures.

Each keyword it compiles is jsonschema's own rule, read from jsonschema/_keywords.py and its type
checker (a bool is no number; 1.0 is an integer). A schema node with a keyword it does not compile
(`uniqueItems`, `oneOf`, `not`, ...) is judged by jsonschema itself, node by node, so the answer
stays exact; a keyword jsonschema does not know (`title`, `discriminator`) is ignored by both.
"""

from __future__ import annotations

import numbers
import re
from collections.abc import Callable
from typing import Any

Predicate = Callable[[Any], bool]

#: jsonschema's type checker, one test per JSON type (jsonschema/_types.py, Draft 2020-12's).
_TYPES: dict[str, Predicate] = {
    "array": lambda x: isinstance(x, list),
    "boolean": lambda x: isinstance(x, bool),
    "integer": lambda x: not isinstance(x, bool) and (isinstance(x, int) or (isinstance(x, float) and x.is_integer())),
    "null": lambda x: x is None,
    "number": lambda x: not isinstance(x, bool) and isinstance(x, numbers.Number),
    "object": lambda x: isinstance(x, dict),
    "string": lambda x: isinstance(x, str),
}
_is_number = _TYPES["number"]

#: The keywords compiled here; a node with any other keyword jsonschema knows goes to jsonschema whole.
_COMPILED = {"type", "enum", "const", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength",
             "maxLength", "pattern", "minItems", "maxItems", "prefixItems", "items", "properties",
             "patternProperties", "additionalProperties", "required", "propertyNames", "anyOf", "allOf"}
_OBJECT_WALK = ("properties", "patternProperties", "additionalProperties")


#: The scalar types an array's items may be checked as a whole for, each as the JSON Schema's own
#: `type` keyword has it for what JSON holds (a bool is not a number, 1.0 is an integer); a subclass
#: (numpy's float64 in a record built in memory) is left to the `type` keyword.
_SCALARS: dict[str, Predicate] = {
    "integer": lambda item: type(item) is int or (type(item) is float and item.is_integer()),
    "number": lambda item: type(item) in (int, float),
    "string": lambda item: type(item) is str,
}


def plain_items(items: Any) -> Predicate | None:
    """For an `items` schema of one scalar type with at most a minimum and a maximum, a test of one
    item that passes only where the schema passes it (a cell's thousands of timing samples, each
    one call); None for any other schema. A bound fails as jsonschema fails it (`item < minimum`),
    so that NaN passes it there too."""
    if not isinstance(items, dict) or not set(items) <= {"type", "minimum", "maximum"}:
        return None
    is_type, low, high = _SCALARS.get(str(items.get("type"))), items.get("minimum"), items.get("maximum")
    if is_type is None or (items["type"] == "string" and len(items) > 1):  # bounds judge numbers only
        return None
    return lambda item: is_type(item) and (low is None or not item < low) and (high is None or not item > high)


def same(one: Any, two: Any) -> bool:
    """JSON equality as jsonschema's `enum` and `const` judge it (jsonschema/_utils.py `equal`): a
    bool equals only a bool, 1 equals 1.0, arrays and objects member by member."""
    if isinstance(one, str) or isinstance(two, str):
        return bool(one == two)
    if isinstance(one, list | tuple) and isinstance(two, list | tuple):
        return len(one) == len(two) and all(same(a, b) for a, b in zip(one, two, strict=True))
    if isinstance(one, dict) and isinstance(two, dict):
        return one.keys() == two.keys() and all(same(one[key], two[key]) for key in one)
    if isinstance(one, bool) or isinstance(two, bool):
        return one is two
    return bool(one == two)


class _Refers(Exception):
    """The schema still refers elsewhere: a node judged apart from its root would lose the referent."""


def compile_schema(schema: Any, validator: Any) -> Predicate | None:
    """A predicate true exactly where `validator` (a jsonschema validator of `schema`) finds no
    problem; None where the schema still refers elsewhere (a `$ref` that could not be inlined),
    which only the validator resolves."""
    try:
        return _node(schema, validator)
    except _Refers:
        return None


def _node(schema: Any, validator: Any) -> Predicate:
    if schema is True or schema == {}:
        return lambda x: True
    if schema is False:
        return lambda x: False
    known = set(schema) & set(validator.VALIDATORS)
    if known & {"$ref", "$dynamicRef"}:
        raise _Refers
    if not known <= _COMPILED:  # judged by jsonschema, with the validator's own types and keywords
        inner = validator.evolve(schema=schema)
        return lambda x: bool(inner.is_valid(x))
    checks = [check for key in known for check in [_keyword(key, schema, validator)] if check is not None]
    if len(checks) == 1:
        return checks[0]

    def every(x: Any) -> bool:  # a loop, not all() over a generator: this runs at every node of a record
        for check in checks:
            if not check(x):
                return False
        return True

    return every


def _keyword(key: str, schema: dict[str, Any], validator: Any) -> Predicate | None:  # noqa: C901 (one branch a keyword)
    value = schema[key]
    if key == "type":
        tests = [_TYPES[name] for name in ([value] if isinstance(value, str) else value)]
        return tests[0] if len(tests) == 1 else (lambda x: any(test(x) for test in tests))
    if key == "enum":
        return lambda x: any(same(each, x) for each in value)
    if key == "const":
        return lambda x: same(x, value)
    # each bound fails as jsonschema words its failure (`instance < minimum`), so that NaN passes as there
    if key == "minimum":
        return lambda x: not _is_number(x) or not x < value
    if key == "maximum":
        return lambda x: not _is_number(x) or not x > value
    if key == "exclusiveMinimum":
        return lambda x: not _is_number(x) or not x <= value
    if key == "exclusiveMaximum":
        return lambda x: not _is_number(x) or not x >= value
    if key == "minLength":
        return lambda x: not isinstance(x, str) or len(x) >= value
    if key == "maxLength":
        return lambda x: not isinstance(x, str) or len(x) <= value
    if key == "pattern":
        compiled = re.compile(value)
        return lambda x: not isinstance(x, str) or compiled.search(x) is not None
    if key == "minItems":
        return lambda x: not isinstance(x, list) or len(x) >= value
    if key == "maxItems":
        return lambda x: not isinstance(x, list) or len(x) <= value
    if key == "prefixItems":
        prefix = [_node(each, validator) for each in value]
        return lambda x: not isinstance(x, list) or all(test(item) for test, item in zip(prefix, x, strict=False))
    if key == "items":
        return _items(value, len(schema.get("prefixItems", ())), validator)
    if key in _OBJECT_WALK:  # one walk for the three, compiled at the first of them the node has
        return _object(schema, validator) if key == next(name for name in _OBJECT_WALK if name in schema) else None
    if key == "required":
        return lambda x: not isinstance(x, dict) or all(name in x for name in value)
    if key == "propertyNames":
        names = _node(value, validator)
        return lambda x: not isinstance(x, dict) or all(names(name) for name in x)
    branches = [_node(each, validator) for each in value]  # anyOf, allOf
    if key == "anyOf" and len(value) == 2 and {"type": "null"} in value:  # a nullable field, the common case
        other = branches[value.index({"type": "null"}) - 1]
        return lambda x: x is None or other(x)
    if key == "anyOf":
        return lambda x: any(branch(x) for branch in branches)
    return lambda x: all(branch(x) for branch in branches)


def _items(items: Any, prefix: int, validator: Any) -> Predicate:
    each = plain_items(items) or _node(items, validator)
    return lambda x: not isinstance(x, list) or all(map(each, x[prefix:] if prefix else x))


def _object(schema: dict[str, Any], validator: Any) -> Predicate:
    """`properties`, `patternProperties` and `additionalProperties` together, which share the walk
    over an object's keys; an extra key is one no property names and no pattern matches, the
    patterns joined as jsonschema joins them (`find_additional_properties`)."""
    named = {name: _node(inner, validator) for name, inner in schema.get("properties", {}).items()}
    patterns = [(re.compile(pattern), _node(inner, validator)) for pattern, inner in schema.get("patternProperties", {}).items()]
    joined = re.compile("|".join(schema["patternProperties"])) if schema.get("patternProperties") else None
    extra = _node(schema["additionalProperties"], validator) if "additionalProperties" in schema else None

    def passes(x: Any) -> bool:
        if not isinstance(x, dict):
            return True
        for key, value in x.items():
            test = named.get(key)
            if test is not None and not test(value):
                return False
            if any(pattern.search(key) and not inner(value) for pattern, inner in patterns):  # named keys too
                return False
            if extra is not None and test is None and not (joined is not None and joined.search(key)) and not extra(value):
                return False
        return True

    return passes
