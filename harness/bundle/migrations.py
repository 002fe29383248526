"""Schema versions of result bundles, and the explicit steps that upgrade older ones.

Every reader goes through `upgraded_header` and `upgraded_cell`: a record of the current version
passes unchanged, an older one is upgraded one version at a time by the functions below (never
guessed), a newer one is refused with `SchemaVersionError`, and anything else (a missing,
non-integer or unknown version) is a `BundleError`. Records are copied, never changed in place.

History:
- v1 (FusionBench 0.1, first release): bundle.json, cells/<id>.json, MANIFEST.sha256.
- v2: bundle.json gains `state` (running, interrupted, complete) and `artifact_cache`; a cell's
  `metrics.kernels` gains `backend_figures`; the bundle may hold `report.md` and `report.html`.
  A v1 header upgrades with `state: "unrecorded"` (v1 did not say whether the run finished) and
  `artifact_cache: null`; a v1 cell with kernel figures gains `backend_figures: {}`.
- v3: a measured cell records the math it ran with (`metrics.math_mode`, harness/precision.py).
  A v2 cell upgrades with what is known of it: on a CPU, fp32 ran IEEE fp32 (torch's, ONNX
  Runtime's and TVM's CPU default, which v2 never changed); fp16 and bf16 ran their dtype's math;
  an fp32 cell on a GPU is `unrecorded` (cuDNN allowed TF32 by default and v2 did not set it), so
  `compare` will not pair it with a v3 cell.
- v4: the cell record and the header are typed (harness/bundle/cell_record.py, header_record.py)
  and their schemas generated from them:
  the whole config is checked (every setting a cell records, as harness/scenario/cell_config.py
  types it), and the system under test's own figures, the accuracy run and compliance tests are
  typed. A measured cell gains `metrics.first_call_ratio` (the first call's time over the steady
  median: what compiling or warming up costs the first inference). A v3 record upgrades unchanged:
  it never measured that ratio, so it has none.
- v5: `system.container` gains `layers` (the image's layer digests, its diff_ids in order) and
  `base` (where its base came from: Debian by mmdebstrap and the base lock's hash, or the pinned
  registry image), so `compare` can say whether two runs' software stacks differ and in which
  layer. A v4 header upgrades unchanged: it recorded neither, so both are absent (null); cells
  are unchanged.
- v6: a cell's timing may have rounds (`config.timing.rounds`, harness/run/rounds.py): fresh
  worker processes that time it again, a fusion pair's alternating on and off, and the cell records
  each round (`metrics.rounds`: round, status, median, CV, samples, prepare cache, seconds, log;
  round 1 is its own `device_time`), from which the fusion speedup's interval and verdict come
  (harness/stats/intervals.py). A v5 record upgrades unchanged: with no rounds recorded a cell reads as
  one round, its device timing; the header is unchanged.
- v7: a backend may search for faster code before it compiles (`Backend.tune`, harness/contract.py:
  TVM's MetaSchedule on CPU), timed as its own phase (`tune`) and recorded as `metrics.tuning`
  (whether it tuned and why not, the tuner, trials per task, tasks, trials, the schedule
  database's hash, cold or warm, `tuning_s`), never in `prepare_s`. A v6 record upgrades unchanged:
  nothing was tuned then, and its `tuning` is absent (null).
- v8: rounds say how a cell was measured, not what it is: a cell's id no longer hashes
  `config.timing.rounds` (harness/scenario/cells.py `cell_id`), so a run of three rounds and one of
  one pair cell by cell in `compare`; each further round keeps its timed samples
  (`metrics.rounds[].samples_ns`), from which `validate` derives its median, CV and count again.
  A v7 record upgrades unchanged: its id hashed the rounds (validate checks it so), and its further
  rounds keep no samples (their medians are taken as recorded).
- v9: a measured cell records the DRAM bytes one inference reads and writes, from the GPU's hardware
  counters (`metrics.memory_traffic`, harness/measure/memory_traffic.py), or why none were read (a
  CPU cell, no Nsight Compute, counters refused): never a zero figure. `config.passes` records
  `traffic_iters` (absent: v8 had none), which the cell's id leaves out (harness/scenario/cells.py
  `cell_id`): a v9 cell has a v8 cell's id, and `compare` pairs them. The roofline's `weight_bytes`
  count the weights the forward reads. A v8 record upgrades unchanged: it never read the counters,
  so its `memory_traffic` is absent (null), which says nothing about the traffic.
- v10: bundle.json records `inputs_sha256`, the SHA-256 of what the cells read from a scenario's
  input folder (its labels file and the images they read, names and bytes), so that a resume whose
  folder now holds other images is refused. A v9 header upgrades unchanged: its `inputs_sha256`
  is absent (null), which says nothing of its images (a v9 bundle is read, not resumed); cells are
  unchanged.
- v11: a CPU cell's `metrics.kernels` records each kind of kernel's calls and time per inference
  (`by_kind`: the operator type its backend's profiler names, else the kernel's name without the
  numbers a compiler numbers its kernels by, harness/measure/kernel_kinds.py) and how the kinds were
  named (`kind_method`), from which a report says where a fusion pair's kernel time moved. A v10
  record upgrades unchanged: it kept no kinds, so `by_kind` is empty and `kind_method` absent
  (null), and its pairs say nothing of kinds; the header is unchanged. GPU cells fill the same
  fields from 2026-12-02 on, with no new version (the same shape; one without them says nothing).
- v12: the fields that v11 records gained after v11's first bundles, now part of the version, so
  that a v12 record that lacks one is read as the version says. A valid cell whose backend computes
  the model records the second correctness check, on the timed callable after its last timed call
  (`metrics.correctness.after_timing`), and each check the samples it compared (`samples`);
  `validate` finds a v12 valid cell without `after_timing` a problem. A machine's CPU records its
  identity and vector extensions (`cpu.identity`, `vector_extensions`), a node its machine's boot
  (`boot_id`), and the roofline's peaks their spread over the runs (`peaks.spread`). A v11
  record upgrades unchanged: written before some of these or after, it may lack any of them, which
  says nothing.
"""

from __future__ import annotations

from typing import Any, Callable

from harness.errors import BundleError, SchemaVersionError

SCHEMA_VERSION = 12
OLDEST_READABLE = 1

Step = Callable[[dict[str, Any]], dict[str, Any]]


def _header_v1_to_v2(header: dict[str, Any]) -> dict[str, Any]:
    header.setdefault("artifact_cache", None)
    header.setdefault("state", "unrecorded")
    return header


def _cell_v1_to_v2(cell: dict[str, Any]) -> dict[str, Any]:
    kernels = (cell.get("metrics") or {}).get("kernels")
    if isinstance(kernels, dict):
        kernels.setdefault("backend_figures", {})
    return cell


def _cell_v2_to_v3(cell: dict[str, Any]) -> dict[str, Any]:
    metrics = cell.get("metrics")
    config = cell.get("config") or {}
    if isinstance(metrics, dict) and metrics.get("correctness") is not None and "math_mode" not in metrics:
        dtype, device = config.get("dtype"), config.get("device")
        if dtype in ("fp16", "bf16"):
            effective = dtype
        elif device == "cpu":
            effective = "ieee"
        else:
            effective = "unrecorded"
        metrics["math_mode"] = {"requested": None, "effective": effective, "problems": [],
                                "note": "not recorded by schema v2; inferred from the device and dtype on upgrade"}
    return cell


def _unchanged(record: dict[str, Any]) -> dict[str, Any]:
    return record


# HEADER_STEPS[n] turns a version-n record into a version-(n+1) one.
HEADER_STEPS: dict[int, Step] = {1: _header_v1_to_v2, 2: _unchanged, 3: _unchanged, 4: _unchanged, 5: _unchanged,
                                  6: _unchanged, 7: _unchanged, 8: _unchanged, 9: _unchanged, 10: _unchanged, 11: _unchanged}
CELL_STEPS: dict[int, Step] = {1: _cell_v1_to_v2, 2: _cell_v2_to_v3, 3: _unchanged, 4: _unchanged, 5: _unchanged,
                                6: _unchanged, 7: _unchanged, 8: _unchanged, 9: _unchanged, 10: _unchanged, 11: _unchanged}


def record_version(record: Any, where: str) -> int:
    """The `schema_version` of a bundle record, checked to be one this harness reads."""
    version = record.get("schema_version") if isinstance(record, dict) else None
    if isinstance(version, bool) or not isinstance(version, int):
        raise BundleError(f"{where}: no integer schema_version")
    if version > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"{where}: schema version {version} is newer than this harness reads ({SCHEMA_VERSION}); "
            "upgrade FusionBench"
        )
    if version < OLDEST_READABLE:
        raise BundleError(f"{where}: unknown schema version {version} (this harness reads {OLDEST_READABLE}-{SCHEMA_VERSION})")
    return version


def _copied(value: Any) -> Any:
    """A copy of a record read from JSON, no object shared: its dicts and lists are new, the rest
    (strings, numbers, booleans, None) is immutable. A third of copy.deepcopy's time, which keeps a
    memo of every object for the cycles and shared objects JSON cannot hold."""
    if isinstance(value, dict):
        return {key: _copied(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copied(item) for item in value]
    return value


def _upgraded(record: Any, steps: dict[int, Step], where: str) -> dict[str, Any]:
    version = record_version(record, where)
    upgraded = _copied(record)
    while version < SCHEMA_VERSION:
        upgraded = steps[version](upgraded)
        version += 1
        upgraded["schema_version"] = version
    return dict(upgraded)


def upgraded_header(header: Any) -> dict[str, Any]:
    return _upgraded(header, HEADER_STEPS, "bundle.json")


def upgraded_cell(cell: Any, where: str) -> dict[str, Any]:
    return _upgraded(cell, CELL_STEPS, where)
