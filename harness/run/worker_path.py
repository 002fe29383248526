"""The folders a cell's worker imports from. It gets the PYTHONPATH of the `fusionbench` process,
which found the plugins (models and backends) the run names, unless the scenario's `env:` sets
PYTHONPATH: then that value stands in its place (harness/run/isolation.py `worker_environment`),
and a plugin found in a folder it leaves out is found by the parent, planned, and not found by
the worker, whose cell failed `worker exited with code 2 without an answer (in phase start)`,
the reason (`unknown model ...`) in its log alone. The parent reads its own PYTHONPATH only: a
folder named in `env:` alone gives the worker a plugin the parent never finds, and a file naming
its model is refused as naming an unknown one."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from harness import registry
from harness.models import catalog, plugins
from harness.run.isolation import worker_environment


def plugins_left_out(named: list[str] | tuple[str, ...], models: Iterable[str], backends: Iterable[str],
                     environ: Mapping[str, str]) -> str:
    """Where the scenario's `env:` (`named`) sets a PYTHONPATH that leaves out a folder of this
    process's (`environ`'s) in which a plugin among `models` and `backends` was found: which, and
    what to do; "" otherwise."""
    given = worker_environment(environ, named, {}, Path.cwd())["PYTHONPATH"]
    kept = {_resolved(folder) for folder in given.split(os.pathsep) if folder}
    left_out = {_resolved(folder) for folder in environ.get("PYTHONPATH", "").split(os.pathsep) if folder} - kept
    if not left_out:
        return ""
    found = plugins.found().models
    places = [(f"model {name!r} from {found[name].distribution} {found[name].version}", Path(found[name].folder))
              for name in catalog.plugin_records(list(models)) if found[name].folder]  # never a built-in's name
    places += [(f"backend {name!r} from {where[0]}", where[1])
               for name in dict.fromkeys(backends) if (where := registry.found_in(name)) is not None]
    value = next((item.partition("=")[2] for item in named if item.startswith("PYTHONPATH=")), "")
    for what, folder in places:
        if _resolved(str(folder)) in left_out:
            return (f"env: PYTHONPATH={value} leaves out {folder}, on this shell's PYTHONPATH, where this process found "
                    f"the {what}: each cell's worker gets env:'s PYTHONPATH in place of this shell's, and would not find "
                    f"it; add the folder to the value ({value}{os.pathsep}{folder}) or leave PYTHONPATH out of env: "
                    "(every worker gets this shell's)")
    return ""


def _resolved(folder: str) -> str:
    return os.path.realpath(folder)
