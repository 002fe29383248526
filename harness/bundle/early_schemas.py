"""The JSON Schemas of versions 1 to 3 of a bundle's files, as the harnesses of the time wrote
them: built by hand, each version from the one before by explicit additions, the way
`harness.bundle.migrations` upgrades records (later versions are generated from the typed records,
harness/bundle/schema.py). Ranges are what "sane" means in `fusionbench validate`: a figure outside
them (a negative latency, a 10^30-byte peak) is a problem, whatever produced it.
"""

from __future__ import annotations

from typing import Any, get_args

from harness.allocator import Allocator
from harness.bundle.record_base import BYTES_MAX, COUNT_MAX, FLOPS_MAX, HEX16, INNER_PATH, NS_MAX, RATE_MAX, SECONDS_MAX
from harness.bundle.statuses import STATES, STATUSES
from harness.mlperf.compliance import TESTS
from harness.mlperf.user_conf import OVERRIDABLE
from harness.scenario.rules import SCENARIOS


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


def bundle_v1() -> dict[str, Any]:
    """The schema of a v1 `bundle.json`."""
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


def bundle_v2() -> dict[str, Any]:
    """The schema of a v2 `bundle.json`: v1's, and what v2 added."""
    schema = bundle_v1()
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


def cell_v1() -> dict[str, Any]:
    """The schema of a v1 `cells/<id>.json`."""
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


def cell_v2() -> dict[str, Any]:
    """The schema of a v2 `cells/<id>.json`: v1's, and what v2 added."""
    schema = cell_v1()
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


def bundle_v3() -> dict[str, Any]:
    """The schema of a v3 `bundle.json`: v2's, and what v3 added."""
    schema = bundle_v2()
    schema["properties"]["schema_version"] = {"const": 3}
    return schema


def cell_v3() -> dict[str, Any]:
    """The schema of a v3 `cells/<id>.json`: v2's, and what v3 added."""
    schema = cell_v2()
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
