"""JSON Schemas of a result bundle's files, one per file type and schema version.

`schema("bundle", 2)` is the schema of a v2 `bundle.json`, `schema("cell", 2)` of a v2
`cells/<id>.json`. The current version's schemas are generated from the typed records every
reader uses (harness/bundle/cell_record.py `CellRecord`, harness/bundle/header_record.py
`BundleHeader`) and checked in as docs/schemas/. The versions before it describe the files older
harnesses wrote: v1 to v3 each built from the one before by explicit additions, the way
`harness.bundle.migrations` upgrades records, and v4 to v11 as they were generated when the next
version replaced them (harness/bundle/frozen/). Ranges are what "sane" means in `fusionbench validate`: a figure
outside them (a negative latency, a 10^30-byte peak) is a problem, whatever produced it.
`fusionbench schema --file cell --version 2` prints one.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, get_args

from harness.allocator import Allocator
from harness.bundle.cell_record import (
    BYTES_MAX,
    COUNT_MAX,
    FLOPS_MAX,
    HEX16,
    INNER_PATH,
    NS_MAX,
    RATE_MAX,
    SECONDS_MAX,
    CellRecord,
)
from harness.bundle.header_record import BundleHeader
from harness.bundle.migrations import OLDEST_READABLE, SCHEMA_VERSION
from harness.bundle.statuses import STATES, STATUSES
from harness.mlperf.compliance import TESTS
from harness.mlperf.user_conf import OVERRIDABLE
from harness.scenario.rules import SCENARIOS

KINDS = ("bundle", "cell")
FROZEN = Path(__file__).with_name("frozen")

def _num(maximum: float, minimum: float = 0) -> dict[str, Any]:
    return {"type": "number", "minimum": minimum, "maximum": maximum}


def _int(maximum: int, minimum: int = 0) -> dict[str, Any]:
    return {"type": "integer", "minimum": minimum, "maximum": maximum}


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [schema, {"type": "null"}]}


def _obj(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    # Additional properties are allowed: readers ignore fields they do not know
    # (docs/result_schema.md), so a bundle written by a newer harness still validates here.
    return {"type": "object", "properties": properties, "required": list(required)}


_STRINGS = {"type": "array", "items": {"type": "string"}}
_TEXT = _nullable({"type": "string"})


def _system() -> dict[str, Any]:
    """The machine a run probed (harness/run/system.py), typed wherever a reader uses a field:
    whatever validate accepts here, the report, compare and pack can show."""
    count = _nullable(_int(COUNT_MAX))
    gpu = _obj({"index": _int(1024), "name": {"type": "string"}, "memory_bytes": _nullable(_int(BYTES_MAX)),
                "sm_clock_max_mhz": _nullable(_num(10**6))})
    return _obj({
        "cpu": _obj({"model": _TEXT, "identity": _TEXT,
                     "vector_extensions": _nullable(_STRINGS),
                     "architecture": _TEXT, "logical_cores": count, "physical_cores": count,
                     "usable_cores": count, "memory_bytes": _nullable(_int(BYTES_MAX))}),
        "gpu": _obj({"available": {"type": "boolean"}, "reason": {"type": "string"}, "driver": _TEXT,
                     "gpus": {"type": "array", "items": gpu}}),
        "os": _obj({"platform": _TEXT, "kernel": _TEXT, "system": _TEXT}),
        "python": _obj({"version": _TEXT, "implementation": _TEXT, "executable": _TEXT}),
        "torch": _obj({"installed": {"type": "boolean"}, "version": _TEXT, "cuda_build": _TEXT,
                       "cuda_available": {"type": "boolean"}, "cudnn": {"type": ["string", "integer", "null"]},
                       "devices": {"type": "array", "items": _obj({"name": {"type": "string"},
                                                                    "capability": {"type": "string"}})}}),
        "container": _obj({"in_container": {"type": "boolean"}, "image": _TEXT, "image_id": _TEXT, "image_digest": _TEXT}),
        "packages": {"type": "object", "additionalProperties": {"type": "string"}},
        "machine_noise": _nullable(_obj({"compute_cv": _num(1e6), "memory_cv": _num(1e6), "warning": _TEXT,
                                         "method": {"type": "string"}, "pinned_spread": _nullable(_num(1e6)),
                                         "core_chunk_ms": _nullable({"type": "object",
                                                                     "additionalProperties": _num(1e9)}),
                                         "cross_core_ns": _nullable({"type": "array", "items": _num(1e9),
                                                                     "minItems": 3, "maxItems": 3})})),
        "peaks": _nullable({"type": "object"}),
    })


def _bundle_v1() -> dict[str, Any]:
    return _obj(
        {
            "schema_version": {"const": 1},
            "run_id": {"type": "string", "pattern": r"^[A-Za-z0-9_-]{1,100}$"},
            "created": {"type": "string"},
            "harness": _obj(
                {"version": {"type": "string"}, "git_sha": _nullable({"type": "string"}),
                 "git_dirty": _nullable({"type": "boolean"})},
                ("version",),
            ),
            "command": _STRINGS,
            "scenario_file": _nullable({"type": "string"}),
            "input_folder": _nullable({"type": "string"}),
            "scenario": {"type": "object"},
            "scenario_sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
            "device": {"enum": ["cpu", "cuda"]},
            "only": {"type": "object"},
            "system": _system(),
            "backends": {
                "type": "object",
                "additionalProperties": _obj(
                    {"available": {"type": "boolean"}, "reason": {"type": "string"},
                     "versions": {"type": "object", "additionalProperties": {"type": "string"}}},
                    ("available",),
                ),
            },
            "cells": {
                "type": "array",
                "items": _obj({"id": {"type": "string", "pattern": HEX16}, "label": {"type": "string"}}, ("id", "label")),
            },
            "resumed": _STRINGS,
        },
        ("schema_version", "run_id", "created", "harness", "scenario", "scenario_sha256", "device", "system",
         "backends", "cells"),
    )


def _bundle_v2() -> dict[str, Any]:
    schema = _bundle_v1()
    schema["properties"]["schema_version"] = {"const": 2}
    schema["properties"]["state"] = {"enum": list(STATES)}
    schema["properties"]["artifact_cache"] = _nullable({"type": "string"})
    schema["required"] += ["state"]
    return schema


def _metrics_v1() -> dict[str, Any]:
    summary = _obj(
        {"n": _int(COUNT_MAX), "median_ns": _num(NS_MAX), "p90_ns": _num(NS_MAX), "p99_ns": _num(NS_MAX),
         "mean_ns": _num(NS_MAX), "stdev_ns": _num(NS_MAX), "cv": _num(1e6), "min_ns": _num(NS_MAX),
         "max_ns": _num(NS_MAX), "noisy": {"type": "boolean"}},
        ("n", "median_ns"),
    )
    bytes_or_null = _nullable(_int(BYTES_MAX))
    metric = _obj({"name": {"type": "string"}, "unit": {"enum": ["ns", "samples/s"]},
                   "value": _nullable(_num(max(NS_MAX, RATE_MAX)))}, ("name", "unit", "value"))
    return _obj({
        "prepare_s": _num(SECONDS_MAX),
        "prepare_cache": {"enum": ["cold", "warm", "none", "unknown"]},
        "first_call_s": _num(SECONDS_MAX),
        "correctness": _obj(
            {"ok": {"type": "boolean"}, "reason": {"type": "string"},
             "max_abs_error": _nullable(_num(1e300)), "cosine_similarity": _nullable(_num(1.0001, -1.0001))},
            ("ok",),
        ),
        "device_time": _obj(
            {"method": {"type": "string"}, "samples_ns": {"type": "array", "items": _int(NS_MAX), "maxItems": COUNT_MAX},
             "warmup_samples_ns": {"type": "array", "items": _int(NS_MAX)},
             "host_samples_ns": _nullable({"type": "array", "items": _int(NS_MAX)}),
             "summary": summary},
            ("samples_ns", "summary"),
        ),
        "loadgen": _obj(
            {"scenario": {"enum": list(SCENARIOS)},
             "validity": {"enum": ["VALID", "INVALID", "MISSING"]},
             "invalid_reasons": _STRINGS,
             "metric": metric,
             "log_dir": {"type": "string", "pattern": INNER_PATH},
             "logs": {"type": "array", "items": {"type": "string", "pattern": r"^[A-Za-z0-9_.-]+$"}},
             "attempts": {"type": "array"},
             "results": {"type": "object"}, "settings": {"type": "object"}},
            ("scenario", "validity", "metric", "log_dir"),
        ),
        "memory": _obj({
            key: bytes_or_null for key in (
                "rss_baseline_bytes", "peak_rss_bytes", "peak_rss_delta_bytes", "inference_peak_rss_bytes",
                "torch_max_allocated_bytes", "torch_max_reserved_bytes", "nvml_process_peak_bytes",
                "nvml_device_used_peak_bytes", "nvml_device_used_delta_bytes",
            )
        } | {"inference_peak_rss_delta_bytes": _nullable(_int(BYTES_MAX, -BYTES_MAX))}),
        "kernels": _obj(
            {"kernels_per_inference": _nullable(_num(COUNT_MAX)), "kernel_count_method": {"type": "string"}},
            ("kernels_per_inference", "kernel_count_method"),
        ),
        "fusion_report": _obj(
            {"source": {"type": "string"}, "approximate": {"type": "boolean"}, "notes": {"type": "string"},
             "kernel_count": _int(COUNT_MAX), "fusion_count": _int(COUNT_MAX),
             "kernels_by_class": {"type": "object", "additionalProperties": _int(COUNT_MAX)},
             "kernels": {"type": "array", "items": _obj(
                 {"kernel": {"type": "string"}, "ops": _STRINGS,
                  "class": {"enum": ["tensor+element+tensor", "tensor+element", "element", "single"]}},
                 ("kernel", "ops", "class"),
             )}},
            ("kernel_count", "fusion_count", "kernels"),
        ),
        # Written since schema v3; typed in every version, since a record may claim any of them.
        "accuracy": _accuracy(),
        "compliance": _compliance(metric),
    })


def _cell_v1() -> dict[str, Any]:
    config = _obj(
        {"model": _obj({"name": {"type": "string"}}, ("name",)), "backend": {"type": "string"},
         "variant": _obj({"fusion": {"enum": ["on", "off"]}, "options": {"type": "object"}}, ("fusion", "options")),
         "scenario": {"enum": list(SCENARIOS)}, "device": {"enum": ["cpu", "cuda"]}, "dtype": {"type": "string"},
         "batch": _int(1 << 20, 1), "allocator": {"enum": list(get_args(Allocator))}, "loadgen": _loadgen_config()},
        ("model", "backend", "variant", "scenario", "device", "dtype", "batch"),
    )
    return _obj(
        {
            "schema_version": {"const": 1},
            "id": {"type": "string", "pattern": HEX16},
            "label": {"type": "string"},
            "status": {"enum": list(STATUSES)},
            "reasons": _STRINGS,
            "config": config,
            "started": {"type": "string"},
            "finished": {"type": "string"},
            "wall_s": _num(SECONDS_MAX),
            "log": {"type": "string", "pattern": INNER_PATH},
            "log_tail": {"type": "string"},
            "environment": {"type": "object"},
            "phases_s": {"type": "object", "additionalProperties": _num(SECONDS_MAX)},
            "metrics": _metrics_v1(),
        },
        ("schema_version", "id", "label", "status", "reasons", "config", "metrics"),
    )


def _cell_v2() -> dict[str, Any]:
    schema = _cell_v1()
    schema["properties"]["schema_version"] = {"const": 2}
    metrics = schema["properties"]["metrics"]["properties"]
    metrics["kernels"]["properties"]["backend_figures"] = {"type": "object"}
    metrics["kernels"]["required"] += ["backend_figures"]
    # Optional in v2: written by harnesses that measure them, absent from older v2 bundles.
    metrics["roofline"] = _obj(
        {"flops": _int(FLOPS_MAX), "weight_bytes": _int(BYTES_MAX), "input_bytes": _int(BYTES_MAX),
         "output_bytes": _int(BYTES_MAX), "compulsory_bytes": _int(BYTES_MAX),
         "peak_flops_per_s": _num(FLOPS_MAX), "peak_bytes_per_s": _num(FLOPS_MAX),
         "time_bound_ns": _num(NS_MAX), "measured_ns": _num(NS_MAX), "fraction_of_bound": _num(1e6),
         "bound_by": {"enum": ["compute", "memory"]}},
        ("flops", "compulsory_bytes"),
    )
    report = metrics["fusion_report"]["properties"]
    report["fusions_by_class"] = {"type": "object", "additionalProperties": _int(COUNT_MAX)}
    report["fusions_by_mapping"] = {"type": "object", "additionalProperties": _int(COUNT_MAX)}
    return schema


def _bundle_v3() -> dict[str, Any]:
    schema = _bundle_v2()
    schema["properties"]["schema_version"] = {"const": 3}
    return schema


def _cell_v3() -> dict[str, Any]:
    schema = _cell_v2()
    schema["properties"]["schema_version"] = {"const": 3}
    metrics = schema["properties"]["metrics"]["properties"]
    metrics["math_mode"] = _obj(
        {"requested": _nullable({"enum": ["ieee", "tf32", "fp16", "bf16"]}),
         "effective": {"enum": ["ieee", "tf32", "mixed", "fp16", "bf16", "unrecorded"]},
         "problems": _STRINGS, "torch": {"type": "object"}, "backend": {"type": "object"}},
        ("effective", "problems"),
    )
    # Optional in v3 (cells that failed before a pass have none of these).
    metrics["latency_agreement"] = _obj(
        {"gap": _nullable(_num(1e6, -1.0)), "within": _nullable({"type": "boolean"}), "why": {"type": "string"},
         "loadgen_ns_per_batch": _num(NS_MAX), "device_ns_per_batch": _num(NS_MAX),
         "device_statistic": {"enum": ["median", "mean"]}, "limit": _num(1.0)},
        ("gap", "within", "why"),
    )
    metrics["time_split"] = _obj(
        {"wall_ns": _num(NS_MAX), "kernel_ns": _nullable(_num(NS_MAX)), "overhead_ns": _nullable(_num(NS_MAX)),
         "kernel_share": _num(1.0), "method": {"type": "string"}},
        ("wall_ns", "kernel_ns", "method"),
    )
    metrics["rewrites"] = {"type": "object"}
    timing = metrics["device_time"]["properties"]
    timing["warmup"] = _obj({"calls": _int(COUNT_MAX), "steady": {"type": "boolean"}, "seconds": _num(SECONDS_MAX)},
                            ("calls", "steady"))
    timing["repetitions"] = {"type": "array", "items": _obj(
        {"when": {"type": "string"}, "n": _int(COUNT_MAX, 1), "median_ns": _num(NS_MAX), "cv": _num(1e6),
         "beside": {"type": "object"}}, ("when", "n", "median_ns"))}
    timing["repetition_spread"] = _num(1e6)
    schema["properties"]["warnings"] = _STRINGS
    return schema


def _loadgen_config() -> dict[str, Any]:
    """A cell's LoadGen settings, typed where validate and pack act on them (the MLPerf profile,
    its accuracy run, compliance tests and overrides of mlperf.conf)."""
    overrides = {"type": "object", "propertyNames": {"enum": list(OVERRIDABLE)}, "additionalProperties": _num(1e9)}
    return _obj({"profile": {"enum": ["dev", "mlperf"]}, "accuracy": {"type": "boolean"},
                 "compliance": {"type": "array", "items": {"enum": list(TESTS)}, "uniqueItems": True},
                 "overrides": overrides})


def _accuracy() -> dict[str, Any]:
    """A cell's accuracy run (harness/measure/loadgen.py run_accuracy): its figures and the folder
    of its logs (harness/bundle/mlperf_check.py re-derives the figures from them)."""
    return _obj({"top1_percent": _num(100.0), "good": _int(COUNT_MAX), "total": _int(COUNT_MAX, 1),
                 "log_dir": {"type": "string", "pattern": INNER_PATH},
                 "labels": {"type": "string", "pattern": r"^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,99}$"}},
                ("top1_percent", "good", "total", "log_dir"))


def _compliance(metric: dict[str, Any]) -> dict[str, Any]:
    """A cell's compliance tests, by name (a key becomes a folder of the submission: only the
    tests this harness runs), each with its verdicts and the folder of its logs."""
    checks = {"type": "object", "properties": {"performance": {"type": "boolean"}, "accuracy": {"type": "boolean"}},
              "required": ["performance"], "additionalProperties": False}
    outcome = _obj({"passed": {"type": "boolean"}, "checks": checks, "validity": {"enum": ["VALID", "INVALID", "MISSING"]},
                    "metric": metric, "log_dir": {"type": "string", "pattern": INNER_PATH}},
                   ("passed", "checks", "validity", "metric", "log_dir"))
    return {"type": "object", "propertyNames": {"enum": list(TESTS)}, "additionalProperties": outcome}


def _frozen(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((FROZEN / name).read_text())
    return loaded


def _bundle_v4() -> dict[str, Any]:
    """As generated from the typed header when v5 replaced it."""
    return _frozen("bundle-v4.schema.json")


def _cell_v4() -> dict[str, Any]:
    """As generated from the typed cell record when v5 replaced it."""
    return _frozen("cell-v4.schema.json")


def _bundle_v5() -> dict[str, Any]:
    """As generated from the typed header when v6 replaced it."""
    return _frozen("bundle-v5.schema.json")


def _cell_v5() -> dict[str, Any]:
    """As generated from the typed cell record when v6 replaced it."""
    return _frozen("cell-v5.schema.json")


def _bundle_v6() -> dict[str, Any]:
    """As generated from the typed header when v7 replaced it."""
    return _frozen("bundle-v6.schema.json")


def _cell_v6() -> dict[str, Any]:
    """As generated from the typed cell record when v7 replaced it."""
    return _frozen("cell-v6.schema.json")


def _bundle_v7() -> dict[str, Any]:
    """As generated from the typed header when v8 replaced it."""
    return _frozen("bundle-v7.schema.json")


def _cell_v7() -> dict[str, Any]:
    """As generated from the typed cell record when v8 replaced it."""
    return _frozen("cell-v7.schema.json")


def _bundle_v8() -> dict[str, Any]:
    """As generated from the typed header when v9 replaced it."""
    return _frozen("bundle-v8.schema.json")


def _cell_v8() -> dict[str, Any]:
    """As generated from the typed cell record when v9 replaced it."""
    return _frozen("cell-v8.schema.json")


def _bundle_v9() -> dict[str, Any]:
    """As generated from the typed header when v10 replaced it."""
    return _frozen("bundle-v9.schema.json")


def _cell_v9() -> dict[str, Any]:
    """As generated from the typed cell record when v10 replaced it."""
    return _frozen("cell-v9.schema.json")


def _bundle_v10() -> dict[str, Any]:
    """As generated from the typed header when v11 replaced it."""
    return _frozen("bundle-v10.schema.json")


def _cell_v10() -> dict[str, Any]:
    """As generated from the typed cell record when v11 replaced it."""
    return _frozen("cell-v10.schema.json")


def _bundle_v11() -> dict[str, Any]:
    """As generated from the typed header when v12 replaced it."""
    return _frozen("bundle-v11.schema.json")


def _cell_v11() -> dict[str, Any]:
    """As generated from the typed cell record when v12 replaced it."""
    return _frozen("cell-v11.schema.json")


def _bundle_v12() -> dict[str, Any]:
    """Generated from the typed header (harness/bundle/header_record.py)."""
    return BundleHeader.model_json_schema(mode="validation")


def _cell_v12() -> dict[str, Any]:
    """Generated from the typed record every reader uses: what validate accepts, they can read."""
    return CellRecord.model_json_schema(mode="validation")


_BUILDERS = {("bundle", 1): _bundle_v1, ("bundle", 2): _bundle_v2, ("bundle", 3): _bundle_v3, ("bundle", 4): _bundle_v4,
             ("bundle", 5): _bundle_v5, ("bundle", 6): _bundle_v6, ("bundle", 7): _bundle_v7, ("bundle", 8): _bundle_v8,
             ("bundle", 9): _bundle_v9, ("bundle", 10): _bundle_v10, ("bundle", 11): _bundle_v11,
             ("bundle", 12): _bundle_v12,
             ("cell", 1): _cell_v1, ("cell", 2): _cell_v2, ("cell", 3): _cell_v3, ("cell", 4): _cell_v4, ("cell", 5): _cell_v5,
             ("cell", 6): _cell_v6, ("cell", 7): _cell_v7, ("cell", 8): _cell_v8, ("cell", 9): _cell_v9,
             ("cell", 10): _cell_v10, ("cell", 11): _cell_v11, ("cell", 12): _cell_v12}


def schema(kind: str, version: int = SCHEMA_VERSION) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of `kind` ("bundle" or "cell") at `version`."""
    if kind not in KINDS:
        raise ValueError(f"no schema for {kind!r}; kinds: {', '.join(KINDS)}")
    if not OLDEST_READABLE <= version <= SCHEMA_VERSION:
        raise ValueError(f"no schema version {version}; versions: {OLDEST_READABLE}-{SCHEMA_VERSION}")
    if (kind, version) not in _BUILDERS:  # a version bumped without its builders
        raise ValueError(f"no {kind} schema of version {version} in harness/bundle/schema.py _BUILDERS "
                         "(docs/adding_a_metric.md, Bumping the schema version)")
    built = copy.deepcopy(_BUILDERS[(kind, version)]())
    title = "bundle.json" if kind == "bundle" else "cells/<cell-id>.json"
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": f"FusionBench {title}, schema version {version}", **built}


#: The scalar types an array's items may be checked as a whole for, each as the JSON Schema's own
#: `type` keyword has it (a bool is not a number), or stricter: a float such as 1.0, which the
#: keyword takes for an integer, is left to it.
_SCALARS: dict[str, Callable[[Any], bool]] = {
    "integer": lambda item: type(item) is int,
    "number": lambda item: type(item) in (int, float),
    "string": lambda item: type(item) is str,
}


def _plain_items(items: Any) -> Callable[[Any], bool] | None:
    """For an `items` schema of one scalar type with at most a minimum and a maximum, a test of one
    item that passes only where the schema passes it; None for any other schema."""
    if not isinstance(items, dict) or not set(items) <= {"type", "minimum", "maximum"}:
        return None
    is_type, low, high = _SCALARS.get(str(items.get("type"))), items.get("minimum"), items.get("maximum")
    if is_type is None or (items["type"] == "string" and len(items) > 1):  # bounds judge numbers only
        return None
    return lambda item: is_type(item) and (low is None or item >= low) and (high is None or item <= high)


#: The keywords whose value maps names to schemas, and those whose value is data, not a schema.
_NAMED_SCHEMAS = ("properties", "patternProperties", "dependentSchemas")
_DATA = ("enum", "const", "default", "examples")


def _inlined(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` with every `{"$ref": "#/$defs/NAME"}` replaced by that definition, and no `$defs`:
    the same rules, which jsonschema checks without resolving a reference at each of a record's
    nested objects (a fifth of its time on a cell). A reference with siblings, to anywhere else or
    to itself (a recursive schema) leaves the schema as it is."""
    definitions = schema.get("$defs", {})

    def inline(node: Any, within: tuple[str, ...]) -> Any:
        if isinstance(node, list):
            return [inline(item, within) for item in node]
        if not isinstance(node, dict):
            return node
        reference = node.get("$ref")
        if reference is not None:
            prefix = "#/$defs/"
            name = reference[len(prefix):] if isinstance(reference, str) and reference.startswith(prefix) else ""
            if len(node) > 1 or name not in definitions or name in within:
                raise LookupError(reference)
            return inline(definitions[name], (*within, name))
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key == "$defs":
                continue
            if key in _NAMED_SCHEMAS and isinstance(value, dict):
                out[key] = {name: inline(inner, within) for name, inner in value.items()}
            else:
                out[key] = value if key in _DATA else inline(value, within)
        return out

    try:
        return dict(inline(schema, ()))
    except LookupError:
        return schema


@functools.cache
def _validator(kind: str, version: int) -> Any:
    """One validator per schema a process checks against: building the schema from the typed
    records and compiling it cost more than checking a record does, and validate checks every cell.
    Its `items` keyword checks an array of plain scalars (a cell's thousands of timing samples) in
    one pass, and hands the array to the keyword as jsonschema has it the moment any item might fail,
    so the problems found, and their words, are jsonschema's own: the pass took half of validate's
    time on a bundle of 14 cells. The schema it checks has its references inlined (`_inlined`)."""
    import jsonschema
    from jsonschema import validators

    every_item = jsonschema.Draft202012Validator.VALIDATORS["items"]

    def items(validator: Any, items: Any, instance: Any, parent: dict[str, Any]) -> Any:
        passes = _plain_items(items)
        if passes is not None and isinstance(instance, list) and all(map(passes, instance[len(parent.get("prefixItems", ())):])):
            return
        yield from every_item(validator, items, instance, parent)

    checker = validators.extend(jsonschema.Draft202012Validator, {"items": items})
    return checker(_inlined(schema(kind, version)))


def problems(record: Any, kind: str, version: int, where: str) -> list[str]:
    """One line per place where `record` breaks the schema, `where` first."""
    return lines_of(_validator(kind, version), record, where)


def lines_of(validator: Any, record: Any, where: str) -> list[str]:
    """`problems`' lines, by any jsonschema validator."""
    lines = []
    for error in sorted(validator.iter_errors(record), key=lambda e: list(map(str, e.absolute_path))):
        while error.context:  # a nullable record (anyOf: the record, null): say what is wrong deepest inside it
            error = max(error.context, key=lambda inner: len(inner.absolute_path))
        location = "/".join(str(part) for part in error.absolute_path) or "(top)"
        said = PATTERNS_IN_WORDS.get(error.schema.get("pattern")) if error.validator == "pattern" else None
        message = f"{str(error.instance)[:100]!r} is not {said}" if said else error.message[:200]
        lines.append(f"{where}: {location}: {message}")
    return lines


#: What a pattern of the records asks for, in words: the pattern itself said nothing to a reader.
PATTERNS_IN_WORDS = {
    INNER_PATH: "a path inside the bundle (relative, without '..', a backslash or a control character)",
    HEX16: "16 hexadecimal digits",
}
