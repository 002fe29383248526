"""Writing a result bundle: a self-describing, checksummed directory per run.

    <run-dir>/bundle.json             what was run, on what, by which harness
    <run-dir>/cells/<cell-id>.json    one finished cell, written atomically the moment it ends
    <run-dir>/cells/<cell-id>/        its worker log and LoadGen logs
    <run-dir>/MANIFEST.sha256         every other file's SHA-256

JSON only; docs/result_schema.md documents every field. Reading a bundle someone else wrote
(validate, compare, report, pack) goes through `harness.bundle.reader` instead: strict, bounded,
and never writing. A bundle opened to resume is read once, through the snapshot `--resume` checks
(`opened`); a cell record this process writes is kept as written, so the run never reads back a
record it wrote or one the snapshot holds.
"""

from __future__ import annotations

import json
import os
import shutil
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from harness.bundle import lock, manifest, schema_check
from harness.bundle.cell_record import CellRecord
from harness.bundle.files import CELLS, HEADER
from harness.bundle.migrations import SCHEMA_VERSION, record_version
from harness.bundle.reader import check_root
from harness.bundle.safe_json import MAX_JSON_BYTES, parse_json
from harness.bundle.snapshot import Snapshot
from harness.bundle.statuses import FINISHED
from harness.errors import BundleError, BundleUnreadable, ConfigError
from harness.files.atomic import json_bytes, write_bytes_atomic, write_json_atomic
from harness.models.catalog import RECORD
from harness.plain_text import shell_word

# A cell in one of these states is done; anything else (no file, interrupted) runs on --resume.


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def new_run_id(name: str) -> str:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    # ASCII letters and digits only (the header's run_id pattern): str.isalnum takes "é" and "测" too
    safe = "".join(ch if (ch.isascii() and ch.isalnum()) or ch in "-_" else "-" for ch in name)[:60] or "run"
    return f"{stamp}-{safe}"


class Bundle:
    """A bundle this process writes, locked against any other writer while this object lives
    (`harness.bundle.lock`)."""

    def __init__(self, root: Path, header: dict[str, Any], held: int | None = None, opened: Snapshot | None = None) -> None:
        self.root = root.resolve()  # workers run in other directories
        self.header = header
        self._lock: int | None = lock.hold(self.root) if held is None else held
        self.opened = opened  # the files as `open` read them: what --resume validates and reads on from
        self._written: dict[str, dict[str, Any]] = {}  # the cell records this process wrote
        self._dropped: set[str] = set()  # the cell records this process removed (`drop_cell`)

    @property
    def device(self) -> str:
        """The device the run resolved to (a resume stays on it)."""
        return str(self.header["device"])

    @property
    def state(self) -> str:
        return str(self.header["state"])

    @property
    def cell_ids(self) -> list[str]:
        """The ids of the run's cells, in bundle.json's order."""
        return [str(entry["id"]) for entry in self.header["cells"]]

    @property
    def scenario_sha256(self) -> str:
        """The hash of the stored scenario (`harness.scenario.loading.sha256`): a resume's file must match it."""
        return str(self.header["scenario_sha256"])

    @property
    def stored_scenario(self) -> dict[str, Any]:
        """The resolved scenario the run stored: what a resume runs."""
        scenario: dict[str, Any] = self.header["scenario"]
        return scenario

    @property
    def model_plugins(self) -> object:
        """bundle.json `model_plugins`: its scenario's plugin models as it ran them, which its cells
        expand from (`expand`'s `recorded`); None where it ran none."""
        return self.header.get("model_plugins")

    def close(self) -> None:
        """Let another process write the bundle (the lock goes with its descriptor)."""
        if getattr(self, "_lock", None) is not None:
            os.close(self._lock)  # type: ignore[arg-type]
            self._lock = None

    __del__ = close

    @classmethod
    def create(cls, out_dir: Path, run_id: str, header: dict[str, Any]) -> Bundle:
        """Make `<out_dir>/<run_id>` (a new directory; a suffix is added if the name is taken)."""
        root = out_dir / run_id
        suffix = 1
        while root.exists():
            suffix += 1
            root = out_dir / f"{run_id}-{suffix}"
        root.mkdir(parents=True)
        bundle = cls(root, {"schema_version": SCHEMA_VERSION, "run_id": root.name, "state": "running", **header})
        (root / CELLS).mkdir()
        bundle.update_header()
        return bundle

    @classmethod
    def open(cls, root: Path) -> Bundle:
        """An existing bundle of this schema version, to resume; locked before anything is read."""
        try:
            check_root(root)
        except BundleUnreadable:
            raise  # a bundle, perhaps, that this user may not look into
        except BundleError as exc:
            raise ConfigError(f"{exc}; --resume takes a result bundle") from None
        path = root / HEADER
        held = lock.hold(root.resolve())
        opened = Snapshot(root.resolve())
        try:
            header = cls._resumable_header(root, path, opened)
        except BaseException:
            os.close(held)
            raise
        return cls(root, header, held, opened)

    @staticmethod
    def _resumable_header(root: Path, path: Path, opened: Snapshot) -> dict[str, Any]:
        # bounded; a FIFO or a link is refused, not read
        header = parse_json(opened.text(HEADER, str(path), max_bytes=MAX_JSON_BYTES), str(path))
        if not isinstance(header, dict):
            raise BundleError(f"{path}: not a JSON object")
        version = record_version(header, str(path))
        if version != SCHEMA_VERSION:
            raise BundleError(
                f"{path}: written with schema version {version}; this harness writes {SCHEMA_VERSION} and "
                "will not mix them in one bundle: run the scenario again instead of resuming"
            )
        broken = schema_check.problems(header, "bundle", version, str(path))
        if broken:
            raise BundleError(f"cannot resume: {broken[0]}" + (f" (and {len(broken) - 1} more)" if len(broken) > 1 else ""))
        if not (root / CELLS).is_dir():
            raise BundleError(f"cannot resume {root}: it has no {CELLS}/ folder; see `fusionbench validate {shell_word(root)}`")
        if not os.access(root, os.W_OK) or not os.access(path, os.W_OK) or not os.access(root / CELLS, os.W_OK):
            raise ConfigError(f"cannot resume {root}: it is read-only here (the bundle and its cells/ must be writable)")
        return header

    def update_header(self, **fields: Any) -> None:
        self.header.update(fields)
        write_json_atomic(self.root / HEADER, self.header)

    def seal(self, **fields: Any) -> None:
        """Update bundle.json as `update_header` does, the manifest written first, listing the new
        bundle.json: a stop or a full disk between the two leaves bundle.json as it was (`running`,
        which `--resume` takes without its manifest), never a state the run ended in with no
        manifest, which nothing could resume or read."""
        self.header.update(fields)
        data = json_bytes(self.header)
        manifest.write(self.root, {HEADER: data})
        write_bytes_atomic(self.root / HEADER, data)

    def cell_path(self, cell_id: str) -> Path:
        return self.root / CELLS / f"{cell_id}.json"

    def artifact_dir(self, cell_id: str) -> Path:
        return self.root / CELLS / cell_id

    def fresh_artifact_dir(self, cell_id: str) -> Path:
        """An empty artifact directory for a cell about to run (leftovers of a killed attempt go)."""
        path = self.artifact_dir(cell_id)
        if path.exists():
            shutil.rmtree(path)
        path.mkdir(parents=True)
        return path

    def read_cell(self, cell_id: str) -> dict[str, Any] | None:
        """The cell's record: as this process wrote it, else as the bundle was opened (read once),
        else from its file; None where there is none (or it is not JSON)."""
        if cell_id in self._written:
            return self._written[cell_id]
        if cell_id in self._dropped:  # `opened` still holds it
            return None
        rel = f"{CELLS}/{cell_id}.json"
        try:
            data = self.opened.read(rel, max_bytes=MAX_JSON_BYTES) if self.opened else (self.root / rel).read_bytes()
            cell: dict[str, Any] = json.loads(data)
            return cell
        except (FileNotFoundError, BundleError, ValueError):
            return None

    def drop_cell(self, cell_id: str) -> None:
        """Remove the cell's record and its folder, so that it runs afresh, as a user who deletes
        them does (a resume's, of a cell the time budget kept from some of its rounds)."""
        self.cell_path(cell_id).unlink(missing_ok=True)
        shutil.rmtree(self.artifact_dir(cell_id), ignore_errors=True)
        self._written.pop(cell_id, None)
        self._dropped.add(cell_id)

    def finished(self, cell_id: str) -> bool:
        record = self.read_cell(cell_id)
        return record is not None and record.get("status") in FINISHED

    def write_cell(self, cell_id: str, record: dict[str, Any]) -> None:
        full = {"schema_version": SCHEMA_VERSION, **record}
        write_json_atomic(self.cell_path(cell_id), full)
        self._dropped.discard(cell_id)
        self._written[cell_id] = json.loads(json.dumps(full))  # as a reader of the file would see it

    def cells(self) -> list[dict[str, Any]]:
        """Every cell record, in the order bundle.json lists them."""
        records = []
        for entry in self.header.get("cells", []):
            record = self.read_cell(entry["id"])
            if record is not None:
                records.append(record)
        return records

    def records(self) -> list[CellRecord]:
        """Every cell record, typed (this harness wrote them: each reads as one)."""
        return [CellRecord.model_validate(record, context={RECORD: self.model_plugins}) for record in self.cells()]

    def write_manifest(self) -> None:
        manifest.write(self.root)

    def drop_manifest(self) -> None:
        """Remove the checksums while cells are written: a run killed now leaves a bundle that says
        it is `running` and holds no manifest, rather than one whose manifest is stale."""
        (self.root / manifest.MANIFEST).unlink(missing_ok=True)
