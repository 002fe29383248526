"""`run --executor ray` refuses, in seconds and before anything is written, a cluster that will never
run its cells: an address Ray cannot read, one nothing answers at, one that answers but never
speaks (after --ray-connect-timeout-s), and cells no node could ever give what they reserve. Each
is one line and exit 2; SIGTERM while the run waits for the cluster still gives 143."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from harness.bundle.migrations import SCHEMA_VERSION
from harness.cli.main import main
from harness.run.probe_answer import ProbeAnswer
from harness.run.ray_executor import room_problem

REPO = Path(__file__).resolve().parents[2]
SCENARIO = "models: [{name: resnet18, input_size: 32}]\nbackends: [null]\nscenarios: [SingleStream]\ndevice: cpu\n"
LIMIT_S = 60  # the old harness waited forever: a test that hangs fails instead


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}  # the tests name the cluster themselves


def _start(tmp_path: Path, *options: str) -> subprocess.Popen[str]:
    (tmp_path / "s.yaml").write_text(SCENARIO)
    return subprocess.Popen([sys.executable, "-m", "harness.cli", "run", str(tmp_path / "s.yaml"), "--out",
                             str(tmp_path / "out"), "--executor", "ray", *options], cwd=REPO, env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _refused(tmp_path: Path, *options: str) -> tuple[str, float]:
    """Run the CLI; assert it refused as every refusal must; its standard error and how long it took."""
    started = time.monotonic()
    run = _start(tmp_path, *options)
    try:
        out, err = run.communicate(timeout=LIMIT_S)
    finally:
        run.kill()
    assert run.returncode == 2, out[-2000:] + err[-2000:]
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "out").exists(), "a refused run writes nothing"
    return err, time.monotonic() - started


def _probes_left(marker: str) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["cmdline"]):
        cmdline = " ".join(process.info["cmdline"] or [])
        if "harness.run.ray_executor" in cmdline and marker in cmdline:
            found.append(process)
    return found


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port that accepts connections and never says a word, as a firewall or a wrong service may."""
    server = socket.socket()
    server.bind(("0.0.0.0", 0))  # Ray reads 127.0.0.1 as this machine's address: listen on every one
    server.listen(16)
    try:
        yield server.getsockname()[1]
    finally:
        server.close()


def test_a_node_too_small_for_a_cell_is_named_with_what_would_fit() -> None:
    nodes = [{"CPU": 2.0, "GPU": 0.0}, {"CPU": 8.0}]
    assert room_problem(nodes, "cpu", 8) is None
    assert room_problem(nodes, "cpu", 9) == ("a cpu cell reserves 9 CPU(s) (--cpus-per-cell 9), and no node of the Ray "
                                             "cluster has that many (the most one has is 8); give --cpus-per-cell 8 or fewer")
    assert room_problem([{"CPU": 1.0, "GPU": 1.0}], "cuda", 99) is None  # a cuda cell takes one CPU, whatever --cpus-per-cell says
    assert "none of the Ray cluster's 2 node(s) has both" in (room_problem(nodes, "cuda", 1) or "")


@pytest.mark.parametrize("address", ["", "host-without-port", "127.0.0.1:99999", "a b:6379"])
def test_an_address_ray_cannot_read_is_refused_before_anything_runs(address: str, tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "s.yaml").write_text(SCENARIO)
    code = main(["run", str(tmp_path / "s.yaml"), "--out", str(tmp_path / "out"), "--executor", "ray", "--address", address])
    err = capsys.readouterr().err
    assert code == 2 and "not a Ray address" in err and "Traceback" not in err, err
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_an_address_nothing_answers_at_is_refused_at_once(tmp_path: Path) -> None:
    pytest.importorskip("ray", reason="Ray is an optional extra (pip install .[ray])")
    err, took_s = _refused(tmp_path, "--address", "127.0.0.1:1")
    assert "--address 127.0.0.1:1: nothing answers at 127.0.0.1:1" in err and "Connection refused" in err, err
    assert took_s < 30, f"took {took_s:.0f} s"


@pytest.mark.slow
def test_a_cluster_that_never_answers_is_refused_after_the_connect_timeout(tmp_path: Path, silent_port: int) -> None:
    pytest.importorskip("ray", reason="Ray is an optional extra (pip install .[ray])")
    address = f"127.0.0.1:{silent_port}"
    err, took_s = _refused(tmp_path, "--address", address, "--ray-connect-timeout-s", "3")
    assert f"--address {address}: no Ray cluster answered within 3 s (--ray-connect-timeout-s)" in err, err
    assert took_s < 25, f"took {took_s:.0f} s"
    assert not _probes_left(str(silent_port)), "the process that asked the cluster is still running"


@pytest.mark.slow
def test_cells_no_node_could_run_are_refused_instead_of_waiting_forever(tmp_path: Path) -> None:
    pytest.importorskip("ray", reason="Ray is an optional extra (pip install .[ray])")
    err, _ = _refused(tmp_path, "--cpus-per-cell", "4096")  # a local instance: this machine's cores
    assert "--executor ray: a cpu cell reserves 4096 CPU(s) (--cpus-per-cell 4096), and no node" in err, err
    assert "give --cpus-per-cell" in err


def test_the_connect_timeout_is_a_ray_option_of_positive_seconds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "s.yaml").write_text(SCENARIO)
    for options, expected in ((["--executor", "ray", "--ray-connect-timeout-s", "0"], "give a number of seconds above 0"),
                              (["--ray-connect-timeout-s", "5"], "are for --executor ray")):
        code = main(["run", str(tmp_path / "s.yaml"), "--out", str(tmp_path / "out"), *options])
        err = capsys.readouterr().err
        assert code == 2 and expected in err and "--ray-connect-timeout-s" in err, err
    assert not (tmp_path / "out").exists()


def test_fresh_workers_is_a_local_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "s.yaml").write_text(SCENARIO)
    code = main(["run", str(tmp_path / "s.yaml"), "--out", str(tmp_path / "out"), "--executor", "ray", "--fresh-workers"])
    err = capsys.readouterr().err
    assert code == 2 and "--fresh-workers is for --executor local; on Ray every cell's worker starts fresh" in err, err
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_sigterm_while_the_run_waits_for_the_cluster_gives_143_and_leaves_nothing(tmp_path: Path,
                                                                                  silent_port: int) -> None:
    pytest.importorskip("ray", reason="Ray is an optional extra (pip install .[ray])")
    run = _start(tmp_path, "--address", f"127.0.0.1:{silent_port}", "--ray-connect-timeout-s", "40")
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not _probes_left(str(silent_port)):
            time.sleep(0.1)  # the run is now asking the cluster
        assert _probes_left(str(silent_port)), "the run never asked the cluster"
        run.send_signal(signal.SIGTERM)
        out, err = run.communicate(timeout=LIMIT_S)
    finally:
        run.kill()
    assert run.returncode == 143, out[-2000:] + err[-2000:]
    assert "Traceback" not in err, err
    assert not (tmp_path / "out").exists()
    _, alive = psutil.wait_procs(_probes_left(str(silent_port)), timeout=10)  # a loaded machine reaps it late
    assert not alive, "the process that asked the cluster outlived the run"


@pytest.mark.slow
@pytest.mark.parametrize("disk_full", [False, True], ids=["closed", "disk-full-as-it-closes"])
def test_a_refusal_once_the_bundle_is_made_leaves_it_interrupted_never_running(
        disk_full: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        whole_machine: None) -> None:
    """An executor that refuses only once its cells are handed to it (a cluster lost since it was
    joined): the bundle is closed `interrupted`, valid and resumable, not left `running`. Where the
    disk fills up as it closes, the run says both, the refusal first, and exits 3 with the bundle
    `running`, which `--resume` takes."""
    import errno
    import json
    import shutil

    from harness.bundle.validate import validate
    from harness.bundle.writer import Bundle
    from harness.errors import ConfigError
    from harness.run import executor_choice, runner

    root = tmp_path / "run"
    shutil.copytree(REPO / "tests" / "golden" / f"v{SCHEMA_VERSION}", root)
    header = json.loads((root / "bundle.json").read_text())
    victim = header["cells"][2]["id"]  # a null cell, so that it is not skipped
    (root / "cells" / f"{victim}.json").unlink()
    shutil.rmtree(root / "cells" / victim)

    class Refusing:
        def record(self) -> dict[str, str]:
            return {"name": "local"}

        def run(self, tasks: list[object], on_phase: object) -> Iterator[object]:
            raise ConfigError("the cluster went away")
            yield  # a generator, as every executor's run is

    def probe(device: str, names: list[str], with_system: bool, cache_dir: Path | None) -> ProbeAnswer:
        return ProbeAnswer.model_validate({"device": "cpu", "cuda_available": False,
                                           "backends": {name: {"available": True, "reason": "", "versions": {}}
                                                        for name in names}})

    def no_room(self: Bundle, **fields: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(executor_choice, "local_executor", lambda *args: Refusing())
    monkeypatch.setattr(runner, "run_probe", probe)
    if disk_full:
        monkeypatch.setattr(Bundle, "seal", no_room)
    code = main(["run", "--resume", str(root), "--no-cache"])
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    state = json.loads((root / "bundle.json").read_text())["state"]
    if disk_full:
        assert code == 3, err
        said = " ".join(err.split())
        assert said.index("the cluster went away") < said.index("could not close"), err
        assert "No space left on device" in said and f"--resume {root}" in said, err
        assert state == "running"
    else:
        assert code == 2 and "the cluster went away" in err, err
        assert state == "interrupted"
        assert validate(root).ok, validate(root).problems
        assert json.loads((root / "bundle.json").read_text())["interruption"] == {
            "why": "refused once the bundle was made: the cluster went away", "resume_runs": [victim]}
