"""pack, compare and validate on the MLPerf bundle made hostile, case by case as a hostile user tried
them: each exits as docs/cli.md says (1 for a bundle validate rejects, 2 for a refusal), with no
traceback and no hang, and nothing is read or written outside the bundle and --out."""

from __future__ import annotations

import json
import os
import shutil
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.bundle import manifest
from harness.cli.main import main
from tests.unit.test_validate import tree_digest

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
CELL = "cells/fe0739a275a7c07b"  # the eager cell: accuracy run, TEST01 and TEST04
LIMIT_S = 30


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """`fusionbench ARGV` in this process, failed after LIMIT_S seconds (a reader blocked on a FIFO)."""
    def alarm(signum: int, frame: Any) -> None:
        raise TimeoutError(f"fusionbench {' '.join(argv)}: still running after {LIMIT_S} s")

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.alarm(LIMIT_S)
    try:
        code = main(argv)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    captured = capsys.readouterr()
    printed = captured.out + captured.err
    assert "Traceback" not in printed, printed[-2000:]
    return code, printed


def _mlperf(tmp: Path, edit: Callable[[Path, dict[str, Any]], None] | None = None) -> Path:
    """A copy of the MLPerf golden bundle with `edit(root, cell record)` applied and the manifest re-hashed."""
    root = tmp / "bundle"
    shutil.copytree(GOLDEN / "mlperf", root)
    if edit is not None:
        path = root / f"{CELL}.json"
        record = json.loads(path.read_text())
        edit(root, record)
        path.write_text(json.dumps(record, indent=1))
        manifest.write(root)
    return root


def _set(*keys: str, value: Any) -> Callable[[Path, dict[str, Any]], None]:
    def edit(root: Path, record: dict[str, Any]) -> None:
        target = record["metrics"]
        for key in keys[:-1]:
            target = target[key]
        if value is _REMOVE:
            del target[keys[-1]]
        else:
            target[keys[-1]] = value
    return edit


_REMOVE = object()


def _without_test01_folder(root: Path, record: dict[str, Any]) -> None:
    shutil.rmtree(root / CELL / "loadgen" / "TEST01")


def _accuracy_log_a_fifo(root: Path, record: dict[str, Any]) -> None:
    log = root / CELL / "loadgen" / "accuracy" / "mlperf_log_accuracy.json"
    log.unlink()
    os.mkfifo(log)


SHAPES = {
    "top1 a string": _set("accuracy", "top1_percent", value="76.5"),
    "accuracy a string": _set("accuracy", value="76.5%"),
    "a compliance entry a string": _set("compliance", "TEST01", value="TEST PASS"),
    "log_dir a number": _set("accuracy", "log_dir", value=3),
    "log_dir missing": _set("compliance", "TEST04", "log_dir", value=_REMOVE),
    "total null": _set("accuracy", "total", value=None),
    "TEST01's folder deleted": _without_test01_folder,
    "the accuracy log a FIFO": _accuracy_log_a_fifo,
}


@pytest.mark.parametrize("edit", SHAPES.values(), ids=SHAPES.keys())
def test_a_record_of_the_wrong_shape_is_found_by_validate_and_refused_by_pack(
        edit: Callable[[Path, dict[str, Any]], None], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _mlperf(tmp_path, edit)
    assert _run(["validate", str(root)], capsys)[0] == 1
    code, printed = _run(["pack", str(root), "--org", "Acme", "--out", str(tmp_path / "sub")], capsys)
    assert code == 2 and "fails validation" in printed
    assert not (tmp_path / "sub").exists()


def test_pack_out_inside_the_bundle_is_refused_and_the_bundle_untouched(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    root = _mlperf(tmp_path)
    before = tree_digest(root)
    code, printed = _run(["pack", str(root), "--org", "Acme", "--out", str(root / "inside")], capsys)
    assert code == 2 and "inside the bundle" in printed
    assert tree_digest(root) == before
    assert _run(["validate", str(root)], capsys)[0] == 0


def test_compare_out_over_a_bundle_file_is_refused_and_the_bundle_untouched(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(GOLDEN / "v3", a)
    shutil.copytree(GOLDEN / "v3", b)
    before = tree_digest(a)
    code, printed = _run(["compare", str(a), str(b), "--out", str(a / "bundle.json")], capsys)
    assert code == 2 and "inside the bundle" in printed
    assert tree_digest(a) == before


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


SYSTEM_INFOS: dict[str, tuple[Callable[[Path], Path], str]] = {
    "a FIFO": (lambda t: _fifo(t / "info.json"), "not a regular file"),
    "100,000 [": (lambda t: _write(t / "info.json", "[" * 100_000), "nested too deeply"),
    "a repeated key": (lambda t: _write(t / "info.json", '{"cooling": "air", "cooling": "water"}'), "appears twice"),
    "a control character": (lambda t: _write(t / "info.json", json.dumps({"cooling": "air\x1b[2J\u202e"})),
                            "control or bidirectional"),
}


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.mark.parametrize("case", SYSTEM_INFOS.values(), ids=SYSTEM_INFOS.keys())
def test_a_hostile_system_info_file_is_refused_at_once(case: tuple[Callable[[Path], Path], str], tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    make, words = case
    info = make(tmp_path)
    root = _mlperf(tmp_path)
    code, printed = _run(["pack", str(root), "--org", "Acme", "--out", str(tmp_path / "sub"), "--system-info", str(info)],
                         capsys)
    assert code == 2 and words in printed
    assert not (tmp_path / "sub").exists()


def _config(*keys: str, value: Any) -> Callable[[Path, dict[str, Any]], None]:
    def edit(root: Path, record: dict[str, Any]) -> None:
        target = record["config"]
        for key in keys[:-1]:
            target = target[key]
        target[keys[-1]] = value
    return edit


def _as_v2(edit: Callable[[Path, dict[str, Any]], None]) -> Callable[[Path, dict[str, Any]], None]:
    def both(root: Path, record: dict[str, Any]) -> None:
        record["schema_version"] = 2  # a record may claim an older version, whose schema is laxer
        edit(root, record)
    return both


ODD_RECORDS = {
    "config.loadgen a string": _config("loadgen", value="x"),
    "an override no user.conf has": _config("loadgen", "overrides", value={"bogus": 1}),
    "an override not a number": _config("loadgen", "overrides", value={"min_query_count": "x"}),
    "a 1e308 s minimum time": _config("timing", "min_time_s", value=1e308),
    "compliance a number": _set("compliance", value=5),
    "compliance without the performance run": _set("loadgen", value=_REMOVE),
    "a v2 record with an empty accuracy": _as_v2(_set("accuracy", value={})),
    "a v2 record with compliance a list": _as_v2(_set("compliance", value=["TEST01"])),
    "a warm-up tolerance that calls anything steady": _set("device_time", "warmup", "tolerance", value=1.0),
}


@pytest.mark.parametrize("edit", ODD_RECORDS.values(), ids=ODD_RECORDS.keys())
def test_validate_finds_odd_records_without_a_traceback(edit: Callable[[Path, dict[str, Any]], None], tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    root = _mlperf(tmp_path, edit)
    code, printed = _run(["validate", str(root)], capsys)
    assert code == 1, printed


def test_pack_copies_only_the_files_validate_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """TEST04 makes no accuracy check: a verify_accuracy.txt or accuracy log added to its folder
    (and to the manifest) is never read by validate, so pack leaves it out."""
    def plant(root: Path, record: dict[str, Any]) -> None:
        test04 = root / CELL / "loadgen" / "TEST04"
        (test04 / "verify_accuracy.txt").write_text("planted\nTEST PASS\n")
        (test04 / "performance" / "run_1" / "mlperf_log_accuracy.json").write_text("[]")

    root = _mlperf(tmp_path, plant)
    assert _run(["validate", str(root)], capsys)[0] == 0
    assert _run(["pack", str(root), "--org", "Acme", "--out", str(tmp_path / "sub")], capsys)[0] == 0
    packed = {p.relative_to(tmp_path / "sub").as_posix() for p in (tmp_path / "sub").rglob("*") if p.is_file()}
    assert any(p.endswith("TEST01/verify_accuracy.txt") for p in packed)
    assert not [p for p in packed if "TEST04/verify_accuracy" in p or "TEST04/accuracy" in p]


def test_pack_out_through_a_dangling_link_is_refused_and_nothing_is_made_outside(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "bundle"
    shutil.copytree(GOLDEN / "mlperf", root)
    target = tmp_path / "elsewhere" / "made-through-the-link"
    (tmp_path / "elsewhere").mkdir()
    link = tmp_path / "tree"
    link.symlink_to(target)
    assert main(["pack", str(root), "--org", "Acme", "--out", str(link)]) == 2
    assert "is a symbolic link" in capsys.readouterr().err
    assert not target.exists() and not (tmp_path / "elsewhere" / "made-through-the-link.tar.gz").exists()


def test_no_command_writes_into_another_bundle_and_a_folder_holding_one_is_fine(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(GOLDEN / "v3", a)
    shutil.copytree(GOLDEN / "v2", b)
    before = tree_digest(b)
    assert main(["report", str(a), "--out", str(b)]) == 2
    assert f"is inside the bundle {b}" in capsys.readouterr().err
    assert main(["compare", str(a), str(a), "--out", str(b / "bundle.json")]) == 2
    assert f"is inside the bundle {b}" in capsys.readouterr().err
    assert main(["findings", str(a), "--out", str(b / "cells" / "x")]) == 2
    assert tree_digest(b) == before
    monkeypatch.chdir(tmp_path)  # B's parent: report files beside B touch nothing of it
    assert main(["report", str(b), "--out", "."]) == 0
    assert (tmp_path / "report.md").is_file() and tree_digest(b) == before


def test_an_interrupted_report_is_repaired_by_writing_it_again(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Stopped between its first write and the manifest's re-hash, `report RUN_DIR` leaves report.md
    edited and a temporary file beside it: `report` again puts the bundle right; an edited cell it
    still refuses."""
    root = tmp_path / "bundle"
    shutil.copytree(GOLDEN / "v3", root)
    (root / "report.md").write_text("half of a report")
    (root / ".report.html.abc123.tmp").write_text("<html>")
    assert main(["validate", str(root)]) == 1
    capsys.readouterr()
    assert main(["report", str(root)]) == 0
    assert main(["validate", str(root)]) == 0 and not (root / ".report.html.abc123.tmp").exists()
    cell = next((root / "cells").glob("*.json"))
    cell.write_text(cell.read_text().replace('"status"', '"status" ', 1))
    assert main(["report", str(root)]) == 2
    assert "fails validation" in capsys.readouterr().err
