"""What an engine of the project's own (harness/container/engine.py) keeps in its data root, and
what `engine stop --purge` may delete there.

The root holds the daemon's `data` folder (its images: gigabytes) and its log. A purge deletes them
only where they are the engine's: the root an engine started in with an empty slate carries a
marker file, and the default root is the project's by its name. A `data` folder that was there
before any engine started in its root (`FUSIONBENCH_ENGINE_ROOT=$HOME`) is never the engine's.

A plain `engine stop` keeps the images and removes the state file that named the root, so the
purge that follows it finds the root as `FUSIONBENCH_ENGINE_ROOT` (or the default) names it, and
removes the data only where the marker says an engine of the project's own left it and no dockerd
works in it any more.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from harness.container.host_processes import PROC, Process, mounts_under, process

DEFAULT_ROOT = Path("/var/lib/fusionbench-engine")
#: Left in a root an engine started in with an empty slate (no `data` folder, or the default root):
#: its `data` and log are the engine's, which a purge may remove.
ROOT_MARKER = ".fusionbench-engine"
LOG_NAME = "dockerd.log"


def owns_data(root: Path) -> bool:
    """Whether `data` (and the log) in `root` are an engine's: the default root, a root an engine
    started in with no `data` folder (it left its marker), or one with none yet."""
    return (root / ROOT_MARKER).exists() or root == DEFAULT_ROOT or not (root / "data").exists()


def left_by_own_engine(root: Path) -> bool:
    """Whether `root` holds what a stopped engine of the project's own left there: its marker, or,
    in the default root, a `data` folder (an engine of an earlier version left no marker)."""
    return (root / ROOT_MARKER).exists() or (root == DEFAULT_ROOT and (root / "data").exists())


def in_use(root: Path) -> str | None:
    """Why the `data` folder in `root` cannot be deleted now, or None: a dockerd runs with it as
    its data root (whoever started it), or something is still mounted in it (deleting through a
    mount deletes what it shows)."""
    data = root / "data"
    running = dockerd_working_in(data)
    if running is not None:
        return f"a dockerd (PID {running.pid}) runs with its images there; stop that engine first"
    mounted = mounts_under(data)
    if mounted:
        return f"{mounted[0]} is still mounted; unmount it (umount {mounted[0]}) first"
    return None


def dockerd_working_in(data: Path) -> Process | None:
    """A running process named dockerd whose `--data-root` is `data`, or None; both with their links
    resolved (a root named through a link is the same folder)."""
    data = Path(os.path.realpath(data))
    for entry in PROC.iterdir():
        if entry.name.isdigit() and _data_root(entry) == data:
            found = process(int(entry.name))
            if found is not None and found.running():
                return found
    return None


def _data_root(entry: Path) -> Path | None:
    """The `--data-root` of the dockerd whose /proc entry this is, its links resolved (a relative
    one from the dockerd's own working folder), or None for another process."""
    try:
        words = [word.decode(errors="replace") for word in (entry / "cmdline").read_bytes().split(b"\0") if word]
    except OSError:
        return None
    if not words or Path(words[0]).name != "dockerd":
        return None
    named = None
    for index, word in enumerate(words[1:], start=1):
        if word.startswith("--data-root="):
            named = word.removeprefix("--data-root=")
        elif word == "--data-root" and index + 1 < len(words):
            named = words[index + 1]
        if named is not None:
            break
    if named is None:
        return None
    try:
        cwd = os.readlink(entry / "cwd")
    except OSError:
        cwd = os.getcwd()
    return Path(os.path.realpath(os.path.join(cwd, named)))


def purge(root: Path) -> str:
    """Remove what the engine writes in its root (the daemon's data folder, its log), and the root
    only where nothing else is left in it: a root named anew (`FUSIONBENCH_ENGINE_ROOT=$HOME`) may
    hold files that are not the engine's, and a purge deleted them with it. Says what it removed."""
    shutil.rmtree(root / "data", ignore_errors=True)
    (root / LOG_NAME).unlink(missing_ok=True)
    (root / ROOT_MARKER).unlink(missing_ok=True)
    try:
        root.rmdir()  # only when empty
    except OSError:
        others = sorted(p.name for p in root.iterdir()) if root.is_dir() else []
        if others:
            return (f"removed ({root / 'data'}); {root} kept for what else it holds, which is not the "
                    f"engine's ({', '.join(others[:3])}{', ...' if len(others) > 3 else ''})")
    return f"removed ({root})"
