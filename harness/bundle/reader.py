"""Reading a result bundle for validate, compare, report and pack: strict, bounded, read-only.

Every JSON file goes through `harness.bundle.safe_json` (size, UTF-8, finite numbers, unique keys,
bounded nesting) and every record through `harness.bundle.migrations` (newer versions refused, older
ones upgraded in memory). Files are read through a `harness.bundle.snapshot.Snapshot`, so a file
validate has hashed is not read again. Nothing here writes, executes or follows a path the bundle names
outside itself: cell files are found by the ids in bundle.json, which must be 16 hex digits.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import pydantic

from harness.bundle.cell_record import CellRecord
from harness.bundle.files import CELLS, HEADER
from harness.bundle.header_record import BundleHeader
from harness.bundle.manifest import MANIFEST
from harness.bundle.migrations import record_version, upgraded_cell, upgraded_header
from harness.bundle.safe_json import MAX_JSON_BYTES, parse_json
from harness.bundle.snapshot import Snapshot
from harness.errors import BundleError, BundleUnreadable, SchemaVersionError
from harness.models.catalog import RECORD

_CELL_ID = re.compile(r"^[0-9a-f]{16}$")


@dataclass
class LoadedBundle:
    """A bundle as this harness's current schema sees it."""

    files: Snapshot  # what was read, each file once: the logs a reader takes next come from it too
    version: int  # the schema version it was written with
    header: dict[str, Any]  # upgraded to the current version
    cells: list[dict[str, Any]] = field(default_factory=list)  # upgraded, in bundle.json's order
    raw_header: dict[str, Any] = field(default_factory=dict)  # as written, for schema checks
    raw_cells: dict[str, Any] = field(default_factory=dict)  # id -> record as written
    missing: list[str] = field(default_factory=list)  # ids listed in bundle.json with no record

    @property
    def root(self) -> Path:
        return self.files.root

    @property
    def name(self) -> str:
        return str(self.header.get("run_id") or self.root.name)

    @property
    def missing_labels(self) -> list[str]:
        """Each cell listed in bundle.json with no record, by the label it was planned with (its id
        where the header gives none): what `--resume` would run."""
        labels = {planned.id: planned.label for planned in self.header_record.cells}
        return [labels.get(cell, cell) for cell in self.missing]

    @property
    def model_plugins(self) -> object:
        """bundle.json `model_plugins`: its scenario's plugin models as it ran them, which its cells
        expand from (`expand`'s `recorded`), installed here or not; None where it ran none."""
        return self.header.get("model_plugins") if isinstance(self.header, dict) else None

    @cached_property
    def records(self) -> list[CellRecord]:
        """The cells as typed records, in bundle.json's order: what the report, compare and the
        run's summary read. Every cell of a bundle that passed validate reads as one; BundleError
        names the first that does not."""
        records = []
        for cell in self.cells:
            try:
                # its plugin models as this bundle recorded them, installed here or not
                records.append(CellRecord.model_validate(cell, context={RECORD: self.model_plugins}))
            except pydantic.ValidationError as exc:
                where = f"{CELLS}/{cell.get('id')}.json"
                raise BundleError(f"{where}: not a cell record this harness reads: {str(exc).splitlines()[0]}") from None
        return records

    @cached_property
    def header_record(self) -> BundleHeader:
        """bundle.json as a typed record: what the report and compare read of the run and the
        machine it ran on. The header of a bundle that passed validate reads as one; BundleError
        says so where one does not."""
        try:
            return BundleHeader.model_validate(self.header)
        except pydantic.ValidationError as exc:
            raise BundleError(f"{HEADER}: not a header this harness reads: {str(exc).splitlines()[0]}") from None


def cell_ids(header: dict[str, Any], where: str = HEADER) -> list[str]:
    """The cell ids bundle.json lists, each checked to be a safe file name."""
    entries = header.get("cells")
    if not isinstance(entries, list):
        raise BundleError(f"{where}: 'cells' is not a list")
    ids = []
    for index, entry in enumerate(entries):
        cell = entry.get("id") if isinstance(entry, dict) else None
        if not isinstance(cell, str) or not _CELL_ID.match(cell):
            raise BundleError(f"{where}: cells/{index}: id {str(cell)[:40]!r} is not 16 hex digits")
        ids.append(cell)
    return ids


def check_root(root: Path) -> None:
    """BundleError unless `root` is a folder with a bundle.json, saying which it is not;
    BundleUnreadable where this user may not look into it."""
    try:
        if not root.exists():
            raise BundleError(f"{root}: no such file or directory")
        if not root.is_dir():
            raise BundleError(f"{root}: not a directory")
        if not (root / HEADER).exists():
            packed = (root / MANIFEST).is_file() and any((root / division).is_dir() for division in ("open", "closed"))
            raise BundleError(f"{root}: not a FusionBench result bundle (no {HEADER})" + (
                "; it is a submission tree `pack` wrote: give the bundle it was packed from, or check the tree with "
                "MLPerf's submission checker (docs/submitting.md, section 5)" if packed else ""))
    except PermissionError as exc:  # a folder closed to this user, its own or one above: pathlib's tests raise there
        raise BundleUnreadable(f"{root}: unreadable ({exc.strerror})") from None


def load(source: Path | Snapshot) -> LoadedBundle:
    """The bundle at `source` (a path, or the snapshot validate read it through); BundleError (one
    line, naming the file) when it cannot be read; SchemaVersionError naming the bundle and its file
    when it is newer than this harness (a command given several bundles refuses the whole command
    for it, so the line must say which)."""
    files = source if isinstance(source, Snapshot) else Snapshot(source)
    check_root(files.root)
    try:
        return _read(files)
    except SchemaVersionError as exc:
        raise SchemaVersionError(f"{files.root}: {exc}") from None


def _read(files: Snapshot) -> LoadedBundle:
    root = files.root
    raw_header = parse_json(files.text(HEADER, max_bytes=MAX_JSON_BYTES), HEADER)
    version = record_version(raw_header, HEADER)
    header = upgraded_header(raw_header)
    loaded = LoadedBundle(files=files, version=version, header=header, raw_header=raw_header)
    for cell in cell_ids(header):
        where = f"{CELLS}/{cell}.json"
        if not os.path.lexists(root / where):
            loaded.missing.append(cell)
            continue
        raw = parse_json(files.text(where, max_bytes=MAX_JSON_BYTES), where)
        loaded.raw_cells[cell] = raw
        loaded.cells.append(upgraded_cell(raw, where))
    return loaded


def lookup(data: Any, *path: str) -> Any:
    """The value at `path` in a record read from a bundle, or None where a level is missing or is
    not an object (a bundle is read, never trusted to have the shape it should)."""
    for key in path:
        data = data.get(key) if isinstance(data, dict) else None
    return data
