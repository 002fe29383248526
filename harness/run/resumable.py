"""What `--resume` may start from.

A resumed run re-hashes the bundle when it closes it, so a bundle edited since it was written
would come out of the resume looking measured. `check` therefore asks `validate` first and lets
the resume go on only from a bundle it accepts, with two things forgiven that forge nothing.

The run then reads the scenario stored in bundle.json as it reads a scenario file's, so `check`
also holds the stored scenario to the scenario schema and to the form a run stores it in: a value
of the wrong type would otherwise fail the resume half-way, with a traceback and a bundle left
`running`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pydantic
from pydantic import Field, ValidationInfo, field_validator

from harness.bundle import manifest
from harness.bundle.cell_record import CellRecord
from harness.bundle.files import CELLS, HEADER
from harness.bundle.validate import validate
from harness.bundle.writer import Bundle
from harness.errors import BundleError
from harness.mlperf.user_conf import OVERRIDABLE
from harness.models.catalog import RECORD
from harness.plain_text import shell_word, shortened
from harness.reporting.report import REPORT_HTML, REPORT_MD
from harness.run import time_budget
from harness.scenario.cells import Cell, expand, select
from harness.scenario.loading import resolved
from harness.scenario.schema import ScenarioFile
from harness.scenario.specs import BackendSpec, ModelSpec

#: Keys of a stored scenario that bundles of this schema version lack when they were written before
#: the key existed. The run reads their absence as the harness that wrote the bundle did (no
#: allocator as `system`, no profile as `dev`); any other key missing is refused.
MAY_LACK = frozenset({"env", "allocator", "baseline", "inputs.labels", "loadgen.profile", "loadgen.accuracy",
                      "loadgen.compliance", "loadgen.overrides", "timing.rounds", "passes.traffic_iters"})


def check(bundle: Bundle) -> ScenarioFile:
    """Resume only a bundle validate accepts as it stands: one edited since it was written would be
    re-hashed by the resumed run and pass for a measured one. Three things are forgiven: a run that
    was killed (`running`) left no manifest to check (every other check still applies), and a cell
    whose record was deleted, with its files, so that it runs again, forges nothing, and neither does
    a report (report.md, report.html) edited or missing: the resume writes it again. The stored
    scenario, which the run reads, must be one it can read (`check_scenario`): checked first, as
    the problems validate finds in a bundle whose scenario is malformed follow from it. Returns the
    stored scenario, typed."""
    scenario = check_scenario(bundle.stored_scenario, f"cannot resume {bundle.root}: {HEADER}",
                              bundle.header.get("model_plugins"))
    killed = bundle.state == "running"
    verdict = validate(bundle.opened or bundle.root, integrity=not killed, resuming=True)  # read once, by open
    rerun = {cell for cell in bundle.cell_ids if not bundle.cell_path(cell).exists()}
    problems = [line for line in verdict.problems if not _of_a_cell_to_rerun(manifest.missing_file(line), rerun)
                and manifest.file_of(line) not in (REPORT_MD, REPORT_HTML)]  # the resume writes the report again
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise BundleError(f"cannot resume {bundle.root}: it fails validation: {problems[0]}{more}; "
                          f"see `fusionbench validate {shell_word(bundle.root)}`")
    return scenario


def _of_a_cell_to_rerun(missing: str | None, rerun: set[str]) -> bool:
    """Whether `missing` (a file of the bundle) is the record or an artifact of a cell in `rerun`."""
    parts = (missing or "").split("/")
    return len(parts) > 1 and parts[0] == CELLS and parts[1].removesuffix(".json") in rerun


class _StoredBackend(BackendSpec):
    """A backend entry as a bundle stores it. Neither its name nor its options are judged against
    the backends installed here: a backend missing here skips its cells with the reason, as on any
    machine without it, and a backend judges its options when its cell runs and fails the cell
    with the reason, as it did when the bundle was written (the golden bundles hold such a cell)."""

    @field_validator("name")
    @classmethod
    def _registered(cls, name: str) -> str:
        return name

    @field_validator("options")
    @classmethod
    def _backend_accepts(cls, options: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        return options


class _StoredScenario(ScenarioFile):
    """The scenario schema, read from a bundle rather than a file (`_StoredBackend`): a model at an
    input size its forward does not take (written before the file's check) fails its cells again,
    and the bundle's other cells still run. Nor do the backends installed here judge it: entries
    whose options differ only by a default, or an `env:` variable a backend points at its own
    folder, were cells of their own, and the variable the backend's, when the bundle was written."""

    backends: list[_StoredBackend] = Field(min_length=1, max_length=100)  # type: ignore[assignment]

    @classmethod
    def _options_as_run(cls, backend: BackendSpec) -> str:
        return json.dumps(backend.options, sort_keys=True)

    @classmethod
    def _backends_scratch_env(cls, name: str) -> dict[str, str]:
        return {}

    @field_validator("models")
    @classmethod
    def _sizes_taken(cls, models: list[ModelSpec]) -> list[ModelSpec]:
        return models


def check_scenario(stored: Any, where: str, recorded: object = None) -> ScenarioFile:
    """Refuse a scenario stored in a bundle unless the scenario schema accepts it and it is in the
    form a run stores (`harness.scenario.loading.resolved`): each value of the type a run gives it,
    no key missing but those in MAY_LACK. BundleError `WHERE: scenario.FIELD: why` otherwise; the
    scenario, typed (its name the stored one), where it is accepted. `recorded`: the bundle's
    `model_plugins`, by which its plugin models are known."""
    if not isinstance(stored, dict):
        raise BundleError(f"{where}: scenario: not a mapping")
    name = stored.get("name")
    if not isinstance(name, str) or not name:
        raise BundleError(f"{where}: scenario.name: not a name")  # the file's stem when it gave none
    bare = dict(stored)
    loadgen = bare.get("loadgen")
    if isinstance(loadgen, dict):  # a run adds its user.conf overrides; checked apart below
        bare["loadgen"] = {key: value for key, value in loadgen.items() if key != "overrides"}
    # A run stores every default a file left out; a default is validated as if left out again, as
    # the schema's checks of a value a file gives (a baseline it runs, say) do not hold of defaults.
    given = {key: value for key, value in bare.items() if key != "name" and not _is_default(key, value)}
    if isinstance(loadgen, dict) and "loadgen" in given and _overrides_problem(loadgen) is None:
        # typed with the settings the run's user.conf named, the others mlperf.conf's again
        # (`LoadGenSettings.user_conf`), as the file was: stripped of its overrides, an official
        # run's stored `min_duration_s: 10.0` read as an override, and its resume's dry run gave a
        # floor of 10 s a cell where mlperf.conf's is 600 s
        given["loadgen"] = {**given["loadgen"], **_named(loadgen)}
    try:
        # its plugin models known by the bundle's record (`recorded`), installed here or not
        scenario = _StoredScenario.model_validate(given, context={RECORD: recorded})
    except pydantic.ValidationError as exc:
        raise BundleError(f"{where}: {_first_error(exc)}") from None
    written = resolved(scenario, name)
    written["loadgen"].pop("overrides", None)
    problem = _differs(bare, written, "scenario") or _overrides_problem(loadgen if isinstance(loadgen, dict) else {})
    if problem is not None:
        raise BundleError(f"{where}: {problem}")
    return scenario.model_copy(update={"name": name})


def _named(loadgen: dict[str, Any]) -> dict[str, Any]:
    """A stored loadgen's `overrides` in the stored form the scenario schema reads, where it has
    them: each a value (a null, given before 2026-12-06, is mlperf.conf's and no override)."""
    overrides = loadgen.get("overrides")
    if not isinstance(overrides, dict):
        return {}
    return {"overrides": {key: value for key, value in overrides.items() if value is not None}}


def _is_default(key: str, value: Any) -> bool:
    field = ScenarioFile.model_fields.get(key)
    if field is None or field.is_required():
        return False
    default = field.get_default(call_default_factory=True)
    if isinstance(default, pydantic.BaseModel):
        default = default.model_dump(mode="json")
    return _differs(value, default, "") is None


# pydantic's names for validators and for the branches of a union, in an error's location: not keys
_BRANCHES = ("synthetic", "folder", "bool", "int", "float", "str")


def _first_error(exc: pydantic.ValidationError) -> str:
    errors = sorted(exc.errors(include_url=False), key=lambda e: e["type"] != "extra_forbidden")
    first = errors[0]
    field = "scenario"
    for part in first["loc"]:
        if isinstance(part, int):
            field += f"[{part}]"
        elif not str(part).startswith(("function-", "tagged-union[")) and part not in _BRANCHES:
            field += f".{part}"
    why = {"extra_forbidden": "not a field of a scenario", "model_type": "not a mapping",
           "model_attributes_type": "not a mapping"}.get(first["type"]) or first["msg"].removeprefix("Value error, ")
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{field}: {why}{more}"


def _differs(stored: Any, written: Any, path: str) -> str | None:
    """Where `stored` is not `written` (the form a run stores), as `PATH: why`; None where it is.
    Types must match too: 3.0 where a run stores 3 would reach a count as a float."""
    if isinstance(stored, dict) and isinstance(written, dict):
        for key, value in written.items():
            if key not in stored:
                if f"{path}.{key}".removeprefix("scenario.") in MAY_LACK:
                    continue
                return f"{path}.{key}: missing"
            found = _differs(stored[key], value, f"{path}.{key}")
            if found is not None:
                return found
        extra = sorted(set(stored) - set(written))
        return f"{path}.{extra[0]}: not a field of a scenario" if extra else None
    if isinstance(stored, list) and isinstance(written, list) and len(stored) == len(written):
        for index, (item, want) in enumerate(zip(stored, written)):
            found = _differs(item, want, f"{path}[{index}]")
            if found is not None:
                return found
        return None
    if type(stored) is type(written) and stored == written:
        return None
    return f"{path}: {_short(stored)} is not what a run stores there ({_short(written)})"


def _overrides_problem(loadgen: dict[str, Any]) -> str | None:
    """The user.conf overrides a run stores for the mlperf profile: loadgen fields, at their values."""
    overrides = loadgen.get("overrides")
    if overrides is None:
        return None
    where = "scenario.loadgen.overrides"
    if loadgen.get("profile") != "mlperf":
        return f"{where}: only the mlperf profile has overrides"
    if not isinstance(overrides, dict):
        return f"{where}: not a mapping"
    for key, value in overrides.items():
        if key not in OVERRIDABLE or _differs(value, loadgen.get(key), "") is not None:
            return f"{where}.{key}: not one of the scenario's loadgen settings at its value"
    return None


def _short(value: Any) -> str:
    return shortened(json.dumps(value, sort_keys=True), 60)  # ASCII: no control character reaches the terminal


def to_run(bundle: Bundle, cell_id: str) -> bool:
    """Whether a resume runs the cell: it has no finished record, or `run --budget-s` kept some of
    its further rounds from it (`time_budget.rounds_cut`). Such a cell is timed afresh, every round
    (`cut_cells`): its rounds are not completed from where they stopped, because rounds of one cell
    taken in two sessions would not pool honestly: round i of every cell of a setting is to meet
    the same stretch of the machine (`rounds_paired`), the compiler caches its rounds shared are
    gone (a round of the resume would prepare cold where its others were warm), and the machine's
    speed readings and its noise would be another start's."""
    return not bundle.finished(cell_id) or bool(time_budget.rounds_cut(bundle.read_cell(cell_id)))


def left_to_run(bundle: Bundle) -> list[str]:
    """The ids of the bundle's cells a resume runs (`to_run`), in its plan's order: what an
    interrupted bundle records of its resume (bundle.json `interruption.resume_runs`)."""
    return [cell_id for cell_id in bundle.cell_ids if to_run(bundle, cell_id)]


def cut_cells(bundle: Bundle, cells: list[Cell]) -> list[tuple[Cell, int, int]]:
    """Each of `cells` (a resume's) whose further rounds the budget kept from it, which the resume
    times afresh (`to_run`), with the rounds it kept, of how many. Its record and folder stay until
    its round 1 starts (harness/run/sweep.py): a resume whose budget does not reach it keeps it."""
    found = []
    for cell in cells:
        record = bundle.read_cell(cell.id) if bundle.finished(cell.id) else None
        if record is not None and time_budget.rounds_cut(record):
            found.append((cell, time_budget.rounds_kept(record), cell.config.timing.rounds))
    return found


def planned_cells(bundle: Bundle, stored: dict[str, Any], only: dict[str, set[str]] | None) -> list[Cell]:
    """The cells of the bundle's plan (bundle.json `cells`) a resume selects with `only`, from its
    `stored` scenario on the device it started on: a resume's and its dry run's."""
    planned = set(bundle.cell_ids)
    return [c for c in select(expand(stored, bundle.device, bundle.header.get("model_plugins")), only or {}) if c.id in planned]


def values_seen(records: list[CellRecord], name: str) -> set[Any]:
    """The values of `name` the cells of `records` that recorded their worker's variables saw (None:
    unset there); a resume is held to them, and a rerun sets them."""
    seen = [record.environment.get("variables") for record in records]
    return {variables.get(name) for variables in seen if isinstance(variables, Mapping)}
