"""The bundle: atomic cell files, a manifest that matches, refusing newer schemas."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from harness.bundle.writer import SCHEMA_VERSION, Bundle
from harness.errors import BundleError, ConfigError, SchemaVersionError


def make(tmp_path: Path) -> Bundle:
    return Bundle.create(tmp_path / "results", "run", {"cells": [{"id": "a", "label": "A"}, {"id": "b", "label": "B"}]})


def test_create_writes_header_and_never_reuses_a_directory(tmp_path: Path) -> None:
    first, second = make(tmp_path), make(tmp_path)
    assert first.root != second.root and second.root.name == "run-2"
    header = json.loads((first.root / "bundle.json").read_text())
    assert header["schema_version"] == SCHEMA_VERSION and header["run_id"] == "run"


def test_cells_finished_and_ordered(tmp_path: Path) -> None:
    bundle = make(tmp_path)
    assert not bundle.finished("a")
    bundle.write_cell("b", {"id": "b", "status": "failed"})
    bundle.write_cell("a", {"id": "a", "status": "interrupted"})
    assert bundle.finished("b") and not bundle.finished("a"), "an interrupted cell runs again on --resume"
    assert [c["id"] for c in bundle.cells()] == ["a", "b"]
    assert not list(bundle.root.rglob("*.tmp"))


def test_manifest_lists_every_file_with_its_hash(tmp_path: Path) -> None:
    bundle = make(tmp_path)
    bundle.write_cell("a", {"id": "a", "status": "valid"})
    (bundle.fresh_artifact_dir("a") / "worker.log").write_text("log")
    bundle.write_manifest()
    lines = (bundle.root / "MANIFEST.sha256").read_text().splitlines()
    listed = {line.split("  ", 1)[1]: line.split("  ", 1)[0] for line in lines}
    assert set(listed) == {"bundle.json", "cells/a.json", "cells/a/worker.log"}
    for rel, digest in listed.items():
        assert hashlib.sha256((bundle.root / rel).read_bytes()).hexdigest() == digest


def test_open_refuses_newer_and_missing(tmp_path: Path) -> None:
    bundle = make(tmp_path)
    bundle.close()
    header = json.loads((bundle.root / "bundle.json").read_text())
    (bundle.root / "bundle.json").write_text(json.dumps({**header, "schema_version": SCHEMA_VERSION + 1}))
    with pytest.raises(SchemaVersionError, match="newer"):
        Bundle.open(bundle.root)
    with pytest.raises(ConfigError, match="not a FusionBench result bundle"):
        Bundle.open(tmp_path)


def test_resume_refuses_a_header_without_its_fields_in_one_line(tmp_path: Path) -> None:
    import subprocess
    import sys

    root = tmp_path / "run"
    (root / "cells").mkdir(parents=True)
    (root / "bundle.json").write_text(json.dumps({"schema_version": SCHEMA_VERSION}))
    with pytest.raises(BundleError, match="cannot resume: .*bundle.json: \\(top\\): '[a-z_]+' is a required property"):
        Bundle.open(root)
    done = subprocess.run([sys.executable, "-m", "harness.cli", "run", "--resume", str(root)], capture_output=True,
                          text=True, timeout=120, cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_resume_refuses_a_bundle_it_cannot_write(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os
    import shutil

    root = tmp_path / "run"
    shutil.copytree(Path(__file__).resolve().parents[1] / "golden" / f"v{SCHEMA_VERSION}", root)
    Bundle.open(root)  # a golden bundle opens
    monkeypatch.setattr(os, "access", lambda path, mode: False)  # a read-only mount (root ignores file modes)
    with pytest.raises(ConfigError, match="read-only"):
        Bundle.open(root)


_HOLD = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(60)
"""


def test_a_bundle_another_process_writes_is_refused_naming_its_pid(tmp_path: Path) -> None:
    """Two resumes of one bundle must not run the same cells at once."""
    import shutil
    import subprocess
    import sys

    root = tmp_path / "run"
    shutil.copytree(Path(__file__).resolve().parents[1] / "golden" / f"v{SCHEMA_VERSION}", root)
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(root)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(ConfigError, match=f"pid {holder.pid} is running or resuming this bundle"):
            Bundle.open(root)
        done = subprocess.run([sys.executable, "-m", "harness.cli", "run", "--resume", str(root)], capture_output=True,
                              text=True, timeout=120, cwd=Path(__file__).resolve().parents[2])
        assert done.returncode == 2, done.stdout + done.stderr
        assert f"pid {holder.pid} is running or resuming" in done.stderr and "Traceback" not in done.stderr
    finally:
        holder.kill()
        holder.wait()
    Bundle.open(root).close()  # the lock died with its holder: nothing stale is left behind
    assert sorted(p.name for p in root.iterdir()) == sorted(p.name for p in (Path(__file__).resolve().parents[1] / "golden"
                                                                            / f"v{SCHEMA_VERSION}").iterdir())


def test_the_writer_of_a_bundle_holds_it_until_it_closes(tmp_path: Path) -> None:
    bundle = make(tmp_path)
    with pytest.raises(ConfigError, match="is running or resuming this bundle"):
        Bundle.open(bundle.root)
    bundle.close()
    with pytest.raises(BundleError, match="cannot resume"):  # the lock is free: open reads the (partial) header
        Bundle.open(bundle.root)


@pytest.mark.slow
def test_a_fifo_as_bundle_json_is_refused_without_reading_it(tmp_path: Path) -> None:
    """A FIFO as bundle.json would block the reader forever."""
    import os
    import subprocess
    import sys

    root = tmp_path / "run"
    (root / "cells").mkdir(parents=True)
    os.mkfifo(root / "bundle.json")
    with pytest.raises(BundleError, match="not a regular file"):
        Bundle.open(root)
    # validate judges the bundle (invalid: 1); the commands that need it refuse it (2)
    for command, code in ((["validate", str(root)], 1), (["report", str(root)], 2), (["run", "--resume", str(root)], 2)):
        done = subprocess.run([sys.executable, "-m", "harness.cli", *command], capture_output=True, text=True,
                              timeout=60, cwd=Path(__file__).resolve().parents[2])
        assert done.returncode == code and "not a regular file" in done.stdout + done.stderr, (command, done)
        assert "Traceback" not in done.stderr


@pytest.mark.parametrize("record", ["bundle.json", "cells"])
def test_a_directory_where_a_record_should_be_is_a_problem_named_not_an_error(tmp_path: Path, record: str) -> None:
    """A directory opens as a file descriptor, and Python's file object then refused it in words of
    its own ("3: Is a directory", exit 2): validate names the record and judges the bundle invalid."""
    import shutil

    from harness.bundle.validate import validate

    root = tmp_path / "run"
    shutil.copytree(Path(__file__).resolve().parents[1] / "golden" / f"v{SCHEMA_VERSION}", root)
    target = root / "bundle.json" if record == "bundle.json" else sorted((root / "cells").glob("*.json"))[0]
    target.unlink()
    target.mkdir()
    verdict = validate(root)
    named = f"{target.relative_to(root)}: not a regular file"
    assert not verdict.ok and any(named in line for line in verdict.problems), verdict.problems
    if record == "bundle.json":  # a resume reads the header first; a cell, validate refuses (as above)
        with pytest.raises(BundleError, match="not a regular file"):
            Bundle.open(root)


@pytest.mark.slow
@pytest.mark.parametrize("rehash", [False, True], ids=["edited", "edited-and-rehashed"])
def test_resume_refuses_a_bundle_edited_since_it_was_written(tmp_path: Path, rehash: bool) -> None:
    """Resuming re-hashes the bundle, so it must not resume one validate rejects."""
    import shutil
    import subprocess
    import sys

    from harness.bundle import manifest

    root = tmp_path / "run"
    shutil.copytree(Path(__file__).resolve().parents[1] / "golden" / f"v{SCHEMA_VERSION}", root)
    header = json.loads((root / "bundle.json").read_text())
    (root / "bundle.json").write_text(json.dumps({**header, "state": "interrupted"}))
    record = next(p for p in sorted((root / "cells").glob("*.json")) if json.loads(p.read_text())["status"] == "valid")
    cell = json.loads(record.read_text())
    cell["metrics"]["device_time"]["summary"]["median_ns"] /= 2  # twice as fast, on paper
    record.write_text(json.dumps(cell))
    if rehash:
        manifest.write(root)
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    done = subprocess.run([sys.executable, "-m", "harness.cli", "run", "--resume", str(root)], capture_output=True,
                          text=True, timeout=120, cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 2, done.stdout + done.stderr
    expected = "but the samples'" if rehash else "bundle.json: edited (its SHA-256 differs"
    assert "cannot resume" in done.stderr and expected in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before


def test_resume_forgives_a_cell_record_deleted_so_that_it_runs_again(tmp_path: Path) -> None:
    """Deleting a record (and its logs) forges nothing: the cell runs again. Anything more is refused."""
    import shutil

    from harness.run.resumable import check as check_resumable

    root = tmp_path / "run"
    shutil.copytree(Path(__file__).resolve().parents[1] / "golden" / f"v{SCHEMA_VERSION}", root)
    victim = sorted((root / "cells").glob("*.json"))[0]
    victim.unlink()
    shutil.rmtree(victim.with_suffix(""))
    bundle = Bundle.open(root)
    check_resumable(bundle)  # accepted
    bundle.close()
    (root / "cells" / "extra.log").write_text("added")
    bundle = Bundle.open(root)  # a resume checks the bundle as it opened it
    with pytest.raises(BundleError, match="cells/extra.log: added"):
        check_resumable(bundle)


@pytest.mark.parametrize("name", ["résumé", "测试", "x²", "a b/c", "", "-" * 200])
def test_a_run_id_is_one_the_header_accepts_whatever_the_scenarios_name(name: str) -> None:
    """The run id is made from the scenario's name, which may be any text: a run of `name: résumé`
    measured every cell and then could not write its header (exit 2, a bundle validate refused)."""
    import re

    from harness.bundle.header_record import BundleHeader
    from harness.bundle.writer import new_run_id

    pattern = BundleHeader.model_fields["run_id"].metadata[0].pattern
    assert re.fullmatch(pattern, new_run_id(name)), new_run_id(name)


def test_the_lock_holder_is_the_writer_of_this_folder_on_its_own_device(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """/proc/locks was matched by inode alone: another file system's file of that inode number, or a
    shared lock on it, named an unrelated process as the bundle's writer; a holder outside this pid
    namespace reads as pid 0."""
    import os

    from harness.bundle import lock

    root = tmp_path / "run"
    root.mkdir()
    stat = os.stat(root)
    here = f"{os.major(stat.st_dev):02x}:{os.minor(stat.st_dev):02x}:{stat.st_ino}"
    other = f"{os.major(stat.st_dev) + 1:02x}:{os.minor(stat.st_dev):02x}:{stat.st_ino}"
    locks = tmp_path / "locks"
    monkeypatch.setattr(lock, "_PROC_LOCKS", locks)
    for lines, holder in ((f"1: FLOCK  ADVISORY  WRITE 4242 {other} 0 EOF", None),
                          (f"1: FLOCK  ADVISORY  READ  4242 {here} 0 EOF", None),
                          (f"1: FLOCK  ADVISORY  WRITE 0 {here} 0 EOF", None),
                          (f"1: FLOCK  ADVISORY  WRITE 4242 {other} 0 EOF\n2: FLOCK  ADVISORY  WRITE 77 {here} 0 EOF", 77)):
        locks.write_text(lines + "\n")
        assert lock.holder_pid(root) == holder, lines
    assert lock.writer_pid(root) is None  # the lock is free (whatever /proc/locks says): nobody writes it


def test_validate_says_what_a_running_bundle_whose_checksums_do_not_match_is(tmp_path: Path) -> None:
    """A stop as a run closed left `running` with a manifest of its final bundle.json: "bundle.json:
    edited" read as tampering."""
    import shutil

    from harness.bundle import manifest
    from harness.bundle.validate import validate

    root = tmp_path / "run"
    shutil.copytree(Path(__file__).resolve().parents[1] / "golden" / f"v{SCHEMA_VERSION}", root)
    manifest.write(root)
    header = json.loads((root / "bundle.json").read_text())
    (root / "bundle.json").write_text(json.dumps({**header, "state": "running"}))
    verdict = validate(root)
    assert "bundle.json: edited (its SHA-256 differs from MANIFEST.sha256)" in verdict.problems
    assert any("the run is running: a run killed, or stopped as it wrote its checksums" in n for n in verdict.notes)
    (root / "bundle.json").write_text(json.dumps({**header, "state": "complete", "name": "x"}))
    assert not any("stopped as it wrote its checksums" in n for n in validate(root).notes)  # tampered: no excuse
