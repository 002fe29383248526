"""docs/results/scenarios/gpu-session.sh, the script a GPU session without network runs: wheels
carried in parts joined, checked and installed from the folder's own list; scenarios run in turn
within a budget, a complete bundle left out and an unfinished one resumed. Its `run` step is tried
against a stand-in run.sh that says what it was asked; the harness's runs are tested elsewhere."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from harness.bundle.migrations import SCHEMA_VERSION
from harness.container import offline_wheels
from harness.scenario import loading

REPO = Path(__file__).resolve().parents[2]
SCRIPT = Path("docs/results/scenarios/gpu-session.sh")


def session(root: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(root / SCRIPT), *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHON": sys.executable, **(env or {})}, check=False)


def _wheel(folder: Path, name: str, version: str, padding: int = 0) -> Path:
    stem = f"{name.replace('-', '_')}-{version}"
    path = folder / f"{stem}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        wheel.writestr(f"{stem}.dist-info/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        wheel.writestr(f"{stem}.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        wheel.writestr(f"{stem}.dist-info/RECORD", "")
        wheel.writestr(f"{name.replace('-', '_')}_data.bin", os.urandom(padding))  # big enough to split
    return path


@pytest.fixture
def carried(tmp_path: Path) -> tuple[Path, Path]:
    """A wheels folder as `fusionbench wheels` leaves it, its larger wheel then split into parts."""
    wheels, parts = tmp_path / "w", tmp_path / "parts"
    wheels.mkdir()
    parts.mkdir()
    _wheel(wheels, "small-one", "1.0")
    big = _wheel(wheels, "big-one", "2.0", padding=300_000)
    offline_wheels._write_lists(wheels, ["small-one==1.0", "big-one==2.0"])  # requirements.txt and SHA256SUMS
    data = big.read_bytes()
    for i, start in enumerate(range(0, len(data), 100_000)):
        (parts / f"{big.name}.parta{'abcdef'[i]}").write_bytes(data[start:start + 100_000])
    big.unlink()
    return wheels, parts


@pytest.mark.slow
def test_install_joins_the_parts_checks_them_and_installs_the_folders_list(carried: tuple[Path, Path],
                                                                            tmp_path: Path) -> None:
    wheels, parts = carried
    done = session(REPO, "install", str(wheels), str(parts), env={"PIP_TARGET": str(tmp_path / "site")})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "joined big_one-2.0-py3-none-any.whl from 4 parts" in done.stdout
    assert {p.name for p in (tmp_path / "site").glob("*.dist-info")} == {"big_one-2.0.dist-info", "small_one-1.0.dist-info"}


def test_a_part_cut_short_fails_the_sums_and_installs_nothing(carried: tuple[Path, Path], tmp_path: Path) -> None:
    wheels, parts = carried
    last = sorted(parts.iterdir())[-1]
    last.write_bytes(last.read_bytes()[:-1])
    done = session(REPO, "install", str(wheels), str(parts), env={"PIP_TARGET": str(tmp_path / "site")})
    assert done.returncode != 0 and "FAILED" in done.stdout + done.stderr
    assert not (tmp_path / "site").exists()


def _bundle(out: Path, run_id: str, scenario: Path, state: str, **header: object) -> Path:
    """A bundle's header as a run of `scenario` (as the file reads now) writes it, `header` over it."""
    resolved = loading.resolved(loading.load(scenario), scenario.stem)
    (out / run_id).mkdir(parents=True)
    (out / run_id / "bundle.json").write_text(json.dumps({"scenario": resolved, "scenario_sha256": loading.sha256(resolved),
                                                          "only": {}, "state": state, "schema_version": SCHEMA_VERSION,
                                                          **header}))
    return out / run_id


def _stand_in(tmp_path: Path) -> tuple[Path, Path]:
    """A repository root holding the script, the harness it reads scenario files with, and a run.sh
    that writes what it was asked to the file returned."""
    root = tmp_path / "repo"
    (root / SCRIPT.parent).mkdir(parents=True)
    shutil.copy(REPO / SCRIPT, root / SCRIPT)
    (root / "harness").symlink_to(REPO / "harness")
    asked = tmp_path / "asked.txt"
    (root / "run.sh").write_text(f'#!/bin/bash\necho "$*" >> {asked}\n')  # stands in for the harness
    (root / "run.sh").chmod(0o755)
    return root, asked


def _scenario(tmp_path: Path, name: str, backends: str = "[eager]") -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"models: [resnet18]\nbackends: {backends}\nscenarios: [Offline]\nname: {name}\n")
    return path


def test_run_leaves_out_a_complete_bundle_resumes_an_unfinished_one_and_starts_the_rest(tmp_path: Path) -> None:
    root, asked = _stand_in(tmp_path)
    scenarios = [_scenario(tmp_path, name) for name in ("done", "half", "new")]
    out = tmp_path / "out"
    complete = _bundle(out, "20261204-010000-done", scenarios[0], "complete")
    _bundle(out, "20261203-010000-half", scenarios[1], "complete")  # an older start: the newer one is resumed
    half = _bundle(out, "20261204-020000-half", scenarios[1], "interrupted")
    done = session(root, "run", str(out), "0600", *map(str, scenarios), env={"MARGIN_S": "60"})
    assert done.returncode == 0, done.stdout + done.stderr
    lines = asked.read_text().splitlines()
    assert lines[0] == f"run --resume {half} --budget-s {lines[0].rsplit(' ', 1)[1]}"
    assert 500 <= int(lines[0].rsplit(" ", 1)[1]) <= 540, "600 s (read in base 10) less the 60 s margin"
    assert lines[1].startswith(f"run {scenarios[2]} --budget-s ") and lines[1].endswith(f"--out {out}")
    assert all(not line.startswith(f"run {scenarios[0]}") for line in lines), "a complete bundle is left out"
    assert f"complete in {complete}" in done.stdout
    assert sorted(line for line in lines if line.startswith("validate")) == sorted(
        f"validate {path}/" for path in out.iterdir())


def test_run_passes_over_a_complete_bundle_of_only_some_cells_or_of_the_file_before_an_edit(tmp_path: Path) -> None:
    """A bundle run with --only, or before the file gained cells, is complete for what it stores
    alone: the file is run (its resume would run the stored scenario and --only, nothing more)."""
    root, asked = _stand_in(tmp_path)
    cut, grown = _scenario(tmp_path, "cut", "[eager, inductor]"), _scenario(tmp_path, "grown")
    out = tmp_path / "out"
    only = _bundle(out, "20261204-010000-cut", cut, "complete", only={"backend": ["inductor"]})
    before = _bundle(out, "20261204-010000-grown", grown, "complete")
    grown.write_text(grown.read_text().replace("[eager]", "[eager, inductor]"))  # a cell added since
    done = session(root, "run", str(out), "600", str(cut), str(grown))
    assert done.returncode == 0, done.stdout + done.stderr
    lines = asked.read_text().splitlines()
    assert [line.split(" --budget-s ")[0] for line in lines if line.startswith("run")] == [f"run {cut}", f"run {grown}"]
    assert f"{only} ran {cut} with --only" in done.stderr and f"{before} stores {grown} as it read before an edit" in done.stderr


def test_run_passes_over_an_unfinished_bundle_of_an_older_schema_and_runs_the_file_afresh(tmp_path: Path) -> None:
    """The H200 layout bundle of 2026-12-04 (schema 11, interrupted) was to be finished by --resume,
    which this harness (schema 12) refuses: the session spent its call on the refusal and never ran
    the file. A complete bundle of an older schema is still left out: its cells are measured."""
    root, asked = _stand_in(tmp_path)
    old, kept = _scenario(tmp_path, "old"), _scenario(tmp_path, "kept")
    out = tmp_path / "out"
    stale = _bundle(out, "20261204-010000-old", old, "interrupted", schema_version=SCHEMA_VERSION - 1)
    complete = _bundle(out, "20261204-010000-kept", kept, "complete", schema_version=SCHEMA_VERSION - 1)
    done = session(root, "run", str(out), "600", str(old), str(kept))
    assert done.returncode == 0, done.stdout + done.stderr
    runs = [line.split(" --budget-s ")[0] for line in asked.read_text().splitlines() if line.startswith("run")]
    assert runs == [f"run {old}"], runs
    assert (f"{stale} was written with schema {SCHEMA_VERSION - 1}, and this harness resumes only its own "
            f"({SCHEMA_VERSION}): passed over") in " ".join(done.stderr.split())
    assert f"complete in {complete}" in done.stdout


def test_run_puts_the_nvidia_wheels_lib_folders_of_every_import_path_on_ld_library_path(tmp_path: Path) -> None:
    """ONNX Runtime's CUDA provider finds CUDA 13's libraries through LD_LIBRARY_PATH: the folders
    of torch's nvidia-* wheels wherever that Python imports from, PYTHONPATH's too (pip --target)."""
    root, asked = _stand_in(tmp_path)
    (root / "run.sh").write_text(f'#!/bin/bash\necho "$LD_LIBRARY_PATH" >> {asked}\n')
    target = tmp_path / "target"
    for wheel in ("cu13", "cudnn"):
        (target / "nvidia" / wheel / "lib").mkdir(parents=True)
    done = session(root, "run", str(tmp_path / "out"), "600", str(_scenario(tmp_path, "any")),
                   env={"PYTHONPATH": str(target), "LD_LIBRARY_PATH": "/kept"})
    assert done.returncode == 0, done.stdout + done.stderr
    folders = asked.read_text().splitlines()[0].split(":")  # this Python's own nvidia-* wheels among them
    assert {str(target / "nvidia/cu13/lib"), str(target / "nvidia/cudnn/lib")} <= set(folders[:-1]), folders
    assert folders[-1] == "/kept", "what LD_LIBRARY_PATH held comes after them"
