"""`fusionbench engine`: what it refuses and says where it cannot start an engine, the daemon's
flags, the roots it accepts, and that `stop` ends only what it started (real processes standing in
for dockerd and its children), removes a socket only where no engine answers, and names what
changed on the host's network without undoing it (a fake command runner: nothing here touches the
host's network or starts a daemon). tests/integration/test_engine.py starts a real one."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from harness.container import engine, engine_socket, host_network
from harness.container.engine import EngineError, EnginePaths, EngineState
from harness.container.host_network import HostNetwork
from harness.container.host_processes import Process, descendants, mounts_under, process


class FakeRunner:
    def __init__(self, outputs: dict[str, str] | None = None) -> None:
        self.outputs = outputs or {}
        self.calls: list[tuple[list[str], str | None]] = []

    def __call__(self, command: Sequence[str], stdin: str | None) -> subprocess.CompletedProcess[str]:
        self.calls.append((list(command), stdin))
        return subprocess.CompletedProcess(list(command), 0, self.outputs.get(command[0], ""), "")


def paths_in(folder: Path) -> EnginePaths:
    return EnginePaths(root=folder / "root", run_dir=folder / "run", socket=folder / "docker.sock")


def test_the_daemon_is_started_with_its_own_roots_and_no_host_network_changes(tmp_path: Path) -> None:
    paths = paths_in(tmp_path)
    command = paths.dockerd_command("/usr/sbin/dockerd")
    assert command[:1] == ["/usr/sbin/dockerd"]
    for flag in ("--bridge=none", "--iptables=false", "--ip-forward=false", "--ip-masq=false"):
        assert flag in command
    assert command[command.index("--data-root") + 1] == str(tmp_path / "root" / "data")
    assert command[command.index("--exec-root") + 1] == str(tmp_path / "run" / "exec")
    assert command[command.index("--host") + 1] == f"unix://{tmp_path / 'docker.sock'}"


def test_the_engine_root_comes_from_the_environment(tmp_path: Path) -> None:
    assert EnginePaths.from_environment({}).root == engine.DEFAULT_ROOT
    assert EnginePaths.from_environment({engine.ROOT_VARIABLE: str(tmp_path)}).root == tmp_path


@pytest.mark.parametrize("system, euid, said", [("Darwin", 0, "for Linux machines (this is Darwin)"),
                                                ("Linux", 1000, "needs root (sudo ./run.sh engine start)")])
def test_where_an_engine_cannot_be_started_it_says_what_to_install(system: str, euid: int, said: str) -> None:
    reason = engine.why_not_here(euid=euid, system=system)
    assert reason is not None and said in reason and "install a Docker engine" in reason
    assert engine.why_not_here(euid=0, system="Linux") is None


def test_start_as_a_user_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine, "answers", lambda socket, timeout_s=5.0: None)
    monkeypatch.setattr(engine.os, "geteuid", lambda: 1000)
    runner = FakeRunner()
    with pytest.raises(EngineError, match="needs root"):
        engine.start(paths_in(tmp_path), write=lambda _: None, run=runner)
    assert runner.calls == [] and list(tmp_path.iterdir()) == []


def _socket_refusing_this_user(path: Path, monkeypatch: pytest.MonkeyPatch) -> socket.socket:
    """A listening Unix socket at `path` that this user may not connect to: the suite runs as root,
    which may connect anywhere, so the permission check answers as it does for a user outside the
    socket's group."""
    listening = socket.socket(socket.AF_UNIX)
    listening.bind(str(path))
    listening.listen()
    real_access = engine_socket.os.access
    monkeypatch.setattr(engine_socket.os, "access", lambda p, mode: False if Path(p) == path else real_access(p, mode))
    monkeypatch.setattr(engine_socket.os, "geteuid", lambda: 1000)
    return listening


def test_an_engine_that_refuses_this_user_is_named_and_no_start_is_offered(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A user outside the socket's group of a running engine was told "no Docker engine answers ...;
    start one with ./run.sh engine start", and the start then said it needs root: the engine was
    there, and what helps (access to its socket, or a native run) went unsaid."""
    paths = paths_in(tmp_path)
    monkeypatch.setattr(engine, "answers", lambda socket, timeout_s=5.0: None)
    monkeypatch.setattr(engine.os, "geteuid", lambda: 1000)
    with _socket_refusing_this_user(paths.socket, monkeypatch):
        said: list[str] = []
        assert engine.status(paths, write=said.append, environ={}) == 1
        assert len(said) == 1 and f"a Docker engine's socket {paths.socket} refuses " in said[0]
        assert "run natively instead: ./run.sh SCENARIO.yaml" in said[0] and "engine start" not in said[0]
        runner = FakeRunner()
        with pytest.raises(EngineError, match=f"socket {paths.socket} refuses .*ask an administrator"):
            engine.start(paths, write=said.append, run=runner)
        assert runner.calls == [] and sorted(p.name for p in tmp_path.iterdir()) == ["docker.sock"]
        elsewhere = {"DOCKER_HOST": f"unix://{paths.socket}"}
        other = replace(paths, socket=tmp_path / "other.sock")
        assert engine.status(other, write=said.append, environ=elsewhere) == 1 and "refuses" in said[-1]
    assert engine_socket.socket_of({"DOCKER_HOST": "tcp://build:2376"}) is None
    assert engine_socket.socket_of({}) == engine_socket.DEFAULT_SOCKET


def test_status_as_a_user_says_a_start_needs_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """It said "start one with ./run.sh engine start" to a user, whose start is then refused."""
    monkeypatch.setattr(engine, "answers", lambda socket, timeout_s=5.0: None)
    said: list[str] = []
    monkeypatch.setattr(engine.os, "geteuid", lambda: 1000)
    assert engine.status(paths_in(tmp_path), write=said.append, environ={}) == 1
    assert said[-1].startswith(f"fusionbench: no Docker engine answers on {tmp_path / 'docker.sock'}; starting an "
                               "engine needs root (sudo ./run.sh engine start); or install a Docker engine")
    monkeypatch.setattr(engine.os, "geteuid", lambda: 0)
    assert engine.status(paths_in(tmp_path), write=said.append, environ={}) == 1
    assert said[-1].endswith("; start one with ./run.sh engine start\n")


def test_start_leaves_an_engine_that_answers_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine, "answers", lambda socket, timeout_s=5.0: "28.2.2")
    said: list[str] = []
    runner = FakeRunner()
    assert engine.start(paths_in(tmp_path), write=said.append, run=runner) is False
    assert "already answers" in said[0] and "nothing started" in said[0]
    assert runner.calls == [] and list(tmp_path.iterdir()) == []


def test_without_dockerd_or_apt_it_says_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine, "answers", lambda socket, timeout_s=5.0: None)
    monkeypatch.setattr(engine, "why_not_here", lambda: None)
    monkeypatch.setattr(engine.shutil, "which", lambda name: None)
    runner = FakeRunner()
    with pytest.raises(EngineError, match="not a Debian-like system.*install a Docker engine"):
        engine.start(paths_in(tmp_path), write=lambda _: None, run=runner)
    assert runner.calls == [] and list(tmp_path.iterdir()) == []


def test_stop_without_an_engine_of_its_own_does_nothing(tmp_path: Path) -> None:
    said: list[str] = []
    runner = FakeRunner()
    assert engine.stop(paths_in(tmp_path), write=said.append, run=runner) is False
    assert "nothing to stop" in said[0] and runner.calls == []


def test_stop_and_purge_as_a_user_refuse_in_one_line_and_change_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tree: subprocess.Popen[bytes], quiet_network: None) -> None:
    """As a user, `engine stop` of the engine root started failed at its SIGTERM ("writing the
    output: Operation not permitted"), and `engine stop --purge` after a plain stop removed nothing
    of the images (their deletion ignores errors) and then failed on the log ("dockerd.log:
    Permission denied"). The suite runs as root: this process stands in for a user's."""
    monkeypatch.setattr(engine.os, "geteuid", lambda: 1000)
    paths = paths_in(tmp_path)
    _record(paths, tree.pid)
    with pytest.raises(EngineError, match=f"dockerd PID {tree.pid}\\) is root's.*sudo ./run.sh engine stop\\); "
                                          "nothing was changed"):
        engine.stop(paths, write=lambda _: None, run=FakeRunner())
    assert process(tree.pid).running() and paths.state_file.exists()  # type: ignore[union-attr]
    paths.state_file.unlink()
    root = _engine_root(paths.root)
    with pytest.raises(EngineError, match="are root's.*sudo ./run.sh engine stop --purge"):
        engine.stop(paths, write=lambda _: None, run=FakeRunner(), purge=True)
    assert (root / "data" / "image").is_dir() and (root / "dockerd.log").exists()


def test_iptables_rules_are_compared_without_their_counters_and_comments(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(host_network.shutil, "which", lambda name: f"/usr/sbin/{name}")
    saved = ("# Generated by iptables-save v1.8.9 on Thu Nov 26 09:00:00 2026\n*filter\n"
             ":INPUT ACCEPT [12:3400]\n:FORWARD DROP [0:0]\n-A FORWARD -j DOCKER-USER\nCOMMIT\n"
             "# Completed on Thu Nov 26 09:00:00 2026\n")
    later = saved.replace("[12:3400]", "[99:99999]").replace("09:00:00", "10:00:00")
    first = host_network.read_host_network(FakeRunner({"iptables-save": saved, "ip": ""}), ip_forward=Path("/nonexistent"))
    second = host_network.read_host_network(FakeRunner({"iptables-save": later, "ip": ""}), ip_forward=Path("/nonexistent"))
    assert first.iptables == second.iptables == "*filter\n:INPUT ACCEPT\n:FORWARD DROP\n-A FORWARD -j DOCKER-USER\nCOMMIT"
    assert first.ip_forward is None


def test_links_are_read_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(host_network.shutil, "which", lambda name: None if name == "iptables-save" else f"/usr/sbin/{name}")
    listing = ("1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue\n"
               "5: veth1a2b@if4: <BROADCAST,MULTICAST,UP> mtu 1500\n"
               "4: docker0: <NO-CARRIER,BROADCAST,MULTICAST,UP> mtu 1500\n")
    read = host_network.read_host_network(FakeRunner({"ip": listing}), ip_forward=Path("/nonexistent"))
    assert read.links == ("docker0", "lo", "veth1a2b") and read.iptables is None




# --- the engine touches only what it started (issue: the engine on the host) ------------------

@pytest.fixture
def quiet_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """No engine answers anywhere and the host's network reads the same every time."""
    monkeypatch.setattr(engine, "answers", lambda socket, timeout_s=5.0: None)
    monkeypatch.setattr(engine, "read_host_network", lambda run=None: HostNetwork("0", ("lo",), None))


@pytest.fixture
def tree() -> Iterator[subprocess.Popen[bytes]]:
    """A process standing in for dockerd, with a child standing in for its containerd."""
    parent = subprocess.Popen(["bash", "-c", "sleep 60 & wait"], start_new_session=True)
    deadline = time.monotonic() + 10
    while not descendants(process(parent.pid)) and time.monotonic() < deadline:  # type: ignore[arg-type]
        time.sleep(0.02)
    yield parent
    for p in [process(parent.pid), *descendants(process(parent.pid) or Process(parent.pid, -1))]:
        if p is not None and p.running():
            os.kill(p.pid, 9)
    parent.wait()


def _record(paths: EnginePaths, pid: int, **fields: object) -> EngineState:
    me = process(pid)
    assert me is not None
    state = EngineState(pid=pid, pid_start=me.start, socket=str(paths.socket), root=str(paths.root), started=0.0,
                        run_dir=str(paths.run_dir), host={"ip_forward": "0", "links": ["lo"], "iptables": None})
    for name, value in fields.items():
        setattr(state, name, value)
    paths.run_dir.mkdir(parents=True, exist_ok=True)
    paths.state_file.write_text(json.dumps(state.__dict__))
    return state


@pytest.mark.parametrize("root, refused", [
    ("/", "a system folder"), ("/etc", "a system folder"), ("/usr/lib/fb", "in /usr, a system folder"),
    ("/var/lib", "a system folder"), ("/tmp", "a system folder"),
    ("/var/lib/fusionbench-engine", None), ("/tmp/fb-engine", None), ("/srv/images/fb", None)])
def test_an_engine_root_is_a_folder_of_its_own_never_a_system_one(root: str, refused: str | None) -> None:
    why = engine.unsafe_root(Path(root))
    assert (why is None) if refused is None else (why is not None and refused in why)
    if refused:
        with pytest.raises(EngineError, match="give a folder of its own"):
            EnginePaths.from_environment({engine.ROOT_VARIABLE: root})


def test_a_root_that_links_to_the_system_is_refused_and_a_relative_one_made_absolute(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "to-root").symlink_to("/")
    with pytest.raises(EngineError, match="to-root is /, a system folder"):
        EnginePaths.from_environment({engine.ROOT_VARIABLE: str(tmp_path / "to-root")})
    monkeypatch.chdir(tmp_path)
    assert EnginePaths.from_environment({engine.ROOT_VARIABLE: "relroot"}).root == tmp_path / "relroot"


def test_start_refuses_where_docker_host_names_another_place(tmp_path: Path, quiet_network: None) -> None:
    with pytest.raises(EngineError, match="DOCKER_HOST is tcp://127.0.0.1:1, where no Docker engine answers"):
        engine.start(paths_in(tmp_path), write=lambda _: None, run=FakeRunner(),
                     environ={"DOCKER_HOST": "tcp://127.0.0.1:1"})
    assert list(tmp_path.iterdir()) == []


def test_start_never_replaces_an_engine_of_its_own_that_runs_without_answering(
        tmp_path: Path, quiet_network: None, tree: subprocess.Popen[bytes]) -> None:
    paths = paths_in(tmp_path)
    _record(paths, tree.pid)
    before = paths.state_file.read_text()
    with pytest.raises(EngineError, match=f"dockerd PID {tree.pid}.* is running but does not answer.*left as it is"):
        engine.start(paths, write=lambda _: None, run=FakeRunner(), environ={})
    assert paths.state_file.read_text() == before and tree.poll() is None


def test_stop_ends_the_recorded_tree_and_nothing_that_merely_names_its_folders(
        tmp_path: Path, quiet_network: None, tree: subprocess.Popen[bytes]) -> None:
    paths = paths_in(tmp_path)
    child = descendants(process(tree.pid))  # type: ignore[arg-type]
    bystander = subprocess.Popen(["bash", "-c", "sleep 60", str(paths.run_dir / "exec-notes.txt")])
    try:
        _record(paths, tree.pid, below=[[c.pid, c.start] for c in child])
        said: list[str] = []
        runner = FakeRunner()
        assert engine.stop(paths, write=said.append, run=runner) is True
        tree.wait(timeout=10)
        assert child and not any(c.running() for c in child)
        assert bystander.poll() is None, "a process that only names the engine's folder is not the engine's"
        assert "Docker engine stopped" in said[-1] and not paths.state_file.exists()
        assert runner.calls == []  # nothing was unmounted or restored: nothing was there
    finally:
        bystander.kill()
        bystander.wait()


class _SlowToEnd:
    """A process standing in for a containerd that ends a few reads after its SIGKILL, as the kernel
    delivers a kill after `kill` returns."""

    def __init__(self, pid: int, reads_after_kill: int) -> None:
        self.pid, self.reads_left, self.killed = pid, reads_after_kill, False

    def running(self) -> bool:
        if self.killed:
            self.reads_left -= 1
        return not self.killed or self.reads_left > 0


def test_stop_returns_only_once_a_killed_containerd_has_ended(monkeypatch: pytest.MonkeyPatch) -> None:
    slow = _SlowToEnd(pid=4_000_000, reads_after_kill=5)
    gone = Process(pid=4_000_001, start=-1)  # never there: nothing is sent to it

    def kill(pid: int, sig: int) -> None:
        assert pid == slow.pid
        slow.killed = True

    monkeypatch.setattr(engine.os, "kill", kill)
    engine._end(gone, [slow, gone], 1.0, write=lambda _: None)  # type: ignore[list-item]
    assert slow.killed and not slow.running(), "the unmounts that follow would race a containerd still ending"


def test_stop_after_the_daemon_died_keeps_another_engines_socket(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, quiet_network: None) -> None:
    paths = paths_in(tmp_path)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    _record(paths, os.getpid())  # a real state, then pointed at the process that ended
    state = json.loads(paths.state_file.read_text())
    paths.state_file.write_text(json.dumps({**state, "pid": gone.pid}))
    paths.socket.write_text("")  # the socket another daemon now answers on
    monkeypatch.setattr(engine, "answers", lambda socket, timeout_s=5.0: "28.2.2")
    said: list[str] = []
    assert engine.stop(paths, write=said.append, run=FakeRunner()) is True
    assert "was no longer running" in said[-1] and "Docker engine stopped" not in said[-1]
    assert "another Docker engine (28.2.2) answers on" in said[-1] and paths.socket.exists()


def test_stop_names_network_changes_it_did_not_make_and_undoes_none(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, quiet_network: None) -> None:
    paths = paths_in(tmp_path)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    _record(paths, os.getpid())
    state = json.loads(paths.state_file.read_text())
    paths.state_file.write_text(json.dumps({**state, "pid": gone.pid}))
    monkeypatch.setattr(engine, "read_host_network", lambda run=None: HostNetwork("1", ("lo", "probe4b0"), None))
    runner = FakeRunner()
    said: list[str] = []
    engine.stop(paths, write=said.append, run=runner)
    assert runner.calls == []
    assert ("the host's network changed while it ran (IP forwarding 0 -> 1; network links added: probe4b0), not by it"
            in said[-1]) and "left as it is" in said[-1] and "restored" not in said[-1]


def test_purge_removes_the_root_the_state_recorded_never_the_environments(
        tmp_path: Path, quiet_network: None) -> None:
    recorded, named = tmp_path / "recorded", tmp_path / "named"
    for root in (recorded, named):
        (root / "data").mkdir(parents=True)
    paths = EnginePaths(root=named, run_dir=tmp_path / "run", socket=tmp_path / "docker.sock")
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    _record(paths, os.getpid(), root=str(recorded))
    state = json.loads(paths.state_file.read_text())
    paths.state_file.write_text(json.dumps({**state, "pid": gone.pid}))
    said: list[str] = []
    engine.stop(paths, write=said.append, run=FakeRunner(), purge=True)
    assert not recorded.exists() and (named / "data").is_dir() and f"removed ({recorded})" in said[-1]
    _record(paths, os.getpid(), root="/")
    state = json.loads(paths.state_file.read_text())
    paths.state_file.write_text(json.dumps({**state, "pid": gone.pid}))
    engine.stop(paths, write=said.append, run=FakeRunner(), purge=True)
    assert "not removed: / is /, a system folder" in said[-1]


def _purged(tmp_path: Path, root: Path, **fields: object) -> str:
    """What `stop --purge` says of an engine recorded with data root `root` (and `fields`) whose
    dockerd is gone: the purge itself, with nothing to end."""
    paths = EnginePaths(root=root, run_dir=tmp_path / "run", socket=tmp_path / "docker.sock")
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    _record(paths, os.getpid(), root=str(root), **fields)
    state = json.loads(paths.state_file.read_text())
    paths.state_file.write_text(json.dumps({**state, "pid": gone.pid}))
    said: list[str] = []
    engine.stop(paths, write=said.append, run=FakeRunner(), purge=True)
    return said[-1]


def test_purge_removes_what_the_engine_wrote_and_keeps_what_else_its_root_holds(
        tmp_path: Path, quiet_network: None) -> None:
    """`FUSIONBENCH_ENGINE_ROOT=eroot` over a folder holding the user's notes: a purge deleted the
    notes with the images."""
    root = tmp_path / "eroot"
    (root / "data" / "image").mkdir(parents=True)
    (root / "dockerd.log").write_text("log")
    (root / "my-notes.txt").write_text("precious")
    said = _purged(tmp_path, root)
    assert sorted(p.name for p in root.iterdir()) == ["my-notes.txt"] and (root / "my-notes.txt").read_text() == "precious"
    assert f"removed ({root / 'data'}); {root} kept for what else it holds, which is not the engine's (my-notes.txt)" in said


def test_a_data_folder_that_was_there_before_the_engine_is_never_purged(tmp_path: Path, quiet_network: None) -> None:
    """`FUSIONBENCH_ENGINE_ROOT=$HOME` over a home that has a `data` folder of its own."""
    home = tmp_path / "home"
    (home / "data").mkdir(parents=True)
    (home / "data" / "thesis.tex").write_text("years")
    assert not engine.owns_data(home) and engine.owns_data(tmp_path / "fresh") and engine.owns_data(engine.DEFAULT_ROOT)
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / engine.ROOT_MARKER).touch()
    (tmp_path / "used" / "data").mkdir()
    assert engine.owns_data(tmp_path / "used")  # an engine started there on an empty slate before
    said = _purged(tmp_path, home, data_owned=False)
    assert (home / "data" / "thesis.tex").read_text() == "years"
    assert f"not removed: {home / 'data'} was there before an engine first started in {home}" in said


def _engine_root(folder: Path) -> Path:
    """A root as an engine of the project's own leaves it: its marker, its images, its log."""
    (folder / "data" / "image").mkdir(parents=True)
    (folder / engine.ROOT_MARKER).touch()
    (folder / "dockerd.log").write_text("log")
    return folder


def test_purge_after_a_plain_stop_removes_the_images_the_stopped_engine_left(tmp_path: Path, quiet_network: None) -> None:
    """`engine stop` said "images kept in ROOT/data (--purge removes them)"; `engine stop --purge`
    then said "nothing to stop" and left them, since the first stop had removed the state file."""
    paths = paths_in(tmp_path)
    root = _engine_root(paths.root)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    _record(paths, os.getpid())
    paths.state_file.write_text(json.dumps({**json.loads(paths.state_file.read_text()), "pid": gone.pid}))
    said: list[str] = []
    engine.stop(paths, write=said.append, run=FakeRunner())
    assert f"kept in {root / 'data'} (--purge removes them)" in said[-1] and (root / "data" / "image").is_dir()
    assert engine.stop(paths, write=said.append, run=FakeRunner(), purge=True) is False
    assert not root.exists()
    assert said[-1] == (f"fusionbench: no engine started by fusionbench is running ({paths.state_file} is absent); "
                        f"the images a stopped one left are removed ({root})\n")
    engine.stop(paths, write=said.append, run=FakeRunner(), purge=True)
    assert said[-1].endswith(f"nothing to stop, and no images in {root / 'data'} to remove\n")


def test_purge_with_no_engine_recorded_spares_a_data_folder_no_engine_of_its_own_left(tmp_path: Path) -> None:
    paths = paths_in(tmp_path)
    home = paths.root  # FUSIONBENCH_ENGINE_ROOT=$HOME over a home with a `data` folder of its own
    (home / "data").mkdir(parents=True)
    (home / "data" / "thesis.tex").write_text("years")
    said: list[str] = []
    engine.stop(paths, write=said.append, run=FakeRunner(), purge=True)
    assert (home / "data" / "thesis.tex").read_text() == "years"
    assert (f"{home / 'data'} not removed: no engine of fusionbench's own left it ({home} has no "
            f"{engine.ROOT_MARKER})") in said[-1]


@pytest.mark.parametrize("flag", ["--data-root", "--data-root=", "through-a-link", "relative"])
def test_purge_with_no_engine_recorded_refuses_while_a_dockerd_works_in_the_data(tmp_path: Path, flag: str) -> None:
    """Also where the root is named through a link, or the dockerd named its data root relative to
    its own folder: compared as written, both purged the images of a dockerd still running."""
    real = _engine_root(tmp_path / "real")
    paths = paths_in(tmp_path)
    paths.root.symlink_to(real)  # the root the environment names: the engine's, through a link
    data = real / "data"
    cwd = None
    if flag == "--data-root=":
        words = [f"--data-root={data}"]
    elif flag == "relative":
        words, cwd = ["--data-root", "data"], real
    else:
        words = ["--data-root", str(data)]
    if flag != "through-a-link":
        paths = replace(paths, root=real)
    # a process whose command line is a dockerd's: named dockerd, with the data root among its options
    daemon = subprocess.Popen(["dockerd", "-c", "import time; time.sleep(60)", *words], executable=sys.executable,
                              cwd=cwd)
    try:
        deadline = time.monotonic() + 10
        while b"dockerd" not in Path(f"/proc/{daemon.pid}/cmdline").read_bytes() and time.monotonic() < deadline:
            time.sleep(0.02)
        with pytest.raises(EngineError, match=f"is not removed: a dockerd \\(PID {daemon.pid}\\) runs "
                                              "with its images there; stop that engine first"):
            engine.stop(paths, write=lambda _: None, run=FakeRunner(), purge=True)
        assert (data / "image").is_dir() and (real / engine.ROOT_MARKER).exists()
    finally:
        daemon.kill()
        daemon.wait()


def test_status_looks_where_docker_host_points(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine, "answers", lambda socket, timeout_s=5.0: "27.5.1" if socket is None else None)
    said: list[str] = []
    assert engine.status(paths_in(tmp_path), write=said.append, environ={"DOCKER_HOST": "tcp://build:2376"}) == 0
    assert said == ["fusionbench: DOCKER_HOST is tcp://build:2376: a Docker engine (27.5.1) answers there\n"]
    monkeypatch.setattr(engine, "answers", lambda socket, timeout_s=5.0: None)
    assert engine.status(paths_in(tmp_path), write=said.append, environ={"DOCKER_HOST": "tcp://build:2376"}) == 1
    assert said[-1].endswith("no Docker engine answers there\n")


def test_processes_are_named_by_pid_and_start_time(tree: subprocess.Popen[bytes]) -> None:
    me = process(tree.pid)
    assert me is not None and me.running() and Process(tree.pid, me.start + 1).running() is False
    assert [p.pid for p in descendants(me)] and process(2**22 + 1) is None


def test_mounts_are_read_with_their_escapes_deepest_first(tmp_path: Path) -> None:
    info = tmp_path / "mountinfo"
    info.write_text("36 35 98:0 / /srv/fb rw - ext3 /dev/root rw\n"
                    "37 36 98:0 / /srv/fb/data rw - ext3 /dev/root rw\n"
                    "38 36 98:0 / /srv/fb/data/with\\040space rw - ext3 /dev/root rw\n"
                    "39 35 98:0 / /srv/other rw - ext3 /dev/root rw\n")
    assert mounts_under(Path("/srv/fb/data"), info) == [Path("/srv/fb/data/with space"), Path("/srv/fb/data")]


def test_start_installs_mmdebstrap_beside_the_engine_where_it_is_missing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, quiet_network: None) -> None:
    monkeypatch.setattr(engine, "why_not_here", lambda: None)
    monkeypatch.setattr(engine.shutil, "which", lambda name: None if name == "mmdebstrap" else f"/usr/bin/{name}")
    asked: list[list[str]] = []

    def install(packages: list[str], write: object, run: object) -> None:
        asked.append(packages)
        raise EngineError("stop here")

    monkeypatch.setattr(engine, "_install", install)
    with pytest.raises(EngineError, match="stop here"):
        engine.start(paths_in(tmp_path), write=lambda _: None, run=FakeRunner(), environ={})
    assert asked == [["mmdebstrap"]]


def test_packages_install_with_service_starts_held_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if not Path("/etc/debian_version").exists():
        pytest.skip("not a Debian-like system")
    monkeypatch.setattr(engine, "POLICY_RC_D", tmp_path / "policy-rc.d")
    monkeypatch.setattr(engine.shutil, "which", lambda name: f"/usr/bin/{name}")
    held: list[bool] = []
    runner = FakeRunner()

    def run(command: Sequence[str], stdin: str | None) -> subprocess.CompletedProcess[str]:
        held.append((tmp_path / "policy-rc.d").read_text().endswith("exit 101\n"))
        return runner(command, stdin)

    engine._install(["docker.io", "mmdebstrap"], lambda _: None, run)
    assert [c[0][-2:] for c in runner.calls][-1] == ["docker.io", "mmdebstrap"] and all(held)
    assert not (tmp_path / "policy-rc.d").exists()
