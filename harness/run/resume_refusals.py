"""What a `--resume` is refused for once the bundle is open: cells that would not be comparable with
the ones it holds, run on other inputs, another software stack, another share of the machine,
other versions of their backends' libraries or other values of a variable `env:` passes on, or
without a backend the run had (a plugin not installed here). Each
is a ConfigError naming what differs and what to do, raised before a cell runs and leaving the
bundle as it was. A resume on another start of
the machine, or under other harness code, is allowed, and warned of (`another_boot`, `another_harness`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from harness import registry
from harness.bundle.cell_record import CellRecord
from harness.bundle.header_record import Node, local_jobs
from harness.bundle.reader import lookup
from harness.bundle.record_base import read_as
from harness.bundle.statuses import MEASURED
from harness.bundle.writer import Bundle
from harness.errors import ConfigError
from harness.models import plugins
from harness.reporting.pairing import variable_value
from harness.reporting.run_facts import machine_share, quota_recorded
from harness.run import executor_choice, preflight, skips, slots
from harness.run.executors import Executor, LocalPool
from harness.run.probe_answer import ProbeAnswer
from harness.run.resumable import values_seen
from harness.run.run_request import RunRequest
from harness.run.system import container_info
from harness.scenario.cells import Cell
from harness.scenario.schema import ScenarioFile, passed_on


def before_the_probe(bundle: Bundle, scenario: ScenarioFile) -> None:
    """The refusals a resume meets before the machine is probed: its input folder no longer the one
    its cells read (`other_inputs`), another software stack (`another_stack`). A resume and its dry
    run (harness/run/plan.py) meet them alike."""
    folder = bundle.header.get("input_folder")
    if folder:  # it may have changed since the run began
        preflight.check_inputs(scenario, Path(folder))
        other_inputs(bundle, scenario, folder)
    another_stack(bundle, container_info())


def once_probed(bundle: Bundle, request: RunRequest, executor: Executor | None, probe: ProbeAnswer,
                env: list[str], environ: Mapping[str, str]) -> list[CellRecord]:
    """The refusals a local resume meets once the machine is probed and its executor chosen (None:
    one cell at a time): another share of the machine, other versions of its backends' libraries,
    other values of the variables `env:` passes on from `environ`. Return the bundle's timed cells.
    A resume and its dry run meet them alike; a Ray resume meets `another_share_offered` alone, earlier."""
    timed = another_share_offered(bundle, request, executor, probe.device)
    other_versions(bundle, timed, probe)
    other_variables(bundle, timed, env, environ, executor.slots if isinstance(executor, LocalPool) else [])
    return timed


def share_before_the_probe(bundle: Bundle, request: RunRequest) -> None:
    """Refuse a resume on another share of the machine (`another_share_offered`) before the machine is
    probed (seconds: torch and every backend's libraries imported) wherever the share is known
    without it: Ray's is --cpus-per-cell's, and a CPU bundle's local one is its --jobs slots' cores
    or the CPUs this process may use. A GPU bundle's --jobs slots need the probe's GPUs: its resume
    meets the refusal once probed (`once_probed`), as before. A resume and its dry run call it alike."""
    if request.executor == "ray":
        another_share_offered(bundle, request, None, bundle.device)
    elif bundle.device == "cpu":
        cut = executor_choice.local_slots(request, "cpu", ProbeAnswer(device="cpu")) if request.jobs > 1 else []
        another_share_offered(bundle, request, LocalPool(cut) if cut else None, "cpu")


def another_share_offered(bundle: Bundle, request: RunRequest, executor: Executor | None, device: str) -> list[CellRecord]:
    """Refuse a resume whose cells would run on another share of the machine than its measured cells
    ran on (`another_share`), the shares the request's executor offers; return those cells."""
    timed = measured(bundle)
    with_quota = all(quota_recorded(record) for record in timed)  # older cells: the quota unknown, not held to
    another_share(bundle, timed, executor_choice.shares_given(executor, request, device, with_quota), with_quota)
    return timed


def other_inputs(bundle: Bundle, scenario: ScenarioFile, folder: str) -> None:
    """ConfigError where the input folder no longer holds what the run's cells read: a resume
    would set cells measured on other images beside them, or where the header names the folder
    without the digest every run of this harness records beside it."""
    recorded = bundle.header.get("inputs_sha256")
    if recorded is None:
        raise ConfigError(f"--resume {bundle.root}: bundle.json names the input folder {folder} but records no "
                          "inputs_sha256 of what its cells read, which a run of this harness records beside it; "
                          "start a new run")
    now = preflight.inputs_sha256(scenario, folder)
    if now != recorded:
        raise ConfigError(f"--resume {bundle.root}: {folder} no longer holds what the run's cells read (the SHA-256 of "
                          f"its labels file and images was {recorded[:12]}..., now {str(now)[:12]}...); put those "
                          "inputs back, or start a new run")


def another_stack(bundle: Bundle, here: Mapping[str, Any]) -> None:
    """A resume in another of the project's images than the run started in, or in one where it
    started outside them, or the other way round, is refused: bundle.json records one software
    stack, the first start's, and its cells would have run on two (a native run resumed with
    --container kept `image_id: null`). The image is the launcher's (`FUSIONBENCH_IMAGE_ID`); a host
    that is itself a container of some other kind is "natively" here."""
    recorded = (bundle.header.get("system") or {}).get("container")
    if not isinstance(recorded, dict):
        return  # a header from before the container facts

    def stack(image_id: Any, image: Any) -> str:
        return f"in the image {image or '?'} ({str(image_id)[:19]})" if image_id else "outside the project's images"

    if recorded.get("image_id") != here.get("image_id"):
        raise ConfigError(f"--resume {bundle.root}: its cells ran {stack(recorded.get('image_id'), recorded.get('image'))} "
                          f"and this resume would run them {stack(here.get('image_id'), here.get('image'))}; bundle.json "
                          "records one software stack: resume it as it started (with or without --container, the same "
                          "image), or start a new run")


def backends_gone(bundle: Bundle, left: list[Cell]) -> None:
    """A resume whose cells to run (`left`) include a backend no installed package registers here,
    where the run had it when it started (bundle.json `backends.<name>.available`, or a measured cell
    of it), is refused, naming the package the bundle records: its cells were recorded skipped for
    good ("unknown backend 'torchscript'; ..."), exit 0 and the bundle complete without them, where
    a resume under another version of the plugin is refused (`other_versions`). A backend the first
    start lacked too (tensorrt on a CPU) is not: its cells are skipped with their reason, as then."""
    ran = {record.config.backend for record in measured(bundle)}
    plugin_gone(f"--resume {bundle.root}", bundle.header, ran, left)


def plugin_gone(who: str, header: Mapping[str, Any], ran: set[str], left: list[Cell], to_run: str = "left to run") -> None:
    """ConfigError, said for `who` (`--resume RUN_DIR`, `rerun BUNDLE`), where `left` (the cells to run)
    include a backend no package registers here that the bundle's run had (bundle.json `header`'s
    `backends.<name>.available`, or a backend in `ran`, those of its measured cells), naming the
    package and the pip line the bundle records; and where they include a plugin model that no package
    here provides at the version the bundle records (bundle.json `model_plugins`)."""
    model_missing = plugins.provider_missing(header.get("model_plugins"), [cell.config.model.name for cell in left])
    if model_missing:
        raise ConfigError(f"{who}: {model_missing}")
    registered = set(registry.names())
    gone = sorted({cell.config.backend for cell in left} - registered)
    had = [name for name in gone if name in ran or lookup(header, "backends", name, "available") is True]
    if not had:
        return
    name = had[0]  # once it is installed, the next is named
    count = sum(cell.config.backend == name for cell in left)
    raise ConfigError(f"{who}: {count} cell(s) {to_run} are of backend {name!r}, which the run "
                      f"had when it started and no package here registers ({registry.unknown(name)}): they would be "
                      "recorded skipped for good; leave them out with --only, or install it"
                      + (skips.to_install(name, header) or " (the package that registers it)"))


def measured(bundle: Bundle) -> list[CellRecord]:
    """The bundle's cells that were timed (valid or invalid), read once for the refusals below."""
    return [record for record in bundle.records() if record.status in MEASURED]


def another_share(bundle: Bundle, timed: list[CellRecord], offered: set[str], with_quota: bool = True) -> None:
    """A resume whose cells would run on another share of the machine than the measured cells ran
    on is refused: within one bundle the report pairs fusion on with off and every cell with eager,
    and a 1-core slot's time beside the whole machine's is no speedup (a serial resume of a `--jobs 2`
    run set one at 6x). Only cells with a time count (`timed`: `measured`), each where its record says
    where it ran (a Ray task lost twice records no slot); held to the CPU quota `with_quota` (every
    such cell recorded its own: `quota_recorded`), as `offered` is."""
    ran = {machine_share(record, with_quota) for record in timed
           if isinstance(record.node, dict) and record.node.get("cpu")}
    if ran and not ran <= offered:
        raise ConfigError(f"--resume {bundle.root}: its cells ran on {' and '.join(sorted(ran))} and this resume would "
                          f"run its cells on {' or '.join(sorted(offered))}; resume with the options it ran with "
                          f"({_options_of(bundle.header.get('executor'))}) and on the CPUs it "
                          "was bound to (taskset, a container's cpuset), so that its times can be set side by side")


def _options_of(executor: object) -> str:
    """The executor options of the run's last start, as bundle.json's `executor` records them."""
    said = "as bundle.json `executor` records its last start"
    if isinstance(executor, Mapping) and executor.get("name") == "ray" and isinstance(executor.get("cpus_per_cell"), int):
        return f"`--executor ray --cpus-per-cell {executor['cpus_per_cell']}`, {said}"
    jobs = local_jobs(executor)
    if jobs is not None:
        return f"`--jobs {jobs}`, {said}" if jobs > 1 else f"no --jobs, one cell at a time, {said}"
    return "bundle.json `executor`: --jobs, or --executor ray with --cpus-per-cell"


def other_versions(bundle: Bundle, timed: list[CellRecord], probe: ProbeAnswer) -> None:
    """A resume whose backends' libraries are other versions than the run's first start found is
    refused: a plugin upgraded between the start and the resume put fusion on of one version beside
    fusion off of another in one pair, with nothing said (and the report named the last version
    only). Like with like: the first start's probe (bundle.json `backends`) against this one, for
    every library of a backend with a cell in `timed` (`measured`), so that a torch upgraded
    under a resume that runs only Inductor's cells is caught by eager's, the baseline they are set
    against. A library no backend here reports (one unavailable now: its cells will not run) is
    left out. Not for `--executor ray`, whose probe is the driver's and whose cells ran on the nodes."""
    backends = {record.config.backend for record in timed}
    then: dict[str, set[str]] = {}
    for name, entry in (bundle.header.get("backends") or {}).items():
        versions = entry.get("versions") if isinstance(entry, dict) and name in backends else None
        for library, version in (versions if isinstance(versions, dict) else {}).items():
            then.setdefault(str(library), set()).add(str(version))
    now: dict[str, set[str]] = {}
    for report in probe.backends.values():
        for library, version in (report.versions or {}).items() if report.available else ():
            now.setdefault(library, set()).add(version)
    changed = {library: (then[library], now[library]) for library in sorted(then)
               if library in now and now[library] != then[library]}
    if changed:
        said = "; ".join(f"{library} {' and '.join(sorted(was))} when the run started, {' and '.join(sorted(here))} here"
                         for library, (was, here) in changed.items())
        raise ConfigError(f"--resume {bundle.root}: {said}: its cells would have run on two versions; install the "
                          "versions it ran with, or start a new run")


def other_variables(bundle: Bundle, timed: list[CellRecord], env: list[str], environ: Mapping[str, str],
                    cut: Sequence[slots.Slot] = ()) -> None:
    """A resume whose cells would see another value of a variable the scenario's `env:` passes on from
    the shell (`NAME`, not `NAME=value`) than its measured cells saw is refused: the first start under
    `OMP_NUM_THREADS=1` and a resume from a shell without it ran eager on two threads beside the rest
    on one, and the report set them side by side, with nothing said. `environ` is this shell's; in
    the `--jobs` slots `cut` a thread count (slots.THREAD_COUNTS) is the one each slot sets from it:
    the slot's cores, or the fewer this shell asks (a first start's cells ran 4 a slot, and a resume
    from a shell of OMP_NUM_THREADS=2 ran 2 beside them, with nothing said); another slot is
    `another_share`'s to refuse. Cells that recorded no variables (older records) are not held."""
    for name in passed_on(env):
        then = values_seen(timed, name)
        slotted = bool(cut) and name in slots.THREAD_COUNTS
        offered = {slot.environment(environ).get(name) for slot in cut} if slotted else {environ.get(name)}
        apart = sorted((variable_value(value) for value in offered if value not in then))
        if then and apart:
            was = " and ".join(sorted(variable_value(value) for value in then))
            now = f"{apart[0]} in its slots" if slotted else apart[0]
            raise ConfigError(f"--resume {bundle.root}: {name} was {was} when its cells ran, {now} here (the "
                              "scenario's env: passes this shell's value on): its cells would have run under two "
                              "values; set it as it was, or start a new run")


def another_boot(timed: list[CellRecord], here: str | None) -> str:
    """The warning for a resume on another start of the machine than some of the bundle's timed
    cells ran on (their `node.boot_id` against `here`, this start's), or empty. It is allowed, as a
    resume on a machine of the same kind is; the report sets no cell of this start beside one of
    those (harness/reporting/run_facts.py `other_boots`)."""
    if here is None:
        return ""
    nodes = [read_as(Node, record.node) for record in timed]
    earlier = sorted({node.boot_id for node in nodes if node is not None and node.boot_id and node.boot_id != here})
    if not earlier:
        return ""
    count = sum(1 for node in nodes if node is not None and node.boot_id in earlier)
    return (f"{count} of the bundle's timed cells ran on another start of the machine (boot "
            f"{', '.join(boot[:8] for boot in earlier)}; this is {here[:8]}): a restart since, or another machine of "
            "its kind, which may run slower or faster as a whole; the report sets no cell of this start beside one of "
            "those (fusion pairs, speedups over the baseline): run such cells again in one start with --only")


def another_harness(header: Mapping[str, Any], here: Mapping[str, Any]) -> str:
    """The warning for a resume whose harness (`here`: harness_info()) is not the one the run started
    with (bundle.json's `harness`): another version or git commit, or uncommitted changes one time
    and not the other; or empty. bundle.json keeps the first start's, and the report names it for
    every cell. Two starts with uncommitted changes on one commit cannot be told apart: not warned."""
    then = header.get("harness")
    if not isinstance(then, Mapping):
        return ""

    def named(harness: Mapping[str, Any]) -> str:
        return (f"{harness.get('version')} {harness.get('git_sha') or '(no git commit)'}"
                + (" with uncommitted changes" if harness.get("git_dirty") else ""))

    shas = then.get("git_sha"), here.get("git_sha")
    other = (then.get("version") != here.get("version") or (all(shas) and shas[0] != shas[1])
             or (then.get("git_dirty") is not None and here.get("git_dirty") is not None
                 and bool(then.get("git_dirty")) != bool(here.get("git_dirty"))))
    if not other:
        return ""
    return (f"this resume runs harness {named(here)}; the run started with {named(then)}: the cells it runs may be "
            "measured by other code than those before, and bundle.json's `harness` and the report name the first "
            "start's for every cell; for one harness throughout, resume from the checkout the run started in")
