"""Opening a bundle reads each of its files once: validate (its manifest's hashes and every later
layer from the same bytes), the commands that validate before they read (compare, report, findings,
pack), and `--resume` (its lock, its header, its check, and which cells are finished).

Counted with an audit hook on `open` (every file Python opens raises it), over the golden bundle
of the current schema (a resume takes only a bundle of its own version). Before
harness/bundle/snapshot.py, at 5875e36: validate opened the 68 files 107 times (39 of them twice:
hashed, then read), and the resume's opening 109 times (bundle.json three times), with every cell
record read again each time the runner asked whether the cell was finished (four times a cell)."""

from __future__ import annotations

import shutil
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from harness.bundle.migrations import SCHEMA_VERSION
from harness.bundle.snapshot import Snapshot
from harness.bundle.validate import validate
from harness.bundle.writer import Bundle
from harness.cli.bundle_commands import trusted
from harness.run import resumable

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / f"v{SCHEMA_VERSION}"
_watching: list[tuple[Path, Counter[str]]] = []


def _hook(event: str, args: tuple[Any, ...]) -> None:
    if event != "open" or not _watching or not isinstance(args[0], str | bytes | Path):
        return
    root, opened = _watching[-1]
    path = Path(args[0].decode() if isinstance(args[0], bytes) else args[0])
    if path.is_relative_to(root) and path.is_file():  # files only: the lock holds the folder open
        opened[path.relative_to(root).as_posix()] += 1


sys.addaudithook(_hook)


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    root = tmp_path / "bundle"
    shutil.copytree(GOLDEN, root)
    return root.resolve()


def _files(root: Path) -> set[str]:
    return {path.relative_to(root).as_posix() for path in root.rglob("*") if path.is_file()}


class _Counting:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.opened: Counter[str] = Counter()

    def __enter__(self) -> Counter[str]:
        _watching.append((self.root, self.opened))
        return self.opened

    def __exit__(self, *exc: object) -> None:
        _watching.pop()


def _once_each(opened: Counter[str], root: Path) -> None:
    twice = {rel: n for rel, n in opened.items() if n > 1}
    assert not twice, f"read more than once: {twice}"
    assert set(opened) == _files(root), f"never read: {sorted(_files(root) - set(opened))}"


def test_validate_reads_every_file_once(bundle: Path) -> None:
    with _Counting(bundle) as opened:
        verdict = validate(bundle)
    assert verdict.ok, verdict.problems
    _once_each(opened, bundle)


def test_the_counting_sees_a_second_read() -> None:
    """The hook counts what it should: two validates without a shared snapshot read each file twice."""
    root = GOLDEN.resolve()
    with _Counting(root) as opened:
        validate(root)
        validate(root)
    assert set(opened.values()) == {2} and set(opened) == _files(root)


def test_a_command_that_validates_then_reads_reads_once(bundle: Path) -> None:
    with _Counting(bundle) as opened:
        loaded = trusted(bundle)
        records = loaded.records  # what compare, report and findings read
    assert len(records) == len(loaded.header["cells"])
    _once_each(opened, bundle)


def test_resume_opens_checks_and_plans_reading_each_file_once(bundle: Path) -> None:
    with _Counting(bundle) as opened:
        opened_bundle = Bundle.open(bundle)
        resumable.check(opened_bundle)
        ids = [entry["id"] for entry in opened_bundle.header["cells"]]
        for _ in range(4):  # the runner asks this of each cell up to four times before one runs
            finished = [opened_bundle.finished(cell) for cell in ids]
        records = opened_bundle.records()
    opened_bundle.close()
    assert all(finished) and len(records) == len(ids)
    _once_each(opened, bundle)


def test_a_record_written_during_the_run_is_read_as_written(bundle: Path) -> None:
    opened_bundle = Bundle.open(bundle)
    resumable.check(opened_bundle)
    cell = opened_bundle.header["cells"][0]["id"]
    record = opened_bundle.read_cell(cell)
    assert record is not None
    opened_bundle.write_cell(cell, {**record, "status": "interrupted", "reasons": ["interrupted by the user"]})
    with _Counting(bundle) as opened:
        again = opened_bundle.read_cell(cell)
    opened_bundle.close()
    assert again is not None and again["status"] == "interrupted" and not opened_bundle.finished(cell)
    assert not opened, "a record this process wrote is read back from the file"
    assert Snapshot(bundle).read(f"cells/{cell}.json", max_bytes=1 << 20).count(b'"interrupted"') >= 1
