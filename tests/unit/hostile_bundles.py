"""A generated corpus of hostile and broken result bundles, each a mutation of a real one.

Start from a real bundle (tests/golden/v3: a CPU smoke run) and change one thing:
- a JSON field of bundle.json or of a cell record (one cell of each kind: an eager, an Inductor and
  a null cell, all valid, and a failed one), swapped for every other JSON type, for a number out
  of range (negative, huge, tiny, NaN, infinity), for a string of control and bidirectional
  characters and markup (terminal escapes, HTML, a `javascript:` link, Rich markup), removed, or
  given an extra key beside it;
- a file: removed, emptied, cut in half, filled with bytes that are not UTF-8, or replaced by a
  FIFO, a directory or a symbolic link; or an extra file added.

Each case re-hashes the bundle's manifest after the change (unless the change is to the manifest
itself), so that it reaches past the integrity check to every deeper reader.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.bundle import manifest

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "v3"
HOSTILE_TEXT = "\x1b[31mred\x1b[0m\x07\r<script>alert(1)</script>[red]x[/red][/][evil](javascript:alert(1))\u202eexe.txt|`"
NAN = float("nan")

#: What a JSON value is swapped for; NaN and infinity are written as the bare words Python's json writes.
REPLACEMENTS: dict[str, Any] = {
    "null": None, "true": True, "zero": 0, "negative": -1, "huge-int": 10**19, "huge-float": 1e300, "tiny": 1e-300,
    "nan": NAN, "infinity": float("inf"), "text": HOSTILE_TEXT, "empty-text": "", "list": [HOSTILE_TEXT, None],
    "empty-list": [], "object": {HOSTILE_TEXT: HOSTILE_TEXT}, "empty-object": {},
}
FILE_DAMAGE = ("missing", "empty", "truncated", "not-utf8", "fifo", "directory", "symlink")


@dataclass(frozen=True)
class Case:
    """One mutation: `file` (relative to the bundle), and either a JSON `path` with its `change`
    (a REPLACEMENTS key, `remove` or `extra-key`) or a file `damage` (FILE_DAMAGE, or `extra-file`)."""

    file: str
    path: tuple[str | int, ...] = ()
    change: str = ""
    damage: str = ""

    @property
    def name(self) -> str:
        if self.damage:
            return f"{self.file}:{self.damage}"
        return f"{self.file}:{'/'.join(map(str, self.path)) or '(top)'}:{self.change}"


def _paths(value: Any, prefix: tuple[str | int, ...] = ()) -> Iterator[tuple[str | int, ...]]:
    """Every path into a JSON value (lists: their first element only: the others have its shape)."""
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*prefix, key))
    elif isinstance(value, list) and value:
        yield from _paths(value[0], (*prefix, 0))


def _chosen_cells() -> list[str]:
    """One cell record of each kind: eager, Inductor and null (valid), and a failed one."""
    chosen: dict[str, str] = {}
    for path in sorted((GOLDEN / "cells").glob("*.json")):
        record = json.loads(path.read_text())
        kind = record["config"]["backend"] if record["status"] == "valid" else record["status"]
        chosen.setdefault(kind, f"cells/{path.name}")
    return sorted(chosen.values())


def all_cases() -> list[Case]:
    cases = []
    for rel in ["bundle.json", *_chosen_cells()]:
        data = json.loads((GOLDEN / rel).read_text())
        for path in _paths(data):
            cases += [Case(rel, path, change) for change in REPLACEMENTS]
            if path:
                cases.append(Case(rel, path, "remove"))
            if isinstance(_at(data, path), dict):
                cases.append(Case(rel, path, "extra-key"))
    files = sorted(p.relative_to(GOLDEN).as_posix() for p in GOLDEN.rglob("*") if p.is_file())
    cases += [Case(rel, damage=damage) for rel in files for damage in FILE_DAMAGE]
    cases += [Case(rel, damage="extra-file") for rel in ("stray.txt", "cells/0123456789abcdef.json", "cells/stray/x.log")]
    return cases


def sample(count: int, seed: int) -> list[Case]:
    """`count` cases drawn with `seed`, always the same ones for the same arguments."""
    return random.Random(seed).sample(all_cases(), count)


def _at(data: Any, path: tuple[str | int, ...]) -> Any:
    for key in path:
        data = data[key]
    return data


def make(case: Case, root: Path) -> Path:
    """A copy of the golden bundle at `root` with `case` applied; its manifest re-hashed."""
    shutil.copytree(GOLDEN, root)
    target = root / case.file
    if case.damage:
        _damage(target, case.damage)
    else:
        data = json.loads(target.read_text())
        _mutate(data, case)
        target.write_text(json.dumps(data, indent=1))  # allow_nan: NaN and Infinity as bare words
    if case.file != manifest.MANIFEST and case.damage not in ("missing", "fifo", "directory", "symlink"):
        manifest.write(root)
    return root


def _mutate(data: Any, case: Case) -> None:
    if not case.path:
        if case.change == "extra-key":
            data[HOSTILE_TEXT] = HOSTILE_TEXT
        elif case.change in REPLACEMENTS:
            data.clear()  # the top level itself: keep the object, lose everything in it
        return
    parent = _at(data, case.path[:-1])
    key = case.path[-1]
    if case.change == "remove":
        del parent[key]
    elif case.change == "extra-key":
        parent[key][HOSTILE_TEXT] = HOSTILE_TEXT
    else:
        parent[key] = REPLACEMENTS[case.change]


def _damage(target: Path, damage: str) -> None:
    if damage == "extra-file":
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(HOSTILE_TEXT)
        return
    content = target.read_bytes()
    target.unlink()
    if damage == "empty":
        target.write_bytes(b"")
    elif damage == "truncated":
        target.write_bytes(content[: len(content) // 2])
    elif damage == "not-utf8":
        target.write_bytes(b"\xff\xfe\x00" + content[:100])
    elif damage == "fifo":
        os.mkfifo(target)
    elif damage == "directory":
        target.mkdir()
    elif damage == "symlink":
        target.symlink_to("/etc/hostname")
