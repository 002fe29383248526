"""A backend's `options:`, typed. A backend declares `options_model`, a subclass of `BackendOptions`
(a small pydantic model: unknown keys and wrong types refused, ranges as field constraints), and
the scenario loader checks every backend entry's options against it before anything is written:
a typo is exit 2 naming the file, the line and the allowed keys. `prepare` reads the options with
`Backend.variant` (harness/contract.py) parses a cell's options with `parse`, which raises
`BackendFailed` (one line) for options that did not come through a checked scenario file, and
`prepare` receives them typed: it reads them with `expect`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

import pydantic

from harness.errors import BackendFailed


class BackendOptions(pydantic.BaseModel):
    """Base of every backend's options model: no unknown keys, no type coercion (a bool is not an int)."""

    model_config = pydantic.ConfigDict(extra="forbid", strict=True, frozen=True)


Options = TypeVar("Options", bound=BackendOptions)


def problem(model: type[BackendOptions], given: Mapping[str, Any]) -> str | None:
    """What is wrong with `given` for `model`, in one line naming the allowed keys, or None."""
    try:
        model.model_validate(dict(given))
    except pydantic.ValidationError as exc:
        allowed = ", ".join(model.model_fields) or "none"
        parts = []
        for error in exc.errors():
            where = ".".join(str(part) for part in error["loc"])
            if error["type"] == "extra_forbidden":
                parts.append(f"unknown option {where}")
            else:
                parts.append(f"{where}: {error['msg']}" if where else error["msg"])
        return f"{'; '.join(parts)} (allowed: {allowed})"
    return None


def parse(backend: str, model: type[Options], given: Mapping[str, Any]) -> Options:
    """`given` as `model`, or BackendFailed naming what is wrong and the allowed keys."""
    why = problem(model, given)
    if why is not None:
        raise BackendFailed(f"{backend} options: {why}")
    return model.model_validate(dict(given))


def expect(backend: str, model: type[Options], given: BackendOptions) -> Options:
    """`given` as `model`: the options `Backend.variant` parsed, or `model`'s defaults for a
    variant made without options; BackendFailed for another backend's options."""
    if type(given) is model:
        return given
    if type(given) is BackendOptions:
        return model()
    raise BackendFailed(f"{backend} options: got {type(given).__name__}, not {model.__name__}")
