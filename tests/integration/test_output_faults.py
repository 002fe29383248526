"""Where results go: an output directory that cannot be made, a disk too full to start, and a
disk that fills up during the run. Refused before the machine is probed where possible; otherwise the
run stops with one clear line and the cells already written stay intact and resumable."""

from __future__ import annotations

import errno
import io
import json
import os
import shutil
import subprocess
import sys
from collections import namedtuple
from pathlib import Path

import pytest
from rich.console import Console

from harness.bundle.validate import validate
from harness.bundle.writer import Bundle
from harness.errors import ConfigError, OutputError
from harness.run import preflight, runner
from harness.run.run_request import RunRequest
from harness.run.runner import run

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
SCENARIO = ("models: [{name: resnet18, input_size: 32}]\nbackends: [null]\nscenarios: [SingleStream, Offline]\n"
            "batch_sizes: {cpu: [4]}\nloadgen: {min_duration_s: 0.3}\ntiming: {min_time_s: 0.1}\n")


def scenario(tmp_path: Path) -> Path:
    path = tmp_path / "null.yaml"
    path.write_text(SCENARIO)
    return path


def test_an_output_directory_that_cannot_be_made_is_refused_before_anything_runs(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("not a directory")
    done = subprocess.run([sys.executable, "-m", "harness.cli", "run", str(scenario(tmp_path)), "--out",
                           str(tmp_path / "a-file" / "results")], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 2 and "cannot create it" in done.stderr and "Traceback" not in done.stderr
    assert "probing" not in done.stdout and not done.stdout.strip()  # refused before the machine is probed


def test_a_read_only_cache_directory_is_refused_before_anything_runs(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    cache.chmod(0o555)
    try:
        if os.access(cache, os.W_OK):  # root writes anyway: the write in the cache is refused as the kernel would
            write_bytes = Path.write_bytes

            def refused_in_the_cache(path: Path, data: bytes) -> int:
                if path.parent == cache:
                    raise PermissionError(errno.EACCES, "Permission denied", str(path))
                return write_bytes(path, data)

            monkeypatch.setattr(Path, "write_bytes", refused_in_the_cache)
        with pytest.raises(ConfigError, match=r"--cache-dir .*cache: not writable"):
            run(RunRequest(scenario_path=scenario(tmp_path), device="cpu", out_dir=tmp_path / "results", cache_dir=cache),
                Console(file=io.StringIO()))
    finally:
        cache.chmod(0o755)
    assert not (tmp_path / "results").exists()


def test_a_cache_directory_under_a_file_is_refused_before_anything_runs(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("not a directory")
    with pytest.raises(ConfigError, match=r"--cache-dir .*a-file/cache: cannot create it"):
        run(RunRequest(scenario_path=scenario(tmp_path), device="cpu", out_dir=tmp_path / "results",
                       cache_dir=tmp_path / "a-file" / "cache"), Console(file=io.StringIO()))
    assert not (tmp_path / "results").exists()


def test_a_nearly_full_disk_is_refused_before_anything_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(preflight.shutil, "disk_usage", lambda path: usage(10 << 30, (10 << 30) - (5 << 20), 5 << 20))
    out = tmp_path / "results"
    with pytest.raises(ConfigError, match=r"only 5 MiB free; 2 cell\(s\) need about 20 MiB"):
        run(RunRequest(scenario_path=scenario(tmp_path), device="cpu", out_dir=out), Console(file=io.StringIO()))
    assert not out.exists() or not any(out.iterdir())


def test_a_disk_that_fills_up_mid_run_keeps_finished_cells_and_resumes(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    written = []
    real_write = Bundle.write_cell

    def full_after_one(self: Bundle, cell_id: str, record: dict) -> None:
        if written:
            raise OSError(errno.ENOSPC, "No space left on device")
        real_write(self, cell_id, record)
        written.append(cell_id)

    monkeypatch.setattr(Bundle, "write_cell", full_after_one)
    out = tmp_path / "results"
    with pytest.raises(OutputError, match="No space left on device; the cells finished before it are intact") as raised:
        run(RunRequest(scenario_path=scenario(tmp_path), device="cpu", out_dir=out), Console(file=io.StringIO()))
    assert raised.value.exit_code == 3
    (bundle,) = out.iterdir()
    (kept,) = (bundle / "cells").glob("*.json")
    assert kept.stem == written[0] and json.loads(kept.read_text())["status"] == "valid"
    before = kept.read_bytes()

    usage = namedtuple("usage", "total used free")
    def no_probe(*args: object, **kwargs: object) -> None:
        raise AssertionError("the machine was probed for a resume the full disk refuses")

    with monkeypatch.context() as full:  # a resume on a full disk is refused, pointing at the bundle's file system
        full.setattr(preflight.shutil, "disk_usage", lambda path: usage(10 << 30, 10 << 30, 1 << 20))
        full.setattr(runner, "run_probe", no_probe)  # before the probe, as a new run's full --out is
        with pytest.raises(ConfigError, match=r"1 cell\(s\) need .*: make room on that file system \(a resumed run"):
            run(RunRequest(scenario_path=None, resume=bundle), Console(file=io.StringIO()))
    assert kept.read_bytes() == before
    monkeypatch.setattr(Bundle, "write_cell", real_write)  # room again
    assert run(RunRequest(scenario_path=None, resume=bundle), Console(file=io.StringIO())) == 0
    assert kept.read_bytes() == before and len(list((bundle / "cells").glob("*.json"))) == 2
    assert validate(bundle).ok, validate(bundle).problems
    shutil.rmtree(bundle)
