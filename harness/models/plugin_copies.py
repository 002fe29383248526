"""Copies of one plugin package installed twice: which runs, and which never does.

A team's package can be installed in the venv and, another copy, in a folder on PYTHONPATH (a
checkout's build, a colleague's site). importlib.metadata's `entry_points` reads one copy of each
package, the first on sys.path (PYTHONPATH's folders come before the venv's site-packages), and
the import system loads its modules from there too: the other copy is never read. Two copies of
one version that register a model at one `module:attribute` are one package, and nothing is said
(two different packages registering one name are refused: harness/models/plugins.py).
A copy of another version, or one that registers the model elsewhere, is one a user may believe
runs: `fusionbench rerun` asks for `pip install acme-models==1.0` where 2.0 runs, and after that
install into the venv 2.0 on PYTHONPATH still runs, and the rerun is refused again, the copy
installed never named. So each model whose package has such a copy says which copy runs and
where the other is (`plugins.Found.shadowed`).

A copy first on sys.path that registers no model at all (an old editable install, a release from
before the package had models) hides every later copy's: `entry_points` reads that copy alone, and a
file naming a model of the later one was refused as naming an unknown model, the copy that hid it
never named. So each model only a hidden copy registers is said, with the copy that hides it
(`hidden_by_earlier`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import metadata

from harness.distribution_names import name_and_version, normalized


@dataclass(frozen=True)
class Copy:
    """One installed copy of a package: its version, its folder and its entry points of a group."""

    version: str
    folder: str
    entry_points: dict[str, str]  # name -> `module:attribute`


def installed(group: str) -> dict[str, list[Copy]]:
    """Every package installed in more than one folder on sys.path, one copy at least registering
    entry points in `group`, by `normalized` name, each copy in sys.path's order (a folder named
    twice is one copy), those that register none among them."""
    found: dict[str, list[Copy]] = {}
    for dist in metadata.distributions():  # every copy: entry_points() reads the first of each name alone
        name, version = name_and_version(dist)
        if not name:
            continue
        folder = str(dist.locate_file(""))
        listed = found.setdefault(normalized(name), [])
        if all(os.path.realpath(copy.folder) != os.path.realpath(folder) for copy in listed):
            listed.append(Copy(version, folder, {ep.name: ep.value for ep in dist.entry_points if ep.group == group}))
    return {name: listed for name, listed in found.items() if len(listed) > 1 and any(copy.entry_points for copy in listed)}


def copies(every: dict[str, list[Copy]]) -> dict[str, list[Copy]]:
    """Of `every` (`installed`), the packages with more than one copy registering entry points."""
    registering = {name: [copy for copy in listed if copy.entry_points] for name, listed in every.items()}
    return {name: listed for name, listed in registering.items() if len(listed) > 1}


def hidden_by_earlier(every: dict[str, list[Copy]]) -> dict[str, tuple[str, Copy, Copy]]:
    """Of `every` (`installed`), model name -> (its package, the copy first on sys.path, which
    registers no entry point and so hides every other, and the first later copy registering it)."""
    hidden: dict[str, tuple[str, Copy, Copy]] = {}
    for name, listed in every.items():
        if listed[0].entry_points:
            continue
        for copy in listed[1:]:
            for model in copy.entry_points:
                hidden.setdefault(model, (name, listed[0], copy))
    return hidden


def hidden_text(model: str, distribution: str, first: Copy, later: Copy) -> str:
    """What a file naming `model`, which only the copy `later` of `distribution` registers, behind
    `first` (`hidden_by_earlier`), is told."""
    return (f"unknown model {model!r}: {distribution} {later.version} registers it ({later.entry_points[model]}, in "
            f"{later.folder}), but {distribution} {first.version}, in {first.folder}, registers no model and comes "
            f"first on sys.path, where Python reads one copy of a package, the first, and never the other: take "
            f"{first.folder} off PYTHONPATH, or uninstall that copy")


def never_loaded(model: str, distribution: str, version: str, entry_point: str, folder: str,
                 installed: dict[str, list[Copy]]) -> list[Copy]:
    """The copies of `distribution` in `installed` (`copies`) beside the one in `folder` that runs
    `model` (at `version`, from `entry_point`) that are not that one: of another version, or
    registering the model elsewhere or not at all. A copy alike in both is the same package."""
    here = os.path.realpath(folder)
    return [copy for copy in installed.get(normalized(distribution), [])
            if os.path.realpath(copy.folder) != here
            and (copy.version != version or copy.entry_points.get(model) != entry_point)]


def described(distribution: str, model: str, others: list[Copy]) -> str:
    """`others` (from `never_loaded`) in words: each copy's version, where `model` points and folder."""
    return ", ".join(f"{distribution} {copy.version} ({copy.entry_points.get(model, 'not registering it')}, in "
                     f"{copy.folder})" for copy in others)
