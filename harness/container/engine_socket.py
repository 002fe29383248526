"""Whether the Docker engine's socket lets this user in.

On a shared lab machine an engine often runs (root's dockerd, its socket `root:docker 0660`) while
a user outside the socket's group cannot connect to it. The SDK's error for that ("Permission
denied") read as "no Docker engine is reachable", and the advice that followed, to start one with
`./run.sh engine start`, needs root the user lacks: the one thing that helps (access to the socket,
or a native run) went unsaid. The launcher, `engine status` and `engine start` ask here first.
"""

from __future__ import annotations

import grp
import os
import pwd
import stat
from collections.abc import Mapping
from pathlib import Path

DEFAULT_SOCKET = Path("/var/run/docker.sock")


def socket_of(environ: Mapping[str, str]) -> Path | None:
    """The socket the launcher connects to: DOCKER_HOST's `unix://` path, else the usual one; None
    where DOCKER_HOST names no local socket (tcp://, ssh://)."""
    host = environ.get("DOCKER_HOST")
    if not host:
        return DEFAULT_SOCKET
    if host.startswith("unix://"):
        return Path(host.removeprefix("unix://"))
    return None


def refused(socket: Path | None) -> str | None:
    """Why `socket` refuses this user, or None: where there is no socket file, or this user may
    connect to it (connecting to a Unix socket needs write permission on it)."""
    if socket is None:
        return None
    try:
        mode = socket.stat()
    except OSError:
        return None
    if not stat.S_ISSOCK(mode.st_mode) or os.access(socket, os.W_OK):
        return None
    user, owner, group = _user(os.geteuid()), _user(mode.st_uid), _group(mode.st_gid)
    said = (f"a Docker engine's socket {socket} refuses {user} (it is {owner}:{group}, "
            f"mode {stat.S_IMODE(mode.st_mode):04o}; connecting needs write access)")
    if group == "root":
        access = "ask an administrator for access to it (a group of its own, such as docker)"
    else:
        access = f"ask an administrator to add you to its group (usermod -aG {group} {user}; then log in again)"
    return f"{said}; {access}, or run natively instead: ./run.sh SCENARIO.yaml"


def _user(uid: int) -> str:
    """The user's name, else its number (a uid the system has no entry for)."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _group(gid: int) -> str:
    """The group's name, else its number."""
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)
