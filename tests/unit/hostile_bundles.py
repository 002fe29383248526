"""A generated corpus of hostile and broken result bundles, each a mutation of a real one.

Start from a real bundle (tests/golden/v3: a CPU smoke run) and change one thing:
- a JSON field of bundle.json or of a cell record (one cell of each kind: an eager, an Inductor and
  a null cell, all valid, and a failed one), swapped for every other JSON type, for a number out
  of range (negative, huge, tiny, NaN, infinity), for a string of control and bidirectional
  characters and markup (terminal escapes, HTML, a `javascript:` link, Rich markup), removed, or
  given an extra key beside it;
- a file: removed, emptied, cut in half, filled with bytes that are not UTF-8, or replaced by a
  FIFO, a directory or a symbolic link; or an extra file added.

From the MLPerf bundle (tests/golden/mlperf: accuracy runs and compliance tests), one class each:
- path escape: every path a cell record names (its LoadGen, accuracy and compliance folders) set
  to climb out with `..`, to an absolute path, through a symbolic link, or a compliance test's key
  renamed to climb out of pack's output; `outside/` beside the bundle holds a copy of the cell's
  logs with a marker in every file (`SENTINEL`), which nothing may read into its output, and
  nothing may be written beside the bundle;
- shape: each field of the accuracy and compliance records swapped as above;
- contradiction: a figure edited against the files beside it (a verdict against its verify file,
  top-1 and total against the accuracy log, user.conf's overrides stripped);
- foreign cell: a cell record and its folder copied in from the MLPerf bundle and listed.

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
MLPERF = GOLDEN.parent / "mlperf"
MLPERF_CELL = "cells/fe0739a275a7c07b.json"  # the eager cell: accuracy, TEST01 and TEST04
OUTSIDE = "outside"  # beside the bundle: a copy of the cell's logs, each file marked
SENTINEL = "SENTINEL-outside-the-bundle"
ESCAPES = ("escape-parent", "escape-absolute", "escape-middle", "escape-symlink")
CONTRADICTIONS = ("compliance-passed", "top1", "total", "user-conf-stripped", "verify-flipped")
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
    base: str = "v3"  # the golden bundle mutated: v3 or mlperf

    @property
    def name(self) -> str:
        prefix = "" if self.base == "v3" else f"{self.base}:"
        if self.damage:
            return f"{prefix}{self.file}:{self.damage}"
        return f"{prefix}{self.file}:{'/'.join(map(str, self.path)) or '(top)'}:{self.change}"


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
    return cases + escape_cases() + shape_cases() + contradiction_cases() + [foreign_cell_case()]


def escape_cases() -> list[Case]:
    """Every path the MLPerf cell names, set to each escape; each compliance key renamed to climb out."""
    record = json.loads((MLPERF / MLPERF_CELL).read_text())
    fields = [("metrics", "loadgen", "log_dir"), ("metrics", "accuracy", "log_dir")]
    fields += [("metrics", "compliance", test, "log_dir") for test in sorted(record["metrics"]["compliance"])]
    cases = [Case(MLPERF_CELL, path, change, base="mlperf") for path in fields for change in ESCAPES]
    cases += [Case(MLPERF_CELL, ("metrics", "compliance", test), "rename-key-escape", base="mlperf")
              for test in sorted(record["metrics"]["compliance"])]
    return cases


def shape_cases() -> list[Case]:
    """Each field of the MLPerf cell's accuracy and compliance records, swapped for every other shape."""
    record = json.loads((MLPERF / MLPERF_CELL).read_text())
    cases = []
    for part in ("accuracy", "compliance"):
        for path in _paths(record["metrics"][part], ("metrics", part)):
            cases += [Case(MLPERF_CELL, path, change, base="mlperf") for change in REPLACEMENTS]
            cases.append(Case(MLPERF_CELL, path, "remove", base="mlperf"))
    return cases


def contradiction_cases() -> list[Case]:
    return [Case(MLPERF_CELL, change=f"contradiction-{name}", base="mlperf") for name in CONTRADICTIONS]


def foreign_cell_case() -> Case:
    return Case("bundle.json", change="foreign-cell")


def sample(count: int, seed: int) -> list[Case]:
    """`count` cases drawn with `seed`, always the same ones for the same arguments."""
    return random.Random(seed).sample(all_cases(), count)


def _at(data: Any, path: tuple[str | int, ...]) -> Any:
    for key in path:
        data = data[key]
    return data


def make(case: Case, root: Path) -> Path:
    """A copy of the golden bundle at `root` with `case` applied; its manifest re-hashed. A case
    of the MLPerf bundle also lays `outside/` beside it (see the module's docstring)."""
    shutil.copytree(MLPERF if case.base == "mlperf" else GOLDEN, root)
    target = root / case.file
    if case.base == "mlperf":
        _lay_outside(root)
    if case.damage:
        _damage(target, case.damage)
    elif case.change == "foreign-cell":
        _add_foreign_cell(root)
    elif case.change.startswith("contradiction-"):
        _contradict(root, case.change.removeprefix("contradiction-"))
    else:
        data = json.loads(target.read_text())
        if case.change.startswith("escape-") or case.change == "rename-key-escape":
            _escape(data, case, root)
        else:
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


def _cell_dir(root: Path) -> Path:
    return root / MLPERF_CELL.removesuffix(".json")


def _lay_outside(root: Path) -> None:
    """`outside/`: the cell's LoadGen folders, every file with the marker, as an escape would find them."""
    outside = root.parent / OUTSIDE
    shutil.copytree(_cell_dir(root) / "loadgen", outside)
    for path in outside.rglob("*"):
        if path.is_file():
            with path.open("a") as handle:
                handle.write(f"\n{SENTINEL} TEST PASS\n" if path.suffix == ".txt" else f"\n{SENTINEL}\n")


def _escape(data: Any, case: Case, root: Path) -> None:
    parent = _at(data, case.path[:-1])
    key = case.path[-1]
    if case.change == "rename-key-escape":  # pack's folder for the test: climb out of --out (7 levels deep)
        parent["../" * 7 + "escaped"] = parent.pop(key)
        return
    folder = str(parent[key]).rsplit("/", 1)[-1]  # attempt-1, accuracy, TEST01, ...
    if case.change == "escape-parent":
        parent[key] = f"../../../{OUTSIDE}/{folder}"
    elif case.change == "escape-absolute":
        parent[key] = str(root.parent / OUTSIDE / folder)
    elif case.change == "escape-middle":
        parent[key] = f"loadgen/../../../../{OUTSIDE}/{folder}"
    else:  # escape-symlink: a link inside the cell's folder, to the folder outside
        (_cell_dir(root) / "escape").symlink_to(root.parent / OUTSIDE)
        parent[key] = f"escape/{folder}"


def _contradict(root: Path, name: str) -> None:
    """One figure edited against the files beside it (the files themselves left as they are)."""
    path = root / MLPERF_CELL
    record = json.loads(path.read_text())
    metrics = record["metrics"]
    if name == "compliance-passed":  # TEST01's performance check failed; say it passed
        metrics["compliance"]["TEST01"]["checks"]["performance"] = True
        metrics["compliance"]["TEST01"]["passed"] = True
    elif name == "top1":
        metrics["accuracy"]["top1_percent"], metrics["accuracy"]["good"] = 76.5, round(0.765 * metrics["accuracy"]["total"])
    elif name == "total":
        metrics["accuracy"]["total"] = 50000
    elif name == "user-conf-stripped":
        conf = _cell_dir(root) / metrics["loadgen"]["log_dir"] / "user.conf"
        conf.write_text("".join(line + "\n" for line in conf.read_text().splitlines() if line.startswith(("#", "resnet50"))))
    else:  # verify-flipped: the verify file says the opposite of the record
        verify = _cell_dir(root) / "loadgen" / "TEST04" / "verify_performance.txt"
        verify.write_text(verify.read_text().replace("TEST PASS", "TEST FAIL"))
    path.write_text(json.dumps(record, indent=1))


def _add_foreign_cell(root: Path) -> None:
    """A valid cell of the MLPerf bundle, its record and folder copied in and listed in bundle.json."""
    shutil.copy(MLPERF / MLPERF_CELL, root / MLPERF_CELL)
    shutil.copytree(MLPERF / MLPERF_CELL.removesuffix(".json"), root / MLPERF_CELL.removesuffix(".json"))
    header = json.loads((root / "bundle.json").read_text())
    record = json.loads((root / MLPERF_CELL).read_text())
    header["cells"].append({"id": record["id"], "label": record["label"]})
    (root / "bundle.json").write_text(json.dumps(header, indent=1))
