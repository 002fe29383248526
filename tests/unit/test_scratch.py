"""Scratch folders: removed when their block ends, left behind by a process killed with SIGKILL,
and removed by the next sweep unless a live process holds them or they are a moment old."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from harness.run import scratch
from harness.run.scratch import remove_orphans, scratch_dir

REPO = Path(__file__).resolve().parents[2]
PREFIX = "fusionbench-test-scratch-"
# Makes a scratch folder, prints its path, then waits for a line on stdin or kills itself.
CHILD = f"""
import os, signal, sys
from harness.run.scratch import scratch_dir
with scratch_dir({PREFIX!r}) as folder:
    (folder / "answer.json").write_text("{{}}")
    print(folder, flush=True)
    if sys.argv[1] == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    sys.stdin.readline()
"""


@pytest.fixture
def tmp_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(scratch, "_swept", set())
    return tmp_path


def child(tmp_root: Path, how: str) -> tuple[subprocess.Popen[str], Path]:
    proc = subprocess.Popen([sys.executable, "-c", CHILD, how], cwd=REPO, text=True, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, env={**os.environ, "TMPDIR": str(tmp_root)})
    assert proc.stdout is not None
    folder = Path(proc.stdout.readline().strip())
    assert folder.parent == tmp_root and folder.is_dir()
    return proc, folder


def test_a_folder_is_removed_when_its_block_ends(tmp_root: Path) -> None:
    with scratch_dir(PREFIX) as folder:
        (folder / "request.json").write_text("{}")
        assert folder.parent == tmp_root
    assert not folder.exists()


def test_a_killed_process_leaves_its_folder_and_the_next_sweep_removes_it(tmp_root: Path) -> None:
    proc, folder = child(tmp_root, "kill")
    assert proc.wait(timeout=60) == -signal.SIGKILL
    assert (folder / "answer.json").exists()  # left behind: the process never reached its cleanup
    assert remove_orphans(PREFIX, min_age_s=60) == []  # too young to be taken for an orphan
    assert remove_orphans(PREFIX, min_age_s=0) == [folder]
    assert not folder.exists()


def test_a_folder_held_by_a_live_process_is_left_alone(tmp_root: Path) -> None:
    proc, folder = child(tmp_root, "wait")
    try:
        assert remove_orphans(PREFIX, min_age_s=0) == []
        assert (folder / "answer.json").exists()
    finally:
        assert proc.stdin is not None
        proc.stdin.write("\n")
        proc.stdin.flush()
        assert proc.wait(timeout=60) == 0
    assert not folder.exists()  # its own cleanup removed it


def test_the_first_folder_of_a_process_sweeps_old_orphans(tmp_root: Path) -> None:
    orphan = tmp_root / f"{PREFIX}orphan"
    orphan.mkdir()
    (orphan / "phase").write_text("first_call")
    os.utime(orphan, (0, 0))  # last changed long ago, and nobody holds it
    other_kind = tmp_root / "something-else"
    other_kind.mkdir()
    os.utime(other_kind, (0, 0))
    with scratch_dir(PREFIX):
        assert not orphan.exists()
    assert other_kind.exists()


def test_atomic_writes_honour_the_umask_as_a_plain_write_does(tmp_path: Path) -> None:
    import os

    from harness.files.atomic import write_bytes_atomic

    old = os.umask(0o022)
    try:
        write_bytes_atomic(tmp_path / "shared.json", b"{}")
        (tmp_path / "plain.log").write_text("x")
        assert (tmp_path / "shared.json").stat().st_mode & 0o777 == (tmp_path / "plain.log").stat().st_mode & 0o777 == 0o644
        os.umask(0o077)
        write_bytes_atomic(tmp_path / "private.json", b"{}")
        assert (tmp_path / "private.json").stat().st_mode & 0o777 == 0o600
    finally:
        os.umask(old)
