"""The models and backends a scenario file names (`models:`, `backends:`), each entry checked as it
is read: a model against the zoo's catalogue, a backend against the registry and its options
against the backend's own options model, so that a typo is caught before anything runs.
"""

from __future__ import annotations

from typing import Annotated, Any, Union

from pydantic import BeforeValidator, Field, ValidationInfo, field_validator, model_validator

from harness import registry
from harness.models.catalog import CLASSIFICATION_MODELS, INPUT_SIZE_FLOOR, all_models, record_of, unknown
from harness.options import problem
from harness.scenario.format_base import Fusion, OptionValue, StrictModel, as_list


class ModelSpec(StrictModel):
    """One model of the zoo: a torchvision classifier, a fusion-pattern micro-model or a
    non-vision model of the literature suites."""

    name: str = Field(description="model name, as `fusionbench models` lists it")
    pretrained: bool = Field(
        False, description="load torchvision's pretrained weights (needs network); random weights otherwise"
    )
    input_size: int | None = Field(
        None, ge=INPUT_SIZE_FLOOR, le=1_000_000,
        description="image side in pixels, sequence length, feature count or audio samples, as the model's "
        "input kind says (`fusionbench models`); default: the model's own",
    )

    @field_validator("name")
    @classmethod
    def _known_model(cls, name: str, info: ValidationInfo) -> str:
        # a bundle's model is known by its record there (catalog.RECORD), installed here or not
        models = all_models(record_of(info.context))
        if name not in models:
            raise ValueError(unknown(name, list(models)))
        return name

    @model_validator(mode="after")
    def _pretrained_exists(self) -> ModelSpec:
        if self.pretrained and self.name not in CLASSIFICATION_MODELS:
            raise ValueError(f"{self.name} has no pretrained weights (only torchvision's classifiers do)")
        return self


class BackendSpec(StrictModel):
    """One backend and the variants of it under study."""

    name: str = Field(description="a registered backend (`fusionbench backends`)")
    fusion: Annotated[
        list[Fusion], BeforeValidator(as_list, json_schema_input_type=Union[Fusion, list[Fusion]])
    ] = Field(["on"], min_length=1, description="fusion on, off, or both")
    graphs: Annotated[
        list[Fusion], BeforeValidator(as_list, json_schema_input_type=Union[Fusion, list[Fusion]])
    ] = Field(
        ["off"], min_length=1,
        description="CUDA graphs on, off, or both: the whole inference replayed as one graph (GPU; backends that have it)",
    )
    # validate_default: an entry without `options:` is checked too, so a backend option with no
    # default stops the file's loading, not each of its cells at run time
    options: dict[str, OptionValue] = Field(
        default_factory=dict, validate_default=True, description="backend-specific settings, checked by the backend"
    )
    models: list[str] | None = Field(
        None, min_length=1,
        description="run this backend on these of the file's models only (default: all of them)",
    )

    @field_validator("name")
    @classmethod
    def _registered(cls, name: str) -> str:
        if name not in registry.names():
            raise ValueError(registry.unknown(name))
        return name

    @field_validator("fusion", "graphs")
    @classmethod
    def _distinct(cls, values: list[str], info: ValidationInfo) -> list[str]:
        if len(set(values)) != len(values):
            raise ValueError(f"lists the same {info.field_name} setting twice")
        return values

    @field_validator("options")
    @classmethod
    def _backend_accepts(cls, options: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        """Checked against the backend's own options model (harness/options.py), at load time."""
        name = info.data.get("name")
        if name is None:
            return options  # the name itself was refused
        try:
            backend = registry.load(name)
        except (Exception, SystemExit):  # noqa: BLE001 - a plugin that does not load fails its cells, with the reason
            return options
        why = problem(backend.options_model, options)
        if why is not None:
            raise ValueError(f"{name}: {why}")
        return options

    @model_validator(mode="after")
    def _has_the_switch(self) -> BackendSpec:
        """`fusion: off` of a backend with no fusion switch ran the same code twice, and the report
        called the noise between the two fusion's effect (eager 'made slower' 0.94x by fusion)."""
        if "off" not in self.fusion:
            return self
        try:
            backend = registry.load(self.name)
        except (Exception, SystemExit):  # noqa: BLE001 - a plugin that does not load fails its cells, with the reason
            return self
        if not backend.fusion_switch:
            raise ValueError(f"{self.name} has no fusion switch: fusion off would run the same code as on; "
                             "leave `fusion` out")
        return self
