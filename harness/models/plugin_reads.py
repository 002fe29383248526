"""The environment variables a plugin model's own code reads, as it reads them.

A cell's worker gets a whitelisted environment (harness/run/isolation.py): a variable a plugin
reads that the scenario's `env:` does not name is set in the shell and missing in each worker. Read
with `os.environ["ACME_WEIGHTS"]` it fails the cell, in words naming it; read with
`os.environ.get("ACME_SCALE", "1.0")` or `os.getenv`, the cell runs with the default, and its
figures are another model's, without a word. Guessing the names from the plugin's source would be
wrong both ways (a name built at run time, a read in a branch never taken), so the reads are
observed: while a plugin's module loads (`plugins.found`) and while its `build` runs (the worker),
each key looked up in `os.environ` (`[...]`, `.get`, `in`, `os.getenv`) by a line of the plugin's
own package is recorded, and whether it was there. What is not seen: a read through a library the
plugin calls (its own variables, `HF_HOME`), a read in `forward`, a walk over the whole environment
(`dict(os.environ)`, `os.environ.copy()`, `{**os.environ}`: each key it reads is no look-up of the
plugin's, and a walk read as look-ups named every variable of the shell), and C code's `getenv`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType
from typing import Any

from harness.models.plugin_code import within

#: The modules between a read and the line that made it: `os.getenv` calls `environ.get`, which is
#: Mapping's and calls `__getitem__`, as `in` does (frozen modules in Python 3.11: no file to match).
_PLUMBING = ("os", "_collections_abc", "collections.abc")


@dataclass(frozen=True)
class Read:
    """One look-up of `name` in os.environ, by a line of `file`; `found`: the variable was set."""

    name: str
    file: str
    found: bool


@contextmanager
def watched() -> Iterator[list[Read]]:
    """Record each look-up in os.environ made inside the block, in the order made."""
    reads: list[Read] = []
    original, original_iter = os._Environ.__getitem__, os._Environ.__iter__
    #: (frame, instruction) -> the frame: where a walk over the whole environment began, which reads each
    #: key from that same instruction (`dict(os.environ)`); the frame kept, so that its id stays its own
    walks: dict[tuple[int, int], FrameType] = {}

    def caller() -> FrameType:
        frame = sys._getframe(2)
        while frame.f_back is not None and frame.f_globals.get("__name__") in _PLUMBING:
            frame = frame.f_back
        return frame

    def walked(self: Any) -> Any:
        if self is os.environ:
            frame = caller()
            walks[(id(frame), frame.f_lasti)] = frame
        return original_iter(self)

    def looked_up(self: Any, key: Any) -> Any:
        if self is not os.environ:  # os.environb, a bytes view
            return original(self, key)
        frame = caller()
        if (id(frame), frame.f_lasti) in walks:  # a key of a walk, not a look-up
            return original(self, key)
        try:
            value = original(self, key)
        except KeyError:
            reads.append(Read(str(key), frame.f_code.co_filename, False))
            raise
        reads.append(Read(str(key), frame.f_code.co_filename, True))
        return value

    os._Environ.__getitem__, os._Environ.__iter__ = looked_up, walked  # type: ignore[method-assign]
    try:
        yield reads
    finally:
        os._Environ.__getitem__, os._Environ.__iter__ = original, original_iter  # type: ignore[method-assign]


def package_files(module: str, import_root: str) -> str:
    """The folder (or file, for a top-level module) of `module`'s top-level package under
    `import_root` (plugin_code.import_root): where a line of the plugin's own package lies."""
    top = os.path.join(import_root, module.partition(".")[0])
    return top if os.path.isdir(top) else top + ".py"


def made_under(reads: list[Read], files: str) -> list[Read]:
    """Those of `reads` made by a line under `files` (`package_files`), in order: one check of each
    distinct file, however many look-ups its lines made."""
    under = {file: within(file, files) for file in {read.file for read in reads}}
    return [read for read in reads if under[read.file]]


def by(reads: list[Read], files: str, found: bool | None = None) -> list[str]:
    """The names of `reads` made by a line under `files` (`package_files`), each once, sorted; of
    those set (`found` True) or not (False) alone, where given."""
    return sorted({read.name for read in made_under(reads, files) if found is None or read.found == found})


def unset(reads: list[Read]) -> list[str]:
    """The names `reads` looked up and did not find, each once, sorted."""
    return sorted({read.name for read in reads if not read.found})
