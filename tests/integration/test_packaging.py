"""A plain install of FusionBench (`pip install .`, as a Ray node's, docs/scale-out.md) carries the
whole harness, as run.sh's editable one does: the wheel built from the checkout holds every module
of harness/ and backends/, the frozen schemas `validate` reads old bundles with, and the command
and backends' entry points."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from harness.registry import source_entry_points
from tests.conftest import REPO
from tests.pip_sites import builds_wheels_here

PACKAGES = ("harness", "backends")


def _build_wheel(tmp_path: Path) -> Path:
    """The wheel pip builds from a copy of what a plain install reads (pip builds in the source tree,
    which must stay clean)."""
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, source / name)
    for package in PACKAGES:
        shutil.copytree(REPO / package, source / package, ignore=shutil.ignore_patterns("__pycache__"))
    isolation = ["--no-build-isolation"] if builds_wheels_here() else []  # else pip fetches setuptools
    out = tmp_path / "wheel"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--disable-pip-version-check", "--no-deps", *isolation,
         "--wheel-dir", str(out), str(source)],
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr or done.stdout
    (wheel,) = out.glob("fusionbench-*.whl")
    return wheel


def test_the_wheel_holds_every_module_the_frozen_schemas_and_the_entry_points(tmp_path: Path) -> None:
    wheel = _build_wheel(tmp_path)
    wanted = {path.relative_to(REPO).as_posix()
              for package in PACKAGES for path in (REPO / package).rglob("*.py") if "__pycache__" not in path.parts}
    frozen = {path.relative_to(REPO).as_posix() for path in (REPO / "harness" / "bundle" / "frozen").glob("*.json")}
    assert any("/" in name.removeprefix("harness/") for name in wanted), "the checkout's subpackages were not found"
    assert frozen, "the checkout's frozen schemas were not found"
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        (entry_points,) = [name for name in names if name.endswith(".dist-info/entry_points.txt")]
        declared = archive.read(entry_points).decode()
    assert sorted((wanted | frozen) - names) == []
    assert "fusionbench = harness.cli.main:main" in declared
    backends = source_entry_points(REPO / "pyproject.toml")
    assert {entry.name for entry in backends} >= {"eager", "inductor", "onnxruntime", "tvm", "tensorrt"}
    for entry in backends:
        assert f"{entry.name} = {entry.value}" in declared
