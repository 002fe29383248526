"""What every model of the scenario format is built from: a strict, frozen base that forbids
unknown keys (`StrictModel`), and the shorthands a file may use: a single value for a one-item list
(`as_list`), YAML's bare on/off booleans for the words (`Fusion`), and a list that makes cells
naming each item once (`each_once`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, BeforeValidator, ConfigDict


def as_list(value: Any) -> Any:
    """Let a single value stand for a one-item list (`dtypes: fp32`). A key left empty (`scenarios:`)
    is refused in words: as a one-item list of nothing it was refused at an item `[0]` the file lacks."""
    if value is None:
        raise ValueError("empty; list at least one entry")
    return value if isinstance(value, list) else [value]


def _on_off(value: Any) -> Any:
    """YAML 1.1 reads a bare `on`/`off` as a boolean; map it back to the words."""
    if value is True:
        return "on"
    if value is False:
        return "off"
    return value


class StrictModel(BaseModel):
    """The base of every model of the format: unknown keys refused, frozen, strict types, no NaN or infinity."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


Fusion = Annotated[
    Literal["on", "off"],
    BeforeValidator(_on_off, json_schema_input_type=Union[Literal["on", "off"], bool]),
]
OptionValue = Union[bool, int, float, str]


def each_once(values: list[Any]) -> list[Any]:
    """A list whose items make cells (batch sizes, dtypes, scenarios) names each item once: a
    repeated item made the same cell twice, which ran twice and left a bundle validate refuses."""
    twice = [value for i, value in enumerate(values) if value in values[:i]]
    if twice:
        raise ValueError(f"lists {twice[0]} twice")
    return values
