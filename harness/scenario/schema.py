"""Scenario files: the format's top level (pydantic, `extra="forbid"`, frozen) and the JSON Schema
generated from it. `ScenarioFile` says which cells a file makes (its models and backends, dtypes,
scenarios and batch sizes) and checks its sections against each other; the entries of its models
and backends are in `specs.py`, the sections that say how cells are measured in `settings.py`.

Validation has no side effects: no GPU probe, no network, no environment change. It reads the
backend registry (entry-point metadata, cheap) and the zoo's static catalogue, so a typo in a
model or backend name is caught before anything runs. Loading a file and turning every problem
into one line that names the file and the line lives in `loading.py`.
"""

from __future__ import annotations

import json
from itertools import product
from typing import Annotated, Any, Literal, Union

from pydantic import AfterValidator, BeforeValidator, Field, StringConstraints, ValidationInfo, field_validator, model_validator

from harness import registry
from harness.allocator import DEFAULT as DEFAULT_ALLOCATOR
from harness.allocator import VARIABLE as ALLOCATOR_VARIABLE
from harness.allocator import Allocator
from harness.did_you_mean import closest
from harness.mlperf.benchmarks import MLPERF_MIN_DURATION_S, MLPERF_SAMPLES_PER_QUERY, benchmark_for
from harness.models.catalog import all_models, input_size_refusal, record_of
from harness.scenario.format_base import StrictModel, as_list, each_once
from harness.scenario.rules import RULES, ScenarioName
from harness.scenario.settings import FolderInputs, Inputs, Limits, LoadGenSettings, PassSettings, SyntheticInputs, TimingSettings
from harness.scenario.specs import BackendSpec, ModelSpec

Device = Literal["auto", "cpu", "cuda"]
DType = Literal["fp32", "tf32", "fp16", "bf16"]  # what each means: harness/precision.py


def _name_only(value: Any) -> Any:
    """`- resnet18` is short for `- {name: resnet18}`."""
    return {"name": value} if isinstance(value, str) else value


def _entries(value: Any) -> Any:
    """`models: resnet18` (or one mapping) is a one-entry list, as `dtypes: fp32` is; a key left
    empty is refused in words, not as "Input should be a valid list"."""
    if value is None:
        raise ValueError("empty; list at least one entry")
    return [value] if isinstance(value, (str, dict)) else value


def _backend_name_only(value: Any) -> Any:
    """As `_name_only`; a bare `- null` is YAML's null, and can only mean the null backend."""
    return _name_only("null" if value is None else value)


#: What every cell's worker is given whatever the scenario's `env:` says (harness/run/isolation.py).
WORKER_ENVIRONMENT = {"PYTHONUNBUFFERED": "1"}


BatchSize = Annotated[int, Field(ge=1, le=65536)]
BatchList = Annotated[
    list[BatchSize], Field(min_length=1), AfterValidator(each_once),
    # the schema file says the bounds too: editors and CI check a file against it
    BeforeValidator(as_list, json_schema_input_type=Union[BatchSize, Annotated[list[BatchSize], Field(min_length=1)]]),
]


def _per_device(value: Any) -> Any:
    """`batch_sizes: [8]` was refused as no "valid dictionary or instance of BatchSizes": say what it takes."""
    if isinstance(value, (list, int)) and not isinstance(value, bool):
        raise ValueError(f"batch sizes are given per device: {{cpu: {value}, cuda: {value}}} (or one of the two)")
    return value


class BatchSizes(StrictModel):
    """Batch sizes for Offline and Server, per device (SingleStream runs batch 1; MultiStream
    runs one query of `samples_per_query` samples as one batch)."""

    cpu: BatchList = [1]
    cuda: BatchList = [1]


class ScenarioFile(StrictModel):
    """A scenario file: which cells to run and how to measure them."""

    name: str | None = Field(None, max_length=100, description="default: the file's stem")
    description: str = Field("", max_length=10_000)
    device: Device = "auto"
    dtypes: Annotated[
        list[DType], BeforeValidator(as_list, json_schema_input_type=Union[DType, list[DType]]),
        AfterValidator(each_once),
    ] = Field(["fp32"], min_length=1)
    models: Annotated[
        list[Annotated[ModelSpec, BeforeValidator(_name_only, json_schema_input_type=Union[str, ModelSpec])]],
        BeforeValidator(_entries, json_schema_input_type=Union[
            str, ModelSpec, Annotated[list[Union[str, ModelSpec]], Field(min_length=1, max_length=1000)]]),
    ] = Field(min_length=1, max_length=1000)
    backends: Annotated[
        list[
            Annotated[
                BackendSpec,
                BeforeValidator(_backend_name_only, json_schema_input_type=Union[str, BackendSpec, None]),
            ]
        ],
        BeforeValidator(_entries, json_schema_input_type=Union[
            str, BackendSpec, Annotated[list[Union[str, BackendSpec, None]], Field(min_length=1, max_length=100)]]),
    ] = Field(min_length=1, max_length=100)
    scenarios: Annotated[
        list[ScenarioName],
        BeforeValidator(as_list, json_schema_input_type=Union[ScenarioName, list[ScenarioName]]),
        AfterValidator(each_once),
    ] = Field(min_length=1)
    batch_sizes: Annotated[BatchSizes, BeforeValidator(_per_device)] = BatchSizes()
    inputs: Inputs = SyntheticInputs()
    loadgen: LoadGenSettings = LoadGenSettings()
    timing: TimingSettings = TimingSettings()
    passes: PassSettings = PassSettings()
    limits: Limits = Field(Limits(), validate_default=True)  # a file without `limits:` has its time limit too
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

    @classmethod
    def _options_as_run(cls, backend: BackendSpec) -> str:
        """A backend entry's options as its cells run them, each default filled in: `inductor` and
        `{name: inductor, options: {mode: default}}` make the same cells (as written, where the backend
        does not load: its cells fail with the reason)."""
        try:
            model = registry.load(backend.name).options_model
            return json.dumps(model.model_validate(backend.options).model_dump(mode="json"), sort_keys=True)
        except (Exception, SystemExit):  # noqa: BLE001 - a plugin that does not load fails its cells, with the reason
            return json.dumps(backend.options, sort_keys=True)

    @classmethod
    def _backends_scratch_env(cls, name: str) -> dict[str, str]:
        """The variables backend `name` points at folders of each cell's own (none where it does not load)."""
        try:
            return dict(registry.load(name).scratch_env)
        except (Exception, SystemExit):  # noqa: BLE001 - a plugin that does not load fails its cells, with the reason
            return {}

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

    @field_validator("env")
    @classmethod
    def _not_set_by_the_harness(cls, env: list[str], info: ValidationInfo) -> list[str]:
        """`env: [PYTHONUNBUFFERED=0]` or, running inductor, `[TORCHINDUCTOR_CACHE_DIR=/fast/disk]`
        loaded and the worker got the harness's own value: the cell's record showed the variable,
        not the file's value, without a word."""
        names = [item.partition("=")[0] for item in env]
        for i, name in enumerate(names):
            if name in WORKER_ENVIRONMENT:
                raise ValueError(f"[{i}] sets {name}, which the harness sets to {WORKER_ENVIRONMENT[name]} in every "
                                 "cell's worker: the worker would not get yours; leave it out")
        for backend in dict.fromkeys(b.name for b in info.data.get("backends") or ()):
            own = cls._backends_scratch_env(backend)
            for i, name in enumerate(names):
                if name in own:
                    raise ValueError(f"[{i}] sets {name}, which {backend} points at a fresh folder of each cell's "
                                     "own (its caches, kept from round to round): its cells would not get yours; "
                                     "leave it out")
        return env

    @field_validator("limits")
    @classmethod
    def _time_for_loadgen(cls, limits: Limits, info: ValidationInfo) -> Limits:
        """`cell_timeout_s: 3` beside `min_duration_s: 6` loaded, the dry run said each cell would
        run, and each was killed in its LoadGen pass ("time limit of 3 s exceeded")."""
        loadgen = info.data.get("loadgen")
        if loadgen is None:
            return limits  # refused already: that error is the one to fix
        official = loadgen.profile == "mlperf" and "min_duration_s" not in loadgen.model_fields_set
        least = MLPERF_MIN_DURATION_S if official else loadgen.min_duration_s  # mlperf.conf's 600 s
        if limits.cell_timeout_s <= least:
            default = "" if "cell_timeout_s" in limits.model_fields_set else " (the default)"
            raise ValueError(f"cell_timeout_s {limits.cell_timeout_s:g}{default} is not above the {least:g} s LoadGen "
                             f"runs each cell at least ({'mlperf.conf' if official else 'loadgen.min_duration_s'}): every cell "
                             "would be stopped in its LoadGen pass; give it well above that")
        return limits

    @field_validator("baseline")
    @classmethod
    def _baseline_runs(cls, baseline: str, info: ValidationInfo) -> str:
        # A baseline the file does not run left the report without speedups, silently. Only one the
        # file gives is checked (not the default): a file without eager just has no speedup table.
        # Given at the default, it is the default: a bundle's stored scenario spells every default
        # out, and that of a file without eager was refused as a file ("'eager' is not run").
        backends = info.data.get("backends")
        if backends is None or baseline == cls.model_fields["baseline"].default:
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
    def _each_model_once(cls, models: list[ModelSpec], info: ValidationInfo) -> list[ModelSpec]:
        # Spelling out a model's own input size is the same model: its cells would run twice.
        seen: dict[tuple[str, int | None, bool], int] = {}
        catalogue = all_models(record_of(info.context))  # a bundle's stored scenario: its record's sizes
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
            settings = cls._options_as_run(backend)
            for model, fusion, graphs in product(backend.models or names, backend.fusion, backend.graphs):
                key = (backend.name, settings, fusion, graphs, model)
                if key in made and made[key] != i:
                    same = "" if backends[made[key]].options == backend.options else " (the same options once the " \
                        f"backend's defaults are filled in: {settings})"
                    raise ValueError(f"[{i}] repeats cells of backends[{made[key]}]: {backend.name} fusion {fusion}, "
                                     f"graphs {graphs}{' ' + options if backend.options else ''}, on {model}{same}")
                made[key] = i
        return backends

    @field_validator("loadgen")
    @classmethod
    def _max_queries_reach_the_least(cls, loadgen: LoadGenSettings, info: ValidationInfo) -> LoadGenSettings:
        """A `max_query_count` below the queries a scenario runs at least (`min_query_count`, by default
        the scenario's own: 100 SingleStream queries) made every cell of it INVALID, min queries not
        met, without a word; given both, the settings' own check refused it."""
        scenarios = info.data.get("scenarios")
        if scenarios is None or loadgen.max_query_count is None:
            return loadgen  # refused already, or no maximum
        for name in scenarios:
            least = RULES[name].min_queries(loadgen.min_query_count)
            if loadgen.max_query_count < least:
                raise ValueError(f"max_query_count {loadgen.max_query_count} is below the {least} queries {name} runs at "
                                 f"least (min_query_count{'' if loadgen.min_query_count else ', by default'}): every "
                                 f"{name} cell would be INVALID; give max_query_count {least} or more")
        return loadgen

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

    @model_validator(mode="after")
    def _cells_a_run_may_have(self) -> ScenarioFile:
        """A file of more than MAX_CELLS cells loaded and ran, and `validate` then refused its
        bundle ("expands to more than 20000 cells"), and with it report, compare and --resume."""
        data = self.model_dump(mode="json")
        for device in ("cpu", "cuda"):
            cells = planned_cells(data, device)
            if cells > MAX_CELLS:
                raise ValueError(f"makes up to {cells} cells on {device} (models x backend variants x scenarios x "
                                 f"dtypes x batch sizes), more than the {MAX_CELLS} a run may have: split it into "
                                 "several files")
        return self


#: The most cells a scenario may make on a device (`planned_cells`): a file that makes more is refused
#: as it is read, and `validate` refuses a bundle whose stored scenario makes more (a hostile header
#: could name a product of lists far beyond any real run).
MAX_CELLS = 20_000


def passed_on(env: object) -> list[str]:
    """The variables a scenario's `env:` (as typed, or as bundle.json stores it) passes on from the
    shell: `NAME`, not `NAME=value`."""
    return [item for item in env if isinstance(item, str) and "=" not in item] if isinstance(env, list) else []


def planned_cells(resolved: dict[str, Any], device: str) -> int:
    """How many cells `expand` would give, at most, counted without building them."""
    variants = sum(len(b["fusion"]) * len(b.get("graphs", ["off"])) for b in resolved["backends"])
    batches = max((len(resolved["batch_sizes"][device]), 1))
    return len(resolved["models"]) * variants * len(resolved["scenarios"]) * len(resolved["dtypes"]) * batches


def json_schema() -> dict[str, Any]:
    """The JSON Schema every file in `scenarios/` is checked against (what a file may contain)."""
    schema = ScenarioFile.model_json_schema(mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "FusionBench scenario file"
    # Model names are a closed set: spell it out, so editors can complete them, and a check refuses
    # a misspelt one in every place a file names a model, not only in `{name: ...}`: the bare
    # `models: [ResNet18]` (or `models: ResNet18`) and a backend's `models:` passed the schema file.
    # The set is this installation's, its plugins' models among them (docs/adding_a_model.md): the
    # committed file is the project's, with none.
    names = sorted(all_models())
    schema["$defs"]["ModelSpec"]["properties"]["name"]["enum"] = names
    models = schema["properties"]["models"]["anyOf"]
    only = schema["$defs"]["BackendSpec"]["properties"]["models"]["anyOf"]
    for branch in [*models, *models[-1]["items"]["anyOf"], *(b["items"] for b in only if b.get("type") == "array")]:
        if branch == {"type": "string"}:
            branch["enum"] = names
    return schema
