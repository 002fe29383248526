"""The sections of a scenario file that say how its cells are measured: the inputs (`inputs:`),
what MLPerf LoadGen is told (`loadgen:`), the device-timing pass and its rounds (`timing:`), the
untimed passes (`passes:`) and the limits each cell's worker runs under (`limits:`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BeforeValidator, Field, WithJsonSchema, field_validator, model_validator

from harness.mlperf.user_conf import OVERRIDABLE
from harness.scenario.format_base import StrictModel

#: Images a sample library holds at most, all in memory (an accuracy run covers no more).
MAX_SAMPLES = 4096


class SyntheticInputs(StrictModel):
    """Seeded random images of the model's input size."""

    source: Literal["synthetic"] = "synthetic"
    seed: int = Field(0, ge=0, le=2**32 - 1)
    samples: int = Field(64, ge=1, le=MAX_SAMPLES, description="images in LoadGen's sample library")


class FolderInputs(StrictModel):
    """Images from a folder, passed through the model's own preprocessing."""

    source: Literal["folder"]
    path: str = Field(min_length=1, description="folder of .jpg/.jpeg/.png images, relative to the scenario file",
                      json_schema_extra={"not": {"pattern": "^~(/|$)"}})  # as `_no_home` refuses it
    samples: int = Field(
        64, ge=1, le=MAX_SAMPLES,
        description="at most this many images, in name order (in the labels file's order when it is given)",
    )
    labels: str | None = Field(
        None, min_length=1, max_length=255,
        description="a file in the folder with one '<image file> <class index>' per line (ImageNet's "
        "val_map.txt): the images, in LoadGen's sample order, and their classes for the accuracy run",
    )

    @field_validator("path")
    @classmethod
    def _no_home(cls, path: str) -> str:
        # `path: ~/images` was looked for as a folder named `~` beside the scenario file, and refused
        # as "<scenario's folder>/~/images is not a directory", at no line of the file
        if path == "~" or path.startswith("~/"):
            raise ValueError(f"{path!r}: a ~ is not expanded in a scenario file (the folder would be one named ~ "
                             "beside it); give the path itself, absolute or relative to the scenario file")
        return path

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


#: OVERRIDABLE's keys, as a type.
OverridableKey = Literal["min_duration_s", "max_duration_s", "min_query_count", "max_query_count"]


class LoadGenSettings(StrictModel):
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
    # Not dumped: `resolved` writes it, from the settings given, where a run stores the scenario.
    overrides: dict[OverridableKey, Annotated[float, Field(gt=0, le=1e9)]] | None = Field(
        None, exclude=True,
        description="the form a bundle stores (bundle.json's scenario, every default filled in): which of the "
        "settings above stand over mlperf.conf (profile mlperf), each at its value; those it does not name are "
        "mlperf.conf's, so a stored scenario run as a file is the same run",
    )

    @model_validator(mode="before")
    @classmethod
    def _stored_form(cls, given: Any) -> Any:
        """A stored scenario fills in every LoadGen setting, those mlperf.conf gives too: its
        `overrides` names the ones the file gave. The others are left out again, as the file left
        them, so they stay mlperf.conf's (run as given, `min_duration_s: 10.0` became an override
        and the official run an unofficial one); one that is not at its default was given and is refused."""
        if not isinstance(given, dict) or not isinstance(given.get("overrides"), dict):
            return given
        named = given["overrides"]
        for key in OVERRIDABLE:
            default = cls.model_fields[key].default
            if key in given and key not in named and given[key] != default:
                raise ValueError(f"{key} {given[key]} is not at its default ({default}) and overrides does not "
                                 "name it: name it there, or leave it out to keep mlperf.conf's")
        return {key: value for key, value in given.items() if key in named or key not in OVERRIDABLE}

    def user_conf(self) -> dict[str, float | int]:
        """What stands over mlperf.conf under the mlperf profile (user.conf): each LoadGen setting of
        OVERRIDABLE the file gave a value. A null (no maximum, or the scenario's own minimum) is one
        the file left to mlperf.conf: user.conf has no word for it, and a cell's overrides no room."""
        given = ((key, getattr(self, key)) for key in sorted(OVERRIDABLE) if key in self.model_fields_set)
        return {key: value for key, value in given if value is not None}

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
        if self.overrides is not None:
            if self.profile != "mlperf":
                raise ValueError("overrides: only the mlperf profile overrides mlperf.conf")
            for key, value in sorted(self.overrides.items()):
                if getattr(self, key) != value:
                    raise ValueError(f"overrides.{key} is {value:g} where {key} is {getattr(self, key)}: "
                                     "a stored scenario's overrides are its settings' values")
        return self


#: The most rounds a cell may have (`timing.rounds`, `fusionbench run --rounds`).
MAX_ROUNDS = 20


class TimingSettings(StrictModel):
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


class PassSettings(StrictModel):
    """Calls made in the untimed memory, profile and memory-traffic passes."""

    memory_iters: int = Field(5, ge=1, le=10_000)
    profile_iters: int = Field(
        3, ge=1, le=10_000,
        description="inferences the profile pass profiles: on a GPU the trace its kernels are counted and timed over, "
        "on the CPU those the share in kernels and each kernel's part of it are medians over",
    )
    traffic_iters: int = Field(
        2, ge=0, le=1_000,
        description="inferences whose DRAM bytes a CUDA cell reads from the GPU's hardware counters "
        "(harness/measure/memory_traffic.py); 0 turns the pass off",
    )


class Limits(StrictModel):
    """Limits each cell's worker process runs under."""

    cell_timeout_s: float = Field(900.0, gt=0, le=7 * 86400)
    memory_limit_mib: int | None = Field(
        None, ge=64, le=16 << 20,
        description="resident memory (RSS) the worker and its children may use, MiB; over it the cell "
        "fails (default: no limit)",
    )
