"""A cell's configuration, typed: what one cell measures, built from the scenario's models by
`cells.expand`, carried to the worker in its request and kept in the bundle's cell record.

Every field is read by attribute. `recorded()` is the JSON the bundle keeps and the cell id hashes:
keys a cell did not ask for (a scenario's LoadGen keys another scenario has, the mlperf profile's
overrides, the accuracy run, the compliance tests, the system allocator) are left out of it, so a
cell's id stays what it was before each of those settings existed.

The backend's options stay the scenario file's plain values here (a plugin's options model is
the plugin's); the worker parses them with the backend's own model before `prepare` sees them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, SerializerFunctionWrapHandler, model_serializer

from harness.allocator import UNRECORDED as SYSTEM_ALLOCATOR
from harness.allocator import Allocator
from harness.models.catalog import default_input_size, record_of
from harness.scenario.format_base import OptionValue
from harness.scenario.rules import RULES, ScenarioName
from harness.scenario.schema import DType
from harness.scenario.settings import Inputs, PassSettings, TimingSettings
from harness.scenario.specs import ModelSpec

OnOff = Literal["on", "off"]
CellDevice = Literal["cpu", "cuda"]
ComplianceTest = Literal["TEST01", "TEST04"]
# A scenario's own LoadGen settings (harness/scenario/rules.py `loadgen_keys`): absent from the
# record of a cell of another scenario.
SCENARIO_KEYS = tuple(dict.fromkeys(key for scenario_rule in RULES.values() for key in scenario_rule.loadgen_keys))


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CellVariant(_Frozen):
    """The backend setting under study."""

    fusion: OnOff
    graphs: OnOff = "off"
    options: dict[str, OptionValue] = Field(default_factory=dict)


class CellLoadGen(_Frozen):
    """What LoadGen is told for this cell (the scenario's settings, resolved for its scenario)."""

    min_duration_s: float
    max_duration_s: float | None
    max_query_count: int | None
    min_query_count: int
    samples_per_query: int | None = None  # MultiStream
    target_qps: float | Literal["auto"] | None = None  # Server
    target_qps_fraction: float | None = None  # Server
    target_latency_ms: float | None = None  # Server
    profile: Literal["dev", "mlperf"] = "dev"
    overrides: dict[str, float | int] = Field(default_factory=dict)  # the mlperf profile's user.conf
    accuracy: bool = False
    compliance: tuple[ComplianceTest, ...] = ()

    @model_serializer(mode="wrap")
    def _as_recorded(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        for key in SCENARIO_KEYS:
            if data.get(key, 0) is None:
                del data[key]
        absent = [*(("profile", "overrides") if self.profile == "dev" else ()), *(("accuracy",) if not self.accuracy else ()),
                  *(("compliance",) if not self.compliance else ())]
        for key in absent:
            data.pop(key, None)
        return data


class CellConfig(_Frozen):
    """One cell: (model, backend, variant, scenario, device, dtype, batch) and how it is measured."""

    model: ModelSpec
    input_size: int
    backend: str
    variant: CellVariant
    scenario: ScenarioName
    device: CellDevice
    dtype: DType
    batch: int = Field(ge=1)
    inputs: Inputs
    seed: int
    loadgen: CellLoadGen
    timing: TimingSettings
    passes: PassSettings
    allocator: Allocator = SYSTEM_ALLOCATOR
    # The model's own input size where this cell was made: a plugin model's as the bundle it was read
    # from recorded it (validated with catalog.RECORD in the context), not as another bundle read
    # beside it, or the package installed here, has it. Not a field: the cell's id never holds it.
    _model_input_size: int | None = PrivateAttr(default=None)

    def model_post_init(self, context: Any, /) -> None:
        self._model_input_size = default_input_size(self.model.name, record_of(context))

    @model_serializer(mode="wrap")
    def _as_recorded(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if self.allocator == SYSTEM_ALLOCATOR:  # ids of system cells stay what they were
            data.pop("allocator", None)
        return data

    def recorded(self) -> dict[str, Any]:
        """The config as the bundle keeps it and the cell id hashes it. Settings the scenario it
        was expanded from did not have (a bundle's scenario from before a setting existed) stay
        absent, so the cells of an old bundle expand to the configs it recorded."""
        return self.model_dump(mode="json", exclude_unset=True)

    @property
    def variant_label(self) -> str:
        return variant_label(self.backend, self.variant.fusion, self.variant.graphs)

    @property
    def options_label(self) -> str:
        """The variant's backend options as tables and console lines show them: ` key=value` each,
        sorted; empty without options. Not part of `label`, which bundles record and check."""
        return "".join(f" {k}={v}" for k, v in sorted(self.variant.options.items()))

    @property
    def label(self) -> str:
        return self._label("")

    @property
    def shown_label(self) -> str:
        """`label` with the variant's options, an input size not the model's own (`input 160`) and
        pretrained weights where the cell loads them: what a run and `compare` print, so that two cells
        that differ only in these are told apart."""
        return self._label(self.options_label) + self.model_detail

    @property
    def model_detail(self) -> str:
        """What sets the model apart beyond its name: ` input 160` where the input size is not the
        model's own, ` pretrained` where it loads pretrained weights; empty otherwise."""
        size = "" if self.input_size == self._model_input_size else f" input {self.input_size}"
        return size + (" pretrained" if self.model.pretrained else "")

    def _label(self, options: str) -> str:
        return f"{self.model.name} {self.variant_label}{options} {self.scenario} {self.device} {self.dtype} b{self.batch}"


def variant_label(backend: str, fusion: str, graphs: str) -> str:
    """A cell's backend and variant as every table names them: `inductor fusion-off graphs`."""
    return f"{backend} fusion-{fusion}{' graphs' if graphs == 'on' else ''}"
