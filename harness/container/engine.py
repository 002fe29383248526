"""`fusionbench engine start|stop|status`: a Docker engine of the project's own, for a machine
where none runs (`./run.sh engine start`, and `./run.sh --container ...` when no engine answers).

Where it can (Linux, root, a Debian-like system with apt), `start` installs Debian's docker.io if
`dockerd` is missing (with service starts held back by policy-rc.d, so the package starts nothing
itself) and starts `dockerd` with a data root of its own (`FUSIONBENCH_ENGINE_ROOT`, an absolute
folder outside the system's, default /var/lib/fusionbench-engine: images stay there between runs)
on the usual socket, so the `docker` command and the launcher find it. The daemon is started so
that it changes nothing on the host's network: no docker0 bridge, no iptables rules, IP forwarding
left alone (`--bridge=none --iptables=false --ip-forward=false`); the project's containers and
builds need no network. Elsewhere `start` says what to install and changes nothing.

The promise (docs/containers.md): the engine stops, removes and restores only what it started or
changed itself; where something else is there, it says so and leaves it.
- `start` refuses to replace an engine it started that still runs (answering or not), and to start
  one where DOCKER_HOST names another place (the launcher would not use it).
- `stop` ends the dockerd it recorded (PID and start time: never a later process given the same PID)
  and the processes below it (its containerd and shims, by parentage, recorded while it ran), then
  unmounts what the daemon left mounted under its data root, and removes its socket only when no
  engine answers on it any more. It undoes nothing on the host's network: its daemon changed
  nothing there, so what changed meanwhile is another tool's, and is named, not touched.
- `stop --purge` deletes what the engine wrote in the data root the state file recorded (its data
  folder and log; the root itself where nothing else is left in it), never a root named anew.
  After a plain `stop` (no state file left) it deletes what a stopped engine of the project's own
  left in the root the environment names, and only that (harness/container/engine_data.py).

The state of an engine this started (its dockerd, the processes below it, its paths, the host's
network as it was) is a JSON file in its run directory; `stop` acts only on that engine.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.container.engine_data import DEFAULT_ROOT, LOG_NAME, ROOT_MARKER, in_use, left_by_own_engine, owns_data
from harness.container.engine_data import purge as purge_data
from harness.container.engine_socket import DEFAULT_SOCKET, refused, socket_of
from harness.container.host_folders import system_folder
from harness.container.host_network import HostNetwork, Runner, read_host_network, run_command
from harness.container.host_processes import Process, descendants, mounts_under, process
from harness.errors import HarnessError
from harness.killed_wait import wait_until_ended

ROOT_VARIABLE = "FUSIONBENCH_ENGINE_ROOT"
DEFAULT_RUN_DIR = Path("/run/fusionbench-engine")
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
POLICY_RC_D = Path("/usr/sbin/policy-rc.d")
INSTALL_HINT = ("install a Docker engine (on Debian or Ubuntu as root: apt-get install docker.io; elsewhere: "
                "your distribution's Docker package) and start it, or run natively: ./run.sh SCENARIO.yaml")
class EngineError(HarnessError):
    """The engine could not be started or stopped here; what was changed has been put back."""

    exit_code = 2


def unsafe_root(root: Path) -> str | None:
    """Why `root` cannot be an engine's data root (harness/container/host_folders.py), or None."""
    return system_folder(root)


@dataclass(frozen=True)
class EnginePaths:
    """Where an engine of the project's own keeps its images (`root`), its runtime files (`run_dir`:
    exec root, PID file, state) and the socket it answers on."""

    root: Path = DEFAULT_ROOT
    run_dir: Path = DEFAULT_RUN_DIR
    socket: Path = DEFAULT_SOCKET

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] = os.environ) -> EnginePaths:
        """The default paths, the root from FUSIONBENCH_ENGINE_ROOT where set (a relative one taken
        from the working folder); EngineError for a root in or at a system folder."""
        given = environ.get(ROOT_VARIABLE)
        if not given:
            return cls()
        root = Path(os.path.abspath(given))
        why = unsafe_root(root)
        if why:
            raise EngineError(f"{ROOT_VARIABLE}={given}: {why}; give a folder of its own, such as "
                              f"{DEFAULT_ROOT}")
        return cls(root=root)

    @property
    def state_file(self) -> Path:
        return self.run_dir / "engine.json"

    @property
    def log_file(self) -> Path:
        return self.root / LOG_NAME

    def dockerd_command(self, dockerd: str) -> list[str]:
        return [dockerd, "--data-root", str(self.root / "data"), "--exec-root", str(self.run_dir / "exec"),
                "--pidfile", str(self.run_dir / "dockerd.pid"), "--host", f"unix://{self.socket}",
                "--bridge=none", "--iptables=false", "--ip-forward=false", "--ip-masq=false", "--userland-proxy=false"]


@dataclass
class EngineState:
    """The JSON state file of an engine this module started."""

    pid: int
    socket: str
    root: str
    started: float
    host: dict[str, Any] = field(default_factory=dict)
    pid_start: int | None = None  # dockerd's start time (host_processes.Process)
    run_dir: str | None = None
    below: list[list[int]] = field(default_factory=list)  # [pid, start] of the processes below dockerd
    mounts_before: list[str] = field(default_factory=list)  # mounts under the data root before it started
    # Whether the data folder and log in the root are the engine's: False where `data` was there
    # before an engine first started in that root (a root named anew over a folder of the user's)
    data_owned: bool = True

    def host_network(self) -> HostNetwork:
        return HostNetwork(ip_forward=self.host.get("ip_forward"), links=tuple(self.host.get("links", ())),
                           iptables=self.host.get("iptables"))

    def dockerd(self) -> Process:
        """The dockerd this state names: by PID and start time; a state written before start times were
        kept names it where that PID runs a dockerd with this engine's exec root, else nothing."""
        if self.pid_start is not None:
            return Process(self.pid, self.pid_start)
        now = process(self.pid)
        exec_root = f"{self.run_dir or DEFAULT_RUN_DIR}/exec"
        try:
            command = Path(f"/proc/{self.pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            command = []
        ours = bool(command) and Path(command[0].decode(errors="replace")).name == "dockerd" and (
            exec_root.encode() in command)
        return now if now is not None and ours else Process(self.pid, -1)

    def paths(self, fallback: EnginePaths) -> EnginePaths:
        """The paths this engine was started with (the state's, not the environment's)."""
        return EnginePaths(root=Path(self.root), run_dir=Path(self.run_dir) if self.run_dir else fallback.run_dir,
                           socket=Path(self.socket))


def answers(socket: Path | None, timeout_s: float = 5.0) -> str | None:
    """The version of the Docker engine answering on `socket` (None: where DOCKER_HOST, else the
    usual socket, points, as the launcher looks), or None."""
    try:
        import docker

        timeout = int(max(timeout_s, 1))
        client = (docker.from_env(timeout=timeout) if socket is None
                  else docker.DockerClient(base_url=f"unix://{socket}", timeout=timeout))
        try:
            return str(client.version().get("Version", "unknown"))
        finally:
            client.close()
    except Exception:  # noqa: BLE001 - any failure to reach it means it does not answer
        return None


def read_state(paths: EnginePaths) -> EngineState | None:
    try:
        return EngineState(**json.loads(paths.state_file.read_text()))
    except (OSError, ValueError, TypeError):
        return None


def why_not_here(euid: int | None = None, system: str | None = None) -> str | None:
    """Why this machine cannot start an engine of the project's own, or None."""
    system = system or platform.system()
    if system != "Linux":
        return f"starting an engine is for Linux machines (this is {system}); {INSTALL_HINT}"
    if (os.geteuid() if euid is None else euid) != 0:
        return f"starting an engine needs root (sudo ./run.sh engine start); or {INSTALL_HINT}"
    return None


#: What an engine of the project's own needs, by the command that shows it is there: dockerd, and
#: mmdebstrap, which builds the images' base where no registry answers (harness/container/image_base.py).
PACKAGES = (("docker.io", "dockerd"), ("mmdebstrap", "mmdebstrap"))


def _install(packages: list[str], write: Callable[[str], object], run: Runner) -> None:
    """Debian's `packages`, any service they bring held back from starting by policy-rc.d while they install."""
    if shutil.which("apt-get") is None or not Path("/etc/debian_version").exists():
        raise EngineError(f"{', '.join(packages)} not installed and this is not a Debian-like system; {INSTALL_HINT}")
    write(f"fusionbench: installing Debian's {' and '.join(packages)} (apt-get; about 30 s) ...\n")
    guard = not POLICY_RC_D.exists()
    if guard:
        POLICY_RC_D.write_text("#!/bin/sh\n# fusionbench engine start: no service starts while docker.io installs\nexit 101\n")
        POLICY_RC_D.chmod(0o755)
    try:
        for command in (["apt-get", "update", "-qq"],
                        ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages]):
            done = run(command, None)
            if done.returncode != 0:
                tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
                raise EngineError(f"{' '.join(command)} failed (exit {done.returncode}): {' | '.join(tail)}; {INSTALL_HINT}")
    finally:
        if guard:
            POLICY_RC_D.unlink(missing_ok=True)


def _docker_host_elsewhere(paths: EnginePaths, environ: Mapping[str, str]) -> str | None:
    """DOCKER_HOST where it names a place other than this engine's socket, else None."""
    host = environ.get("DOCKER_HOST")
    if not host or host in (f"unix://{paths.socket}", f"unix://{paths.socket.resolve()}"):
        return None
    return host


def _running(state: EngineState | None) -> bool:
    return state is not None and state.dockerd().running()


def start(paths: EnginePaths, write: Callable[[str], object] = sys.stdout.write, run: Runner = run_command,
          timeout_s: float = START_TIMEOUT_S, environ: Mapping[str, str] = os.environ) -> bool:
    """Start an engine of the project's own unless one answers; return whether this started one."""
    elsewhere = _docker_host_elsewhere(paths, environ)
    for socket in (paths.socket, None):
        version = answers(socket)
        if version is not None:
            where = paths.socket if socket else elsewhere or DEFAULT_SOCKET
            write(f"fusionbench: a Docker engine ({version}) already answers on {where}; nothing started\n")
            return False
    refusal = refused(socket_of(environ) if elsewhere else paths.socket)
    if refusal:  # an engine is there, and this user may not use it: another would not help
        raise EngineError(refusal)
    if elsewhere:
        raise EngineError(f"DOCKER_HOST is {elsewhere}, where no Docker engine answers; an engine started here would "
                          f"answer on unix://{paths.socket}, which the launcher would not use while DOCKER_HOST is set: "
                          "unset DOCKER_HOST (or start the engine it names) and try again")
    state = read_state(paths)
    if _running(state):
        assert state is not None
        raise EngineError(f"the engine fusionbench started (dockerd PID {state.pid}) is running but does not answer on "
                          f"{state.socket} (stopped or hung); it is left as it is: `./run.sh engine stop` ends it")
    refusal = why_not_here()
    if refusal:
        raise EngineError(refusal)
    if state is not None:  # an engine of an earlier start that died: what it left goes first
        stop(paths, write=write, run=run)
    missing = [package for package, command in PACKAGES if shutil.which(command) is None]
    if missing:
        _install(missing, write, run)
    dockerd = shutil.which("dockerd")
    if dockerd is None:
        raise EngineError(f"dockerd is still not on PATH after installing docker.io; {INSTALL_HINT}")
    host = read_host_network(run)
    data_owned = owns_data(paths.root)
    for folder in (paths.root, paths.run_dir):
        folder.mkdir(parents=True, exist_ok=True)
    if data_owned:
        (paths.root / ROOT_MARKER).touch()
    mounts_before = [str(m) for m in mounts_under(paths.root / "data")]
    with paths.log_file.open("ab") as log:
        started = subprocess.Popen(paths.dockerd_command(dockerd), stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                   start_new_session=True)
    own = process(started.pid)
    state = EngineState(pid=started.pid, socket=str(paths.socket), root=str(paths.root), started=time.time(),
                        host=asdict(host), pid_start=own.start if own else None, run_dir=str(paths.run_dir),
                        mounts_before=mounts_before, data_owned=data_owned)
    _write_state(paths, state)
    deadline = time.monotonic() + timeout_s
    while (version := answers(paths.socket, timeout_s=2)) is None:
        if started.poll() is not None or time.monotonic() > deadline:
            tail = _log_tail(paths.log_file)
            stop(paths, write=lambda _: None, run=run)
            said = "exited" if started.returncode is not None else f"did not answer within {timeout_s:g} s"
            raise EngineError(f"dockerd {said}; it was stopped and what it left removed. Its log ({paths.log_file}) "
                              f"ends: {tail}")
        time.sleep(0.25)
    state.below = [[p.pid, p.start] for p in descendants(state.dockerd())]  # its containerd
    _write_state(paths, state)
    write(f"fusionbench: Docker engine {version} started (dockerd PID {started.pid}, images in {paths.root / 'data'}, "
          f"socket {paths.socket}); stop it with ./run.sh engine stop\n")
    return True


def _write_state(paths: EnginePaths, state: EngineState) -> None:
    paths.state_file.write_text(json.dumps(asdict(state), indent=1))


def _end(dockerd: Process, below: list[Process], timeout_s: float, write: Callable[[str], object]) -> None:
    """SIGTERM `dockerd`, SIGKILL after `timeout_s`; then SIGKILL whichever of `below` still runs, and
    wait (up to harness/killed_wait.py's KILLED_WAIT_S) until each has ended: a kill is delivered after `kill` returns, and a
    containerd still ending may hold the mounts that are unmounted next."""
    if dockerd.running():
        os.kill(dockerd.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while dockerd.running() and time.monotonic() < deadline:
            _reap(dockerd.pid)
            time.sleep(0.2)
        if dockerd.running():
            os.kill(dockerd.pid, signal.SIGKILL)
            write(f"fusionbench: dockerd did not end within {timeout_s:g} s of SIGTERM; killed\n")
        _reap(dockerd.pid)
    killed = []
    for child in below:  # a containerd or shim the daemon left behind
        if child.running():
            try:
                os.kill(child.pid, signal.SIGKILL)
                killed.append(child)
            except ProcessLookupError:
                pass
    wait_until_ended(lambda: any(child.running() for child in killed))


def _unmount(root: Path, before: list[str], run: Runner) -> list[str]:
    """Unmount what appeared under `root` since the engine started (dockerd's own bind mount of its
    data root, which a killed daemon leaves); say what."""
    said = []
    for point in mounts_under(root):
        if str(point) in before:
            continue
        done = run(["umount", str(point)], None)
        if done.returncode != 0:
            done = run(["umount", "-l", str(point)], None)
        said.append(f"{'unmounted' if done.returncode == 0 else 'could not unmount'} {point}")
    return said


def stop(paths: EnginePaths, write: Callable[[str], object] = sys.stdout.write, run: Runner = run_command,
         timeout_s: float = STOP_TIMEOUT_S, purge: bool = False) -> bool:
    """Stop the engine `start` started, with what runs below it and what it mounted; return whether
    there was one. Its socket goes only where no engine answers on it; the host's network is
    compared, not changed. With `purge` and no engine recorded, the images a stopped one left go."""
    state = read_state(paths)
    if state is None:
        none = f"fusionbench: no engine started by fusionbench is running ({paths.state_file} is absent)"
        write(f"{none}; {_purge_left(paths.root) if purge else 'nothing to stop'}\n")
        return False
    if os.geteuid() != 0:  # its dockerd, run folder and images are root's: each step would be refused
        raise EngineError(f"the engine fusionbench started (dockerd PID {state.pid}) is root's, as starting it needed "
                          "root: stopping it does too (sudo ./run.sh engine stop); nothing was changed")
    own = state.paths(paths)
    dockerd = state.dockerd()
    was_running = dockerd.running()
    below = {Process(pid, start) for pid, start in state.below} | set(descendants(dockerd))
    _end(dockerd, sorted(below, key=lambda p: p.pid), timeout_s, write)
    said = _unmount(own.root / "data", state.mounts_before, run)
    other = answers(own.socket)
    if other is None:
        own.socket.unlink(missing_ok=True)
    else:
        said.append(f"another Docker engine ({other}) answers on {own.socket}: its socket is left as it is")
    changed = read_host_network(run).differences(state.host_network())
    if changed:
        said.append(f"the host's network changed while it ran ({'; '.join(changed)}), not by it (it runs with no "
                    "bridge, no iptables rules, no IP forwarding): left as it is")
    for path in (own.state_file, own.run_dir / "dockerd.pid"):
        path.unlink(missing_ok=True)
    shutil.rmtree(own.run_dir / "exec", ignore_errors=True)
    try:
        own.run_dir.rmdir()  # only when empty
    except OSError:
        pass
    kept = f"kept in {own.root / 'data'} (--purge removes them)"
    if purge:
        why = unsafe_root(own.root)
        if why or not state.data_owned:
            kept = f"not removed: {why}" if why else (
                f"not removed: {own.root / 'data'} was there before an engine first started in {own.root}, so it may "
                "not be the engine's; remove it yourself if it is")
        else:
            kept = purge_data(own.root)
    what = (f"Docker engine stopped (PID {state.pid})" if was_running
            else f"the engine fusionbench started (dockerd PID {state.pid}) was no longer running; cleaned up after it")
    write(f"fusionbench: {what}; {'; '.join(said) or 'nothing else was left'}; images {kept}\n")
    return True


def _purge_left(root: Path) -> str:
    """`stop --purge` after a plain `stop`: what a stopped engine of the project's own left in `root`
    (engine_data.left_by_own_engine) removed, said; EngineError while a dockerd still works there.
    The root is taken with its links resolved: a dockerd and the mount table name the folder itself."""
    root = Path(os.path.realpath(root))
    why = unsafe_root(root)
    if why:
        return f"nothing to stop; {root / 'data'} not removed: {why}"
    if not left_by_own_engine(root):
        if not (root / "data").exists():
            return f"nothing to stop, and no images in {root / 'data'} to remove"
        return (f"nothing to stop; {root / 'data'} not removed: no engine of fusionbench's own left it ({root} has "
                f"no {ROOT_MARKER}); remove it yourself if it is an engine's")
    if os.geteuid() != 0:  # the daemon wrote them as root: a purge removed nothing and said a file refused it
        raise EngineError(f"{root / 'data'} is not removed: the images an engine of fusionbench's own left are root's, "
                          "as starting it needed root: removing them does too (sudo ./run.sh engine stop --purge)")
    busy = in_use(root)
    if busy:
        raise EngineError(f"{root / 'data'} is not removed: {busy}")
    return f"the images a stopped one left are {purge_data(root)}"


def status(paths: EnginePaths, write: Callable[[str], object] = sys.stdout.write,
           environ: Mapping[str, str] = os.environ) -> int:
    """Say which engine answers, if any, where the launcher would look (DOCKER_HOST first); 0 when one does."""
    state = read_state(paths)
    elsewhere = _docker_host_elsewhere(paths, environ)
    version = answers(None) if elsewhere else answers(paths.socket)
    if _running(state):
        assert state is not None
        own = answers(Path(state.socket))
        write(f"fusionbench: engine started by fusionbench: dockerd PID {state.pid}, "
              f"{'answering, version ' + own if own else 'not answering'}, images in {state.root}/data\n")
    refusal = None if version else refused(socket_of(environ) if elsewhere else paths.socket)
    if refusal:
        write(f"fusionbench: {refusal}\n")
    elif elsewhere:
        write(f"fusionbench: DOCKER_HOST is {elsewhere}: " + (f"a Docker engine ({version}) answers there\n" if version
                                                               else "no Docker engine answers there\n"))
    elif version is not None and not _running(state):
        write(f"fusionbench: a Docker engine ({version}) answers on {paths.socket} (not started by fusionbench)\n")
    elif version is None and not _running(state):
        # as a user, "start one with ./run.sh engine start" sent them to a start that needs root
        write(f"fusionbench: no Docker engine answers on {paths.socket}; "
              f"{why_not_here() or 'start one with ./run.sh engine start'}\n")
    return 0 if version is not None else 1


@dataclass(frozen=True)
class OwnEngine:
    """An engine of the project's own that `./run.sh --container` starts for one run and stops after it."""

    paths: EnginePaths
    write: Callable[[str], object]

    def start(self) -> bool:
        return start(self.paths, self.write)

    def stop(self) -> None:
        stop(self.paths, self.write)


def own_engine_here(write: Callable[[str], object], environ: Mapping[str, str] = os.environ) -> OwnEngine | None:
    """The engine `--container` may start when none answers, or None: where DOCKER_HOST names an
    engine (the user chose one) or where this machine cannot start one (`why_not_here`)."""
    if environ.get("DOCKER_HOST") or why_not_here() is not None:
        return None
    return OwnEngine(EnginePaths.from_environment(environ), write)


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def _log_tail(path: Path, lines: int = 8) -> str:
    """The log's last lines, joined on one line (an error is one line on the terminal)."""
    try:
        return " | ".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return "(no log)"
