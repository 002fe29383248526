"""The MLPerf LoadGen passes' records (harness/measure/loadgen.py): the performance run with its
headline metric and what the system under test measured of itself, the accuracy run, and the
compliance tests. Parts of a cell's `Metrics` (harness/bundle/cell_record.py).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from harness.bundle.record_base import COUNT_MAX, NS_MAX, RATE_MAX, Count, InnerPath, Ns, Record, Validity
from harness.scenario.rules import ScenarioName


class LoadGenMetric(Record):
    """MLPerf's headline figure of the scenario (harness/scenario/rules.py), with its name and unit."""

    name: str
    unit: Literal["ns", "samples/s"]
    value: Annotated[float, Field(ge=0, le=max(NS_MAX, RATE_MAX))] | None


class SutFigures(Record):
    """What the system under test measured of itself in a LoadGen run (harness/measure/sut.py)."""

    batches: Count | None = None
    samples: Count | None = None
    batches_in_flight: Count | None = None
    gathered_batches: Count | None = None
    gather_median_ns: Ns | None = None
    call_median_ns: Ns | None = None
    call_mean_ns: Ns | None = None
    respond_median_ns: Ns | None = None
    call_definition: str | None = None


class LoadGenRun(Record):
    """A LoadGen run: the verdict, the headline metric, LoadGen's own entries and where its logs are."""

    scenario: ScenarioName
    validity: Validity
    invalid_reasons: list[str] = []
    metric: LoadGenMetric
    log_dir: InnerPath
    logs: list[Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]+$")]] = []
    attempts: list[dict[str, Any]] = []
    results: dict[str, Any] = {}
    settings: dict[str, Any] = {}
    sut: SutFigures | None = None
    beside: dict[str, Any] | None = None
    profile: Literal["dev", "mlperf"] | None = None
    user_conf: str | None = None
    loadgen_version: str | None = None
    warnings: list[str] = []


def invalid_run_reason(validity: str, invalid_reasons: list[str]) -> str:
    """The reason a cell gives for its LoadGen run that was not VALID (harness/measure/worker.py),
    which validate holds the cell's reasons to (harness/bundle/loadgen_check.py)."""
    return f"loadgen: {validity} ({'; '.join(invalid_reasons) or 'no reason given'})"


class Accuracy(Record):
    """LoadGen's accuracy run, scored against the labels (the logs re-derive it in validate)."""

    top1_percent: Annotated[float, Field(ge=0, le=100)]
    good: Count
    total: Annotated[int, Field(ge=1, le=COUNT_MAX)]
    log_dir: InnerPath
    labels: Annotated[str, Field(pattern=r"^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,99}$")] | None = None


class ComplianceChecks(BaseModel):
    """Which of a compliance test's checks passed: its performance run's, and its accuracy
    comparison's where the test has one (null where it has none)."""

    model_config = ConfigDict(extra="forbid")

    performance: bool
    accuracy: bool | None = None


class ComplianceOutcome(Record):
    """One MLPerf compliance test, verified against the cell's runs."""

    passed: bool
    checks: ComplianceChecks
    validity: Validity
    metric: LoadGenMetric
    log_dir: InnerPath
