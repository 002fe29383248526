"""A fusion verdict cannot be forged or mispaired: rounds added, dropped, copied or edited, extreme
medians, a cell deleted with its entry, cells of another schema version, a stored scenario edited,
and validate bounded on huge lists. Each is an edit of the golden bundles (v7 ran two rounds),
re-checksummed so that only the deeper checks can catch it."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from harness.bundle import manifest
from harness.bundle.safe_json import _depth
from harness.bundle.snapshot import Snapshot
from harness.bundle.validate import validate
from harness.cli.main import main
from harness.scenario.loading import sha256 as scenario_sha256
from tests.unit.test_validate import edit_json

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


def _copy(tmp_path: Path, name: str = "v7") -> Path:
    root = tmp_path / "bundle"
    shutil.copytree(GOLDEN / name, root)
    return root


def _cells(root: Path, backend: str = "inductor", scenario: str = "Offline") -> list[Path]:
    return [p for p in sorted((root / "cells").glob("*.json"))
            if (c := json.loads(p.read_text()))["config"]["backend"] == backend and c["config"]["scenario"] == scenario]


def _problems(root: Path) -> list[str]:
    verdict = validate(root)
    assert not verdict.ok, "the edit passed validate"
    return verdict.problems


def _round(data: dict[str, Any], number: int) -> dict[str, Any]:
    return next(r for r in data["metrics"]["rounds"] if r["round"] == number)


@pytest.mark.parametrize(("edit", "said"), [
    (lambda d: d["metrics"].__setitem__("rounds", []), "rounds, where recorded, hold round 1 at least"),
    (lambda d: d["metrics"]["rounds"].append({**d["metrics"]["rounds"][1], "round": 3}),
     "3 recorded, the config asks for 2"),
    (lambda d: d["metrics"].__setitem__("rounds", d["metrics"]["rounds"][:1]), "1 recorded, the config asks for 2"),
    (lambda d: d["metrics"].pop("rounds"), "the config asks for 2 rounds and the cell records none"),
    (lambda d: _round(d, 2).__setitem__("median_ns", 5e-324), "rounds/1/median_ns"),
    (lambda d: _round(d, 2).update(n=0, cv=1e6), "a valid round has its count of samples"),
    (lambda d: _round(d, 1).__setitem__("cv", 0.5), "round 1's cv is not the cell's own"),
    (lambda d: _round(d, 1).__setitem__("wall_s", 1.0), "round 1's wall_s is not the cell's own"),
    (lambda d: _round(d, 2).__setitem__("log", "cells/nowhere/worker.log"), "round 2's log cells/nowhere/worker.log is "
     "not a file of the bundle"),
    (lambda d: d.__setitem__("log", "cells/nowhere/worker.log"), "the cell's log cells/nowhere/worker.log is not a file"),
])
@pytest.mark.slow
def test_a_rounds_edit_is_a_problem_not_a_new_verdict(tmp_path: Path, edit: Any, said: str) -> None:
    root = _copy(tmp_path)
    for path in _cells(root):
        edit_json(path, edit)
    assert any(said in line for line in _problems(root)), _problems(root)


def test_a_copied_round_is_no_measurement(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    path = _cells(root)[0]
    edit_json(path, lambda d: d["metrics"]["rounds"].__setitem__(1, {**_round(d, 1), "round": 2, "log": _round(d, 2)["log"]}))
    assert any("round 2 is round 1 again, figure for figure" in line for line in _problems(root))


def test_extreme_round_medians_are_refused_and_the_reports_do_not_crash(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    root = _copy(tmp_path)
    off, on = sorted(_cells(root), key=lambda p: json.loads(p.read_text())["config"]["variant"]["fusion"])
    edit_json(off, lambda d: _round(d, 2).__setitem__("median_ns", 5e-324))
    edit_json(on, lambda d: _round(d, 2).__setitem__("median_ns", 1e13))
    assert _problems(root)
    assert main(["report", str(root), "--out", str(tmp_path / "r")]) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_a_cell_deleted_with_its_entry_is_missing_from_the_run(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    path = next(p for p in _cells(root, backend="onnxruntime", scenario="SingleStream"))
    gone = path.stem
    header = json.loads((root / "bundle.json").read_text())
    header["cells"] = [e for e in header["cells"] if e["id"] != gone]
    (root / "bundle.json").write_text(json.dumps(header))
    path.unlink()
    shutil.rmtree(root / "cells" / gone)
    manifest.write(root)
    assert any("its scenario's cell resnet18 onnxruntime fusion-on SingleStream cpu fp32 b1 is not listed" in line
               for line in _problems(root))


def test_a_cell_of_another_schema_version_is_a_problem_and_resume_refuses(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    root = _copy(tmp_path)
    edit_json(_cells(root)[0], lambda d: d.__setitem__("schema_version", 6))
    assert any("written with schema version 6, the bundle with 7" in line for line in _problems(root))
    before = (root / "bundle.json").read_bytes()
    assert main(["run", "--resume", str(root)]) == 2
    assert (root / "bundle.json").read_bytes() == before and "Traceback" not in capsys.readouterr().err


def test_a_stored_scenario_edited_and_rehashed_no_longer_expands_to_its_cells(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    header = json.loads((root / "bundle.json").read_text())
    header["scenario"]["loadgen"]["min_duration_s"] = 0.75
    header["scenario_sha256"] = scenario_sha256(header["scenario"])
    (root / "bundle.json").write_text(json.dumps(header))
    manifest.write(root)
    assert any("is not listed in cells: a cell of the run is missing" in line for line in _problems(root))


@pytest.mark.slow
def test_huge_timing_lists_are_refused_before_the_schema_spends_seconds_on_them(tmp_path: Path) -> None:
    root = _copy(tmp_path)
    edit_json(_cells(root)[0], lambda d: d["metrics"]["device_time"].__setitem__("warmup_samples_ns", [7] * 1_200_000))
    start = time.monotonic()
    problems = _problems(root)
    assert time.monotonic() - start < 30
    assert any("1,200,000 items, more than the 1,000,000 a timing list holds" in line for line in problems)


def test_the_depth_of_a_long_flat_list_is_found_without_a_tuple_per_item() -> None:
    import tracemalloc

    flat = [0] * 2_000_000
    tracemalloc.start()
    assert _depth({"a": flat}) == 3
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 1 << 20


def test_an_accuracy_without_its_labels_is_a_problem_from_schema_4_on(tmp_path: Path) -> None:
    """A forged `good` with the labels deleted was a note ("an older harness"): every accuracy run has
    kept its labels since schema 3, so from 4 on their absence is a problem. (The golden mlperf
    bundle is of schema 3, written before its record named them: read as of 8, it is that forgery.)"""
    from harness.bundle import mlperf_check

    root = _copy(tmp_path, "mlperf")
    path = next(p for p in sorted((root / "cells").glob("*.json")) if json.loads(p.read_text())["metrics"].get("accuracy"))
    cell = json.loads(path.read_text())
    assert "labels" not in cell["metrics"]["accuracy"]
    found, notes = mlperf_check.problems(Snapshot(root), cell, 8)
    assert any("cannot be scored again: its labels are gone" in line for line in found)
    found, notes = mlperf_check.problems(Snapshot(root), cell, 3)
    assert not any("labels are gone" in line for line in found) and any("keeps no labels" in n for n in notes)


def test_a_user_conf_stripped_of_its_overrides_would_pass_as_official_and_is_a_problem(tmp_path: Path) -> None:
    root = _copy(tmp_path, "mlperf")
    for conf in (root / "cells").glob("*/loadgen/attempt-1/user.conf"):
        conf.write_text("\n".join(line for line in conf.read_text().splitlines() if line.startswith(("#", "resnet50."))))
    manifest.write(root)
    assert any("sets nothing but the hint" in line and "it would pass as official" in line for line in _problems(root))


def _as_two_jobs(header: dict[str, Any]) -> None:
    header["executor"] = {**header["executor"], "jobs": 2, "slots": [{"index": 0, "cpus": [0], "gpu": None},
                                                                    {"index": 1, "cpus": [1], "gpu": None}]}


@pytest.mark.parametrize(("name", "edit", "said"), [
    # a --jobs 2 run, which the harness leaves unpaired, given the flag: its header and its cells say how it ran
    ("v12", _as_two_jobs, "bundle.json: rounds_paired 'setting', yet its executor ran 'local' with jobs 2"),
    ("v12", lambda h: h["executor"].update(name="ray"), "yet its executor ran 'ray' with jobs 1"),
    # a bundle from before the harness took turns by setting, given the flag
    ("v10", lambda h: h.__setitem__("rounds_paired", "setting"), "before the harness took turns by setting"),
])
def test_rounds_paired_is_held_to_how_the_run_ran_its_cells(tmp_path: Path, name: str, edit: Any, said: str) -> None:
    """bundle.json's `rounds_paired` gives every backend's speedup over eager an interval from paired
    rounds; set on a run whose rounds did not take turns it passed validate, re-hashed."""
    root = _copy(tmp_path, name)
    edit_json(root / "bundle.json", edit)
    assert any(said in line for line in _problems(root))


def test_a_cell_that_ran_in_a_slot_is_no_cell_of_a_paired_run(tmp_path: Path) -> None:
    root = _copy(tmp_path, "v12")
    path = _cells(root)[0]
    edit_json(path, lambda c: c["node"].update(slot={"index": 1, "cpus": [1], "gpu": None}))
    assert f"cells/{path.stem}.json: ran in slot 1 of a --jobs run, yet bundle.json says rounds_paired 'setting'" in \
        " ".join(_problems(root))
