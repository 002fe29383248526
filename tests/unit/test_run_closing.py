"""How a run closes its bundle (harness/run/ending.py): a stop (Ctrl-C, SIGTERM) or a full disk at
any file the close writes leaves a bundle that `--resume` completes, never one marked as ended
with no manifest, which nothing could resume or read; a full disk there exits 3, as one during
the cells does."""

from __future__ import annotations

import errno
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.bundle.migrations import SCHEMA_VERSION
from harness.bundle.validate import validate
from harness.cli.main import main
from harness.files import atomic
from harness.reporting import report
from harness.run import ending

pytestmark = pytest.mark.slow
GOLDEN = Path(__file__).resolve().parents[1] / "golden"


def _finished_without_its_report(tmp_path: Path, name: str) -> Path:
    """The golden bundle, every cell finished, its report removed: a resume runs no cell and closes it."""
    root = tmp_path / name
    shutil.copytree(GOLDEN / f"v{SCHEMA_VERSION}", root)
    for report_name in (report.REPORT_MD, report.REPORT_HTML):
        (root / report_name).unlink()
    from harness.bundle import manifest

    manifest.write(root)
    return root


def _writes_of_a_resume(root: Path, monkeypatch: pytest.MonkeyPatch,
                        fault: Callable[[int, Path], BaseException | None], *, while_closing: bool,
                        landed: bool = True) -> int:
    """Resume `root` with `fault(k, path)` asked at the k-th file written into it, counting those of
    the close alone where `while_closing`, and raise what it returns: once the write has landed (the
    file is in place, the next not begun), or where not `landed`, in its stead. Returns the resume's
    exit code."""
    replace = os.replace
    close = ending.close
    counting = {"on": not while_closing, "k": 0}

    def counted(src: Any, dst: Any) -> None:
        raised = None
        if counting["on"] and Path(dst).parent == root:
            counting["k"] += 1
            raised = fault(counting["k"], Path(dst))
        if raised is None or landed:
            replace(src, dst)
        if raised is not None:
            raise raised

    def closing(*args: Any, **kwargs: Any) -> None:
        counting["on"] = True
        close(*args, **kwargs)

    monkeypatch.setattr(atomic.os, "replace", counted)
    monkeypatch.setattr(ending, "close", closing)
    try:
        return main(["run", "--resume", str(root), "--no-cache"])
    finally:
        monkeypatch.setattr(atomic.os, "replace", replace)
        monkeypatch.setattr(ending, "close", close)


def _completes(root: Path) -> None:
    """`root`, as a fault left it, is valid, or `running` (a killed run's, its manifest missing or
    out of date); a resume of it finishes it: exit 0 (its cells are valid or skipped), complete,
    valid, its report written."""
    state = json.loads((root / "bundle.json").read_text())["state"]
    assert state == "running" or validate(root).ok, (state, validate(root).problems)
    assert main(["run", "--resume", str(root), "--no-cache"]) == 0
    assert json.loads((root / "bundle.json").read_text())["state"] == "complete"
    assert validate(root).ok, validate(root).problems
    assert (root / report.REPORT_MD).is_file() and (root / report.REPORT_HTML).is_file()


@pytest.mark.parametrize("landed", [True, False], ids=["after-the-write", "instead-of-it"])
def test_a_stop_at_any_file_a_resume_writes_leaves_a_bundle_that_a_resume_completes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], landed: bool) -> None:
    """Closing wrote bundle.json's final state, then its manifest: a stop between the two left a
    bundle `complete` with no manifest, which validate, report and --resume all refused; so did a
    stop as a resume began, between dropping the manifest and writing `running`."""
    written: list[str] = []
    root = _finished_without_its_report(tmp_path, "counted")
    assert _writes_of_a_resume(root, monkeypatch, lambda k, path: written.append(path.name), while_closing=False) == 0
    assert written.count("bundle.json") >= 2 and "MANIFEST.sha256" in written, written  # running, then its end
    for k in range(1, len(written) + 1):
        root = _finished_without_its_report(tmp_path, f"stopped-{k}")
        code = _writes_of_a_resume(root, monkeypatch, lambda at, path, k=k: KeyboardInterrupt() if at == k else None,
                                   while_closing=False, landed=landed)
        assert code == 130, (k, written[k - 1])
        _completes(root)
    capsys.readouterr()


def test_a_full_disk_at_any_file_the_close_writes_exits_3_and_a_resume_completes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """It exited 2, which says nothing was written, with a bundle `--resume` refused."""
    written: list[str] = []
    root = _finished_without_its_report(tmp_path, "counted")
    assert _writes_of_a_resume(root, monkeypatch, lambda k, path: written.append(path.name), while_closing=True) == 0
    capsys.readouterr()
    for k in range(1, len(written) + 1):
        root = _finished_without_its_report(tmp_path, f"full-{k}")

        def full(at: int, path: Path, k: int = k) -> OSError | None:
            return OSError(errno.ENOSPC, "No space left on device", str(path)) if at == k else None

        assert _writes_of_a_resume(root, monkeypatch, full, while_closing=True, landed=False) == 3, (k, written[k - 1])
        err = capsys.readouterr().err
        assert "No space left on device" in err and f"--resume {root}" in err and "Traceback" not in err, err
        _completes(root)


def test_a_stop_as_the_run_closes_or_once_it_has_closed_says_what_it_left(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A stop in the close before its seal landed left the bundle `running`, which `validate`
    refuses, and one while the last lines were printed left it complete: either said only
    `fusionbench: interrupted`, naming no bundle and no --resume."""
    written: list[str] = []
    root = _finished_without_its_report(tmp_path, "counted")
    assert _writes_of_a_resume(root, monkeypatch, lambda k, path: written.append(path.name), while_closing=True) == 0
    capsys.readouterr()
    left = []
    for k in range(1, len(written) + 1):
        root = _finished_without_its_report(tmp_path, f"stopped-{k}")
        code = _writes_of_a_resume(root, monkeypatch, lambda at, path, k=k: KeyboardInterrupt() if at == k else None,
                                   while_closing=True, landed=False)
        left.append(json.loads((root / "bundle.json").read_text())["state"])
        assert code == 130, (k, written[k - 1])
        printed = capsys.readouterr()
        said = " ".join((printed.out + printed.err).split())
        if left[-1] == "running":
            assert "left `running`" in said and f"--resume {root}" in said, (k, said)
        else:  # the report was cut short: the bundle is valid, and the line says how to write it
            assert f"fusionbench report {root}" in said, (k, said)
    assert "running" in left and "complete" in left, left  # the seal's first write, and the report's

    def stopped(*args: Any) -> None:
        raise KeyboardInterrupt

    root = _finished_without_its_report(tmp_path, "last-lines")
    monkeypatch.setattr(ending, "summary_table", stopped)
    assert main(["run", "--resume", str(root), "--no-cache"]) == 130
    printed = capsys.readouterr()
    said = " ".join((printed.out + printed.err).split())
    assert f"stopped once {root} was closed: it is complete and valid, with its report" in said, said
    assert validate(root).ok
