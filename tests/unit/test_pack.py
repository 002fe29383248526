"""`fusionbench pack`: an MLPerf-style submission tree of the valid cells, its system
descriptions, a reproducible tarball with a manifest, and refusals that write nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from harness.bundle import manifest
from harness.bundle.reader import load
from harness.errors import ConfigError
from harness.reporting.pack import SYSTEM_FIELDS, UNKNOWN, pack
from tests.unit.test_validate import tree_digest

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
REPO = GOLDEN.parents[1]


def test_tree_holds_each_valid_cell_with_logs_measurements_config_and_code_version(tmp_path: Path) -> None:
    before = tree_digest(GOLDEN / "v2")
    loaded = load(GOLDEN / "v2")
    packed = pack(loaded, tmp_path / "sub", org="Acme", system_base="testbox")
    valid = [c for c in loaded.cells if c["status"] == "valid" and c["config"]["backend"] != "null"]
    assert packed.results == len(valid) and len(packed.left_out) == len(loaded.cells) - len(valid)
    null = [line for line in packed.left_out if " null " in line]
    assert len(null) == 2 and all("computes no model" in line for line in null)  # a test double is never packed
    runs = sorted(p.parent for p in (tmp_path / "sub").rglob("measurements.json"))
    assert len(runs) == len(valid)
    for run in runs:
        assert run.relative_to(tmp_path / "sub").parts[:3] == ("closed", "Acme", "results")
        assert run.parts[-2:] == ("performance", "run_1")
        assert {p.name for p in run.iterdir()} == {"mlperf_log_summary.txt", "mlperf_log_detail.txt", "measurements.json",
                                                   "resolved_config.json", "code_version.json"}
        measured = json.loads((run / "measurements.json").read_text())
        assert measured["retraining"] == "no" and measured["starting_weights_filename"].startswith("random weights")
    eager_ss = tmp_path / "sub/closed/Acme/results/testbox_eager-fusion-on_fp32/resnet18/SingleStream/performance/run_1"
    assert json.loads((eager_ss / "code_version.json").read_text())["git_sha"] == loaded.header["harness"]["git_sha"]
    assert manifest.problems(tmp_path / "sub") == []
    assert tree_digest(GOLDEN / "v2") == before, "pack must not write into the bundle"


def test_system_description_has_every_mlperf_field_and_marks_the_unknown(tmp_path: Path) -> None:
    pack(load(GOLDEN / "v2"), tmp_path / "sub", org="Acme", system_base="testbox", division="open", status="available")
    system = json.loads((tmp_path / "sub/open/Acme/systems/testbox_eager-fusion-on_fp32.json").read_text())
    assert set(system) == set(SYSTEM_FIELDS)
    assert (system["division"], system["submitter"], system["status"]) == ("open", "Acme", "available")
    assert system["host_processor_core_count"] >= 1 and system["host_memory_capacity"].endswith(" GB")
    assert system["accelerators_per_node"] == 0 and system["accelerator_model_name"] == "N/A"  # a CPU run
    assert system["host_storage_type"] == UNKNOWN and system["cooling"] == UNKNOWN
    assert "FusionBench" in system["framework"] and "torch" in system["framework"]


def test_tarball_is_reproducible_and_carries_the_manifest(tmp_path: Path) -> None:
    first = pack(load(GOLDEN / "v2"), tmp_path / "a" / "sub", org="Acme", system_base="box")
    second = pack(load(GOLDEN / "v2"), tmp_path / "b" / "sub", org="Acme", system_base="box")
    assert first.tarball.read_bytes() == second.tarball.read_bytes()
    with tarfile.open(first.tarball) as archive:
        names = archive.getnames()
    assert "sub/MANIFEST.sha256" in names and all(name.startswith("sub/") for name in names)
    assert len(names) == sum(1 for p in (tmp_path / "a" / "sub").rglob("*") if p.is_file())


@pytest.mark.parametrize(("kwargs", "words"), [
    ({"org": "../evil"}, "--org '../evil'"),
    ({"org": "Acme", "system_base": "a/b"}, "--system-name 'a/b'"),
    ({"org": "Acme", "division": "secret"}, "--division 'secret'"),
])
def test_bad_names_are_refused_before_writing(tmp_path: Path, kwargs: dict, words: str) -> None:
    with pytest.raises(ConfigError, match=words.replace("(", r"\(")):
        pack(load(GOLDEN / "v2"), tmp_path / "sub", **kwargs)
    assert not (tmp_path / "sub").exists()


def test_pack_never_overwrites(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    with pytest.raises(ConfigError, match="already exists; pack never overwrites"):
        pack(load(GOLDEN / "v2"), tmp_path / "sub", org="Acme")
    assert list((tmp_path / "sub").iterdir()) == []


def test_cli_packs_a_valid_bundle(tmp_path: Path) -> None:
    out = tmp_path / "submission"
    done = subprocess.run([sys.executable, "-m", "harness.cli", "pack", str(GOLDEN / "v1"), "--org", "Acme",
                           "--out", str(out)], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "packed" in done.stdout and (tmp_path / "submission.tar.gz").exists()
    assert any(out.glob("closed/Acme/systems/*.json"))


@pytest.mark.parametrize("command", [
    ["pack", str(GOLDEN / "v3"), "--org", "Acme", "--out", "."],
    ["pack", str(GOLDEN / "v3"), "--org", "Acme", "--out", "/"],
    ["schema", "--out", "."],
    ["compare", str(GOLDEN / "v3"), str(GOLDEN / "v3"), "--out", "missing-dir/x.md"],
    ["report", str(GOLDEN / "v3"), "--out", "a-file/report"],
])
def test_a_path_a_command_cannot_write_is_exit_2_and_one_line(tmp_path: Path, command: list[str]) -> None:
    (tmp_path / "a-file").write_text("not a directory")
    before = sorted(p.name for p in tmp_path.iterdir())
    done = subprocess.run([sys.executable, "-m", "harness.cli", *command], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == before
