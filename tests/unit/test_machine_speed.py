"""The reference loops that tell a drift of the machine from a drift of the model."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.measure import core_latency, machine_speed
from harness.run.preflight import noexec_mount
from tests.built_code import needs_exec
from tests.conftest import WHOLE_MACHINE

pytestmark = pytest.mark.whole_machine  # each core in turn: tests/conftest.py


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity on this system")
def test_a_read_times_each_usable_core_and_the_memory_loop_and_gives_the_affinity_back(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(machine_speed, "_sweep", None)
    monkeypatch.setattr(machine_speed, "_ping_pong", None)
    before = os.sched_getaffinity(0)
    unprepared = machine_speed.read()
    assert unprepared["memory_ms"] is None and unprepared["cross_core_ns"] is None
    machine_speed.prepare(tmp_path)
    read = machine_speed.read()
    assert os.sched_getaffinity(0) == before
    assert list(read["cores_ms"]) == [str(core) for core in sorted(before)[:machine_speed.MAX_CORES]]
    assert all(ms > 0 for ms in read["cores_ms"].values()) and read["memory_ms"] > 0
    if len(before) > 1 and (shutil.which("cc") or shutil.which("gcc")) and noexec_mount(tmp_path) is None:
        assert 1 < read["cross_core_ns"] < 1e6


def test_without_cpu_affinity_the_cores_are_not_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(os, "sched_setaffinity", raising=False)
    assert machine_speed.read()["cores_ms"] is None


def reading(cores: list[float], memory: float | None, cross_core: float | None = 50.0) -> dict[str, object]:
    return {"cores_ms": {str(i): ms for i, ms in enumerate(cores)}, "memory_ms": memory, "cross_core_ns": cross_core}


def test_the_indexes_are_means_over_both_reads_with_the_loops_own_jitter_or_none() -> None:
    recorded = machine_speed.around(reading([1.0, 2.0], 10.0, 50.0), reading([3.0, 4.0], 12.0, 330.0))
    found = machine_speed.indexes(recorded)
    assert found["cores"] == pytest.approx((2.5, 2.0 / 2.5)) and found["memory"] == pytest.approx((11.0, 2.0 / 11.0))
    assert found["cross-core"] == pytest.approx((190.0, 280.0 / 190.0))
    assert machine_speed.indexes(machine_speed.around(reading([1.0], None), reading([1.0], 2.0, None))) == {
        "cores": (1.0, 0.0), "memory": None, "cross-core": None}
    for hostile in (None, "x", {}, {"before": reading([1.0], 1.0)}, {"before": "x", "after": reading([1.0], 1.0)},
                    machine_speed.around(reading([True], 1.0), reading([1.0], 1.0)),  # type: ignore[list-item]
                    machine_speed.around(reading([-1.0], 1.0), reading([1.0], 1.0)),
                    machine_speed.around({"cores_ms": {}, "memory_ms": 1.0}, reading([1.0], 1.0))):
        assert machine_speed.indexes(hostile)["cores"] is None, hostile


def test_pooled_regions_keep_the_mean_and_the_largest_jitter() -> None:
    pooled = machine_speed.pooled([{"cores": (1.0, 0.01), "memory": (10.0, 0.1), "cross-core": None},
                                   {"cores": (2.0, 0.03), "memory": (12.0, 0.0), "cross-core": (50.0, 0.0)}])
    assert pooled == {"cores": (1.5, 0.03), "memory": (11.0, 0.1), "cross-core": None}
    assert machine_speed.pooled([]) == {"cores": None, "memory": None, "cross-core": None}


def test_a_loop_explains_a_change_only_in_the_same_direction_and_at_least_half_its_size() -> None:
    assert machine_speed.explains(0.10, 0.19) and machine_speed.explains(-0.08, -0.12)
    assert not machine_speed.explains(0.03, 0.42) and not machine_speed.explains(-0.10, 0.10)
    assert not machine_speed.explains(0.10, 0.0)


def test_the_comparison_names_each_loop_and_counts_only_those_beyond_their_jitter() -> None:
    fast = {"cores": (1.0, 0.02), "memory": (10.0, 0.02), "cross-core": None}
    slow = {"cores": (1.01, 0.02), "memory": (13.0, 0.02), "cross-core": (60.0, 0.0)}
    assert machine_speed.compare(slow, fast, 0.5, "here") == (
        "here, the reference loops were 1.0% slower (cores) and 30% slower (memory): the machine's speed moved (memory)")
    assert machine_speed.compare(slow, fast, 0.9, "here").endswith(
        "none beyond its own jitter and half the figures' change: the machine's own speed does not explain it")
    jittery = {**slow, "memory": (13.0, 0.4)}  # its two reads 40% apart: a 30% move is within that
    assert machine_speed.compare(jittery, fast, 0.5, "here").endswith("does not explain it")
    stepped = machine_speed.compare({**slow, "memory": (10.0, 0.0), "cross-core": (330.0, 0.01)},
                                    {**fast, "cross-core": (52.0, 0.02)}, 0.55, "here")
    assert stepped.endswith("1.0% slower (cores), 0.0% slower (memory) and 535% slower (cross-core): the machine's "
                            "speed moved (cross-core)")
    assert machine_speed.compare(dict.fromkeys(machine_speed.LOOPS), fast, 0.5, "here") == ""


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity") or len(WHOLE_MACHINE) < 2
                    or not (shutil.which("cc") or shutil.which("gcc")), reason="needs two cores and a C compiler")
def test_the_cross_core_round_trip_is_built_once_and_measured(tmp_path: Path) -> None:
    needs_exec(tmp_path)
    lib = core_latency.load(tmp_path)
    built = list(tmp_path.glob("core-latency-*.so"))
    assert lib is not None and len(built) == 1 and not list(tmp_path.glob(".core-latency-*"))
    before = os.sched_getaffinity(0)
    ns = core_latency.measure(lib)
    assert ns is not None and 1 < ns < 1e6 and os.sched_getaffinity(0) == before
    assert core_latency.load(tmp_path) is not None and list(tmp_path.glob("core-latency-*.so")) == built


def test_without_a_compiler_or_when_it_fails_there_is_no_cross_core_figure(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert core_latency.measure(None) is None
    monkeypatch.setattr(core_latency.shutil, "which", lambda name: None)
    assert core_latency.load(tmp_path) is None
    monkeypatch.undo()
    if not (shutil.which("cc") or shutil.which("gcc")):
        pytest.skip("no C compiler here: the failed build cannot be shown")
    monkeypatch.setattr(core_latency, "SOURCE", "this is not C")
    assert core_latency.load(tmp_path) is None and not list(tmp_path.iterdir())


def test_a_compiler_that_hangs_or_a_library_that_will_not_load_gives_no_figure(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(core_latency.shutil, "which", lambda name: "/usr/bin/cc")

    def hangs(*args: object, **kwargs: object) -> None:
        raise subprocess.TimeoutExpired("cc", 120)
    monkeypatch.setattr(core_latency.subprocess, "run", hangs)
    assert core_latency.load(tmp_path) is None
    monkeypatch.undo()
    if not (shutil.which("cc") or shutil.which("gcc")):
        pytest.skip("no C compiler here: the library cannot be built to be refused")
    needs_exec(tmp_path)
    assert core_latency.load(tmp_path) is not None

    def noexec(path: str) -> None:
        raise OSError(f"{path}: failed to map segment from shared object")
    monkeypatch.setattr(core_latency.ctypes, "CDLL", noexec)
    assert core_latency.load(tmp_path) is None
    readonly = tmp_path / "a-file"
    readonly.write_text("not a directory")
    monkeypatch.undo()
    assert core_latency.load(readonly / "cache") is None  # mkdir under a file: OSError, not a crash


def test_the_round_trip_is_timed_between_two_physical_cores_not_two_threads_of_one() -> None:
    """On a machine that numbers a core's SMT siblings next to each other (0 and 1 one core), the
    first two usable CPUs shared their caches: the figure was an L1 hand-off, not the one a
    thread pool pays between cores."""
    def adjacent(cpu: int) -> set[int]:
        return {cpu - cpu % 2, cpu - cpu % 2 + 1}

    def apart(cpu: int) -> set[int]:
        return {cpu % 4, cpu % 4 + 4}

    assert core_latency.pair([0, 1, 2, 3], adjacent) == (0, 2)
    assert core_latency.pair([0, 1, 2, 3, 4, 5, 6, 7], apart) == (0, 1)
    assert core_latency.pair([1, 4, 5], apart) == (1, 4) and core_latency.pair([0, 4], apart) == (0, 4)  # one core: its siblings
    assert core_latency.pair([3], apart) is None and core_latency.pair([], apart) is None
