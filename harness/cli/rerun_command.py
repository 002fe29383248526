"""`fusionbench rerun BUNDLE`: run again, on this machine, the cells a bundle ran, as a new bundle
whose bundle.json names the original (`rerun_of`); harness/run/rerun.py says what is read from the
original and what the rerun is refused for."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from harness.cli.path_argument import path_argument
from harness.scenario.cells import ONLY_KEYS


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    rerun = sub.add_parser(
        "rerun", help="run the cells a bundle ran again on this machine, as a new bundle that names it",
        description="Read the scenario BUNDLE stores and run the cells it planned on the device they ran on, with "
        "the values of the variables its scenario's env: passed on from its shell, as its cells recorded them; the new "
        "bundle records `rerun_of`, and `compare BUNDLE NEW` pairs their cells.",
    )
    rerun.add_argument("bundle", type=path_argument, metavar="BUNDLE", help="the result bundle to run again")
    rerun.add_argument("--out", type=path_argument, help="directory for the new bundle (default: results)")
    rerun.add_argument("--only", metavar="KEY=VALUE,...", action="append",
                       help=f"run only the bundle's cells that match; keys: {', '.join(ONLY_KEYS)}")
    rerun.add_argument("--inputs", type=path_argument, metavar="DIR",
                       help="the folder that holds, on this machine, the images the bundle's cells read (where they "
                       "are not at its input_folder); taken where its images' digest is the bundle's inputs_sha256")
    cache = rerun.add_mutually_exclusive_group()
    cache.add_argument("--cache-dir", type=path_argument,
                       help="where backends keep exported and compiled artifacts between runs (default: run's, "
                       "$XDG_CACHE_HOME/fusionbench or ~/.cache/fusionbench; none where the bundle's run had --no-cache)")
    cache.add_argument("--no-cache", action="store_true", help="prepare every cell from scratch (cold)")
    rerun.add_argument("--dry-run", action="store_true",
                       help="list the cells the rerun would run here (or skip, and why); run nothing, write nothing")


def cmd_rerun(args: argparse.Namespace, console: Console, default_cache_dir: Path) -> int:
    from harness.run import rerun
    from harness.run.rerun_original import read
    from harness.run.run_request import RunRequest
    from harness.scenario.cells import only_option

    original = read(args.bundle, only_option(args.only), args.inputs)
    # the original's choice where the command line makes none: a refusal of the default folder then
    # names it as the default, with --cache-dir and --no-cache as the ways on
    chosen = args.no_cache or args.cache_dir is not None
    without = args.no_cache or (not chosen and original.without_cache)
    request = RunRequest(
        scenario_path=None, device=original.device, only=original.only, out_dir=args.out or Path("results"),
        cache_dir=None if without else args.cache_dir or default_cache_dir, cache_chosen=chosen, jobs=original.jobs,
        fresh_workers=original.fresh_workers, command=("fusionbench", *args.argv), rerun=original,
    )
    rerun.jobs_fit_here(original)  # before the run's own check, which names a --jobs never given
    for line in rerun.said(original):
        console.print(line)
    with rerun.variables_set(original, console):
        if args.dry_run:
            from harness.run.plan import dry_run

            return dry_run(request, console)
        from harness.run.runner import run

        return run(request, console)
