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
