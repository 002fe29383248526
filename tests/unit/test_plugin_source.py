"""The digest of a plugin package's files that the artifact cache's keys hold
(harness/models/plugin_source.py): an edit changes it, compiled bytecode does not, and a big
package's files past the content budget count by their size and modification time."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.models import plugin_source


def _digest(files: Path) -> str:
    plugin_source.digest.cache_clear()  # a new process
    return plugin_source.digest(str(files))


def test_an_edit_changes_it_bytecode_does_not(tmp_path: Path) -> None:
    package = tmp_path / "acme_models"
    (package / "__pycache__").mkdir(parents=True)
    (package / "blocks.py").write_text("ACT = 'relu'\n")
    first = _digest(package)
    (package / "__pycache__" / "blocks.cpython-311.pyc").write_bytes(b"\0" * 64)
    assert _digest(package) == first
    stat = (package / "blocks.py").stat()
    (package / "blocks.py").write_text("ACT = 'gelu'\n")  # the same size, its time put back: read by content
    os.utime(package / "blocks.py", ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert _digest(package) != first
    assert _digest(package / "blocks.py") not in ("", first)  # a top-level module's file alone
    assert _digest(tmp_path / "absent") == ""


def test_files_past_the_content_budget_count_by_size_and_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plugin_source, "CONTENT_BUDGET_BYTES", 16)
    package = tmp_path / "big"
    package.mkdir()
    (package / "a.py").write_text("A = 1\n")  # 6 bytes: read
    (package / "b.bin").write_bytes(b"x" * 32)  # past the budget
    first = _digest(package)
    stat = (package / "b.bin").stat()
    (package / "b.bin").write_bytes(b"y" * 32)
    os.utime(package / "b.bin", ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert _digest(package) == first  # not read: bounded
    os.utime(package / "b.bin", ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert _digest(package) != first  # an edit's new time
