"""`--resume` reads the scenario stored in bundle.json as a run reads a scenario file: a stored
scenario the schema refuses, or one not in the form a run stores, is refused in one line that
names bundle.json and the field, and the bundle is left byte for byte as it was. And a run
stopped while it writes the report leaves a valid bundle, says how to write the report, and a
resume writes it."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.bundle import manifest
from harness.bundle.migrations import SCHEMA_VERSION
from harness.bundle.snapshot import Snapshot
from harness.bundle.validate import validate
from harness.cli.main import main
from harness.errors import BundleError
from harness.run import plan, resumable, runner, slots
from harness.run.resumable import check_scenario
from harness.scenario import loading
from tests.resumable_copies import as_run_here
from tests.shared_probe import SharedProbe

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def _snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def shared_probe() -> SharedProbe:
    return SharedProbe()


@pytest.fixture
def one_probe(shared_probe: SharedProbe, monkeypatch: pytest.MonkeyPatch) -> None:
    """The resumes of the golden bundle that reach the probe ask it the same (the bundle's backends, on
    the CPU): it probes once for them all (tests/shared_probe.py). What they check is each refusal,
    made against that answer as against any probe of this machine."""
    monkeypatch.setattr(runner, "run_probe", shared_probe)


@pytest.fixture
def no_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    """A resume refused before the machine is probed: the probe (torch and every backend's libraries
    imported, seconds) is not asked, by the resume or its dry run."""

    def probed(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the probe was asked before the refusal")

    monkeypatch.setattr(runner, "run_probe", probed)
    monkeypatch.setattr(plan, "run_probe", probed)


def _refused(root: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """What `run --resume ROOT` said on standard error, on one line, having refused (exit 2) and left
    the bundle byte for byte as it was."""
    before = _snapshot(root)
    assert main(["run", "--resume", str(root), "--no-cache"]) == 2
    assert _snapshot(root) == before, "a refused resume changed the bundle"
    return " ".join(capsys.readouterr().err.split())


def _edited(tmp_path: Path, edit: Callable[[dict[str, Any]], None]) -> Path:
    """The golden bundle with its stored scenario edited, its hashes made to match, and one cell's
    record deleted so that a resume has a cell to run."""
    root = tmp_path / "run"
    shutil.copytree(GOLDEN / f"v{SCHEMA_VERSION}", root)  # a bundle this harness resumes
    header = json.loads((root / "bundle.json").read_text())
    edit(header["scenario"])
    header["scenario_sha256"] = loading.sha256(header["scenario"])
    (root / "bundle.json").write_text(json.dumps(header))
    victim = header["cells"][0]["id"]
    (root / "cells" / f"{victim}.json").unlink()
    shutil.rmtree(root / "cells" / victim)
    manifest.write(root)
    return root


@pytest.mark.parametrize(("edit", "field", "why"), [
    (lambda s: s.update(limits="x"), "scenario.limits", "not a mapping"),
    # a file may say `models: resnet18`; a run stores the list
    (lambda s: s.update(models="resnet18"), "scenario.models", '"resnet18" is not what a run stores there'),
    (lambda s: s.update(models=["resnet18"]), "scenario.models[0]", "is not what a run stores there"),
    (lambda s: s["limits"].update(cell_timeout_s="900"), "scenario.limits.cell_timeout_s", "Input should be a valid number"),
    (lambda s: s["timing"].pop("min_iters"), "scenario.timing.min_iters", "missing"),
    # a file may say `fusion: on`; a run stores ["on"], and would read "on" as "o" and "n"
    (lambda s: s["backends"][0].update(fusion="on"), "scenario.backends[0].fusion", '"on" is not what a run stores'),
    (lambda s: s["backends"][0].update(fusion=["sometimes"]), "scenario.backends[0].fusion[0]", "Input should be 'on'"),
], ids=["limits-not-a-mapping", "models-not-a-list", "model-not-a-mapping", "timeout-a-string", "key-missing",
        "fusion-not-a-list", "fusion-unknown"])
def test_a_stored_scenario_the_run_cannot_read_is_refused_and_the_bundle_left_as_it_was(
        edit: Callable[[dict[str, Any]], None], field: str, why: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    root = _edited(tmp_path, edit)
    before = _snapshot(root)
    code = main(["run", "--resume", str(root), "--no-cache"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert f"cannot resume {root}: bundle.json: {field}: " in err and why in err, err
    assert _snapshot(root) == before, "a refused resume changed the bundle"
    assert json.loads((root / "bundle.json").read_text())["state"] == "complete"


@pytest.mark.parametrize("bundle", ["v3", "mlperf"])
def test_the_golden_bundles_stored_scenarios_are_accepted(bundle: str) -> None:
    """Options its backend refuses (v3's failed cell), the mlperf profile's overrides, and keys that
    bundles written before they existed lack (allocator, env, baseline)."""
    stored = json.loads((GOLDEN / bundle / "bundle.json").read_text())["scenario"]
    typed = check_scenario(stored, "bundle.json")
    assert typed.name == stored["name"]
    assert [model.name for model in typed.models] == [model["name"] for model in stored["models"]]
    assert [backend.name for backend in typed.backends] == [backend["name"] for backend in stored["backends"]]


@pytest.mark.parametrize("path", sorted(SCENARIOS.glob("*.yaml")), ids=lambda p: p.name)
def test_what_a_run_stores_for_each_shipped_scenario_is_accepted(path: Path) -> None:
    loaded = loading.load(path)
    stored = json.loads(json.dumps(loading.resolved(loaded, path.stem)))  # as bundle.json holds it
    typed = check_scenario(stored, "bundle.json")
    assert typed.name == (loaded.name or path.stem)
    assert typed.model_dump(exclude={"name"}) == loaded.model_dump(exclude={"name"})


def test_a_backend_missing_here_is_left_to_skip_its_cells() -> None:
    stored = json.loads((GOLDEN / "v3" / "bundle.json").read_text())["scenario"]
    stored["backends"][0]["name"] = "a_plugin_not_installed_here"
    assert check_scenario(stored, "bundle.json").backends[0].name == "a_plugin_not_installed_here"
    stored["allocator"] = "sometimes"
    with pytest.raises(BundleError, match=r"^bundle.json: scenario.allocator: Input should be 'steady' or 'system'"):
        check_scenario(stored, "bundle.json")


def test_a_bundle_written_before_the_files_checks_of_installed_backends_still_resumes(tmp_path: Path) -> None:
    """Entries whose options differ only by a default, and an env: variable a backend points at a
    folder of its own, loaded before those checks, and their bundles (which validate accepts) were
    then refused by `run --resume` ("repeats cells of backends[0]"): a killed run could not be
    finished. The stored scenario is not judged by the backends installed here."""
    path = tmp_path / "s.yaml"
    path.write_text("models: [resnet18]\nbackends: [inductor, {name: inductor, options: {mode: max-autotune}}]\n"
                    "scenarios: [Offline]\nenv: [FOO=1]\n")
    stored = json.loads(json.dumps(loading.resolved(loading.load(path), "s")))
    stored["backends"][1]["options"] = {"mode": "default"}
    stored["env"] = ["TRITON_CACHE_DIR=/fast/disk"]
    typed = check_scenario(stored, "bundle.json")
    assert [backend.options for backend in typed.backends] == [{}, {"mode": "default"}]
    assert typed.env == ["TRITON_CACHE_DIR=/fast/disk"]
    stored["backends"][1]["options"] = {}  # the same entry twice is the same cells, as written too
    with pytest.raises(BundleError, match=r"scenario.backends: \[1\] repeats cells of backends\[0\]"):
        check_scenario(stored, "bundle.json")


@pytest.mark.slow
def test_a_run_stopped_while_writing_the_report_says_so_and_resume_writes_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from harness.reporting import report

    root = tmp_path / "run"
    shutil.copytree(GOLDEN / f"v{SCHEMA_VERSION}", root)  # a bundle this harness resumes
    for name in (report.REPORT_MD, report.REPORT_HTML):  # complete with its report, a resume leaves it be
        (root / name).unlink()
    manifest.write(root)
    write = report.write_files_atomic

    def cut_short(files: dict[Path, bytes]) -> None:
        for path, data in files.items():
            if path.name == report.REPORT_HTML:  # report.md is written; Ctrl-C lands before report.html
                raise KeyboardInterrupt
            write({path: data})

    monkeypatch.setattr(report, "write_files_atomic", cut_short)
    assert main(["run", "--resume", str(root), "--no-cache"]) == 130
    printed = " ".join(capsys.readouterr().out.split())  # as one line, whatever the console wrapped
    assert "interrupted while writing the report" in printed and f"fusionbench report {root}" in printed, printed
    assert not (root / "report.md").exists() and not (root / "report.html").exists()
    assert validate(root).ok, validate(root).problems
    assert json.loads((root / "bundle.json").read_text())["state"] == "complete"

    monkeypatch.setattr(report, "write_files_atomic", write)
    assert main(["run", "--resume", str(root), "--no-cache"]) == 0  # as its run: valid and skipped cells
    assert (root / "report.md").exists() and (root / "report.html").exists()
    assert {"report.md", "report.html"} <= set(manifest.read(Snapshot(root)))
    assert validate(root).ok, validate(root).problems


def test_a_killed_bundle_whose_cells_folder_is_a_link_is_refused_and_nothing_outside_is_touched(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A killed run has no manifest to check, but a link still leads out: the resumed run would
    have written its records (and cleared their folders) through it."""
    root = tmp_path / "bundle"
    shutil.copytree(GOLDEN / f"v{SCHEMA_VERSION}", root)  # a bundle this harness resumes
    header = json.loads((root / "bundle.json").read_text())
    header["state"] = "running"
    (root / "bundle.json").write_text(json.dumps(header))
    (root / manifest.MANIFEST).unlink()
    outside = tmp_path / "outside"
    shutil.move(root / "cells", outside)
    for record in outside.glob("*.json"):
        record.unlink()
    (root / "cells").symlink_to(outside)
    before = _snapshot(outside)
    code = main(["run", "--resume", str(root), "--no-cache"])
    printed = capsys.readouterr()
    assert code == 2 and "cells: a symbolic link" in printed.err, printed.err
    assert _snapshot(outside) == before


def test_a_bundle_run_with_no_cache_is_resumed_only_with_no_cache(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Its header says every cell was prepared cold; a resume from a cache would add warm ones."""
    root = _edited(tmp_path, lambda s: None)
    header = json.loads((root / "bundle.json").read_text())
    (root / "bundle.json").write_text(json.dumps({**header, "artifact_cache": None}))
    manifest.write(root)
    before = _snapshot(root)
    assert main(["run", "--resume", str(root), "--cache-dir", str(tmp_path / "cache")]) == 2
    assert f"{root} was run with --no-cache (every cell prepared cold); resume it without --cache-dir" in capsys.readouterr().err
    assert _snapshot(root) == before and not (tmp_path / "cache").exists()


@pytest.mark.slow
def test_a_bundle_run_with_no_cache_resumed_with_neither_cache_option_runs_without_the_cache(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, one_probe: None, whole_machine: None) -> None:
    """The README says a resume keeps `--no-cache`; it was refused unless --no-cache was given again."""
    root = _edited(tmp_path, lambda s: None)  # one cell deleted: the resume would run it
    as_run_here(root)
    header = json.loads((root / "bundle.json").read_text())
    (root / "bundle.json").write_text(json.dumps({**header, "artifact_cache": None}))
    manifest.write(root)
    caches: list[object] = []

    def no_cell_run(todo: list[Any], *args: Any, **kwargs: Any) -> None:
        caches.append(args[5])  # the cache the cells would be given: the run's choice, not a cell's
        assert len(todo) == 1

    monkeypatch.setattr(runner.sweep, "sweep", no_cell_run)
    assert main(["run", "--resume", str(root)]) == 0  # the cell left unrun: `interrupted`, the other results kept
    assert caches == [None]


def test_a_file_given_with_resume_that_differs_only_in_its_rounds_says_so_and_auto_is_the_bundles_device(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A run of `f.yaml --rounds 2`, resumed with `f.yaml` (of one round), was told the file differs."""
    from contextlib import ExitStack

    import yaml

    from harness.errors import ConfigError
    from harness.run.opening import open_or_plan
    from harness.run.run_request import RunRequest

    root = _edited(tmp_path, lambda s: None)  # the golden run was of two rounds
    stored = json.loads((root / "bundle.json").read_text())["scenario"]
    assert stored["timing"]["rounds"] == 2
    file = tmp_path / f"{stored['name']}.yaml"
    file.write_text(yaml.safe_dump({**stored, "timing": {**stored["timing"], "rounds": 1}}))
    before = _snapshot(root)
    assert main(["run", str(file), "--resume", str(root), "--no-cache"]) == 2
    assert (f"{file} differs from the scenario stored in {root} only in its rounds: the run had 2; resume with "
            "--rounds 2, or without the file") in capsys.readouterr().err
    assert _snapshot(root) == before
    for request in (RunRequest(file, rounds=2, resume=root), RunRequest(None, device="auto", resume=root)):
        with ExitStack() as closing:
            bundle, _, scenario = open_or_plan(request, closing)
            assert scenario.timing.rounds == 2 and bundle.device == "cpu"
    file.write_text(yaml.safe_dump({**stored, "timing": {**stored["timing"], "rounds": 1, "min_iters": 11}}))
    # the settings apart are named (it said only that the file differs)
    with ExitStack() as closing, pytest.raises(ConfigError, match="differs from the scenario stored in .* in "
                                                                  r"timing\.min_iters; resume without"):
        open_or_plan(RunRequest(file, rounds=2, resume=root), closing)


def test_a_bundle_without_its_cells_folder_is_refused_as_such_not_as_read_only(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "run"
    shutil.copytree(GOLDEN / f"v{SCHEMA_VERSION}", root)
    shutil.rmtree(root / "cells")
    assert main(["run", "--resume", str(root), "--no-cache"]) == 2
    err = capsys.readouterr().err
    assert f"cannot resume {root}: it has no cells/ folder" in err and "read-only" not in err


def test_a_file_given_with_resume_that_differs_only_in_its_name_says_so(tmp_path: Path) -> None:
    """A copy of the file under another name: its name is its stem, so it "differed", without a word why."""
    from contextlib import ExitStack

    import yaml

    from harness.errors import ConfigError
    from harness.run.opening import open_or_plan
    from harness.run.run_request import RunRequest

    root = _edited(tmp_path, lambda s: None)
    stored = json.loads((root / "bundle.json").read_text())["scenario"]
    copy = tmp_path / "copy.yaml"
    copy.write_text(yaml.safe_dump({k: v for k, v in stored.items() if k != "name"}))
    with ExitStack() as closing, pytest.raises(ConfigError, match=r"only in its name \('copy' against 'golden'\)"):
        open_or_plan(RunRequest(copy, resume=root), closing)
    (tmp_path / "golden.yaml").write_text(copy.read_text())  # the stored name, from its stem: the same file
    with ExitStack() as closing:
        open_or_plan(RunRequest(tmp_path / "golden.yaml", resume=root), closing)


@pytest.mark.slow
def test_a_resume_on_another_share_of_the_machine_than_its_cells_ran_on_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], no_probe: None, whole_machine: None) -> None:
    """A `--jobs 2` run stopped and resumed serially ran fusion on in a 1-core slot and off on the
    whole machine: the report set the two side by side as a 6.02x speedup, and validate passed.
    A CPU cell's share is known before the probe: the resume and its dry run are refused before it."""
    root = _edited(tmp_path, lambda s: None)
    for path in (root / "cells").glob("*.json"):
        record = json.loads(path.read_text())
        if record.get("node"):
            record["node"]["slot"] = {"index": 0, "cpus": [0], "gpu": None, "gpu_order": None}
            path.write_text(json.dumps(record))
    header = json.loads((root / "bundle.json").read_text())
    # as a --jobs 2 run writes it: its rounds did not take turns (validate holds the flag to the slots)
    (root / "bundle.json").write_text(json.dumps({**header, "executor": {**header["executor"], "jobs": 2},
                                                  "rounds_paired": None}))
    manifest.write(root)
    before = _snapshot(root)
    assert main(["run", "--resume", str(root), "--no-cache"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert (f"--resume {root}: its cells ran on a slot of 1 core(s) and this resume would run its cells on the whole "
            "machine; resume with the options it ran with (`--jobs 2`, as bundle.json `executor` records its last "
            "start)") in err, err  # it named bundle.json's field, not the option to give
    assert _snapshot(root) == before, "a refused resume changed the bundle"
    assert main(["run", "--resume", str(root), "--no-cache", "--dry-run"]) == 2
    assert "its cells ran on a slot of 1 core(s) and this resume would run" in " ".join(capsys.readouterr().err.split())


@pytest.mark.slow
def test_a_resume_bound_to_fewer_cpus_than_its_cells_had_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], no_probe: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run on the whole machine resumed under `taskset -c 0` (or in a cpuset container) read as
    the same share: the resumed cells' threads had one core where the others had two, and the
    report set them side by side."""
    root = _edited(tmp_path, lambda s: None)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)  # the golden cells' machine: CPUs 0 and 1 of 2
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    err = _refused(root, capsys)
    assert (f"--resume {root}: its cells ran on the whole machine and this resume would run its cells on 1 of the "
            "machine's 2 CPUs; resume with the options it ran with (no --jobs, one cell at a time") in err, err


def test_a_resume_under_a_cpu_quota_is_held_to_it_only_where_the_cells_recorded_theirs() -> None:
    """A bundle started before cells recorded their quota, in `docker --cpus 2` on 4 CPUs, resumed in
    the same container: its cells read as the whole machine, the resume as under a quota of 2, and
    it was refused."""
    from harness.bundle.cell_record import CellRecord
    from harness.reporting.run_facts import share
    from harness.run.resume_refusals import another_share

    template = json.loads(next(p for p in sorted((GOLDEN / f"v{SCHEMA_VERSION}" / "cells").glob("*.json"))
                               if json.loads(p.read_text())["status"] == "valid").read_text())
    template["node"]["cpu"]["logical_cores"] = 4
    template["environment"] = {**template["environment"], "cpu_affinity": [0, 1, 2, 3]}
    template["environment"].pop("cpu_quota", None)
    older = CellRecord.model_validate(template)
    bundle = runner.Bundle.__new__(runner.Bundle)
    bundle.root, bundle.header = Path("/run"), {}
    another_share(bundle, [older], {share(None, 4, 4)}, with_quota=False)  # the quota left out of both sides
    with pytest.raises(Exception, match="ran on the whole machine and this resume would run its cells on the whole "
                                        "machine under a CPU quota of 2"):
        another_share(bundle, [older], {share(None, 4, 4, 2.0)})
    recorded = CellRecord.model_validate({**template, "environment": {**template["environment"], "cpu_quota": 2.0}})
    another_share(bundle, [recorded], {share(None, 4, 4, 2.0)})  # the same quota, recorded: the same share


@pytest.mark.slow
def test_a_resume_on_other_versions_of_its_backends_libraries_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], one_probe: None, whole_machine: None) -> None:
    """A plugin upgraded between a run's start and its resume: fusion on of 0.2.0 was set beside
    fusion off of 0.3.0 with nothing said, validate passed, and the report named 0.3.0 alone."""
    import torch

    root = _edited(tmp_path, lambda s: None)  # one cell deleted: the resume would run it
    as_run_here(root)
    header = json.loads((root / "bundle.json").read_text())
    header["backends"]["eager"]["versions"] = {"torch": "2.0.0", "gone-lib": "1.0"}  # a library no backend has now: left out
    (root / "bundle.json").write_text(json.dumps(header))
    manifest.write(root)
    before = _snapshot(root)
    assert main(["run", "--resume", str(root), "--no-cache"]) == 2
    err = capsys.readouterr().err
    local = torch.__version__  # the other measured backends' torch, as this machine's: both are said
    assert (f"--resume {root}: torch 2.0.0 and {local} when the run started, {local} here: its cells would have run "
            "on two versions; install the versions it ran with, or start a new run") in err, err
    assert _snapshot(root) == before, "a refused resume changed the bundle"


@pytest.mark.slow
def test_a_resume_under_another_value_of_a_variable_env_passes_on_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], one_probe: None, whole_machine: None,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`env: [OMP_NUM_THREADS]` started under OMP_NUM_THREADS=1 and resumed from a shell without it:
    the resumed eager cell ran on torch's two threads beside the others' one, exit 0, nothing said,
    and the report set them side by side."""
    root = _edited(tmp_path, lambda s: s.update(env=["OMP_NUM_THREADS"]))
    for path in (root / "cells").glob("*.json"):
        record = json.loads(path.read_text())
        if record.get("environment"):  # a measured cell's: a skipped one's worker never started
            record["environment"]["variables"] = {**record["environment"]["variables"], "OMP_NUM_THREADS": "1"}
            path.write_text(json.dumps(record))
    as_run_here(root)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    err = _refused(root, capsys)
    assert (f"--resume {root}: OMP_NUM_THREADS was 1 when its cells ran, unset here (the scenario's env: passes this "
            "shell's value on): its cells would have run under two values; set it as it was, or start a new run") in err, err


def test_the_variables_a_resume_is_held_to_are_those_env_passes_on_from_the_shell() -> None:
    """`NAME=value` is the stored scenario's own, the same at every start; in a `--jobs` slot a thread
    count is the one the slot sets from this shell's (its cores, or the fewer the shell asks: a first
    start's cells that ran 1, the shell's, in slots of 4 were not held to it, and a resume from a
    shell of 2 ran 2 beside them); a cell that recorded no variables holds nothing."""
    from harness.bundle.cell_record import CellRecord
    from harness.errors import ConfigError
    from harness.run.resume_refusals import other_variables

    template = json.loads(next(p for p in sorted((GOLDEN / f"v{SCHEMA_VERSION}" / "cells").glob("*.json"))
                               if json.loads(p.read_text())["status"] == "valid").read_text())

    def seen(variables: dict[str, str] | None) -> CellRecord:
        environment = {k: v for k, v in template["environment"].items() if k != "variables"}
        return CellRecord.model_validate({**template, "environment": environment if variables is None
                                          else {**environment, "variables": variables}})

    bundle = runner.Bundle.__new__(runner.Bundle)
    bundle.root, bundle.header = Path("/run"), {}
    one = [seen({"OMP_NUM_THREADS": "1", "KMP_AFFINITY": "compact"})]
    other_variables(bundle, one, ["OMP_NUM_THREADS", "KMP_AFFINITY"], {"OMP_NUM_THREADS": "1", "KMP_AFFINITY": "compact"})
    other_variables(bundle, one, ["OMP_NUM_THREADS=1"], {})  # set by the file: the shell's is not read
    one_core, four = [slots.Slot(index=0, cpus=(0,))], [slots.Slot(index=0, cpus=(0, 1, 2, 3))]
    other_variables(bundle, one, ["OMP_NUM_THREADS"], {"OMP_NUM_THREADS": "2"}, one_core)  # a slot's own count
    other_variables(bundle, one, ["OMP_NUM_THREADS"], {"OMP_NUM_THREADS": "1"}, four)
    with pytest.raises(ConfigError, match="OMP_NUM_THREADS was 1 when its cells ran, 2 in its slots here"):
        other_variables(bundle, one, ["OMP_NUM_THREADS"], {"OMP_NUM_THREADS": "2"}, four)
    other_variables(bundle, [seen(None)], ["OMP_NUM_THREADS"], {})  # an older record: nothing to hold to
    with pytest.raises(ConfigError, match="KMP_AFFINITY was compact when its cells ran, scatter here"):
        other_variables(bundle, one, ["KMP_AFFINITY"], {"KMP_AFFINITY": "scatter"}, one_core)
    with pytest.raises(ConfigError, match="OMP_NUM_THREADS was unset when its cells ran, 4 here"):
        other_variables(bundle, [seen({})], ["OMP_NUM_THREADS"], {"OMP_NUM_THREADS": "4"})


def test_the_shares_a_resume_is_held_to_are_the_measured_cells_and_any_slot_of_the_run() -> None:
    """A Ray task lost twice records no slot (it read as the whole machine, and every resume was
    refused); a hybrid CPU's slots differ in logical CPUs (a bundle of them was never resumable);
    a failed or skipped cell has no time to set beside another."""
    from harness.bundle.cell_record import CellRecord
    from harness.run.resume_refusals import another_share, measured

    template = json.loads(next(p for p in sorted((GOLDEN / f"v{SCHEMA_VERSION}" / "cells").glob("*.json"))
                               if json.loads(p.read_text())["status"] == "valid").read_text())

    def record(status: str, node: dict[str, Any]) -> CellRecord:
        data = json.loads(json.dumps(template))
        data["node"] = {**data["node"], **node} if node.get("cpu", True) else node
        if status != "valid":
            data.update(status=status, reasons=["lost"], metrics={})
        return CellRecord.model_validate(data)

    class Stub:
        root = Path("bundle")
        header: dict[str, Any] = {}  # no executor recorded

        def __init__(self, records: list[CellRecord]) -> None:
            self._records = records

        def records(self) -> list[CellRecord]:
            return self._records

    slot = {"index": 0, "gpu": None, "gpu_order": None}
    hybrid = Stub([record("valid", {"slot": {**slot, "cpus": [0, 1]}}), record("valid", {"slot": {**slot, "cpus": [2]}}),
                   record("failed", {"executor": "ray", "cpu": None})])
    timed = measured(hybrid)  # the failed Ray cell left out: it has no time to set beside another
    another_share(hybrid, timed, {"a slot of 2 core(s)", "a slot of 1 core(s)"})  # the same --jobs: resumable
    with pytest.raises(Exception, match="ran on a slot of 1 core\\(s\\) and a slot of 2 core\\(s\\) and this resume would run"):
        another_share(hybrid, timed, {"the whole machine"})


def test_a_resume_in_another_image_than_the_run_started_in_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A native run resumed with --container kept the first start's `image_id: null`, though its
    last cells ran in an image: bundle.json records one software stack."""
    root = _edited(tmp_path, lambda s: None)
    before = _snapshot(root)
    monkeypatch.setenv("FUSIONBENCH_IMAGE", "fusionbench-cpu:0123456789abcdef")
    monkeypatch.setenv("FUSIONBENCH_IMAGE_ID", "sha256:" + "1" * 64)
    assert main(["run", "--resume", str(root), "--no-cache"]) == 2
    err = capsys.readouterr().err
    assert (f"--resume {root}: its cells ran outside the project's images and this resume would run them in the "
            "image fusionbench-cpu:0123456789abcdef (sha256:111111111111)") in err, err
    assert _snapshot(root) == before, "a refused resume changed the bundle"
    header = json.loads((root / "bundle.json").read_text())  # started in one image, resumed outside it
    header["system"]["container"].update(image="fusionbench-cpu:0123456789abcdef", image_id="sha256:" + "1" * 64)
    (root / "bundle.json").write_text(json.dumps(header))
    manifest.write(root)
    monkeypatch.delenv("FUSIONBENCH_IMAGE_ID")
    assert main(["run", "--resume", str(root), "--no-cache"]) == 2
    assert "would run them outside the project's images" in capsys.readouterr().err


def test_a_resume_of_a_complete_bundle_says_so_and_changes_nothing(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """It said "0 to run", appended a resume date to bundle.json and wrote the manifest again."""
    root = tmp_path / "run"
    shutil.copytree(GOLDEN / f"v{SCHEMA_VERSION}", root)
    before = _snapshot(root)
    assert main(["run", "--resume", str(root), "--no-cache"]) == 0  # as its run: valid and skipped cells
    out = " ".join(capsys.readouterr().out.split())
    assert "is complete: every cell has its record and the report is written; nothing to resume" in out, out
    assert _snapshot(root) == before


def test_a_resume_says_its_noise_warning_was_measured_when_the_run_started(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A resume printed the first start's noise warning, its figures unchanged, as if of the machine now."""
    from harness.reporting import report

    root = tmp_path / "run"
    shutil.copytree(GOLDEN / f"v{SCHEMA_VERSION}", root)
    header = json.loads((root / "bundle.json").read_text())
    warning = header["system"]["machine_noise"]["warning"]
    header["resumed"] = ["2026-12-01T00:00:00+00:00"]
    (root / "bundle.json").write_text(json.dumps(header))
    for name in (report.REPORT_MD, report.REPORT_HTML):  # complete but for its report: the resume writes it
        (root / name).unlink()
    manifest.write(root)
    assert main(["run", "--resume", str(root), "--no-cache"]) == 0  # as its run: valid and skipped cells
    printed = " ".join(capsys.readouterr().out.split())
    said = " ".join(f"when the run started ({header['created']}), {warning}".split())
    assert printed.count(said) == 2, printed  # before the cells and at the end


def test_a_resume_on_another_start_of_the_machine_is_warned_of_not_refused(tmp_path: Path) -> None:
    """The timed cells' boot ids against this start's: the warning counts the cells of other starts
    and names them; none where every cell ran on this start, or none recorded one (older bundles)."""
    from harness.bundle.cell_record import CellRecord
    from harness.run.resume_refusals import another_boot

    records = [CellRecord.model_validate(json.loads(p.read_text()))
               for p in sorted((GOLDEN / f"v{SCHEMA_VERSION}" / "cells").glob("*.json"))]
    timed = [r for r in records if r.status in ("valid", "invalid")]
    assert len(timed) >= 3
    unbooted = [r.model_copy(update={"node": {k: v for k, v in (r.node or {}).items() if k != "boot_id"}}) for r in timed]
    assert another_boot(unbooted, "c" * 36) == "", "cells that record no boot id (older bundles) are not counted"
    booted = [r.model_copy(update={"node": {**(r.node or {}), "boot_id": ("a" if i else "b") * 36}})
              for i, r in enumerate(timed)]
    assert another_boot(booted, "a" * 36).startswith(
        f"1 of the bundle's timed cells ran on another start of the machine (boot {'b' * 8}; this is {'a' * 8})")
    warning = another_boot(booted, "c" * 36)
    assert warning.startswith(f"{len(timed)} of the bundle's timed cells ran on another start of the machine "
                              f"(boot {'a' * 8}, {'b' * 8}; this is {'c' * 8})"), warning
    assert "run such cells again in one start with --only" in warning
    assert another_boot(booted, None) == ""


def test_a_resume_under_another_harness_is_warned_of() -> None:
    """A resume from another checkout (another commit, or uncommitted changes one time and not the
    other) ran the rest of the cells without a word, and bundle.json and the report name the first
    start's harness for every cell. Two starts with uncommitted changes on one commit say nothing:
    nothing tells them apart."""
    from harness.run.resume_refusals import another_harness

    then = {"version": "0.1.0", "git_sha": "a" * 40, "git_dirty": False}
    assert another_harness({"harness": then}, then) == ""
    assert another_harness({"harness": {**then, "git_dirty": True}}, {**then, "git_dirty": True}) == ""
    assert another_harness({}, then) == "" and another_harness({"harness": "x"}, then) == ""
    said = another_harness({"harness": then}, {**then, "git_sha": "b" * 40})
    assert f"this resume runs harness 0.1.0 {'b' * 40}; the run started with 0.1.0 {'a' * 40}" in said, said
    assert "resume from the checkout the run started in" in said
    assert "with uncommitted changes; the run started" in another_harness({"harness": then}, {**then, "git_dirty": True})
    assert "runs harness 0.2.0" in another_harness({"harness": then}, {**then, "version": "0.2.0", "git_sha": None})


@pytest.mark.slow
def test_a_resume_from_another_checkout_says_so_as_it_begins(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], one_probe: None,
        whole_machine: None) -> None:
    root = _edited(tmp_path, lambda s: None)  # one cell deleted: the resume would run it
    as_run_here(root)
    header = json.loads((root / "bundle.json").read_text())
    header["harness"] = {"version": "0.0.1", "git_sha": "f" * 40, "git_dirty": False}  # no checkout here is that
    (root / "bundle.json").write_text(json.dumps(header))
    manifest.write(root)
    monkeypatch.setattr(runner.sweep, "sweep", lambda todo, *args, **kwargs: None)
    assert main(["run", "--resume", str(root), "--no-cache"]) == 0  # the cell left unrun
    printed = " ".join(capsys.readouterr().out.split())
    assert f"warning: this resume runs harness {runner.harness_info()['version']}" in printed, printed
    assert f"the run started with 0.0.1 {'f' * 40}" in printed, printed


def test_a_resume_given_no_file_says_its_runs_file_has_changed_since(tmp_path: Path) -> None:
    """A plain --resume finished the stored scenario, as it should, and said nothing of the file the
    run was started from having been edited since: the user took the cells it ran for the edit's."""
    from harness.bundle.writer import Bundle
    from harness.run import opening

    root = _edited(tmp_path, lambda s: None)
    header = json.loads((root / "bundle.json").read_text())
    named = tmp_path / "golden.yaml"
    named.write_text(yaml.safe_dump(header["scenario"]))  # the file as the run read it
    header["scenario_file"] = str(named)
    (root / "bundle.json").write_text(json.dumps(header))
    manifest.write(root)
    bundle = Bundle.open(root)
    try:
        stored = resumable.check(bundle)
        assert opening.file_edited_since(bundle, stored) == ""
        named.write_text(yaml.safe_dump({**header["scenario"], "limits": {**header["scenario"]["limits"],
                                                                           "cell_timeout_s": 600.0}}))
        said = opening.file_edited_since(bundle, stored)
        assert said.startswith(f"{named}, as read from here, differs from the scenario the bundle stores (in "
                               "limits.cell_timeout_s): edited since the run started, or another file of that name; "
                               "this resume finishes the stored scenario"), said
        named.write_text("models: [")  # a file that no longer loads, or is gone: not the resume's concern
        assert opening.file_edited_since(bundle, stored) == ""
        named.unlink()
        assert opening.file_edited_since(bundle, stored) == ""
    finally:
        bundle.close()


@pytest.mark.slow
def test_a_resume_in_slots_of_a_run_that_timed_nothing_says_its_rounds_did_not_take_turns(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A run started one cell at a time (`rounds_paired: setting`) and stopped before any cell was
    timed may be resumed under `--jobs 2`: its cells then ran in slots, the flag stayed, and
    validate called the bundle the resume wrote invalid."""
    from harness import cpu_topology
    from harness.run import executors, slots

    cpus = list(range(os.cpu_count() or 1))[:2]
    if len(cpu_topology.physical_cores(cpus)) < 2:
        pytest.skip(f"--jobs 2 needs two physical cores; CPUs {cpus} are one")
    monkeypatch.setattr(slots, "usable_cores", lambda: cpus)  # a pytest-xdist worker is bound to one of them
    scenario = tmp_path / "null.yaml"
    scenario.write_text("models: [{name: resnet18, input_size: 32}]\nbackends: [null]\nscenarios: [Offline]\n"
                        "timing: {min_time_s: 0.1, max_warmup_s: 0.5}\nloadgen: {min_duration_s: 0.2}\n")

    def stopped(*args: Any, **kwargs: Any) -> Any:  # Ctrl-C as its cell starts: no worker, no preloaded parent
        raise KeyboardInterrupt

    with monkeypatch.context() as first_start:
        first_start.setattr(executors, "run_here", stopped)
        assert main(["run", str(scenario), "--device", "cpu", "--out", str(tmp_path / "out")]) == 130
    root = next((tmp_path / "out").iterdir())
    header = json.loads((root / "bundle.json").read_text())
    assert header["rounds_paired"] == "setting"
    for entry in header["cells"]:  # stopped before any cell was timed: none kept
        (root / "cells" / f"{entry['id']}.json").unlink()
        shutil.rmtree(root / "cells" / entry["id"], ignore_errors=True)
    (root / "bundle.json").write_text(json.dumps({**header, "state": "interrupted"}))
    manifest.write(root)
    assert main(["run", "--resume", str(root), "--jobs", "2"]) == 0, capsys.readouterr().err
    assert json.loads((root / "bundle.json").read_text())["rounds_paired"] is None
    assert validate(root).ok, validate(root).problems


def test_a_resume_is_refused_only_for_a_backend_its_run_had_and_no_package_registers_here(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A plugin the run had (available at its first start, or with a measured cell), not installed
    where it is resumed: its cells left to run were recorded skipped for good, exit 0. One the first
    start lacked too keeps being skipped with its reason; cells --only leaves out are not held."""
    from harness import registry
    from harness.bundle.cell_record import CellRecord
    from harness.errors import ConfigError
    from harness.run.resume_refusals import backends_gone
    from harness.scenario.cells import expand

    golden = GOLDEN / f"v{SCHEMA_VERSION}"
    header = json.loads((golden / "bundle.json").read_text())
    cells = expand(header["scenario"], "cpu")
    null = [cell for cell in cells if cell.config.backend == "null"]
    timed = [CellRecord.model_validate(record) for record in (json.loads(p.read_text()) for p in golden.glob("cells/*.json"))
             if record["config"]["backend"] == "null" and record["status"] == "valid"]
    assert null and timed
    registered = registry._read_entry_points()
    monkeypatch.setattr(registry, "_read_entry_points", lambda: {k: v for k, v in registered.items() if k != "null"})

    def bundle(available: bool, records: list[CellRecord]) -> runner.Bundle:
        made = runner.Bundle.__new__(runner.Bundle)
        made.root = Path("/run")
        made.header = {**header, "backends": {**header["backends"], "null": {"available": available, "reason": "no"}}}
        made.records = lambda: records  # type: ignore[method-assign]
        return made

    with pytest.raises(ConfigError, match=f"^--resume /run: {len(null)} cell\\(s\\) left to run are of backend 'null', "
                                          "which the run had when it started and no package here registers \\(unknown "
                                          "backend 'null'; registered: eager, .*\\): they would be recorded skipped for "
                                          "good; leave them out with --only, or install it \\(the package that "
                                          "registers it\\)$"):
        backends_gone(bundle(True, []), cells)
    with pytest.raises(ConfigError, match="1 cell\\(s\\) left to run are of backend 'null'"):
        backends_gone(bundle(False, timed), null[:1])  # a measured cell of it: the run had it
    backends_gone(bundle(False, []), cells)  # the first start lacked it too: its cells are skipped, saying why
    backends_gone(bundle(True, timed), [cell for cell in cells if cell.config.backend != "null"])  # --only


@pytest.mark.slow
def test_the_dry_run_of_a_resume_is_refused_as_the_resume_is(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], one_probe: None, whole_machine: None,
        monkeypatch: pytest.MonkeyPatch, shared_probe: SharedProbe) -> None:
    """`run --resume RUN_DIR --dry-run` listed the cell it would run and exited 0 where the resume
    itself was refused (exit 2): a planner with a lent GPU read the resume as ready to start."""
    monkeypatch.setattr(plan, "run_probe", shared_probe)
    root = _edited(tmp_path, lambda s: s.update(env=["OMP_NUM_THREADS"]))
    for path in (root / "cells").glob("*.json"):
        record = json.loads(path.read_text())
        if record.get("environment"):
            record["environment"]["variables"] = {**record["environment"]["variables"], "OMP_NUM_THREADS": "1"}
            path.write_text(json.dumps(record))
    as_run_here(root)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    before = _snapshot(root)
    assert main(["run", "--resume", str(root), "--dry-run"]) == 2
    assert _snapshot(root) == before, "a dry run changed the bundle"
    captured = capsys.readouterr()
    err = " ".join(captured.err.split())
    assert f"--resume {root}: OMP_NUM_THREADS was 1 when its cells ran, unset here" in err, err
    assert "would run" not in captured.out, captured.out
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # as its cells ran: listed
    assert main(["run", "--resume", str(root), "--dry-run"]) == 0
    assert "1 of 1 cell(s) would run" in " ".join(capsys.readouterr().out.split())
