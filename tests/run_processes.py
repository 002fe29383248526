"""The processes a `fusionbench run` has started for its cells, as the integration tests look for them."""

from __future__ import annotations

from pathlib import Path

import psutil

FRESH = "harness.measure.worker"  # `python -m harness.measure.worker REQUEST`
PRELOADED = "harness.measure.preloaded"  # a preloaded parent, and the workers it forked (its command line)


def workers_of(pid: int, with_parents: bool = False) -> list[psutil.Process]:
    """The cells' workers running under process `pid` (fresh, or forked by a preloaded parent), and
    with `with_parents` the preloaded parents too."""
    try:
        below = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []
    found = []
    for process in below:
        try:
            command = process.cmdline()
            forked = PRELOADED in command and process.ppid() != pid  # a parent's child, not the parent
        except psutil.Error:
            continue
        if FRESH in command or forked or (with_parents and PRELOADED in command):
            found.append(process)
    return found


def phase_of(worker: psutil.Process) -> str:
    """The phase a cell's worker says it is in (the `phase` file in its folder, which is its working
    directory: harness/run/isolation.py), or "" before it has named one or once it is gone."""
    try:
        return Path(worker.cwd(), "phase").read_text().strip()
    except (OSError, psutil.Error):
        return ""
