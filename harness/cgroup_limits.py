"""What this process's control groups let it use: the CPUs' worth of its CPU quota and its memory
limit, the tightest of its own group's and every group's above it (a limit on a parent bounds all
below it), read from cgroup v2 or, where the controller is still mounted the old way, cgroup v1.

`/proc/self/cgroup` names the process's group in each hierarchy. In a container with its own
cgroup namespace that path is `/` and the hierarchy's mount is the container's group; on a host (a
systemd slice, a batch scheduler's job) it is a path under the mount, whose ancestors may hold the
limit. A path that does not exist under the mount (a container without its own namespace, whose
mount is already its group) leaves the mount's own files to read.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
PROC_CGROUP = Path("/proc/self/cgroup")
#: A v1 memory limit at or above this is "none": the kernel writes LONG_MAX rounded to a page.
UNLIMITED_V1_BYTES = 1 << 62


def _own_paths(proc_cgroup: Path) -> dict[str, str]:
    """Each hierarchy's controllers (v2's as "") to the process's group in it."""
    found: dict[str, str] = {}
    try:
        lines = proc_cgroup.read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) == 3:
            found[parts[1]] = parts[2]
    return found


def _groups(mount: Path, path: str) -> list[Path]:
    """The mount's folders from the process's group up to the mount itself, those that exist."""
    parts = [part for part in path.strip("/").split("/") if part and part not in (".", "..")]
    chain = [mount.joinpath(*parts[:depth]) for depth in range(len(parts), -1, -1)]
    return [folder for folder in chain if folder.is_dir()]


def _v1_mount(root: Path, controllers: str, wanted: str) -> Path | None:
    """Where a v1 hierarchy holding the `wanted` controller is mounted: under its joined name
    (cpu,cpuacct) or the controller's own (a link to it on most distributions)."""
    if wanted not in controllers.split(","):
        return None
    for name in (controllers, wanted):
        if (root / name).is_dir():
            return root / name
    return None


def _v2_mount(root: Path) -> Path | None:
    """The unified hierarchy: the root itself, or `unified` under it on a hybrid host."""
    for mount in (root, root / "unified"):
        if (mount / "cgroup.controllers").is_file():
            return mount
    return None


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _v2_quota(text: str | None) -> float | None:
    try:
        quota, period = (text or "").split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except ValueError:
        return None


def _v1_quota(folder: Path) -> float | None:
    try:
        quota, period = int(_read(folder / "cpu.cfs_quota_us") or ""), int(_read(folder / "cpu.cfs_period_us") or "")
    except ValueError:
        return None
    return quota / period if quota > 0 and period > 0 else None


def _v2_memory(text: str | None) -> int | None:
    return int(text) if text and text.isdigit() else None


def _v1_memory(text: str | None) -> int | None:
    value = int(text) if text and text.isdigit() else None
    return value if value is not None and value < UNLIMITED_V1_BYTES else None


def _tightest(root: Path, proc_cgroup: Path, v2: Callable[[Path], float | None], controller: str,
              v1: Callable[[Path], float | None]) -> float | None:
    """The least of the limits `v2` reads from the unified hierarchy's groups and `v1` from those
    of the v1 hierarchy holding `controller`, from the process's group up to the mount."""
    paths = _own_paths(proc_cgroup)
    found: list[float | None] = []
    unified = _v2_mount(root)
    if unified is not None:
        found += [v2(folder) for folder in _groups(unified, paths.get("", "/"))]
    for controllers, path in paths.items():
        mount = _v1_mount(root, controllers, controller)
        if mount is not None:
            found += [v1(folder) for folder in _groups(mount, path)]
    given = [value for value in found if value is not None]
    return min(given) if given else None


def cpu_quota(root: Path = ROOT, proc_cgroup: Path = PROC_CGROUP) -> float | None:
    """The CPUs' worth this process may use (`docker --cpus`, a Kubernetes limit, a systemd
    CPUQuota=), or None without a quota: the affinity mask still lists every core of the host."""
    return _tightest(root, proc_cgroup, lambda folder: _v2_quota(_read(folder / "cpu.max")), "cpu", _v1_quota)


def memory_limit_bytes(root: Path = ROOT, proc_cgroup: Path = PROC_CGROUP) -> int | None:
    """The bytes of memory this process's group and those above it may hold (`docker --memory`, a
    Kubernetes limit, a systemd MemoryMax=), or None without a limit."""
    tightest = _tightest(root, proc_cgroup, lambda folder: _v2_memory(_read(folder / "memory.max")), "memory",
                         lambda folder: _v1_memory(_read(folder / "memory.limit_in_bytes")))
    return int(tightest) if tightest is not None else None
