"""Checking a backend's `options:` mapping: unknown names and wrong types are clear failures.

Backends call `checked` first in `prepare`, then check the values' ranges themselves. A failure
raises `BackendFailed`, so the cell is `failed` with a one-line reason and the sweep goes on.
"""

from __future__ import annotations

from typing import Any, Mapping

from harness.errors import BackendFailed


def checked(backend: str, given: Mapping[str, Any], kinds: Mapping[str, type], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """`defaults` updated with `given`, each value of the type `kinds` names (a bool is not an int)."""
    unknown = sorted(set(given) - set(kinds))
    if unknown:
        raise BackendFailed(f"unknown {backend} option(s) {', '.join(unknown)}; allowed: {', '.join(kinds)}")
    resolved = {**defaults, **given}
    for key, kind in kinds.items():
        value = resolved[key]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise BackendFailed(f"{backend} option {key} must be a {kind.__name__}, got {value!r}")
    return resolved
