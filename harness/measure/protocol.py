"""Everything that crosses the process boundary between the parent (harness/run) and a cell's worker
(harness/measure/worker.py), in one place, written and read as JSON files and versioned.

The parent writes a `WorkerRequest` to `request.json` in the cell's scratch directory and starts
`python -m harness.measure.worker request.json`; the worker writes `phase_file` as it moves from
phase to phase (the progress bar reads it) and leaves a `WorkerAnswer` in `answer_file`. The answer's
fields are the measured part of the cell record the bundle keeps (docs/result_schema.md). A
request or answer of another version, or with keys this version does not know, is refused: a
worker and a parent from different checkouts never half-understand each other.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal, get_args

import pydantic

from harness.bundle.cell_record import Metrics
from harness.bundle.passes_record import WorkerStart
from harness.bundle.record_base import Seconds
from harness.bundle.safe_json import parse_json
from harness.errors import BundleError
from harness.mlperf.compliance import TESTS as COMPLIANCE_TESTS
from harness.plain_text import one_line
from harness.scenario.cell_config import CellConfig

PROTOCOL_VERSION = 1

Status = Literal["valid", "invalid", "failed"]
STATUSES: tuple[Status, ...] = ("valid", "invalid", "failed")


# What a worker phase is for: the run's time line adds up the phases of each kind.
PhaseKind = Literal["start-up", "tuning", "compile", "passes", "LoadGen"]
PHASE_KINDS: tuple[PhaseKind, ...] = get_args(PhaseKind)


@dataclass(frozen=True)
class Phase:
    """A stretch of the worker's time, timed on its own: `name` is its key in `phases_s` and what the
    parent's progress bar shows while it runs."""

    name: str
    kind: PhaseKind


IMPORT = Phase("import", "start-up")
BUILD = Phase("build", "start-up")
REFERENCE = Phase("reference", "start-up")
ROOFLINE = Phase("roofline", "start-up")
TUNE = Phase("tune", "tuning")
PREPARE = Phase("prepare", "compile")
# The part of `prepare` a backend measured as its one-time work for the machine
# (`Prepared.toolchain_s`), moved out of `prepare` after it ends: recorded only where there was some.
TOOLCHAIN = Phase("toolchain", "start-up")
FIRST_CALL = Phase("first_call", "compile")
CORRECTNESS = Phase("correctness", "passes")
TIMING = Phase("timing", "passes")
LOADGEN = Phase("loadgen", "LoadGen")
TIMING_AFTER_LOADGEN = Phase("timing_after_loadgen", "passes")
# The timed callable once more, after its last timed call, on a batch of other samples than the example's.
CORRECTNESS_AFTER_TIMING = Phase("correctness_after_timing", "passes")
ACCURACY = Phase("accuracy", "LoadGen")
# A compliance test runs as a phase named after it (the scenario file's `loadgen.compliance`).
COMPLIANCE: dict[str, Phase] = {test: Phase(test, "LoadGen") for test in COMPLIANCE_TESTS}
MEMORY = Phase("memory", "passes")
PROFILE = Phase("profile", "passes")
MEMORY_TRAFFIC = Phase("memory_traffic", "passes")
# Every phase a worker times, in the order it runs them: the one list of them.
PHASES: tuple[Phase, ...] = (IMPORT, BUILD, REFERENCE, ROOFLINE, TUNE, PREPARE, TOOLCHAIN, FIRST_CALL, CORRECTNESS,
                             TIMING, LOADGEN, TIMING_AFTER_LOADGEN, CORRECTNESS_AFTER_TIMING, ACCURACY,
                             *COMPLIANCE.values(), MEMORY, PROFILE, MEMORY_TRAFFIC)

# The phases a further round runs (harness/measure/phases.py `time_a_round`): the model built and
# prepared again, its compiled artefacts from the caches round 1 filled, and the device timing; not
# LoadGen nor the other passes. What of round 1 a further round repeats (harness/run/time_budget.py).
FURTHER_ROUND_PHASES: tuple[Phase, ...] = (IMPORT, BUILD, REFERENCE, TUNE, PREPARE, TOOLCHAIN, FIRST_CALL, TIMING,
                                           CORRECTNESS_AFTER_TIMING)


class ProtocolError(ValueError):
    """A request or answer this version cannot read."""


@dataclass(frozen=True)
class WorkerRequest:
    cell: CellConfig
    artifact_dir: str  # where the cell's files go (cells/<id>/ in the bundle)
    phase_file: str = ""  # set by harness/run/isolation.py for each worker
    answer_file: str = ""
    parent_pid: int | None = None
    worker_start: WorkerStart = "fresh"  # how the parent started this worker (harness/run/isolation.py)
    input_folder: str | None = None  # `inputs: {source: folder}`: the folder, resolved
    cache_dir: str | None = None  # the artifact cache (exported graphs, engines, compiled libraries)
    peaks: dict[str, Any] | None = None  # the device's measured peaks (harness/measure/roofline.py)
    timing_round: int = 1  # above 1: a further round, which times the steady state only (harness/run/rounds.py)
    time_limit_s: float | None = None  # the parent's limit on this worker (harness/run/isolation.py)
    version: int = PROTOCOL_VERSION

    def to_json(self) -> str:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        return json.dumps({**data, "cell": self.cell.recorded()})

    @classmethod
    def from_json(cls, text: str) -> WorkerRequest:
        data = _read(text, cls)
        if not isinstance(data.get("cell"), dict) or not isinstance(data.get("artifact_dir"), str):
            raise ProtocolError("WorkerRequest: cell (an object) and artifact_dir (a path) are required")
        try:
            cell = CellConfig.model_validate(data.pop("cell"))
        except pydantic.ValidationError as exc:
            raise ProtocolError(f"WorkerRequest: the cell's config is not one this version reads: {_first_problem(exc)}") \
                from None
        return cls(cell=cell, **data)


def _first_problem(exc: pydantic.ValidationError) -> str:
    """A config's first problem on one line (`model.name: model 'acme' ... does not load: ...`), and
    how many more: the worker says it as its last line, which its cell's reason quotes
    (harness/run/last_words.py), where pydantic's message ran over several, its field on one and
    the reason on the next."""
    errors = exc.errors(include_url=False)
    first = errors[0]
    where = ".".join(str(part) for part in first["loc"]) or "the config"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{where}: {one_line(first['msg'].removeprefix('Value error, '))}{more}"


def partial_answer_path(answer_file: str | Path) -> Path:
    """Where a worker keeps its answer as it stands at the end of each phase: what the parent
    records of a worker killed before its answer (a time or memory limit, a crash)."""
    answer = Path(answer_file)
    return answer.with_name(f"{answer.stem}.partial{answer.suffix}")


@dataclass
class WorkerAnswer:
    status: Status = "failed"
    reasons: list[str] = field(default_factory=list)
    metrics: Metrics = field(default_factory=Metrics)
    environment: dict[str, Any] = field(default_factory=dict)  # versions, threads, affinity, variables
    warnings: list[str] = field(default_factory=list)  # figures to read with care (harness/measure/trust.py)
    phases_s: dict[str, float] = field(default_factory=dict)  # seconds per worker phase (`Phase.name`)
    version: int = PROTOCOL_VERSION

    def to_json(self) -> str:
        return json.dumps({**self.record(), "version": self.version})

    @classmethod
    def from_json(cls, text: str) -> WorkerAnswer:
        data = _read(text, cls)
        try:
            metrics = Metrics.model_validate(data.pop("metrics", {}))
        except pydantic.ValidationError as exc:
            raise ProtocolError(f"WorkerAnswer: metrics this version cannot read: {exc}") from None
        if data.get("status", "failed") not in STATUSES:
            raise ProtocolError(f"WorkerAnswer: status {data['status']!r} is not one of {', '.join(STATUSES)}")
        try:
            typed = _AnswerFields.model_validate({k: v for k, v in data.items() if k != "status"})
        except pydantic.ValidationError as exc:
            raise ProtocolError(f"WorkerAnswer: fields this version cannot read: {exc}") from None
        return cls(metrics=metrics, **{**data, **typed.model_dump(exclude_unset=True)})

    def record(self) -> dict[str, Any]:
        """The fields the parent merges into the cell's record."""
        record = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "version"}
        return {**record, "metrics": self.metrics.recorded()}


class _AnswerFields(pydantic.BaseModel):
    """A `WorkerAnswer`'s fields besides its status and metrics, typed as the cell record types
    them (harness/bundle/cell_record.py `CellRecord`): an answer the bundle could not hold is refused."""

    reasons: list[str] = []
    environment: dict[str, Any] = {}
    warnings: list[str] = []
    phases_s: dict[str, Seconds] = {}
    version: int = PROTOCOL_VERSION


def _read(text: str, record: type) -> dict[str, Any]:
    """`text` parsed as the bundle parses what it reads (finite numbers, no repeated key, bounded
    nesting: what a cell record holds), as an object of `record`'s version and keys."""
    kind = record.__name__
    try:
        data = parse_json(text, kind)
    except BundleError as exc:
        raise ProtocolError(f"not JSON a cell record can hold: {exc}") from None
    if not isinstance(data, dict):
        raise ProtocolError(f"{kind}: not a JSON object")
    version = data.get("version")
    if version != PROTOCOL_VERSION:
        raise ProtocolError(f"{kind}: protocol version {version!r}, this harness speaks {PROTOCOL_VERSION}")
    known = {f.name for f in fields(record)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ProtocolError(f"{kind}: unknown keys {', '.join(unknown)}")
    return data
