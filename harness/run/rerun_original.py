"""The bundle `fusionbench rerun` runs again (`Original`), read and checked before anything runs
(`read`): it must pass `validate` (one of a newer schema is refused), its stored scenario be one a
resume reads (harness/run/resumable.py `check_scenario`), and its planned cells the cells this
harness makes of that scenario; harness/run/rerun.py holds the rest of a rerun's checks."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import cgroup_limits
from harness.bundle.header_record import Node, local_jobs
from harness.bundle.manifest import MANIFEST
from harness.bundle.migrations import SCHEMA_VERSION
from harness.bundle.reader import LoadedBundle, lookup
from harness.bundle.record_base import read_as
from harness.bundle.statuses import MEASURED
from harness.bundle.validate import validate
from harness.cpu_topology import physical_cores, siblings
from harness.errors import BundleError, ConfigError
from harness.plain_text import one_line, shell_word
from harness.reporting.pairing import pairing_key, variable_value
from harness.reporting.run_facts import machine_share, machines_apart, quota_recorded
from harness.run import slots
from harness.run.executors import node_info
from harness.run.resumable import check_scenario, values_seen
from harness.scenario.cells import check_values, expand, only_text, select
from harness.scenario.schema import ScenarioFile, passed_on


@dataclass(frozen=True)
class Original:
    """The bundle a rerun runs again, as read and checked before anything runs."""

    root: Path
    header: dict[str, Any]  # bundle.json, upgraded to this harness's schema
    #: The scenario as bundle.json stores it: the rerun stores it unchanged (the same digest).
    stored: dict[str, Any]
    #: The same scenario typed, its device the one the cells ran on (`device: auto` resolved).
    scenario: ScenarioFile
    #: The original's `--only` narrowed by the rerun's: the cells it planned that the rerun runs.
    only: dict[str, set[str]]
    #: The value each `NAME` its `env:` passes on had in its measured cells (None: unset there);
    #: a name absent here was recorded by none of them.
    variables: dict[str, str | None]
    #: What the rerun's bundle.json records as `rerun_of`: the original's run, scenario and manifest
    #: digests, and the values of `variables` it sets, where there are any.
    rerun_of: dict[str, Any]
    #: Each `NAME` its measured cells saw at several values: those values, in words.
    variables_apart: dict[str, str] = field(default_factory=dict)
    #: The backends of its measured cells.
    measured_backends: frozenset[str] = frozenset()
    #: Where this machine holds the images its cells read (`rerun --inputs DIR`), elsewhere than its
    #: `input_folder`; None: there (harness/run/rerun.py `checked_inputs`).
    inputs_here: Path | None = None
    #: The hardware its measured cells ran on and this machine's, in words, where they differ (the
    #: first cell that does): `compare` sets the rerun's cells beside them and judges none.
    hardware_apart: tuple[str, str] | None = None
    #: The torch threads its measured cells ran on unpinned (torch's default on their machine), or in
    #: its `--jobs` slots, and those the rerun's cells run here (the default here, or a slot's here),
    #: where they differ (the first cell that does): `compare` judges no cell and no fusion verdict
    #: across other threads, so a lab on a machine of another core count learned it from `not
    #: comparable` once its rerun had run.
    threads_apart: tuple[int, int] | None = None
    #: The share of its machine its measured cells ran on and the shares the rerun's cells get here,
    #: in the words `compare` sets them apart by (`run_facts.machine_share`), where one differs (the
    #: first cell that does): a run under a CPU quota rerun without one, bound to fewer CPUs, or in
    #: `--jobs` slots of another size; `compare` judges none of the rerun's cells against them.
    share_apart: tuple[str, str] | None = None
    #: The `--jobs` slots its rerun's run cuts of this machine's CPUs (`slots_here`), cut once as the
    #: bundle is read, for the threads and the share they give and for `jobs_fit_here`: none for one
    #: job; None where this machine cannot cut them, and `slots_refused` says why, in the cut's words.
    slots_cut: list[slots.Slot] | None = field(default_factory=list)
    slots_refused: ConfigError | None = None

    @property
    def device(self) -> str:
        return str(self.header["device"])

    @property
    def jobs(self) -> int:
        """The cells its run ran at once (`--jobs`), as bundle.json `executor` records it: 1 for Ray's
        and older runs, whose rerun runs one cell at a time here."""
        return local_jobs(self.header.get("executor")) or 1

    @property
    def fresh_workers(self) -> bool:
        return bool(lookup(self.header, "executor", "worker_start") == "fresh")

    @property
    def without_cache(self) -> bool:
        """Its run prepared every cell cold (`--no-cache`)."""
        return self.header.get("artifact_cache") is None


def read(root: Path, only: dict[str, set[str]] | None, inputs_here: Path | None = None) -> Original:
    """The bundle at `root` to run again, its cells `only` selects; BundleError or ConfigError, one
    line, where it cannot be: it fails validate, is of a newer schema (SchemaVersionError), stores a
    scenario a run cannot read, or planned cells this harness would not make again."""
    verdict = validate(root)
    if not verdict.ok or verdict.loaded is None:
        first = verdict.problems[0] if verdict.problems else "it could not be read"
        more = f" (and {len(verdict.problems) - 1} more)" if len(verdict.problems) > 1 else ""
        raise BundleError(f"cannot rerun {root}: it fails validation: {first}{more}; "
                          f"see `fusionbench validate {shell_word(root)}`")
    loaded = verdict.loaded
    header = loaded.header
    stored = header["scenario"]
    try:
        scenario = check_scenario(stored, f"cannot rerun {root}: bundle.json", loaded.model_plugins)
    except BundleError as exc:
        if loaded.version == SCHEMA_VERSION:
            raise
        # an older harness stored its scenario in a form this one's runs no longer read: said so
        raise BundleError(f"{exc} (its stored scenario is schema {loaded.version}'s, which this harness's runs no longer "
                          "read; run its settings as a file for a new run)") from None
    device = str(header["device"])
    ran_only = {key: set(values) for key, values in (header.get("only") or {}).items()}
    _check_cells_made_again(root, loaded, stored, device, ran_only)
    narrowed = _narrowed(root, loaded, stored, device, ran_only, only or {})
    variables, apart = _variables_seen(loaded, stored)
    here = slots_here(local_jobs(header.get("executor")) or 1)  # the affinity, SMT siblings and CPU quota read once
    cut, refused = (None, here) if isinstance(here, ConfigError) else (here, None)
    in_slot = slot_threads_here(cut, scenario.env, environ_set(variables))
    return Original(root=root, header=header, stored=stored, scenario=scenario.model_copy(update={"device": device}),
                    only=narrowed, variables=variables, variables_apart=apart,
                    # the values the rerun sets (rerun.variables_set), which its --resume sets again
                    rerun_of={**_rerun_of(loaded), **({"variables": variables} if variables else {})},
                    inputs_here=inputs_here, hardware_apart=_hardware_apart(loaded),
                    threads_apart=threads_apart(loaded, default_threads_here(), in_slot),
                    share_apart=share_apart(loaded, cut), slots_cut=cut, slots_refused=refused,
                    measured_backends=frozenset(record.config.backend for record in loaded.records if record.status in MEASURED))


def _hardware_apart(loaded: LoadedBundle) -> tuple[str, str] | None:
    """The hardware of the first measured cell of `loaded` that ran on other hardware than this
    machine, and this machine's, in the words `compare` sets them apart by; None where none did or
    none recorded it."""
    here = read_as(Node, node_info(None))
    measured = (machines_apart(read_as(Node, record.node), here) for record in loaded.records if record.status in MEASURED)
    return next((apart for apart in measured if apart is not None), None)


#: The variables that pin torch's (OpenMP's, MKL's) threads: a worker that saw neither ran torch's default.
_PINNING = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


def default_threads_here(cores: list[int] | None = None, siblings_of: Callable[[int], set[int]] = siblings) -> int:
    """The threads torch runs unpinned in a worker here, one a physical core this process may use
    (`cores`, its affinity where None: taskset, a cpuset), as torch's OpenMP and MKL pool sizes
    itself; a core's SMT siblings count once, and a cgroup's CPU quota not at all (torch reads none:
    under `docker --cpus 2` on 8 cores it runs 8). A rerun's worker gets no OMP_NUM_THREADS of this
    shell that its scenario's `env:` does not pass on."""
    return len(physical_cores(slots.usable_cores() if cores is None else cores, siblings_of))


def slot_threads_here(cut: Sequence[slots.Slot] | None, env: Sequence[str], environ: Mapping[str, str]) -> int | None:
    """The torch threads a rerun's cell runs in a `--jobs` slot here, the least of the slots' (`cut`,
    the run's cut of the cores usable here, under this process's CPU quota: `slots_here`; a thread
    per CPU of its slot, or the fewer that `env:`, as `environ` passes it on, asks); None for a run
    of one job, or where this machine cannot cut the slots (the rerun is refused for that before its
    probe: harness/run/rerun.py `jobs_fit_here`)."""
    counts = [slot.torch_threads(slots.threads_given(env, environ)) for slot in cut or []]
    return min((count for count in counts if count is not None), default=None)


def slots_here(jobs: int, siblings_of: Callable[[int], set[int]] = siblings) -> list[slots.Slot] | ConfigError:
    """The `--jobs` slots a rerun's run cuts of this machine's CPUs, as `run` cuts them (none for one
    job); the cut's refusal where it cannot (the rerun is refused for that before its probe, in its
    words: harness/run/rerun.py `jobs_fit_here`)."""
    if jobs == 1:
        return []
    try:
        return slots.plan(jobs, "cpu", slots.usable_cores(), [], siblings_of, cgroup_limits.cpu_quota())
    except ConfigError as exc:
        return exc


def environ_set(variables: Mapping[str, str | None]) -> dict[str, str]:
    """This process's environment as the rerun's cells get it: each of `variables` set (None: unset)."""
    environ = {**os.environ, **{name: value for name, value in variables.items() if value is not None}}
    return {name: value for name, value in environ.items() if variables.get(name, value) is not None}


def threads_apart(loaded: LoadedBundle, here: int, in_slot: int | None = None) -> tuple[int, int] | None:
    """The torch threads the first measured cell of `loaded` that ran them unpinned (its worker saw
    no `_PINNING` variable, so torch chose: a thread per core of its machine) ran, and `here`, or
    that ran in a `--jobs` slot, and `in_slot`, a slot's here (`slot_threads_here`), where they
    differ; None where every such cell runs as many here. A slot's threads are its cores': a bundle
    run with `--jobs 2` on 8 cores ran 4 a cell, its rerun on 2 runs 1. A cell a scenario's `env:`
    pinned outside a slot runs the same count again; one a Ray task's claimed cores pinned (its
    rerun runs it on this machine whole) is not told apart from it."""
    for record in loaded.records:
        environment = record.environment if isinstance(record.environment, dict) else {}
        variables = environment.get("variables")
        threads = environment.get("torch_threads")
        if (record.status not in MEASURED or not isinstance(variables, dict) or not isinstance(threads, int)
                or isinstance(threads, bool)):
            continue
        slot = record.node.get("slot") if isinstance(record.node, dict) else None
        if in_slot is not None and isinstance(slot, dict) and slot.get("cpus"):
            runs: int | None = in_slot
        else:
            runs = None if any(name in variables for name in _PINNING) else here
        if runs is not None and threads != runs:
            return threads, runs
    return None


def share_apart(loaded: LoadedBundle, cut: Sequence[slots.Slot] | None) -> tuple[str, str] | None:
    """The share of its machine the first measured cell of `loaded` ran on that the rerun's cells, in
    the `--jobs` slots `cut` (`slots_here`; none: one at a time), do not get here, and those they
    get, in words; None where each ran on one of them, or where this machine cannot cut the slots
    (`cut` None: refused before the probe: harness/run/rerun.py
    `jobs_fit_here`). Held to the CPU quota where every such cell recorded its own, as a resume is
    (harness/run/resume_refusals.py `another_share_offered`, which asks the same of a resume)."""
    timed = [record for record in loaded.records
             if record.status in MEASURED and isinstance(record.node, dict) and record.node.get("cpu")]
    with_quota = all(quota_recorded(record) for record in timed)
    if cut is None:
        return None
    offered = slots.shares_offered(cut, with_quota)
    ran = (machine_share(record, with_quota) for record in timed)
    return next(((there, " or ".join(sorted(offered))) for there in ran if there not in offered), None)


def _check_cells_made_again(root: Path, loaded: LoadedBundle, stored: dict[str, Any], device: str,
                            ran_only: dict[str, set[str]]) -> None:
    """Refuse a bundle whose planned cells are not those this harness makes of its stored scenario:
    the rerun would measure other cells, and `compare` could pair none of them with the original's.
    A cell with a record is held to the id `compare` pairs it by (harness/reporting/pairing.py
    `pairing_key`: its config's hash by this harness's rule, which left the rounds out from schema 8
    on, so golden v6's and v7's cells pair), one without to the id its bundle planned."""
    made = {cell.id for cell in select(expand(stored, device, loaded.model_plugins), ran_only)}
    paired_by = {record.id: pairing_key(record) for record in loaded.records}
    planned = [cell for cell in loaded.header_record.cells if paired_by.get(cell.id, cell.id) not in made]
    if planned:
        harness = lookup(loaded.header, "harness", "version")
        raise ConfigError(f"cannot rerun {root}: {len(planned)} of the {len(loaded.header_record.cells)} cell(s) it "
                          f"planned (the first {one_line(planned[0].label)}) are not cells this harness makes of the "
                          f"scenario it stores (it was written by harness {one_line(harness)}, schema {loaded.version}, "
                          "whose cells recorded their settings otherwise): a rerun would measure other cells than it ran; "
                          "run its stored scenario as a file for a new run")


def _narrowed(root: Path, loaded: LoadedBundle, stored: dict[str, Any], device: str, ran_only: dict[str, set[str]],
              only: dict[str, set[str]]) -> dict[str, set[str]]:
    """The original's `--only` (`ran_only`) narrowed by the rerun's (`only`); ConfigError where a value
    of the rerun's matches none of the cells it planned."""
    planned = select(expand(stored, device, loaded.model_plugins), ran_only)
    check_values(planned, only)  # a value of the scenario's the original left out too, named
    narrowed = {key: set(values) for key, values in ran_only.items()}
    for key, values in only.items():
        narrowed[key] = narrowed[key] & values if key in narrowed else set(values)
    if not select(planned, narrowed):
        whose = f", whose run chose only {only_text(ran_only)}" if ran_only else ""
        raise ConfigError(f"--only {only_text(only)} matches no cell of {root}{whose}")
    return narrowed


def _variables_seen(loaded: LoadedBundle, stored: dict[str, Any]) -> tuple[dict[str, str | None], dict[str, str]]:
    """The value each variable the stored `env:` passes on from the shell (`NAME`) had in the
    bundle's measured cells, where they recorded the variables they saw and agree on it; and, for
    each they saw at several values (cells of `--jobs` slots, or of a resume before it was refused),
    those values in words."""
    measured = [record for record in loaded.records if record.status in MEASURED]
    found: dict[str, str | None] = {}
    apart: dict[str, str] = {}
    for name in passed_on(stored.get("env")):
        values = {value if isinstance(value, str) else None for value in values_seen(measured, name)}
        if len(values) == 1:
            found[name] = values.pop()
        elif values:
            apart[name] = " and ".join(sorted(variable_value(value) for value in values))
    return found, apart


def _rerun_of(loaded: LoadedBundle) -> dict[str, Any]:
    """bundle.json `rerun_of`: which run, which scenario, and which copy of it (its manifest's digest)."""
    header = loaded.header
    manifest = loaded.files.sha256(MANIFEST) if (loaded.root / MANIFEST).is_file() else None
    return {"run_id": loaded.name, "created": header.get("created"), "scenario_sha256": header["scenario_sha256"],
            "manifest_sha256": manifest}
