"""What every typed record of a bundle is built from: the sane ranges and the field types that
carry them, the `Record` base of a cell record's parts, and reading a value as a model (`read_as`,
`model_problems`). The cell's record (harness/bundle/cell_record.py) and the header
(harness/bundle/header_record.py) are made of these.

A record is read, never trusted: ranges are what "sane" means in `fusionbench validate` (a negative
latency or a 10^30-byte peak is a problem, whatever produced it), and a path the bundle names stays
inside it. Fields a newer harness adds are kept and ignored (`extra="allow"`), so its bundles still
read here; a figure an older record lacks, or a pass a failed cell never reached, is None.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

# Sane ranges: far beyond any real figure, far below what a hostile or corrupted file could hold.
NS_MAX = 10**13  # 2.8 hours
SECONDS_MAX = 10**7  # 116 days
BYTES_MAX = 2**50  # 1 PiB
COUNT_MAX = 10**8
RATE_MAX = 10**10  # samples per second
FLOPS_MAX = 10**21  # per batch, or per second

#: The most samples a timing list holds: the scenario's largest `max_iters`, and the warm-up's cap
#: (harness/measure/timing.py). A longer list is no measurement of this harness, and would cost
#: validate seconds an item.
MAX_SAMPLES = 1_000_000

HEX16 = "^[0-9a-f]{16}$"
# A path inside the bundle: relative, no "..", no backslash or control characters.
INNER_PATH = r"^(?!/)(?!.*(^|/)\.\.(/|$))[^\\\x00-\x1f]+$"

Ns = Annotated[float, Field(ge=0, le=NS_MAX)]
IntNs = Annotated[int, Field(ge=0, le=NS_MAX)]
Seconds = Annotated[float, Field(ge=0, le=SECONDS_MAX)]
Bytes = Annotated[int, Field(ge=0, le=BYTES_MAX)]
SignedBytes = Annotated[int, Field(ge=-BYTES_MAX, le=BYTES_MAX)]
Count = Annotated[int, Field(ge=0, le=COUNT_MAX)]
MeanCount = Annotated[float, Field(ge=0, le=COUNT_MAX)]
Ratio = Annotated[float, Field(ge=0, le=1e6)]
Share = Annotated[float, Field(ge=0, le=1.0)]
InnerPath = Annotated[str, Field(pattern=INNER_PATH)]
Validity = Literal["VALID", "INVALID", "MISSING"]
Status = Literal["valid", "invalid", "failed", "skipped", "interrupted"]


class Record(BaseModel):
    """Base of every part of a cell record."""

    model_config = ConfigDict(extra="allow", validate_assignment=True, regex_engine="python-re")

    def __setattr__(self, name: str, value: Any) -> None:
        """A field set as validated: a name the record does not declare is refused (extra fields are
        a newer harness's, read from a bundle, never written), and a value its checks refuse leaves
        the field as it was (pydantic keeps the refused value when a model's own check fails after
        the field's: the record could then no longer be written, and every figure in it was lost)."""
        if name not in type(self).model_fields and not name.startswith("_"):
            raise AttributeError(f"{type(self).__name__} has no field {name!r}: a figure is declared in its record "
                                 "first (docs/adding_a_metric.md)")
        before, was_set = self.__dict__.get(name), set(self.model_fields_set)
        try:
            super().__setattr__(name, value)
        except ValidationError:
            self.__dict__[name] = before
            self.__pydantic_fields_set__ = was_set
            raise

    def recorded(self) -> dict[str, Any]:
        """The JSON the bundle keeps: the fields that were set, None where a figure is none."""
        return self.model_dump(mode="json", exclude_unset=True, by_alias=True)


ModelT = TypeVar("ModelT", bound=BaseModel)


def read_as(model: type[ModelT], value: Any) -> ModelT | None:
    """`value` as a `model`, or None where it has another shape: for the parts of a record the
    schema keeps loose (a bundle is read, never trusted to have the shape it should)."""
    try:
        return model.model_validate(value)
    except ValidationError:
        return None


def model_problems(model: type[BaseModel], record: Any, where: str, context: dict[str, Any] | None = None) -> list[str]:
    """One line per place where `record` is not a `model` (validated with `context`), `where` first."""
    try:
        model.model_validate(record, context=context)
    except ValidationError as exc:
        return [f"{where}: {'/'.join(map(str, e['loc'])) or '(top)'}: {e['msg'][:200]}" for e in exc.errors()]
    return []
