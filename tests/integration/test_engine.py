"""`fusionbench engine start` and `stop` for real: a Docker daemon on private paths (its own data
root, run directory and socket, so it never meets an engine the machine already has) answers, and
after `stop` it is gone and the host's network (IP forwarding, links, iptables rules) is exactly as
before; killed with SIGKILL, `stop` still ends its containerd and unmounts its data root, and leaves
the socket to another daemon that answers there; in a network namespace of its own, what another
tool changed on the network while it ran stays changed. Runs where this machine can start one
(Linux, root, dockerd installed); skipped with the reason elsewhere (`./run.sh engine start` installs
Debian's docker.io where dockerd is missing)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.container import engine
from harness.container.host_network import read_host_network
from harness.container.host_processes import mounts_under

pytestmark = pytest.mark.slow


def _reason() -> str | None:
    refusal = engine.why_not_here()  # the refusal `engine start` itself gives (not Linux, not root)
    if refusal:
        return refusal
    if shutil.which("dockerd") is None:
        return "dockerd is not installed (`./run.sh engine start` installs Debian's docker.io)"
    return None


@pytest.fixture
def paths(monkeypatch: pytest.MonkeyPatch) -> Iterator[engine.EnginePaths]:
    folder = Path(tempfile.mkdtemp(prefix="fbe-", dir="/tmp"))  # short: containerd's socket lives under it
    paths = engine.EnginePaths(root=folder / "root", run_dir=folder / "run", socket=folder / "docker.sock")
    monkeypatch.setenv("DOCKER_HOST", f"unix://{paths.socket}")  # the engine the launcher would look for
    try:
        yield paths
    finally:
        engine.stop(paths, write=lambda _: None, purge=True)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.skipif(_reason() is not None, reason=_reason() or "")
def test_an_engine_starts_answers_and_stops_leaving_the_host_as_it_was(paths: engine.EnginePaths) -> None:
    before = read_host_network()
    said: list[str] = []
    assert engine.start(paths, write=said.append) is True
    state = engine.read_state(paths)
    assert state is not None and state.dockerd().running() and state.below  # its containerd, recorded
    assert engine.answers(paths.socket) is not None and "started" in said[-1]
    assert read_host_network().differences(before) == []  # running, it changed nothing
    assert engine.start(paths, write=said.append) is False and "already answers" in said[-1]

    assert engine.stop(paths, write=said.append) is True
    assert "Docker engine stopped" in said[-1] and "nothing else was left" in said[-1]
    assert not state.dockerd().running() and engine.answers(paths.socket) is None
    assert not paths.socket.exists() and not paths.state_file.exists()
    assert not any(engine.Process(pid, start).running() for pid, start in state.below)
    assert read_host_network().differences(before) == []
    assert (paths.root / "data").is_dir() and mounts_under(paths.root / "data") == []  # images kept, unmounted


def _users_daemon(folder: Path, socket: Path) -> subprocess.Popen[bytes]:
    """A daemon of the user's own on `socket`, with roots of its own."""
    command = engine.EnginePaths(root=folder / "root", run_dir=folder / "run", socket=socket).dockerd_command(
        shutil.which("dockerd") or "dockerd")
    (folder / "run").mkdir(parents=True)
    daemon = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 60
    while engine.answers(socket, timeout_s=2) is None:
        assert daemon.poll() is None and time.monotonic() < deadline, "the user's daemon did not start"
        time.sleep(0.25)
    return daemon


@pytest.mark.skipif(_reason() is not None, reason=_reason() or "")
def test_stop_after_a_kill_ends_what_it_left_and_spares_another_daemon_on_the_socket(
        paths: engine.EnginePaths) -> None:
    assert engine.start(paths, write=lambda _: None) is True
    state = engine.read_state(paths)
    assert state is not None and mounts_under(paths.root / "data")  # dockerd bind-mounts its data root
    os.kill(state.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while state.dockerd().running() and time.monotonic() < deadline:
        time.sleep(0.1)
    paths.socket.unlink(missing_ok=True)
    users = Path(tempfile.mkdtemp(prefix="fbu-", dir="/tmp"))
    daemon = _users_daemon(users, paths.socket)
    try:
        said: list[str] = []
        assert engine.stop(paths, write=said.append) is True
        assert "was no longer running" in said[-1] and "answers on" in said[-1]
        assert engine.answers(paths.socket) is not None, "the user's daemon must still answer"
        assert not any(engine.Process(pid, start).running() for pid, start in state.below)  # its containerd
        assert mounts_under(paths.root / "data") == [] and f"unmounted {paths.root / 'data'}" in said[-1]
        assert daemon.poll() is None
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=60)
        for point in mounts_under(users):
            subprocess.run(["umount", "-l", str(point)], check=False)
        shutil.rmtree(users, ignore_errors=True)


NETNS_SCRIPT = textwrap.dedent("""
    import os, subprocess, sys, tempfile
    from pathlib import Path
    from harness.container import engine
    folder = Path(tempfile.mkdtemp(prefix="fbn-", dir="/tmp"))
    paths = engine.EnginePaths(root=folder / "root", run_dir=folder / "run", socket=folder / "docker.sock")
    os.environ["DOCKER_HOST"] = f"unix://{paths.socket}"  # its own, not an engine the machine already runs
    started = []
    assert engine.start(paths, write=started.append), started
    subprocess.run(["ip", "link", "add", "probe4b0", "type", "bridge"], check=True)  # another tool's doing
    said = []
    engine.stop(paths, write=said.append, purge=True)
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    print("KEPT" if "probe4b0" in links else "REMOVED", said[-1])
""")


@pytest.mark.skipif(_reason() is not None, reason=_reason() or "")
def test_in_a_network_namespace_another_tools_changes_stay(tmp_path: Path) -> None:
    if subprocess.run(["unshare", "--net", "true"], capture_output=True).returncode != 0:
        pytest.skip("unshare --net is not allowed here")
    done = subprocess.run(["unshare", "--net", sys.executable, "-c", NETNS_SCRIPT], capture_output=True, text=True,
                          timeout=180, cwd=Path(__file__).resolve().parents[2],
                          env=dict(os.environ))
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("KEPT") and "network links added: probe4b0" in done.stdout
    assert "left as it is" in done.stdout
