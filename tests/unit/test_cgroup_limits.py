"""A process's CPU quota and memory limit, read from the cgroup hierarchies a machine mounts: v2 in
a container with its own namespace, v2 nested under a host's slices, v1 (as this project's own
2-core VM mounts it), a hybrid host, and a container whose mount is its group already."""

from __future__ import annotations

from pathlib import Path

from harness import cgroup_limits


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_a_containers_own_v2_group_gives_its_quota_and_memory_limit(tmp_path: Path) -> None:
    """`docker --cpus 4 --memory 8g` with a cgroup namespace: the process's group is the mount."""
    _write(tmp_path / "cgroup.controllers", "cpu memory\n")
    _write(tmp_path / "cpu.max", "400000 100000\n")
    _write(tmp_path / "memory.max", "8589934592\n")
    _write(tmp_path / "self", "0::/\n")
    assert cgroup_limits.cpu_quota(tmp_path, tmp_path / "self") == 4.0
    assert cgroup_limits.memory_limit_bytes(tmp_path, tmp_path / "self") == 8 << 30


def test_no_limit_reads_as_none_never_as_a_figure(tmp_path: Path) -> None:
    _write(tmp_path / "cgroup.controllers", "cpu memory\n")
    _write(tmp_path / "cpu.max", "max 100000\n")
    _write(tmp_path / "memory.max", "max\n")
    _write(tmp_path / "self", "0::/\n")
    assert cgroup_limits.cpu_quota(tmp_path, tmp_path / "self") is None
    assert cgroup_limits.memory_limit_bytes(tmp_path, tmp_path / "self") is None
    assert cgroup_limits.cpu_quota(tmp_path / "absent", tmp_path / "absent") is None  # no cgroup file system
    assert cgroup_limits.memory_limit_bytes(tmp_path / "absent", tmp_path / "absent") is None


def test_a_limit_on_a_group_above_the_process_bounds_it(tmp_path: Path) -> None:
    """A systemd slice with CPUQuota=150% holding a session without one: the root's cpu.max alone
    (the only file read before) said nothing, and `--jobs 4` was planned on 1.5 CPUs' worth."""
    _write(tmp_path / "cgroup.controllers", "cpu memory\n")
    _write(tmp_path / "batch.slice" / "cpu.max", "150000 100000\n")
    _write(tmp_path / "batch.slice" / "memory.max", "4294967296\n")
    _write(tmp_path / "batch.slice" / "job-7.scope" / "cpu.max", "max 100000\n")
    _write(tmp_path / "batch.slice" / "job-7.scope" / "memory.max", "8589934592\n")  # looser than its parent's
    _write(tmp_path / "self", "0::/batch.slice/job-7.scope\n")
    assert cgroup_limits.cpu_quota(tmp_path, tmp_path / "self") == 1.5
    assert cgroup_limits.memory_limit_bytes(tmp_path, tmp_path / "self") == 4 << 30


def test_a_v1_hierarchy_is_read_where_the_controller_is_mounted_the_old_way(tmp_path: Path) -> None:
    """A cgroup v1 host (this project's VM is one): cpu.max does not exist there, and a quota
    set by cfs_quota_us was never seen."""
    _write(tmp_path / "cpu,cpuacct" / "cpu.cfs_quota_us", "-1\n")
    _write(tmp_path / "cpu,cpuacct" / "cpu.cfs_period_us", "100000\n")
    _write(tmp_path / "cpu,cpuacct" / "jobs" / "cpu.cfs_quota_us", "250000\n")
    _write(tmp_path / "cpu,cpuacct" / "jobs" / "cpu.cfs_period_us", "100000\n")
    _write(tmp_path / "memory" / "memory.limit_in_bytes", "9223372036854771712\n")  # LONG_MAX to a page: none
    _write(tmp_path / "memory" / "jobs" / "memory.limit_in_bytes", "2147483648\n")
    _write(tmp_path / "self", "4:memory:/jobs\n2:cpu,cpuacct:/jobs\n1:name=systemd:/\n")
    assert cgroup_limits.cpu_quota(tmp_path, tmp_path / "self") == 2.5
    assert cgroup_limits.memory_limit_bytes(tmp_path, tmp_path / "self") == 2 << 30
    _write(tmp_path / "self", "4:memory:/\n2:cpu,cpuacct:/\n")
    assert cgroup_limits.cpu_quota(tmp_path, tmp_path / "self") is None
    assert cgroup_limits.memory_limit_bytes(tmp_path, tmp_path / "self") is None


def test_a_hybrid_host_reads_both_hierarchies_and_keeps_the_tightest(tmp_path: Path) -> None:
    _write(tmp_path / "unified" / "cgroup.controllers", "")
    _write(tmp_path / "unified" / "app" / "memory.max", "1073741824\n")
    _write(tmp_path / "memory" / "app" / "memory.limit_in_bytes", "2147483648\n")
    _write(tmp_path / "self", "0::/app\n4:memory:/app\n")
    assert cgroup_limits.memory_limit_bytes(tmp_path, tmp_path / "self") == 1 << 30


def test_a_group_path_missing_under_the_mount_reads_the_mount_itself(tmp_path: Path) -> None:
    """A container without its own cgroup namespace: /proc/self/cgroup names the host's path
    (/docker/ID) and the mount is already that group."""
    _write(tmp_path / "cgroup.controllers", "cpu memory\n")
    _write(tmp_path / "cpu.max", "200000 100000\n")
    _write(tmp_path / "self", "0::/docker/0123abcd\n")
    assert cgroup_limits.cpu_quota(tmp_path, tmp_path / "self") == 2.0


def test_unreadable_or_malformed_files_say_nothing(tmp_path: Path) -> None:
    _write(tmp_path / "cgroup.controllers", "cpu memory\n")
    _write(tmp_path / "cpu.max", "lots\n")
    _write(tmp_path / "memory.max", "-5\n")
    _write(tmp_path / "self", "garbage\n0::/../../etc\n")
    assert cgroup_limits.cpu_quota(tmp_path, tmp_path / "self") is None
    assert cgroup_limits.memory_limit_bytes(tmp_path, tmp_path / "self") is None


def test_this_machine_reads_without_error() -> None:
    """The real files, whatever this machine mounts: a figure above zero, or none."""
    quota, memory = cgroup_limits.cpu_quota(), cgroup_limits.memory_limit_bytes()
    assert quota is None or quota > 0
    assert memory is None or memory > 0


def test_a_memory_limit_above_the_cgroups_is_said_as_the_run_starts() -> None:
    """`limits: {memory_limit_mib: 16384}` in a `docker --memory 8g` container: the kernel killed the
    worker at 8 GiB, the cell failed with SIGKILL, and the limit it was given never acted."""
    from harness.run.opening import memory_limit_warning

    said = memory_limit_warning(16384, 1, 8 << 30)
    assert said.startswith("limits.memory_limit_mib 16384 is more than the 8192 MiB this process's cgroup may hold")
    assert memory_limit_warning(4096, 2, 8 << 30) == ""  # two workers of 4 GiB: within it
    assert "for each of 3 jobs" in memory_limit_warning(4096, 3, 8 << 30)
    assert memory_limit_warning(None, 1, 8 << 30) == "" and memory_limit_warning(16384, 1, None) == ""
