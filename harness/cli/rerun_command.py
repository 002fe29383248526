"""`fusionbench rerun BUNDLE`: run again, on this machine, the cells a bundle ran, as a new bundle
whose bundle.json names the original (`rerun_of`); harness/run/rerun.py says what is read from the
original and what the rerun is refused for."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from harness.cli.path_argument import path_argument
from harness.errors import ConfigError
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
    rerun.add_argument("--dry-run", action="store_true",
                       help="list the cells the rerun would run here (or skip, and why); run nothing, write nothing")


def cmd_rerun(args: argparse.Namespace, console: Console, cache_dir: Path) -> int:
    from harness.run import rerun
    from harness.run.rerun_original import read
    from harness.run.run_request import RunRequest
    from harness.scenario.cells import parse_only

    if args.only is not None and len(args.only) > 1:
        raise ConfigError(f"--only is given {len(args.only)} times; give it once, its KEY=VALUE pairs joined by commas "
                          f"(--only {','.join(args.only)})")
    only = parse_only(args.only[0]) if args.only is not None else None
    original = read(args.bundle, only)
    request = RunRequest(
        scenario_path=None, device=original.device, only=original.only, out_dir=args.out or Path("results"),
        cache_dir=None if original.without_cache else cache_dir, jobs=original.jobs,
        fresh_workers=original.fresh_workers, command=("fusionbench", *args.argv), rerun=original,
    )
    with rerun.variables_set(original, console):
        if args.dry_run:
            from harness.run.plan import dry_run

            return dry_run(request, console)
        from harness.run.runner import run

        return run(request, console)
