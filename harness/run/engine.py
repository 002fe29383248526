"""`fusionbench engine start|stop|status`: a Docker engine of the project's own, for a machine
where none runs (`./run.sh engine start`, and `./run.sh --container ...` when no engine answers).

Where it can (Linux, root, a Debian-like system with apt), `start` installs Debian's docker.io if
`dockerd` is missing (with service starts held back by policy-rc.d, so the package starts nothing
itself) and starts `dockerd` with a data root of its own (`FUSIONBENCH_ENGINE_ROOT`, default
/var/lib/fusionbench-engine: images stay there between runs) on the usual socket, so the `docker`
command and the launcher find it. The daemon is started so that it changes nothing on the host's
network: no docker0 bridge, no iptables rules, IP forwarding left alone (`--bridge=none
--iptables=false --ip-forward=false`); the project's containers and builds need no network.
`stop` ends it (SIGTERM, then SIGKILL after `STOP_TIMEOUT_S`), then compares the host with what
`start` recorded (IP forwarding, the FORWARD chain's policy, the network links, the iptables rules)
and puts back whatever differs, so the host is left as it was. Elsewhere `start` says what to
install and changes nothing.

The state of an engine this started (its PID, paths, the host as it was) is a JSON file in its run
directory; `stop` acts only on that engine, never on one it did not start.
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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import HarnessError

ROOT_VARIABLE = "FUSIONBENCH_ENGINE_ROOT"
DEFAULT_ROOT = Path("/var/lib/fusionbench-engine")
DEFAULT_RUN_DIR = Path("/run/fusionbench-engine")
DEFAULT_SOCKET = Path("/var/run/docker.sock")
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
POLICY_RC_D = Path("/usr/sbin/policy-rc.d")
IP_FORWARD = Path("/proc/sys/net/ipv4/ip_forward")
INSTALL_HINT = ("install a Docker engine (on Debian or Ubuntu as root: apt-get install docker.io; elsewhere: "
                "https://docs.docker.com/engine/install/) and start it, or run natively: ./run.sh SCENARIO.yaml")


class EngineError(HarnessError):
    """The engine could not be started or stopped here; what was changed has been put back."""

    exit_code = 2


@dataclass(frozen=True)
class EnginePaths:
    """Where an engine of the project's own keeps its images (`root`), its runtime files (`run_dir`:
    exec root, PID file, state) and the socket it answers on."""

    root: Path = DEFAULT_ROOT
    run_dir: Path = DEFAULT_RUN_DIR
    socket: Path = DEFAULT_SOCKET

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] = os.environ) -> EnginePaths:
        root = environ.get(ROOT_VARIABLE)
        return cls(root=Path(root)) if root else cls()

    @property
    def state_file(self) -> Path:
        return self.run_dir / "engine.json"

    @property
    def log_file(self) -> Path:
        return self.root / "dockerd.log"

    def dockerd_command(self, dockerd: str) -> list[str]:
        return [dockerd, "--data-root", str(self.root / "data"), "--exec-root", str(self.run_dir / "exec"),
                "--pidfile", str(self.run_dir / "dockerd.pid"), "--host", f"unix://{self.socket}",
                "--bridge=none", "--iptables=false", "--ip-forward=false", "--ip-masq=false", "--userland-proxy=false"]


@dataclass(frozen=True)
class HostNetwork:
    """What a Docker daemon may change on the host's network, as read before and after it ran."""

    ip_forward: str | None
    links: tuple[str, ...]
    iptables: str | None  # `iptables-save`, counters left out; None where iptables is not installed

    def differences(self, before: HostNetwork) -> list[str]:
        """What differs from `before`, in words."""
        found = []
        if self.ip_forward != before.ip_forward:
            found.append(f"IP forwarding {before.ip_forward} -> {self.ip_forward}")
        added = sorted(set(self.links) - set(before.links))
        if added:
            found.append(f"network links added: {', '.join(added)}")
        if before.iptables is not None and self.iptables != before.iptables:
            found.append("iptables rules changed")
        return found


@dataclass
class EngineState:
    """The JSON state file of an engine this module started."""

    pid: int
    socket: str
    root: str
    started: float
    host: dict[str, Any] = field(default_factory=dict)

    def host_network(self) -> HostNetwork:
        return HostNetwork(ip_forward=self.host.get("ip_forward"), links=tuple(self.host.get("links", ())),
                           iptables=self.host.get("iptables"))


#: Runs a command (with this text on its standard input, if any) and returns what it did.
Runner = Callable[[Sequence[str], "str | None"], "subprocess.CompletedProcess[str]"]


def _run(command: Sequence[str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(command), input=stdin, capture_output=True, text=True, check=False, timeout=600)


def _iptables_save(run: Runner) -> str | None:
    if shutil.which("iptables-save") is None:
        return None
    done = run(["iptables-save"], None)
    if done.returncode != 0:
        return None
    # Comments carry the time it was saved and counters change by themselves: neither is a change.
    return "\n".join(line.split(" [")[0] if line.startswith(":") else line
                     for line in done.stdout.splitlines() if not line.startswith("#"))


def read_host_network(run: Runner = _run, ip_forward: Path = IP_FORWARD) -> HostNetwork:
    try:
        forward: str | None = ip_forward.read_text().strip()
    except OSError:
        forward = None
    links: tuple[str, ...] = ()
    done = run(["ip", "-o", "link", "show"], None) if shutil.which("ip") else None
    if done is not None and done.returncode == 0:
        links = tuple(sorted(line.split(":")[1].strip().split("@")[0] for line in done.stdout.splitlines() if ":" in line))
    return HostNetwork(ip_forward=forward, links=links, iptables=_iptables_save(run))


def restore_host_network(before: HostNetwork, now: HostNetwork, run: Runner = _run,
                         ip_forward: Path = IP_FORWARD) -> list[str]:
    """Put back what differs between `now` and `before`; return what was put back, in words."""
    restored = []
    if before.ip_forward is not None and now.ip_forward != before.ip_forward:
        ip_forward.write_text(before.ip_forward + "\n")
        restored.append(f"IP forwarding set back to {before.ip_forward}")
    for link in sorted(set(now.links) - set(before.links)):
        if run(["ip", "link", "delete", link], None).returncode == 0:
            restored.append(f"network link {link} removed")
    if before.iptables is not None and now.iptables != before.iptables:
        if run(["iptables-restore"], before.iptables + "\n").returncode == 0:
            restored.append("iptables rules restored")
    return restored


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


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def why_not_here(euid: int | None = None, system: str | None = None) -> str | None:
    """Why this machine cannot start an engine of the project's own, or None."""
    system = system or platform.system()
    if system != "Linux":
        return f"starting an engine is for Linux machines (this is {system}); {INSTALL_HINT}"
    if (os.geteuid() if euid is None else euid) != 0:
        return f"starting an engine needs root (sudo ./run.sh engine start); or {INSTALL_HINT}"
    return None


def _install_docker(write: Callable[[str], object], run: Runner) -> None:
    """Debian's docker.io, its service held back from starting by policy-rc.d while it installs."""
    if shutil.which("apt-get") is None or not Path("/etc/debian_version").exists():
        raise EngineError(f"dockerd is not installed and this is not a Debian-like system; {INSTALL_HINT}")
    write("fusionbench: installing Debian's docker.io (apt-get; about 30 s) ...\n")
    guard = not POLICY_RC_D.exists()
    if guard:
        POLICY_RC_D.write_text("#!/bin/sh\n# fusionbench engine start: no service starts while docker.io installs\nexit 101\n")
        POLICY_RC_D.chmod(0o755)
    try:
        for command in (["apt-get", "update", "-qq"],
                        ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "docker.io"]):
            done = run(command, None)
            if done.returncode != 0:
                tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
                raise EngineError(f"{' '.join(command)} failed (exit {done.returncode}): {' | '.join(tail)}; {INSTALL_HINT}")
    finally:
        if guard:
            POLICY_RC_D.unlink(missing_ok=True)


def start(paths: EnginePaths, write: Callable[[str], object] = sys.stdout.write, run: Runner = _run,
          timeout_s: float = START_TIMEOUT_S) -> bool:
    """Start an engine of the project's own unless one answers; return whether this started one."""
    for socket in (paths.socket, None):
        version = answers(socket)
        if version is not None:
            where = paths.socket if socket else os.environ.get("DOCKER_HOST", DEFAULT_SOCKET)
            write(f"fusionbench: a Docker engine ({version}) already answers on {where}; nothing started\n")
            return False
    refusal = why_not_here()
    if refusal:
        raise EngineError(refusal)
    if shutil.which("dockerd") is None:
        _install_docker(write, run)
    dockerd = shutil.which("dockerd")
    if dockerd is None:
        raise EngineError(f"dockerd is still not on PATH after installing docker.io; {INSTALL_HINT}")
    host = read_host_network(run)
    for folder in (paths.root, paths.run_dir):
        folder.mkdir(parents=True, exist_ok=True)
    with paths.log_file.open("ab") as log:
        process = subprocess.Popen(paths.dockerd_command(dockerd), stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                   start_new_session=True)
    state = EngineState(pid=process.pid, socket=str(paths.socket), root=str(paths.root), started=time.time(),
                        host=asdict(host))
    paths.state_file.write_text(json.dumps(asdict(state), indent=1))
    deadline = time.monotonic() + timeout_s
    while (version := answers(paths.socket, timeout_s=2)) is None:
        if process.poll() is not None or time.monotonic() > deadline:
            tail = _log_tail(paths.log_file)
            stop(paths, write=lambda _: None, run=run)
            said = "exited" if process.returncode is not None else f"did not answer within {timeout_s:g} s"
            raise EngineError(f"dockerd {said}; the host is as it was. Its log ({paths.log_file}) ends:\n{tail}")
        time.sleep(0.25)
    write(f"fusionbench: Docker engine {version} started (dockerd PID {process.pid}, images in {paths.root / 'data'}, "
          f"socket {paths.socket}); stop it with ./run.sh engine stop\n")
    return True


def stop(paths: EnginePaths, write: Callable[[str], object] = sys.stdout.write, run: Runner = _run,
         timeout_s: float = STOP_TIMEOUT_S, purge: bool = False) -> bool:
    """Stop the engine `start` started and put the host back as it was; return whether one was stopped."""
    state = read_state(paths)
    if state is None:
        write(f"fusionbench: no engine started by fusionbench is running ({paths.state_file} is absent); nothing to stop\n")
        return False
    if alive(state.pid):
        os.kill(state.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while alive(state.pid) and time.monotonic() < deadline:
            _reap(state.pid)
            time.sleep(0.2)
        if alive(state.pid):
            os.kill(state.pid, signal.SIGKILL)
            write(f"fusionbench: dockerd did not end within {timeout_s:g} s of SIGTERM; killed\n")
        _reap(state.pid)
    left = _processes_under(paths.run_dir / "exec")
    for pid in left:  # a containerd or shim the daemon left behind
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    restored = restore_host_network(state.host_network(), read_host_network(run), run)
    for path in (paths.socket, paths.state_file, paths.run_dir / "dockerd.pid"):
        path.unlink(missing_ok=True)
    shutil.rmtree(paths.run_dir / "exec", ignore_errors=True)
    try:
        paths.run_dir.rmdir()  # only when empty
    except OSError:
        pass
    if purge:
        shutil.rmtree(paths.root, ignore_errors=True)
    kept = "removed" if purge else f"kept in {paths.root / 'data'} (--purge removes them)"
    write(f"fusionbench: Docker engine stopped (PID {state.pid}); {'; '.join(restored) or 'the host network is as it was'}; "
          f"images {kept}\n")
    return True


def status(paths: EnginePaths, write: Callable[[str], object] = sys.stdout.write) -> int:
    """Say which engine answers, if any; 0 when one does."""
    state = read_state(paths)
    version = answers(paths.socket)
    if state is not None and alive(state.pid):
        write(f"fusionbench: engine started by fusionbench: dockerd PID {state.pid}, "
              f"{'answering, version ' + version if version else 'not answering'}, images in {state.root}/data\n")
    elif version is not None:
        write(f"fusionbench: a Docker engine ({version}) answers on {paths.socket} (not started by fusionbench)\n")
    else:
        write(f"fusionbench: no Docker engine answers on {paths.socket}; start one with ./run.sh engine start\n")
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


def _processes_under(exec_root: Path) -> list[int]:
    """PIDs of processes whose command line names `exec_root` (a daemon's containerd and shims)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(exec_root) in command:
            found.append(int(entry.name))
    return found


def _log_tail(path: Path, lines: int = 8) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return "(no log)"
