"""`run --dry-run --resume RUN_DIR`: the cells a resume of the bundle would run, listed as a scenario
file's are, with the floor on their time and what `--budget-s` makes of it; nothing written."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from harness.bundle import manifest
from harness.bundle.header_record import BackendReport
from harness.bundle.migrations import SCHEMA_VERSION
from harness.cli.main import main
from harness.run import plan, resumable
from harness.run.probe_answer import ProbeAnswer
from harness.run.run_request import RunRequest
from harness.scenario.cells import expand

REPO = Path(__file__).resolve().parents[2]


def test_a_dry_run_of_a_resume_lists_the_cells_it_would_run_and_writes_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], whole_machine: None) -> None:
    """`--dry-run --resume` was refused: a planner with 15 minutes of GPU could not see what a resume
    would run, nor what its budget would make of it, before spending them."""
    root = tmp_path / "run"
    shutil.copytree(REPO / "tests" / "golden" / f"v{SCHEMA_VERSION}", root)  # a bundle this harness resumes
    cells = json.loads((root / "bundle.json").read_text())["cells"]
    for left in cells[:2]:  # deleted so that they run again
        (root / "cells" / f"{left['id']}.json").unlink()
        shutil.rmtree(root / "cells" / left["id"], ignore_errors=True)
    manifest.write(root)
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    monkeypatch.setattr(plan, "run_probe", lambda *a, **k: ProbeAnswer(
        device="cpu", backends={"eager": BackendReport(available=True), "null": BackendReport(available=True)}))
    assert main(["run", "--resume", str(root), "--dry-run", "--budget-s", "0.7"]) == 0
    out = capsys.readouterr().out
    said = " ".join(out.split())
    # the path may be broken where the terminal's width ends it (a long pytest folder under xdist)
    assert "".join(f"2 of the {len(cells)} cell(s) of {root} to run on cpu".split()) in "".join(out.split()), said
    assert all(left["label"] in said for left in cells[:2]) and cells[2]["label"] not in said, said
    assert "2 of 2 cell(s) would run: at least 1.00 s of LoadGen's minimum duration (2 x 500 ms" in said, said
    assert "--budget-s 0.7 (700 ms) is less than this floor: at most 1 of the 2 cell(s) can finish within it" in said
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before, "a dry run wrote into the bundle"


def test_a_dry_run_of_a_complete_bundle_says_a_resume_would_run_none(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "run"
    shutil.copytree(REPO / "tests" / "golden" / f"v{SCHEMA_VERSION}", root)
    assert main(["run", "--resume", str(root), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "".join(f"each of the 14 cell(s) of {root} has its record: a resume would run none".split()) in "".join(out.split()), out


@pytest.mark.parametrize("held", ["versions", "variable"])
def test_a_dry_run_of_a_resume_is_refused_where_the_resume_is(
        held: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        whole_machine: None) -> None:
    """A library of its backends upgraded since the run started (a plugin, torch), or a variable the
    scenario's `env:` passes on unset in this shell: `run --resume` is refused (exit 2), and its dry
    run listed the cells as ones that would run, exit 0."""
    from tests.unit.test_resume_refusals import _edited

    root = _edited(tmp_path, lambda s: s.update(env=["OMP_NUM_THREADS"]) if held == "variable" else None)
    for path in (root / "cells").glob("*.json"):
        record = json.loads(path.read_text())
        if held == "variable" and record.get("environment"):  # a measured cell's
            record["environment"]["variables"] = {**record["environment"]["variables"], "OMP_NUM_THREADS": "1"}
            path.write_text(json.dumps(record))
    manifest.write(root)
    header = json.loads((root / "bundle.json").read_text())
    torch = "9.9" if held == "versions" else header["backends"]["eager"]["versions"]["torch"]
    monkeypatch.setattr(plan, "run_probe", lambda *a, **k: ProbeAnswer(device="cpu", backends={
        "eager": BackendReport(available=True, versions={"torch": torch}), "null": BackendReport(available=True)}))
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    assert main(["run", "--resume", str(root), "--dry-run"]) == 2
    said = " ".join(capsys.readouterr().err.split())
    assert said.startswith(f"fusionbench: error: --resume {root}: " + (
        f"torch {header['backends']['eager']['versions']['torch']} when the run started, 9.9 here: its cells would have "
        "run on two versions" if held == "versions" else
        "OMP_NUM_THREADS was 1 when its cells ran, unset here")), said
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before, "a dry run wrote into the bundle"


def test_the_dry_run_of_an_official_runs_resume_floors_its_cells_at_mlperf_confs_duration(
        capsys: pytest.CaptureFixture[str]) -> None:
    """An official mlperf run stores every LoadGen setting, mlperf.conf's too, with `overrides: {}`.
    Typed without its overrides, its `min_duration_s: 10.0` read as one the file gave: the dry run
    of its resume said `2 x 10.0 s` where each cell's LoadGen runs mlperf.conf's 600 s."""
    stored = json.loads((REPO / "tests" / "golden" / "mlperf" / "bundle.json").read_text())["scenario"]
    stored["loadgen"].update(overrides={}, min_duration_s=10.0, min_query_count=None)  # as an official run stores it
    typed = resumable.check_scenario(stored, "bundle.json")
    assert typed.loadgen.user_conf() == {}
    short = json.loads((REPO / "tests" / "golden" / "mlperf" / "bundle.json").read_text())["scenario"]
    assert resumable.check_scenario(short, "bundle.json").loadgen.user_conf() == short["loadgen"]["overrides"]
    cells = expand(stored, "cpu")
    assert all(cell.config.loadgen.overrides == {} for cell in cells)  # what its cells run: official
    probe = ProbeAnswer(device="cpu", backends={"eager": BackendReport(available=True), "null": BackendReport(available=True)})
    plan._listed(cells, probe, typed, RunRequest(scenario_path=None, resume=REPO), Console(width=400), "cells")
    said = " ".join(capsys.readouterr().out.split())
    assert "2 of 2 cell(s) would run: at least 20 min of LoadGen's minimum duration (2 x 600 s)" in said, said


def _without_inductors_offline_off(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    """A copy of the golden bundle whose Inductor fusion-off Offline cell was deleted, to run again;
    and the record of its twin."""
    root = tmp_path / "run"
    shutil.copytree(REPO / "tests" / "golden" / f"v{SCHEMA_VERSION}", root)
    cells = {json.loads(p.read_text())["id"]: json.loads(p.read_text()) for p in (root / "cells").glob("*.json")}
    off = next(c for c in cells.values() if c["config"]["backend"] == "inductor" and c["config"]["variant"]["fusion"] == "off"
               and c["config"]["scenario"] == "Offline")
    twin = next(c for c in cells.values() if c["config"]["backend"] == "inductor" and c["config"]["variant"]["fusion"] == "on"
                and c["config"]["scenario"] == "Offline")
    (root / "cells" / f"{off['id']}.json").unlink()
    shutil.rmtree(root / "cells" / off["id"], ignore_errors=True)
    manifest.write(root)
    return root, twin


def _every_backend_here(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plan, "run_probe", lambda *a, **k: ProbeAnswer(
        device="cpu", backends={name: BackendReport(available=True) for name in ("eager", "inductor", "null", "tvm")}))


def test_the_dry_run_of_a_resume_leaves_a_cell_whose_twin_took_longer_than_the_budget(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], whole_machine: None) -> None:
    """The resume does not start a cell whose twin, kept in the bundle, took longer than is left of
    --budget-s; its dry run listed the cell as `run`, its floor within the budget, where the resume
    would start nothing."""
    root, twin = _without_inductors_offline_off(tmp_path)
    _every_backend_here(monkeypatch)
    budget_s = twin["wall_s"] - 2  # less than the twin took: not started
    assert main(["run", "--resume", str(root), "--dry-run", "--budget-s", f"{budget_s:.0f}"]) == 0
    said = " ".join(capsys.readouterr().out.split())
    flat = " ".join(said.replace("│", " ").split())  # the row's text, wherever the table wraps it
    assert (f"be left for --resume (not started: its twin (fusion on) took {twin['wall_s']:.0f} s, {budget_s:.0f} s of "
            "the run's time budget left)") in flat, said
    assert "0 of 1 cell(s) would run" in said, said
    assert main(["run", "--resume", str(root), "--dry-run", "--budget-s", f"{twin['wall_s'] + 60:.0f}"]) == 0
    assert "1 of 1 cell(s) would run" in " ".join(capsys.readouterr().out.split())


def test_the_dry_run_of_a_resume_holds_a_cell_it_times_afresh_and_its_twin_to_its_kept_time_as_the_resume_does(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], whole_machine: None) -> None:
    """A cell whose rounds the budget cut is timed afresh by the resume, its record kept until its round
    1 starts: the resume holds it to its kept round 1's time (started, it would replace its record and be
    cut, leaving nothing) and its twin to that time too; the dry run lists both as the resume runs them."""
    from harness.run import time_budget

    root, twin = _without_inductors_offline_off(tmp_path)
    # the twin as a cell whose round 2 the budget kept from it: what the resume times afresh
    monkeypatch.setattr(time_budget, "rounds_cut", lambda record: [2] if (record or {}).get("id") == twin["id"] else [])
    _every_backend_here(monkeypatch)
    budget_s = twin["wall_s"] - 2
    assert main(["run", "--resume", str(root), "--dry-run", "--budget-s", f"{budget_s:.0f}"]) == 0
    said = " ".join(capsys.readouterr().out.replace("│", " ").split())
    left = f"{twin['wall_s']:.0f} s, {budget_s:.0f} s of the run's time budget left)"
    assert f"be left for --resume (not started: its kept round 1 took {left}" in said, said
    assert f"be left for --resume (not started: its twin (fusion on) took {left}" in said, said
    assert "0 of 2 cell(s) would run" in said, said
    assert main(["run", "--resume", str(root), "--dry-run", "--budget-s", f"{twin['wall_s'] + 60:.0f}"]) == 0
    said = " ".join(capsys.readouterr().out.replace("│", " ").split())
    assert "run all 2 rounds afresh" in said and "2 of 2 cell(s) would run" in said, said


def test_a_resume_and_its_dry_run_meet_a_bundles_refusals_in_one_order(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A bundle that meets six refusals at once, each lifted in turn: the resume and its dry run
    refuse it for the same one each time, in one line each, the run's order. The dry run met the
    `--jobs` and plugin refusals before another image's, and the resume that one first: a planner
    fixed what the dry run said and met another refusal in the resume."""
    import os

    from harness import registry
    from harness.run import runner
    from tests.unit.test_resume_refusals import _edited

    root = _edited(tmp_path, lambda s: s.update(env=["OMP_NUM_THREADS"]))  # its first cell (eager) deleted
    header = json.loads((root / "bundle.json").read_text())
    null = next(cell["id"] for cell in header["cells"] if " null " in cell["label"])  # one of a plugin gone here
    (root / "cells" / f"{null}.json").unlink()
    shutil.rmtree(root / "cells" / null, ignore_errors=True)
    for path in (root / "cells").glob("*.json"):
        record = json.loads(path.read_text())
        if record.get("environment"):  # a measured cell's
            record["environment"]["variables"] = {**record["environment"]["variables"], "OMP_NUM_THREADS": "1"}
            path.write_text(json.dumps(record))
    manifest.write(root)
    recorded = {name: entry.get("versions") or {} for name, entry in header["backends"].items()}
    probed = dict(recorded)  # what the probe says here: torch upgraded for eager
    probed["eager"] = {**probed["eager"], "torch": "9.9"}

    def probe(*args: Any, **kwargs: Any) -> ProbeAnswer:
        return ProbeAnswer(device="cpu", backends={name: BackendReport(available=True, versions=versions)
                                                   for name, versions in probed.items()})

    monkeypatch.setattr(runner, "run_probe", probe)
    monkeypatch.setattr(plan, "run_probe", probe)
    registered = registry._read_entry_points()
    monkeypatch.setattr(registry, "_read_entry_points", lambda: {k: v for k, v in registered.items() if k != "null"})
    monkeypatch.setenv("FUSIONBENCH_IMAGE", "fusionbench-cpu:0123456789abcdef")
    monkeypatch.setenv("FUSIONBENCH_IMAGE_ID", "sha256:" + "1" * 64)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)  # the golden cells' machine: CPUs 0 and 1 of 2
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    options = ["--no-cache", "--jobs", "3"]

    def lift_jobs() -> None:
        options.remove("--jobs")
        options.remove("3")

    # each refusal (what its line says) and how it is lifted, in the order the resume meets them
    refusals: list[tuple[str, Callable[[], None]]] = [
        ("its cells ran outside the project's images and this resume would run them in the image",
         lambda: monkeypatch.delenv("FUSIONBENCH_IMAGE_ID")),
        ("--jobs 3: each cell needs a core of its own and 1 is usable here", lift_jobs),
        ("1 cell(s) left to run are of backend 'null', which the run had when it started and no package here registers",
         lambda: monkeypatch.setattr(registry, "_read_entry_points", lambda: registered)),
        ("its cells ran on the whole machine and this resume would run its cells on 1 of the machine's 2 CPUs",
         lambda: monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})),
        (f"torch {recorded['eager']['torch']} when the run started, {recorded['eager']['torch']} and 9.9 here",
         lambda: probed.update(eager=recorded["eager"])),
        ("OMP_NUM_THREADS was 1 when its cells ran, unset here", lambda: monkeypatch.setenv("OMP_NUM_THREADS", "1")),
    ]
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    for said, lift in refusals:
        lines = []
        for dry in ([], ["--dry-run"]):
            assert main(["run", "--resume", str(root), *options, *dry]) == 2, capsys.readouterr()
            err = capsys.readouterr().err
            assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
            lines.append(" ".join(err.split()))
        assert lines[0] == lines[1], f"the resume and its dry run refused it for other reasons: {lines}"
        assert said in lines[0], f"expected {said!r} next, got: {lines[0]}"
        assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before, "a refusal changed the bundle"
        lift()
    assert main(["run", "--resume", str(root), *options, "--dry-run"]) == 0  # nothing left to refuse
    assert "2 of 2 cell(s) would run" in " ".join(capsys.readouterr().out.split())
