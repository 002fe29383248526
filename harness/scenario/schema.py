"""Scenario files: the schema (pydantic, `extra="forbid"`, frozen) and its validation.

Validation has no side effects: no GPU probe, no network, no environment change. It reads the
backend registry (entry-point metadata, cheap) and the zoo's static catalogue, so a typo in a
model or backend name is caught before anything runs. Loading a file and turning every problem
into one line that names the file and the line lives in `loading.py`.
"""

from __future__ import annotations

import json
from itertools import product
from typing import Annotated, Any, Literal, Union

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from harness import registry
from harness.allocator import DEFAULT as DEFAULT_ALLOCATOR
from harness.allocator import VARIABLE as ALLOCATOR_VARIABLE
from harness.allocator import Allocator
from harness.did_you_mean import closest
from harness.mlperf.benchmarks import MLPERF_SAMPLES_PER_QUERY, benchmark_for
from harness.models.catalog import CLASSIFICATION_MODELS, INPUT_SIZE_FLOOR, all_models, input_size_refusal
from harness.options import problem
from harness.scenario.rules import ScenarioName

Device = Literal["auto", "cpu", "cuda"]
DType = Literal["fp32", "tf32", "fp16", "bf16"]  # what each means: harness/precision.py



def _as_list(value: Any) -> Any:
    """Let a single value stand for a one-item list (`dtypes: fp32`)."""
    return value if isinstance(value, list) else [value]


def _on_off(value: Any) -> Any:
    """YAML 1.1 reads a bare `on`/`off` as a boolean; map it back to the words."""
    if value is True:
        return "on"
    if value is False:
        return "off"
    return value


def _name_only(value: Any) -> Any:
    """`- resnet18` is short for `- {name: resnet18}`."""
    return {"name": value} if isinstance(value, str) else value


def _backend_name_only(value: Any) -> Any:
    """As `_name_only`; a bare `- null` is YAML's null, and can only mean the null backend."""
    return _name_only("null" if value is None else value)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


Fusion = Annotated[
    Literal["on", "off"],
    BeforeValidator(_on_off, json_schema_input_type=Union[Literal["on", "off"], bool]),
]
OptionValue = Union[bool, int, float, str]


class ModelSpec(_Strict):
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
    def _known_model(cls, name: str) -> str:
        models = all_models()
        if name not in models:
            hint = closest(name, list(models))
            raise ValueError(
                f"unknown model {name!r}{hint}; `fusionbench models` lists the {len(models)} models the zoo offers"
            )
        return name

    @model_validator(mode="after")
    def _pretrained_exists(self) -> ModelSpec:
        if self.pretrained and self.name not in CLASSIFICATION_MODELS:
            raise ValueError(f"{self.name} has no pretrained weights (only torchvision's classifiers do)")
        return self


class BackendSpec(_Strict):
    """One backend and the variants of it under study."""

    name: str = Field(description="a registered backend (`fusionbench backends`)")
    fusion: Annotated[
        list[Fusion], BeforeValidator(_as_list, json_schema_input_type=Union[Fusion, list[Fusion]])
    ] = Field(["on"], min_length=1, description="fusion on, off, or both")
    graphs: Annotated[
        list[Fusion], BeforeValidator(_as_list, json_schema_input_type=Union[Fusion, list[Fusion]])
    ] = Field(
        ["off"], min_length=1,
        description="CUDA graphs on, off, or both: the whole inference replayed as one graph (GPU; backends that have it)",
    )
    options: dict[str, OptionValue] = Field(
        default_factory=dict, description="backend-specific settings, checked by the backend"
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
        except Exception:  # noqa: BLE001 - a plugin that does not load fails its cells, with the reason
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
        except Exception:  # noqa: BLE001 - a plugin that does not load fails its cells, with the reason
            return self
        if not backend.fusion_switch:
            raise ValueError(f"{self.name} has no fusion switch: fusion off would run the same code as on; "
                             "leave `fusion` out")
        return self


class SyntheticInputs(_Strict):
    """Seeded random images of the model's input size."""

    source: Literal["synthetic"] = "synthetic"
    seed: int = Field(0, ge=0, le=2**32 - 1)
    samples: int = Field(64, ge=1, le=4096, description="images in LoadGen's sample library")


class FolderInputs(_Strict):
    """Images from a folder, passed through the model's own preprocessing."""

    source: Literal["folder"]
    path: str = Field(min_length=1, description="folder of .jpg/.jpeg/.png images, relative to the scenario file")
    samples: int = Field(
        64, ge=1, le=4096,
        description="at most this many images, in name order (in the labels file's order when it is given)",
    )
    labels: str | None = Field(
        None, min_length=1, max_length=255,
        description="a file in the folder with one '<image file> <class index>' per line (ImageNet's "
        "val_map.txt): the images, in LoadGen's sample order, and their classes for the accuracy run",
    )

    @field_validator("labels")
    @classmethod
    def _a_name(cls, labels: str | None) -> str | None:
        if labels is not None and (any(c in labels for c in "/\\") or labels in (".", "..")
                                   or any(ord(c) < 32 for c in labels)):
            raise ValueError(f"a file name in the input folder, not a path: {labels!r}")
        return labels


def _synthetic_by_default(value: Any) -> Any:
    """`inputs: {samples: 32}` means synthetic inputs."""
    if isinstance(value, dict) and "source" not in value:
        return {"source": "synthetic", **value}
    return value


Inputs = Annotated[
    Union[SyntheticInputs, FolderInputs],
    Field(discriminator="source"),
    BeforeValidator(_synthetic_by_default),
]


class LoadGenSettings(_Strict):
    """What MLPerf LoadGen is told; the expected-latency hints come from the device-timing pass."""

    min_duration_s: float = Field(
        10.0, gt=0, le=86400,
        description="LoadGen's minimum run; above 0 (at 0 an Offline query held one sample: a 'valid' rate of one sample)",
    )
    max_duration_s: float | None = Field(None, gt=0, le=7 * 86400)
    min_query_count: int | None = Field(
        None, ge=1, le=10**9, description="default per scenario: enough for LoadGen's early stopping"
    )
    max_query_count: int | None = Field(None, ge=1, le=10**9)
    samples_per_query: int = Field(8, ge=1, le=4096, description="MultiStream: samples in each query")
    # the bounds are the validator's (its message names both forms); the schema file says them too
    target_qps: Annotated[float, WithJsonSchema({"type": "number", "exclusiveMinimum": 0, "maximum": 1e9})] \
        | Literal["auto"] = Field(
        "auto", description="Server: Poisson arrival rate; auto = target_qps_fraction of measured capacity"
    )
    target_qps_fraction: float = Field(0.5, gt=0, le=1)
    target_latency_ms: float = Field(
        100.0, gt=0, le=3.6e6, description="Server: p99 latency bound (profile dev; under mlperf, the benchmark's own)")
    profile: Literal["dev", "mlperf"] = Field(
        "dev",
        description="dev: every setting from this file (short runs); mlperf: the official settings "
        "(LoadGen's mlperf.conf: seeds, 600 s minimum duration, 1024 performance samples, early "
        "stopping) with a user.conf written into the bundle; LoadGen fields set in this file "
        "become user.conf overrides, and the result says it is not an official run",
    )
    accuracy: bool = Field(
        False, description="also run LoadGen's accuracy mode over the sample library and score top-1 "
        "against inputs.labels",
    )
    compliance: list[Literal["TEST01", "TEST04"]] = Field(
        [], description="MLPerf compliance tests to run after the performance run (mlperf profile, accuracy on)",
    )

    @field_validator("target_qps")
    @classmethod
    def _positive_qps(cls, qps: float | str) -> float | str:
        if not isinstance(qps, str) and not 0 < qps <= 1e9:
            raise ValueError("must be 'auto' or a rate in (0, 1e9] queries per second")
        return qps

    @model_validator(mode="after")
    def _ordered(self) -> LoadGenSettings:
        if len(set(self.compliance)) != len(self.compliance):
            raise ValueError("compliance lists the same test twice")
        if self.compliance and (self.profile != "mlperf" or not self.accuracy):
            raise ValueError("compliance tests need profile: mlperf and accuracy: true (TEST01 checks "
                             "its logged responses against the accuracy run)")
        if self.max_duration_s is not None and self.max_duration_s < self.min_duration_s:
            raise ValueError("max_duration_s is below min_duration_s")
        if self.max_query_count is not None and (self.min_query_count or 1) > self.max_query_count:
            raise ValueError("max_query_count is below min_query_count")
        return self


#: The most rounds a cell may have (`timing.rounds`, `fusionbench run --rounds`).
MAX_ROUNDS = 20


class TimingSettings(_Strict):
    """The device-timing pass: a warm-up until the figure is steady (kept apart), then timed
    calls in repetitions, half before the LoadGen pass and half after it."""

    warmup_iters: int = Field(3, ge=0, le=100_000, description="warm-up calls at least")
    max_warmup_s: float = Field(
        5.0, gt=0, le=3600, description="warm up at most this long, steady or not (the cell says which)"
    )
    min_iters: int = Field(10, ge=1, le=1_000_000)
    max_iters: int = Field(2000, ge=1, le=1_000_000)
    min_time_s: float = Field(1.0, ge=0, le=86400, description="time at least this long in all, within max_iters")
    repetitions: int = Field(4, ge=2, le=100, description="timed blocks, interleaved with the LoadGen pass")
    rounds: int = Field(
        1, ge=1, le=MAX_ROUNDS, strict=True,
        description="fresh worker processes that time each cell: the first measures everything, each further one "
        "times the steady state again (compiled artefacts from the cache); the cells of one setting take turns round "
        "by round, and a fusion speedup's, or a backend's over the baseline's, confidence interval comes from the "
        "paired rounds",
    )

    @model_validator(mode="after")
    def _ordered(self) -> TimingSettings:
        if self.min_iters > self.max_iters:
            raise ValueError("min_iters is above max_iters")
        return self


class PassSettings(_Strict):
    """Calls made in the untimed memory, profile and memory-traffic passes."""

    memory_iters: int = Field(5, ge=1, le=10_000)
    profile_iters: int = Field(
        3, ge=1, le=10_000,
        description="inferences the profile pass profiles: on a GPU the trace its kernels are counted and timed over, "
        "on the CPU those each kernel's median share of an inference is taken over",
    )
    traffic_iters: int = Field(
        2, ge=0, le=1_000,
        description="inferences whose DRAM bytes a CUDA cell reads from the GPU's hardware counters "
        "(harness/measure/memory_traffic.py); 0 turns the pass off",
    )


class Limits(_Strict):
    """Limits each cell's worker process runs under."""

    cell_timeout_s: float = Field(900.0, gt=0, le=7 * 86400)
    memory_limit_mib: int | None = Field(
        None, ge=64, le=16 << 20,
        description="resident memory (RSS) the worker and its children may use, MiB; over it the cell "
        "fails (default: no limit)",
    )


def _each_once(values: list[Any]) -> list[Any]:
    """A list whose items make cells (batch sizes, dtypes, scenarios) names each item once: a
    repeated item made the same cell twice, which ran twice and left a bundle validate refuses."""
    twice = [value for i, value in enumerate(values) if value in values[:i]]
    if twice:
        raise ValueError(f"lists {twice[0]} twice")
    return values


BatchSize = Annotated[int, Field(ge=1, le=65536)]
BatchList = Annotated[
    list[BatchSize], Field(min_length=1), AfterValidator(_each_once),
    # the schema file says the bounds too: editors and CI check a file against it
    BeforeValidator(_as_list, json_schema_input_type=Union[BatchSize, Annotated[list[BatchSize], Field(min_length=1)]]),
]


def _per_device(value: Any) -> Any:
    """`batch_sizes: [8]` was refused as no "valid dictionary or instance of BatchSizes": say what it takes."""
    if isinstance(value, (list, int)) and not isinstance(value, bool):
        raise ValueError(f"batch sizes are given per device: {{cpu: {value}, cuda: {value}}} (or one of the two)")
    return value


class BatchSizes(_Strict):
    """Batch sizes for Offline and Server, per device (SingleStream runs batch 1; MultiStream
    runs one query of `samples_per_query` samples as one batch)."""

    cpu: BatchList = [1]
    cuda: BatchList = [1]


class ScenarioFile(_Strict):
    """A scenario file: which cells to run and how to measure them."""

    name: str | None = Field(None, max_length=100, description="default: the file's stem")
    description: str = Field("", max_length=10_000)
    device: Device = "auto"
    dtypes: Annotated[
        list[DType], BeforeValidator(_as_list, json_schema_input_type=Union[DType, list[DType]]),
        AfterValidator(_each_once),
    ] = Field(["fp32"], min_length=1)
    models: list[
        Annotated[ModelSpec, BeforeValidator(_name_only, json_schema_input_type=Union[str, ModelSpec])]
    ] = Field(min_length=1, max_length=1000)
    backends: list[
        Annotated[
            BackendSpec,
            BeforeValidator(_backend_name_only, json_schema_input_type=Union[str, BackendSpec, None]),
        ]
    ] = Field(min_length=1, max_length=100)
    scenarios: Annotated[
        list[ScenarioName],
        BeforeValidator(_as_list, json_schema_input_type=Union[ScenarioName, list[ScenarioName]]),
        AfterValidator(_each_once),
    ] = Field(min_length=1)
    batch_sizes: Annotated[BatchSizes, BeforeValidator(_per_device)] = BatchSizes()
    inputs: Inputs = SyntheticInputs()
    loadgen: LoadGenSettings = LoadGenSettings()
    timing: TimingSettings = TimingSettings()
    passes: PassSettings = PassSettings()
    limits: Limits = Limits()
    allocator: Allocator = Field(
        DEFAULT_ALLOCATOR,  # before env, whose check reads it
        description=("the C library allocator's settings in every worker (harness/allocator.py): steady keeps "
                     "freed memory (malloc never maps, the heap is never trimmed), so calls do not fault their "
                     "pages in again; system leaves glibc's defaults"))
    env: list[Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*(=.*)?$", max_length=4096)]] = Field(
        [], max_length=200,
        description=("environment variables for every cell's worker beyond the whitelisted ones "
                     "(harness/run/isolation.py): NAME passes this shell's value on, NAME=value sets it"))
    baseline: str = Field("eager", description="the backend the report's speedups are measured against")

    @field_validator("env")
    @classmethod
    def _each_variable_once(cls, env: list[str], info: ValidationInfo) -> list[str]:
        # `[FOO=1, FOO=2]` or `[FOO, FOO=2]`: the worker gets the last one, silently.
        names = [item.partition("=")[0] for item in env]
        twice = sorted({name for name in names if names.count(name) > 1})
        if twice:
            raise ValueError(f"names {', '.join(twice)} twice; give each variable once")
        if info.data.get("allocator") == "steady" and ALLOCATOR_VARIABLE in names:  # refused at the entry
            raise ValueError(f"[{names.index(ALLOCATOR_VARIABLE)}] sets {ALLOCATOR_VARIABLE}, which allocator: steady "
                             "(the default) sets itself; add allocator: system to pass your own")
        return env

    @field_validator("baseline")
    @classmethod
    def _baseline_runs(cls, baseline: str, info: ValidationInfo) -> str:
        # A baseline the file does not run left the report without speedups, silently. Only one the
        # file gives is checked (not the default): a file without eager just has no speedup table.
        backends = info.data.get("backends")
        if backends is None:
            return baseline  # the backends were refused: that error is the one to fix
        names = list(dict.fromkeys(b.name for b in backends))
        if baseline not in names:
            known = registry.names()
            why = "is not a registered backend" if baseline not in known else "is not run by this file"
            raise ValueError(f"{baseline!r} {why}{closest(baseline, names)}; allowed: the file's backends "
                             f"({', '.join(names)})")
        return baseline

    @field_validator("models")
    @classmethod
    def _each_model_once(cls, models: list[ModelSpec]) -> list[ModelSpec]:
        # Spelling out a model's own input size is the same model: its cells would run twice.
        seen: dict[tuple[str, int | None, bool], int] = {}
        catalogue = all_models()
        for i, model in enumerate(models):
            size = catalogue[model.name][1]
            key = (model.name, model.input_size or size, model.pretrained)
            if key in seen:
                raise ValueError(f"[{i}] repeats models[{seen[key]}]: {model.name} at input size {key[1]}"
                                 f"{', pretrained' if model.pretrained else ''}")
            seen[key] = i
        return models

    @field_validator("models")
    @classmethod
    def _sizes_taken(cls, models: list[ModelSpec]) -> list[ModelSpec]:
        """A model at an input size its forward does not take failed its cell at run time ("Wrong
        image height! Expected 224 but got 32!"). The file's check, not ModelSpec's: the records of
        bundles that hold such a cell still read, and a killed one still resumes."""
        for i, model in enumerate(models):
            refusal = None if model.input_size is None else input_size_refusal(model.name, model.input_size)
            if refusal:
                raise ValueError(f"[{i}] {refusal}")
        return models

    @field_validator("backends")
    @classmethod
    def _each_cell_once(cls, backends: list[BackendSpec], info: ValidationInfo) -> list[BackendSpec]:
        """Each backend entry runs models of the file's, and no two entries make the same cell (`eager`
        and `{name: eager, graphs: [on, off]}` both made eager's graphs-off cells, which then ran
        twice and left a bundle validate refuses)."""
        models = info.data.get("models")
        if models is None:
            return backends  # the models were refused: that error is the one to fix
        names = list(dict.fromkeys(m.name for m in models))
        made: dict[tuple[str, ...], int] = {}
        for i, backend in enumerate(backends):
            unknown = [m for m in backend.models or () if m not in names]
            if unknown:
                raise ValueError(f"[{i}] {backend.name}: models {', '.join(unknown)} not in the file's models "
                                 f"({', '.join(names)})")
            options = json.dumps(backend.options, sort_keys=True)
            for model, fusion, graphs in product(backend.models or names, backend.fusion, backend.graphs):
                key = (backend.name, options, fusion, graphs, model)
                if key in made and made[key] != i:
                    raise ValueError(f"[{i}] repeats cells of backends[{made[key]}]: {backend.name} fusion {fusion}, "
                                     f"graphs {graphs}{' ' + options if backend.options else ''}, on {model}")
                made[key] = i
        return backends

    @field_validator("loadgen")
    @classmethod
    def _mlperf_ready(cls, loadgen: LoadGenSettings, info: ValidationInfo) -> LoadGenSettings:
        """What the accuracy run and the mlperf profile need of the rest of the file (refused at
        `loadgen`, the setting that asks for it)."""
        models, inputs, scenarios = (info.data.get(key) for key in ("models", "inputs", "scenarios"))
        if models is None or inputs is None or scenarios is None:
            return loadgen  # refused already: that error is the one to fix
        if loadgen.accuracy and not (isinstance(inputs, FolderInputs) and inputs.labels):
            raise ValueError("accuracy needs labelled images: inputs: {source: folder, path: ..., labels: ...}")
        if loadgen.profile != "mlperf":
            return loadgen
        # by its value, not by whether the file named it: a stored scenario (a resume's) names every field
        if loadgen.target_latency_ms != LoadGenSettings.model_fields["target_latency_ms"].default:
            raise ValueError("profile mlperf: Server's latency bound is the benchmark's own in mlperf.conf, which a "
                             "user.conf may not change; target_latency_ms applies to profile dev only")
        for model in models:
            benchmark = benchmark_for(model.name)
            if benchmark is None:
                raise ValueError(f"profile mlperf: {model.name} stands for no MLPerf benchmark "
                                 "(image classifiers stand for MLPerf's resnet)")
            if inputs.samples < benchmark.performance_sample_count:
                raise ValueError(
                    f"profile mlperf: MLPerf's {benchmark.name} loads {benchmark.performance_sample_count} "
                    f"performance samples; inputs.samples is {inputs.samples}")
        if "MultiStream" in scenarios and loadgen.samples_per_query != MLPERF_SAMPLES_PER_QUERY:
            raise ValueError(f"profile mlperf: MultiStream queries have {MLPERF_SAMPLES_PER_QUERY} samples; "
                             f"samples_per_query is {loadgen.samples_per_query}")
        return loadgen


def json_schema() -> dict[str, Any]:
    """The JSON Schema every file in `scenarios/` is checked against (what a file may contain)."""
    schema = ScenarioFile.model_json_schema(mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "FusionBench scenario file"
    # Model names are a closed set: spell it out, so editors can complete them.
    schema["$defs"]["ModelSpec"]["properties"]["name"]["enum"] = sorted(all_models())
    return schema
