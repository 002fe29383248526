"""`fusionbench engine start` and `stop` for real: a Docker daemon on private paths (its own data
root, run directory and socket, so it never meets an engine the machine already has) answers, and
after `stop` it is gone and the host's network (IP forwarding, links, iptables rules) is exactly as
before. Runs where this machine can start one (Linux, root, dockerd installed); skipped with the
reason elsewhere (`./run.sh engine start` installs Debian's docker.io where dockerd is missing)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.run import engine

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
    before = engine.read_host_network()
    said: list[str] = []
    assert engine.start(paths, write=said.append) is True
    state = engine.read_state(paths)
    assert state is not None and engine.alive(state.pid)
    assert engine.answers(paths.socket) is not None and "started" in said[-1]
    assert engine.read_host_network().differences(before) == []  # running, it changed nothing
    assert engine.start(paths, write=said.append) is False and "already answers" in said[-1]

    assert engine.stop(paths, write=said.append) is True
    assert "the host network is as it was" in said[-1]
    assert not engine.alive(state.pid) and engine.answers(paths.socket) is None
    assert not paths.socket.exists() and not paths.state_file.exists()
    assert engine._processes_under(paths.run_dir / "exec") == []
    assert engine.read_host_network().differences(before) == []
    assert (paths.root / "data").is_dir()  # images are kept for the next start
