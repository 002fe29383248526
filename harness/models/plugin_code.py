"""Where a plugin model's code is imported from, beside the copy of its package whose metadata
registered it: a bundle records that copy's package and version, and its cells must run its code.

importlib.metadata finds the entry point in the first copy of the package's metadata on sys.path,
and the import system loads the module from the first folder on sys.path holding a module of that
name: two searches, which can end in two copies. Two ways were tried:

- `python -m harness.cli run ...` started in a folder holding the plugin's source (a checkout of
  the team's package): Python puts that folder first on this process's sys.path, and the model's
  module was imported from it, its description planning the cells, while each cell's worker, which
  starts in a folder of its own, imported the installed copy and built its model: the bundle
  recorded the installed package and its version, the input size of the source's description, and
  ran the installed copy's code. The folder was this process's alone.
- a bare copy of the package's modules (no metadata: a checkout's folder, an old `pip install
  --target` without its dist-info) in a folder on PYTHONPATH, before the installed copy: parent and
  workers alike ran that folder's code, recorded as the installed copy's package and version.

Both are refused, naming the folder the code came from (`disagreement`). An editable install's
code lies in its project's folder, which its metadata names (`direct_url.json`): that is its copy.
"""

from __future__ import annotations

import json
import os
import sys
from importlib.metadata import Distribution
from typing import Literal
from urllib.parse import unquote, urlparse


def import_root(module: str) -> str | None:
    """The folder on sys.path that `module` was imported from, as imported in this process, read from
    its own file, else from that of the nearest package above it that has one; None where none is
    imported with a file. Not the top-level package's file: a namespace package (`acme.vision` of an
    `acme` that several packages fill) has none, or that of whichever package holds its `__init__.py`."""
    parts = module.split(".")
    for depth in range(len(parts), 0, -1):
        imported = sys.modules.get(".".join(parts[:depth]))
        file = getattr(imported, "__file__", None)
        if file:  # a package's is its __init__.py, a folder deeper
            folder = os.path.dirname(os.path.abspath(str(file)))
            for _ in range(depth - (0 if getattr(imported, "__path__", None) is not None else 1)):
                folder = os.path.dirname(folder)
            return folder
    return None


def editable_source(dist: Distribution) -> str | None:
    """The project folder of an editable install (`pip install -e`), from its `direct_url.json`; None otherwise."""
    try:
        direct = json.loads(dist.read_text("direct_url.json") or "null")
    except (OSError, ValueError):
        return None
    if not (isinstance(direct, dict) and isinstance(direct.get("dir_info"), dict) and direct["dir_info"].get("editable")):
        return None
    url = urlparse(str(direct.get("url", "")))
    return str(unquote(url.path)) if url.scheme == "file" else None


def within(folder: str, parent: str) -> bool:
    """Whether `folder` (a file's path too) is `parent` or lies below it, links resolved."""
    folder, parent = os.path.realpath(folder), os.path.realpath(parent)
    return folder == parent or folder.startswith(parent.rstrip(os.sep) + os.sep)


def working_folder_first(top: str) -> str | None:
    """This process's working folder where Python put it first on sys.path (`python -m`, `-c`) and
    PYTHONPATH, which every worker gets, does not name it, nor does the rest of sys.path where every
    worker imports `top` (a top-level package or module) from it too (a `setup.py develop` install's
    .pth file names it: no folder before it holds `top`); None otherwise."""
    here = os.getcwd()
    if not sys.path or (sys.path[0] != "" and os.path.realpath(sys.path[0]) != os.path.realpath(here)):
        return None
    named = {os.path.realpath(os.path.abspath(p)) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p}
    later = [os.path.realpath(p) for p in sys.path[1:] if p]  # "" is each process's own working folder
    again = later.index(os.path.realpath(here)) if os.path.realpath(here) in later else None
    if again is not None and not any(os.path.exists(os.path.join(folder, top)) or os.path.exists(os.path.join(folder, f"{top}.py"))
                                     for folder in later[:again]):
        return None
    return None if os.path.realpath(here) in named else os.path.realpath(here)


def disagreement(name: str, where: str, module: str, dist: Distribution | None) -> str:
    """Why the model `name`, registered by `dist` (`where`: its package line) at `module`, is not run
    here: its code is imported from another folder than that copy's, or from this process's working
    folder, which no worker reads; "" where neither."""
    root = import_root(module)
    if root is None or dist is None:
        return ""
    top = module.partition(".")[0]
    started_in = working_folder_first(top)
    holder, copy = _copy_holding(root, dist), os.path.realpath(str(dist.locate_file("")))
    # the project an editable install names is no working folder's alone: each worker imports it through that install
    if started_in is not None and (copy == started_in or (os.path.realpath(root) == started_in and holder != "editable")):
        return (f"model {name!r} from {where}: this process imports {top} from {root}, the folder it was started in, "
                "which `python -m` puts first on sys.path; no cell's worker looks there (each starts in a folder of its "
                "own and imports the copy installed), so the cells would run other code than this process planned them "
                "from: start fusionbench from another folder (`./run.sh` does), having installed the copy you mean to run")
    if holder is not None:
        return ""
    return (f"model {name!r} from {where} would run other code: {top} is imported from {root}, a folder before that "
            f"copy on sys.path that holds no metadata of its package, so a bundle would record {where.split(' (')[0]} "
            f"and run that folder's code: take {root} off PYTHONPATH, or install the copy you mean to run")


def _copy_holding(root: str, dist: Distribution) -> Literal["editable", "installed"] | None:
    """Which copy of `dist`'s code holds `root`, the folder its module was imported from: the project
    an editable install names ("editable"), or the folder its metadata lies in ("installed"); None
    where neither does."""
    editable = editable_source(dist)
    if editable and within(root, editable):
        return "editable"
    return "installed" if within(root, str(dist.locate_file(""))) else None


def where_imported(module: str, dist: Distribution | None) -> str:
    """Of an entry point whose `module` did not load: where its top-level package was imported from,
    where that is not `dist`'s copy (a bare folder first on sys.path, lacking the module); "" otherwise."""
    root = import_root(module)
    if root is None or dist is None or _copy_holding(root, dist) is not None:
        return ""
    return f" ({module.partition('.')[0]} is imported from {root}, a folder before that copy on sys.path: take it off PYTHONPATH)"
