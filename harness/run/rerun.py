"""`fusionbench rerun BUNDLE`: the cells a bundle ran, run again on this machine as a new run.

The bundle is read as `compare` reads one (it must pass `validate`; one of a newer schema is
refused) and its stored scenario as a resume reads it (harness/run/rerun_original.py). The rerun
stores that scenario as it is, so its `scenario_sha256` is the original's, and runs the cells the
original planned (its `--only`, narrowed by the rerun's) on the device they ran on, with
the executor options they ran with (`--jobs`, fresh workers) and without the artifact cache where
the original had none, reading the images its cells read (its `input_folder`, or the folder
`--inputs` gives where they are elsewhere here, on their digest: `checked_inputs`). A bundle whose
planned cells this harness would not make again from its scenario (an older harness's cells, whose
ids differ) is refused: the rerun would measure other cells, which `compare` could not pair.

What a scenario file cannot say comes from the original's record: the values its measured cells saw
of each variable its `env:` passes on from the shell (`NAME`: the cells' `environment.variables`),
set here for the rerun's cells (`variables_set`); the package and version of a plugin backend it
ran, named where that plugin is not installed here (`resume_refusals.plugin_gone`). The new
bundle.json records `rerun_of` (the original's run, scenario digest and manifest digest), which
`compare` reads to say that one bundle is a rerun of the other.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text

from harness.bundle.reader import lookup
from harness.errors import ConfigError
from harness.plain_text import visible
from harness.reporting.pairing import variable_value
from harness.run import preflight, resume_refusals, slots
from harness.run.rerun_original import Original, environ_set
from harness.scenario.cells import Cell
from harness.scenario.schema import passed_on
from harness.scenario.settings import FolderInputs


def said(original: Original) -> list[Text]:
    """What a rerun (and its dry run) says as it begins: the bundle it runs again, whose run and on
    which device (its lines named none of them), and, where the bundle names its input folder but
    records no digest of the images its cells read (a harness before bundle.json kept
    `inputs_sha256`), that the rerun cannot tell it reads the same images (a resume of such a
    bundle is refused; a rerun is a new bundle, so it goes on, saying so); and where its cells ran
    on other hardware than this machine, on other torch threads than the rerun's cells run here, or
    on another share of the machine (a CPU quota, fewer CPUs bound, slots of another size), that
    compare will judge none of the rerun's against them (a lab learned it only once its rerun had run)."""
    header = original.header
    lines = [Text(f"fusionbench: a rerun of {visible(original.root)} (run {visible(str(header.get('run_id')))} of "
                  f"{visible(str(header.get('created')))}) on {visible(original.device)}, from the scenario it stores")]
    folder = header.get("input_folder")
    if isinstance(folder, str) and header.get("inputs_sha256") is None:
        lines.append(Text(f"fusionbench: warning: {visible(original.root)} names its input folder {visible(folder)} but "
                          "records no digest of the images its cells read: the rerun cannot tell that they are the same "
                          "images", style="yellow"))
    if original.hardware_apart is not None:
        there, here = original.hardware_apart
        # whether each fusion verdict held is asked of cells apart in their machines alone: not across other
        # threads or shares
        held = "" if original.threads_apart or original.share_apart else ", and say whether each fusion verdict held"
        lines.append(Text(f"fusionbench: warning: {visible(original.root)}'s cells ran on {visible(there)}, this machine is "
                          f"{visible(here)}: `fusionbench compare` will set the rerun's cells beside them, judging "
                          f"none{held}", style="yellow"))
    if original.threads_apart is not None:
        lines.append(Text(threads_warning(original.root, *original.threads_apart, jobs=original.jobs), style="yellow"))
    elif original.share_apart is not None:  # other threads come with their share, which their line says
        there, here = original.share_apart
        lines.append(Text(f"fusionbench: warning: {visible(original.root)}'s cells ran on {visible(there)}, the rerun's "
                          f"cells run on {visible(here)}: `fusionbench compare` will judge none of them against the "
                          "bundle's (`ran on different shares of the machine`)", style="yellow"))
    return lines


def threads_warning(root: Path, there: int, here: int, jobs: int = 1) -> str:
    """What a rerun says where the bundle's cells ran torch's default threads (its scenario pinned
    none), `there`, and torch's default here is `here`: `compare` will set no fusion verdict of the
    two side by side (other torch threads), and the rerun cannot pin them (it runs the scenario as
    stored; its workers get no OMP_NUM_THREADS of this shell that the scenario does not pass on).
    With `jobs` above 1, the cells ran `there` in the run's `--jobs` slots, and a slot here runs
    `here`: a slot's threads are its cores', which the rerun keeps a share of as its run did."""
    if jobs > 1:
        return (f"fusionbench: warning: {visible(root)}'s cells ran {there} torch thread(s) each in its run's `--jobs "
                f"{jobs}` slots, a thread per CPU of a slot or as its scenario's env: asked; here a slot of `--jobs "
                f"{jobs}` runs {here}: `fusionbench compare` will judge no fusion verdict across the two (`not "
                "comparable`: other torch threads, on other shares of the machines); the rerun keeps its `--jobs`, so "
                f"only a machine whose `--jobs {jobs}` slots run {there} thread(s) each runs its threads")
    return (f"fusionbench: warning: {visible(root)}'s cells ran torch's default {there} thread(s), its scenario's env: "
            f"pinning none (no OMP_NUM_THREADS); here torch's default is {here} (a thread per physical core usable "
            "here): `fusionbench compare` will judge no fusion verdict across the two (`not comparable`: other torch "
            f"threads); the rerun runs the scenario as stored, so only a machine of {there} physical core(s), run whole, "
            f"runs its threads; to compare on any machine, pin them (env: [OMP_NUM_THREADS={there}, "
            f"MKL_NUM_THREADS={there}]) and run the scenario afresh on both")


def plugin_gone(original: Original, cells: list[Cell]) -> None:
    """Refuse a rerun whose cells include a plugin backend the original had and no package here
    registers, naming the package and version the original recorded (a plain file run of its
    scenario names none: `unknown backend 'torchscript'`)."""
    resume_refusals.plugin_gone(f"cannot rerun {original.root}", original.header, set(original.measured_backends), cells,
                                to_run="to run")


def jobs_fit_here(original: Original) -> None:
    """Refuse, before the probe, a rerun whose run ran its cells several at once (`--jobs N`, which the
    rerun keeps: its cells' slots and share of the machine are part of what they measured) where this
    machine has fewer usable cores than that, or slots of fewer cores than a thread count its
    scenario's `env:` asks, naming the bundle: the refusals `run` gives named a `--jobs` the rerun
    was never given, the second once the machine was probed, and told it to give fewer threads,
    which the rerun of a stored scenario cannot."""
    jobs, cut, refused = original.jobs, original.slots_cut, original.slots_refused
    # not cut as the bundle was read: a CPU quota below --jobs, or too few cores, each refused as `run`'s cut refuses
    # it, after the probe and naming a --jobs the rerun was never given; here before it, naming the bundle
    if refused is not None:
        ran = f"cannot rerun {original.root}, whose run ran its cells {jobs} at once, as its rerun does"
        if isinstance(refused, slots.QuotaBelowJobs):
            raise ConfigError(f"{ran}: {refused.why}; rerun it where {jobs} CPUs' worth or more may be used")
        raise ConfigError(f"{ran}: {refused}; rerun it on a machine with {jobs} cores or more")
    cores = min((slot.threads or len(slot.cpus) for slot in cut or []), default=None)
    over = slots.counts_over(cores, original.scenario.env, environ_set(original.variables)) if cores else []
    if over:
        name, asked = over[0]
        raise ConfigError(f"cannot rerun {original.root}, whose run ran its cells {jobs} at once with env: "
                          f"{name}={asked}, as its rerun does: a slot of --jobs {jobs} here has {cores} core(s), fewer "
                          f"than those threads; rerun it on a machine whose --jobs {jobs} slots have {asked} cores or more")


def checked_inputs(original: Original) -> tuple[str | None, str | None]:
    """The input folder the rerun's cells read (the original's `input_folder`, or the folder
    `rerun --inputs` gives, where this machine holds those images elsewhere) and the digest of what
    they will read there (None, None for drawn inputs); ConfigError where it is not here or does not
    hold what the original's cells read (`inputs_sha256`): the rerun would measure other images.
    A folder given elsewhere is taken on its digest alone, so a bundle that records none is refused."""
    scenario, recorded_folder = original.scenario, original.header.get("input_folder")
    given = original.inputs_here
    if not isinstance(scenario.inputs, FolderInputs) or not isinstance(recorded_folder, str):
        if given is not None:
            raise ConfigError(f"--inputs {visible(given)}: the cells of {visible(original.root)} read no input folder "
                              f"(inputs: {scenario.inputs.source}); rerun it without --inputs")
        return None, None
    folder = str(given.resolve()) if given is not None else recorded_folder
    where = f"cannot rerun {original.root}: its cells read images from {recorded_folder}"
    if given is not None:
        where += f", given here as --inputs {folder}"
    if not Path(folder).is_dir():
        way = "give a folder that holds them" if given is not None else \
            "put them there, or give the folder that holds them here with --inputs DIR"
        raise ConfigError(f"{where}, which is not a folder here; {way}")
    try:
        preflight.check_inputs(scenario, Path(folder))
        digest = preflight.inputs_sha256(scenario, folder)
        preflight.readable_images(scenario, folder)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    recorded = original.header.get("inputs_sha256")
    if given is not None and recorded is None:
        raise ConfigError(f"{where}, but it records no digest of the images its cells read (inputs_sha256, older "
                          f"harnesses): they cannot be told to be those in {folder}; put them at {recorded_folder}")
    if recorded is not None and digest != recorded:
        if given is not None:  # both in full: the user checks them against a digest of their own copy
            raise ConfigError(f"{where}, which holds other images than they read (the SHA-256 of its labels file and "
                              f"images is {digest}, the bundle records {recorded}); give the folder of those images")
        raise ConfigError(f"{where}, which no longer holds what they read (the SHA-256 of its labels file and images "
                          f"was {recorded[:12]}..., here {str(digest)[:12]}...); put those images there, or give the "
                          "folder that holds them here with --inputs DIR")
    return folder, digest


@contextmanager
def variables_set(original: Original, console: Console) -> Iterator[None]:
    """This process's environment, while the rerun runs, with each variable the original's `env:`
    passed on from its shell at the value its cells saw (unset where they saw none), each that this
    shell has otherwise said; a variable no cell recorded, or that they saw at several values, is
    said to come from this shell. The new bundle records the values set (`rerun_of.variables`),
    which its `--resume` sets again (`variables_resumed`)."""
    for name in passed_on(original.stored.get("env")):
        apart = original.variables_apart.get(name)
        if name not in original.variables:
            seen = f"the bundle's cells saw it at several values ({apart})" if apart else \
                "the bundle's cells recorded no value of it"
            console.print(Text(f"fusionbench: warning: env: {visible(name)}: {seen}; its rerun passes on this shell's",
                               style="yellow"))
    with _values_set(original.variables, "the rerun's cells, as the bundle's saw it", console):
        yield


def variables_resumed(header: Mapping[str, Any], console: Console) -> AbstractContextManager[None]:
    """This process's environment, while a `--resume` of a rerun's bundle runs, with each variable
    the rerun set for its cells (bundle.json `rerun_of.variables`) at that value again, each that
    this shell has otherwise said: the resume passed on this shell's, and a rerun stopped before a
    cell was measured, resumed from a shell without `OMP_NUM_THREADS=1`, ran its cells unbound where
    the original's ran on one thread (`compare` paired none). No change for any other bundle."""
    recorded = lookup(header, "rerun_of", "variables")
    values = {str(name): value for name, value in recorded.items()
              if value is None or isinstance(value, str)} if isinstance(recorded, Mapping) else {}
    return _values_set(values, "the resumed cells, as the rerun set it for its cells", console)


@contextmanager
def _values_set(values: Mapping[str, str | None], why: str, console: Console) -> Iterator[None]:
    """This process's environment with each of `values` set (None: unset) until the block ends, each
    that differs from this shell's said, for `why`."""
    before = {name: os.environ.get(name) for name in values}
    try:
        for name, value in values.items():
            if value != before[name]:
                console.print(Text(f"fusionbench: {visible(name)}={variable_value(value)} for {why} (this shell: "
                                   f"{variable_value(before[name])})"))
            _set(name, value)
        yield
    finally:
        for name, value in before.items():
            _set(name, value)


def _set(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value
