"""Reading JSON that someone else wrote: bounded, strict, and never executing anything.

A result bundle can come from anywhere (a colleague, a submission, an attacker), so every JSON
file of a bundle is read through a `harness.bundle.snapshot.Snapshot` (its size bounded before it
is read, UTF-8 only) and parsed by `parse_json`: numbers must be finite and of sane magnitude (no 1e999, no 5,000-digit
integers), objects may not repeat a key, and nesting is bounded. A violation is a
`BundleError` naming the file and what is wrong; nothing is partially returned.
"""

from __future__ import annotations

import json
import math
from typing import Any

from harness.errors import BundleError

MAX_JSON_BYTES = 64 << 20
MAX_DEPTH = 64
# Room for any unsigned 64-bit integer (LoadGen's RNG seeds), no more.
MAX_INT_DIGITS = 20


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-finite number {name}")


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:20]} is out of range")
    return value


def _parse_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"integer with {len(text.lstrip('-'))} digits is out of range")
    return int(text)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"key {key[:40]!r} appears twice in one object")
        result[key] = value
    return result


def _depth(value: Any) -> int:
    """Nesting depth of a parsed JSON value, without recursion; only containers are stacked (a list
    of millions of numbers costs a pass over it, not a tuple each)."""
    deepest = 1
    stack = [(value, 1)] if isinstance(value, (dict, list)) else []
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth + 1 if item else depth)
        values = item.values() if isinstance(item, dict) else item
        stack.extend((v, depth + 1) for v in values if isinstance(v, (dict, list)))
    return deepest


def parse_json(text: str, where: str, *, max_depth: int = MAX_DEPTH) -> Any:
    """`text` parsed strictly (see the module docstring); BundleError naming `where` otherwise."""
    try:
        value = json.loads(
            text, parse_constant=_reject_constant, parse_float=_parse_float, parse_int=_parse_int,
            object_pairs_hook=_unique_keys,
        )
    except RecursionError:
        raise BundleError(f"{where}: nested too deeply (over {max_depth} levels)") from None
    except ValueError as exc:  # JSONDecodeError is a ValueError; so are the hooks' refusals
        raise BundleError(f"{where}: not valid JSON: {str(exc)[:200]}") from None
    if _depth(value) > max_depth:
        raise BundleError(f"{where}: nested too deeply (over {max_depth} levels)")
    return value
