"""What a run starts from, read and checked before the machine is probed or anything is written:
a new run's scenario file with what the command line overrides (`with_overrides`), and what it
sets and will not get said (`warn_of`); or the bundle `--resume` opens, locked, its stored
scenario the one the run reads, and a scenario file given with it held to that one. An `--only`
that matches no cell is refused here, and a resume is told whether it has anything left to do."""

from __future__ import annotations

import os
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text

from harness import cgroup_limits
from harness.bundle.manifest import MANIFEST
from harness.bundle.writer import Bundle
from harness.errors import ConfigError
from harness.reporting.report import REPORT_HTML, REPORT_MD
from harness.run import resumable, slots
from harness.run.run_request import RunRequest
from harness.scenario import advice
from harness.scenario import loading as scenario_file
from harness.scenario.cells import check_values, expand, only_text, select
from harness.scenario.differences import differences
from harness.scenario.schema import ScenarioFile


def open_or_plan(request: RunRequest, closing: ExitStack) -> tuple[Bundle | None, dict[str, Any], ScenarioFile]:
    """The bundle to resume (None for a new run, a rerun's among them), the resolved scenario as the
    bundle stores it, and the same scenario typed, which the run reads."""
    if request.resume is not None:
        bundle = Bundle.open(request.resume)
        closing.callback(bundle.close)
        scenario = resumable.check(bundle)
        if request.device not in (None, "auto", bundle.device):  # auto: the device it runs on, as a resume does
            raise ConfigError(f"--device {request.device}: {request.resume} was run on {bundle.device}")
        if request.rounds is not None and request.rounds != scenario.timing.rounds:
            raise ConfigError(
                f"--rounds {request.rounds}: {request.resume} was run with {scenario.timing.rounds} round(s)"
            )
        if bundle.header.get("artifact_cache") is None and request.cache_dir is not None and request.cache_chosen:
            # its header says every cell was prepared cold; cells taken from a cache would be warm
            raise ConfigError(f"{request.resume} was run with --no-cache (every cell prepared cold); "
                              "resume it without --cache-dir")
        if request.scenario_path is not None:
            _check_the_file_is_the_stored_one(request, bundle, scenario)
        return bundle, bundle.stored_scenario, scenario
    if request.rerun is not None:  # its stored scenario as stored: the rerun's digest is the original's
        return None, request.rerun.stored, request.rerun.scenario
    if request.scenario_path is None:
        raise ConfigError("run needs a scenario file (or --resume RUN_DIR)")
    scenario = with_overrides(scenario_file.load(request.scenario_path), request)
    named = scenario.model_copy(update={"name": scenario.name or request.scenario_path.stem})  # as resolved names it
    return None, scenario_file.resolved(scenario, request.scenario_path.stem), named


def as_its_run(request: RunRequest, bundle: Bundle | None) -> RunRequest:
    """The request, for a resume of a run made with `--no-cache` whose command line chose no cache,
    without the cache, as its run."""
    if bundle is None or request.cache_chosen or bundle.header.get("artifact_cache") is not None:
        return request
    return replace(request, cache_dir=None)


def _check_the_file_is_the_stored_one(request: RunRequest, bundle: Bundle, stored: ScenarioFile) -> None:
    """A scenario file given with --resume must be the one the bundle stores, with what the command
    line overrode then (the device was checked before this; a file whose only difference is the
    rounds `--rounds` set, or its name, is named so)."""
    path = request.scenario_path
    assert path is not None
    given = with_overrides(scenario_file.load(path), request).model_copy(update={"device": stored.device})

    def same(scenario: ScenarioFile) -> bool:
        return scenario_file.sha256(scenario_file.resolved(scenario, path.stem)) == bundle.scenario_sha256

    if same(given):
        return
    rounds = stored.timing.rounds
    if same(given.model_copy(update={"timing": given.timing.model_copy(update={"rounds": rounds})})):
        raise ConfigError(f"{path} differs from the scenario stored in {request.resume} only in its "
                          f"rounds: the run had {rounds}; resume with --rounds {rounds}, or without the file")
    if same(given.model_copy(update={"name": stored.name})):  # a file's name is its stem unless it names itself
        raise ConfigError(f"{path} differs from the scenario stored in {request.resume} only in its name "
                          f"({given.name or path.stem!r} against {stored.name!r}); resume without the file")
    shown = _settings_apart(scenario_file.resolved(given, path.stem), bundle.stored_scenario)
    raise ConfigError(f"{path} differs from the scenario stored in {request.resume}" + (f" in {shown}" if shown else "")
                      + "; resume without the file to finish the stored one")


def file_edited_since(bundle: Bundle, stored: ScenarioFile) -> str:
    """The warning for a resume given no file whose run's scenario file (bundle.json's
    `scenario_file`, as the run was given it: a relative path is read from the folder the resume
    runs in) now says otherwise than the scenario the bundle stores, or empty: the resume finishes
    the stored one, as it should, and said nothing of the edit. The device and rounds are the
    stored ones (the command line may have set them); a file gone, or one that no longer loads, is
    not the resume's concern."""
    named = bundle.header.get("scenario_file")
    if not isinstance(named, str) or not named:
        return ""
    path = Path(named)
    try:
        if not path.is_file():
            return ""
        given = scenario_file.load(path)
    except (ConfigError, OSError):
        return ""
    given = given.model_copy(update={"device": stored.device,
                                     "timing": given.timing.model_copy(update={"rounds": stored.timing.rounds})})
    resolved = scenario_file.resolved(given, path.stem)
    if scenario_file.sha256(resolved) == bundle.scenario_sha256:
        return ""
    shown = _settings_apart(resolved, bundle.stored_scenario)
    if not shown:  # the same settings, resolved otherwise (another harness's defaults): nothing the user edited
        return ""
    return (f"{named}, as read from here, differs from the scenario the bundle stores (in {shown}): edited since the "
            "run started, or another file of that name; this resume finishes the stored scenario, not the file (a new "
            "run runs that)")


def _settings_apart(given: dict[str, Any], stored: dict[str, Any]) -> str:
    """The settings two resolved scenarios differ in, the first five named: "" where none does."""
    apart = [setting or "(the whole file)" for setting, _, _ in differences(given, stored)]
    return ", ".join(apart[:5]) + (f" and {len(apart) - 5} more" if len(apart) > 5 else "")


def with_overrides(scenario: ScenarioFile, request: RunRequest) -> ScenarioFile:
    """The scenario with what the command line overrides (`--device`, `--rounds`): the bundle
    stores it so, and a resume runs it so."""
    if request.device:
        scenario = scenario.model_copy(update={"device": request.device})
    if request.rounds is not None:
        scenario = scenario.model_copy(update={"timing": scenario.timing.model_copy(update={"rounds": request.rounds})})
    return scenario


def warn_of(scenario: ScenarioFile, console: Console, executor: str, jobs: int) -> None:
    """Print what the file sets and will not get (harness/scenario/advice.py, `slots.env_warnings`;
    under Ray the cells' cores are the cluster's, not this machine's), and, one cell at a time,
    threads a cgroup's CPU quota will throttle (`slots.quota_warning`)."""
    cores = len(slots.usable_cores()) if executor == "local" else None
    lines = advice.warnings(scenario, scenario.device) + slots.env_warnings(scenario.env, os.environ, cores)
    if cores is not None:  # this machine's cgroups: the cells' own only when they run here
        quota = slots.quota_warning(scenario.env, os.environ, cores, cgroup_limits.cpu_quota()) if jobs == 1 else ""
        memory = memory_limit_warning(scenario.limits.memory_limit_mib, jobs, cgroup_limits.memory_limit_bytes())
        lines += [line for line in (quota, memory) if line]
    for line in lines:
        console.print(Text(f"fusionbench: warning: {line}", style="yellow"))


def memory_limit_warning(limit_mib: int | None, jobs: int, cgroup_bytes: int | None) -> str:
    """What a run says where the scenario's `limits.memory_limit_mib`, for each of `jobs` workers at
    once, is more than this process's cgroups let it hold: the kernel kills a worker there first,
    and its cell fails with SIGKILL and no peak, not with the limit it was given."""
    if limit_mib is None or cgroup_bytes is None or limit_mib * jobs * (1 << 20) <= cgroup_bytes:
        return ""
    return (f"limits.memory_limit_mib {limit_mib}{f' for each of {jobs} jobs' if jobs > 1 else ''} is more than the "
            f"{cgroup_bytes / (1 << 20):.0f} MiB this process's cgroup may hold: the kernel kills a worker before that "
            "limit is reached, and its cell fails with SIGKILL and no peak; give a limit within the cgroup's")


def refuse_an_empty_selection(resolved: dict[str, Any], device: str, only: dict[str, set[str]],
                              bundle: Bundle | None) -> None:
    """Raise select's ConfigError when `only` matches no cell on `device` (either device for auto),
    check_values's when one of its values matches none, and one when it, or one of its values,
    matches no cell a resumed bundle planned (a run of its own --only)."""
    recorded = bundle.header.get("model_plugins") if bundle else None  # a resume's: its plugin models as it ran them
    cells = ([*expand(resolved, "cuda", recorded), *expand(resolved, "cpu", recorded)] if device == "auto"
             else expand(resolved, device, recorded))
    check_values(cells, only)
    chosen = select(cells, only)
    if bundle is None:
        return
    whose = f"{bundle.root}, whose run chose only {only_text(bundle.header.get('only') or {})}"
    if not set(bundle.cell_ids) & {c.id for c in chosen}:
        raise ConfigError(f"--only {only_text(only)} matches no cell of {whose}")
    planned = [c for c in cells if c.id in set(bundle.cell_ids)]
    for key, values in only.items():  # beside a value that matches, one of the scenario's alone was dropped
        outside = sorted(values - {c.field(key) for c in planned})
        if outside:
            raise ConfigError(f"--only {key}={outside[0]} matches no cell of {whose}")


def check_selection(request: RunRequest) -> None:
    """Refuse an `--only` that matches no cell of the scenario (or of the bundle to resume) before
    anything starts: `--container` asks it on the host, before an engine is asked or an image built."""
    if not request.only:
        return
    with ExitStack() as closing:
        bundle, resolved, scenario = open_or_plan(request, closing)
        refuse_an_empty_selection(resolved, bundle.device if bundle else scenario.device, request.only, bundle)


def left_complete(bundle: Bundle) -> bool:
    """A bundle whose run ended complete, its manifest and report written: a resume has nothing to
    add (it appended a resume date and wrote the manifest again). A cell the time budget kept from some
    of its rounds is one to run (`resumable.to_run`), whatever state the run ended in."""
    return (bundle.header.get("state") == "complete"
            and not any(resumable.to_run(bundle, cell_id) for cell_id in bundle.cell_ids)
            and all((bundle.root / name).is_file() for name in (REPORT_MD, REPORT_HTML, MANIFEST)))


def all_finished(bundle: Bundle, resolved: dict[str, Any], request: RunRequest) -> bool:
    """Whether every cell of `bundle` that the request selects is finished: a resume with none to run
    (`resumable.to_run`)."""
    planned = set(bundle.cell_ids)
    cells = select(expand(resolved, bundle.device, bundle.header.get("model_plugins")), request.only or {})
    return not any(resumable.to_run(bundle, c.id) for c in cells if c.id in planned)
