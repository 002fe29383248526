"""The TVM tuning database as the backend reads it back (backends/tvm_tuning.py), on files written
here in MetaSchedule's JSON layout: no TVM needed. The search itself runs in
tests/backends/test_tvm.py on a micro model."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from backends import tvm_tuning
from harness.errors import BackendFailed


def _database(folder: Path, runs: list[tuple[int, list[float] | None]], tasks: int = 3) -> Path:
    """A database of one record per (workload, run seconds): None for a candidate that failed."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / tvm_tuning.DATABASE_FILES[0]).write_text("".join(f'["{i}", {{}}]\n' for i in range(tasks)))
    lines = [json.dumps([workload, [[[], []], seconds if seconds is not None else [1e10], {"kind": "llvm"}, []]])
             for workload, seconds in runs]
    (folder / tvm_tuning.DATABASE_FILES[1]).write_text("\n".join(lines) + "\n")
    (folder / "tuning.json").write_text(json.dumps({"tasks": tasks, "trials_per_task": 2}))
    return folder


def test_the_summary_counts_tasks_tuned_and_trials_run(tmp_path: Path) -> None:
    entry = _database(tmp_path / "db", [(0, [1e-4]), (0, None), (1, [2e-4]), (2, None), (2, None)])
    assert tvm_tuning.database_summary(entry) == {"tasks": 3, "tasks_tuned": 2, "trials": 5}


def test_the_database_hash_covers_both_files_in_order(tmp_path: Path) -> None:
    entry = _database(tmp_path / "db", [(0, [1e-4])])
    digest = hashlib.sha256(b"".join((entry / name).read_bytes() for name in tvm_tuning.DATABASE_FILES)).hexdigest()
    assert tvm_tuning.database_sha256(entry) == digest
    (entry / tvm_tuning.DATABASE_FILES[1]).write_text("[0, [[[], []], [2e-4], {}, []]]\n")
    assert tvm_tuning.database_sha256(entry) != digest


def test_a_damaged_database_is_one_clear_failure(tmp_path: Path) -> None:
    entry = _database(tmp_path / "db", [(0, [1e-4])])
    (entry / "tuning.json").write_text("{not json")
    with pytest.raises(BackendFailed, match="the tuning database .* cannot be read"):
        tvm_tuning.database_summary(entry)


def test_the_quick_stack_gives_each_frame_its_file_line_and_text() -> None:
    frames = tvm_tuning._quick_stack()
    assert frames[0].function == "test_the_quick_stack_gives_each_frame_its_file_line_and_text"
    assert frames[0].filename == __file__ and frames[0].code_context is not None
    assert "_quick_stack()" in frames[0].code_context[0]
