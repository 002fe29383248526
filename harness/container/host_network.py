"""The host's network as a Docker daemon could change it (IP forwarding, network links, iptables
rules), read before an engine of the project's own starts and after it stops, so `engine stop` can
say what changed while it ran. The project's daemon runs with no bridge, no iptables rules and no
IP forwarding (harness/container/engine.py), so it changes none of these: a difference is another tool's
doing, named and left as it is, never undone."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

IP_FORWARD = Path("/proc/sys/net/ipv4/ip_forward")

#: Runs a command (with this text on its standard input, if any) and returns what it did.
Runner = Callable[[Sequence[str], "str | None"], "subprocess.CompletedProcess[str]"]


def run_command(command: Sequence[str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(command), input=stdin, capture_output=True, text=True, check=False, timeout=600)


@dataclass(frozen=True)
class HostNetwork:
    """What a Docker daemon may change on the host's network, as read at one moment."""

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
        gone = sorted(set(before.links) - set(self.links))
        if gone:
            found.append(f"network links removed: {', '.join(gone)}")
        if before.iptables is not None and self.iptables != before.iptables:
            found.append("iptables rules changed")
        return found


def _iptables_save(run: Runner) -> str | None:
    if shutil.which("iptables-save") is None:
        return None
    done = run(["iptables-save"], None)
    if done.returncode != 0:
        return None
    # Comments carry the time it was saved and counters change by themselves: neither is a change.
    return "\n".join(line.split(" [")[0] if line.startswith(":") else line
                     for line in done.stdout.splitlines() if not line.startswith("#"))


def read_host_network(run: Runner = run_command, ip_forward: Path = IP_FORWARD) -> HostNetwork:
    try:
        forward: str | None = ip_forward.read_text().strip()
    except OSError:
        forward = None
    links: tuple[str, ...] = ()
    done = run(["ip", "-o", "link", "show"], None) if shutil.which("ip") else None
    if done is not None and done.returncode == 0:
        links = tuple(sorted(line.split(":")[1].strip().split("@")[0] for line in done.stdout.splitlines() if ":" in line))
    return HostNetwork(ip_forward=forward, links=links, iptables=_iptables_save(run))
