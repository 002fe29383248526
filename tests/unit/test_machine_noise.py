"""The machine's own noise floor, measured by the probe, and the run's warning about it."""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import replace
from pathlib import Path

import pytest

from harness.run import machine_noise
from tests.built_code import needs_exec
from tests.conftest import WHOLE_MACHINE

pytestmark = pytest.mark.whole_machine  # each core in turn: tests/conftest.py

needs_affinity = pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity on this system")


def test_a_pass_shorter_than_a_chunk_still_times_enough_chunks_for_a_cv() -> None:
    """In the whole suite (4 x 0.1 s passes, the 2 cores shared by four workers) the sum over 64 MiB
    was timed in one chunk, and its CV recorded as 0: the steadiest machine there is."""
    chunks = machine_noise._chunks(lambda: time.sleep(0.002), 0.0)
    assert len(chunks) >= machine_noise.MIN_CHUNKS == 3 and machine_noise._cv(chunks) > 0


@pytest.mark.slow
def test_the_floor_is_two_cvs_and_a_warning_only_when_high(monkeypatch: pytest.MonkeyPatch) -> None:
    result = machine_noise.measure(0.1)
    assert result.compute_cv > 0 and result.memory_cv > 0 and min(result.chunks) >= 2  # timed chunks never agree to the ns
    spread, cross = result.pinned_spread, result.cross_core_ns
    stepping = (spread is not None and spread > machine_noise.STEP_FLOOR) or (
        cross is not None and cross[2] / cross[0] > machine_noise.CROSS_CORE_FLOOR
    )
    assert (result.warning != "") == (max(result.compute_cv, result.memory_cv) > machine_noise.NOISY_FLOOR or stepping)
    # as bundle.json keeps it (harness/run/probe.py), the warning last
    assert list(result.recorded()) == [
        "compute_cv",
        "memory_cv",
        "chunks",
        "core_chunk_ms",
        "pinned_spread",
        "cross_core_ns",
        "method",
        "warning",
    ]
    assert result.recorded()["warning"] == result.warning
    monkeypatch.setattr(machine_noise, "NOISY_FLOOR", -1.0)
    assert "no figure measured here can be steadier" in machine_noise.measure(0.1).warning


@needs_affinity
def test_the_pinned_pass_runs_on_each_core_in_turn_and_gives_the_affinity_back() -> None:
    before = os.sched_getaffinity(0)
    cores = sorted(before)
    seen: list[frozenset[int]] = []
    samples = machine_noise._pinned_chunks(lambda: seen.append(frozenset(os.sched_getaffinity(0))), cores, 0.05)
    assert os.sched_getaffinity(0) == before
    assert sorted(samples) == cores
    assert min(len(chunks) for chunks in samples.values()) >= machine_noise.MIN_CHUNKS_PER_CORE
    assert set(seen) == {frozenset({core}) for core in cores}  # every call pinned to one core, each core used


@needs_affinity
def test_each_usable_core_gets_a_median() -> None:
    result = machine_noise._cores_measure(lambda: sum(range(1000)), 0.05)
    usable = sorted(os.sched_getaffinity(0))[: machine_noise.MAX_CORES]
    assert result.core_chunk_ms is not None and result.pinned_spread is not None
    assert list(result.core_chunk_ms) == [str(core) for core in usable]
    assert all(ms > 0 for ms in result.core_chunk_ms.values()) and result.pinned_spread >= 1


def _quiet() -> machine_noise.NoiseFloor:
    return machine_noise.NoiseFloor(
        compute_cv=0.01,
        memory_cv=0.01,
        chunks=[75, 75],
        core_chunk_ms={"0": 20.0, "1": 20.5},
        pinned_spread=1.05,
        cross_core_ns=None,
        method="test",
    )


def test_cores_stepping_between_speeds_are_named_in_the_warning() -> None:
    quiet = _quiet()
    assert quiet.warning == "" and quiet.recorded()["warning"] == ""
    stepping = replace(quiet, pinned_spread=1.7, core_chunk_ms={"0": 20.0, "1": 34.0})
    warning = stepping.warning
    assert "spans 1.70x" in warning and "core 1 34.0 ms" in warning and "a fixed compute loop" not in warning
    assert warning.startswith("this machine's cores are unequal") and "differ up to 1.70x" in warning
    steps = replace(quiet, pinned_spread=1.7).warning  # alike medians: each core's speed steps from moment to moment
    assert steps.startswith("this machine's own speed varies") and "whichever core is slow at the moment" in steps
    # a hybrid laptop's performance and efficiency cores, and nothing else: no claim that its speed varies
    hybrid = replace(quiet, pinned_spread=1.9, core_chunk_ms={"0": 10.0, "1": 10.1, "2": 19.0, "3": 19.2})
    assert hybrid.warning.startswith("this machine's cores are unequal") and "varies" not in hybrid.warning
    noisy_hybrid = replace(hybrid, compute_cv=0.2).warning
    assert noisy_hybrid.startswith("this machine's own speed varies") and "cores of unequal speed" in noisy_hybrid
    assert stepping.recorded()["warning"] == warning
    assert replace(quiet, pinned_spread=None, core_chunk_ms=None).warning == ""
    assert replace(quiet, cross_core_ns=[52.0, 60.0, 70.0]).warning == ""
    placed = replace(quiet, cross_core_ns=[52.0, 60.0, 330.0]).warning
    assert "the round trip between two cores stepped from 52 to 330 ns" in placed


@pytest.mark.skipif(
    not hasattr(os, "sched_getaffinity") or len(WHOLE_MACHINE) < 2 or not (shutil.which("cc") or shutil.which("gcc")),
    reason="needs two cores and a C compiler",
)
def test_the_cross_core_round_trip_is_sampled_into_three_percentiles(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    needs_exec(tmp_path)
    low, middle, high = machine_noise._cross_core(0.05, None) or (0.0, 0.0, 0.0)
    assert 0 < low <= middle <= high < 1e6
    # With the run's artifact cache, the loop is compiled there once and found there by the next run.
    assert machine_noise._cross_core(0.05, tmp_path) is not None
    assert len(list(tmp_path.glob("core-latency-*.so"))) == 1
    compiles: list[object] = []
    monkeypatch.setattr(machine_noise.core_latency.subprocess, "run", lambda *args, **kwargs: compiles.append(args))
    assert machine_noise._cross_core(0.05, tmp_path) is not None and compiles == []
    monkeypatch.setattr(machine_noise.core_latency.shutil, "which", lambda name: None)
    assert machine_noise._cross_core(0.05, None) is None


def test_the_probe_is_asked_to_keep_its_compiled_loop_in_the_runs_cache(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess

    from harness.measure.machine_speed import CACHE_FOLDER
    from harness.run import probe

    asked: list[probe.ProbeRequest] = []

    def answer(argv: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        asked.append(probe.ProbeRequest.model_validate_json(argv[-1]))
        return subprocess.CompletedProcess(argv, 0, stdout='{"device": "cpu"}\n', stderr="")

    with monkeypatch.context() as patched:  # the module is subprocess itself: the probe below runs git
        patched.setattr(probe.subprocess, "run", answer)
        probe.run_probe("cpu", ["null"], cache_dir=tmp_path)
        probe.run_probe("cpu", ["null"])  # --no-cache
    assert [request.cache_dir for request in asked] == [str(tmp_path), None]
    seen: list[Path | None] = []
    monkeypatch.setattr(machine_noise, "measure", lambda seconds, cache_dir: seen.append(cache_dir) or _quiet())
    monkeypatch.setattr(probe, "_peaks", lambda device, copy_bytes: {})
    probe.probe("cpu", [], True, 0.05, tmp_path)
    assert seen == [tmp_path / CACHE_FOLDER]  # where the cells' workers keep theirs


def test_without_cpu_affinity_the_pinned_pass_is_not_measured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(os, "sched_setaffinity", raising=False)
    assert machine_noise._cores_measure(lambda: None, 0.05) == machine_noise.PinnedCores(core_chunk_ms=None, pinned_spread=None)


def test_the_probe_runs_each_pass_for_the_seconds_the_environment_gives_and_refuses_nonsense() -> None:
    from harness.errors import ConfigError
    from harness.run.probe import NOISE_PROBE_VARIABLE, noise_probe_s

    assert noise_probe_s({}) == machine_noise.DURATION_S
    assert noise_probe_s({NOISE_PROBE_VARIABLE: "0.25"}) == 0.25
    for bad in ("", "fast", "0", "-1", "nan", "inf", "61"):
        with pytest.raises(ConfigError, match=NOISE_PROBE_VARIABLE):
            noise_probe_s({NOISE_PROBE_VARIABLE: bad})
    assert "for 0.05 s" in machine_noise.measure(0.05).method


def test_the_peak_probe_copies_the_mib_the_environment_gives_and_refuses_nonsense(monkeypatch: pytest.MonkeyPatch) -> None:
    """FUSIONBENCH_PEAK_COPY_MIB (the tests' 32, tests/conftest.py) reaches the probe's request, and
    what is not a whole number of MiB from 1 to 4096 is refused, naming the variable."""
    import subprocess

    from harness.errors import ConfigError
    from harness.run import probe

    assert probe.peak_copy_bytes({}) is None
    assert probe.peak_copy_bytes({probe.PEAK_COPY_VARIABLE: "32"}) == 32 << 20
    for bad in ("", "big", "0", "-1", "1.5", "4097", "\u0663"):
        with pytest.raises(ConfigError, match=probe.PEAK_COPY_VARIABLE):
            probe.peak_copy_bytes({probe.PEAK_COPY_VARIABLE: bad})
    asked: list[probe.ProbeRequest] = []

    def answer(argv: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        asked.append(probe.ProbeRequest.model_validate_json(argv[-1]))
        return subprocess.CompletedProcess(argv, 0, stdout='{"device": "cpu"}\n', stderr="")

    monkeypatch.setenv(probe.PEAK_COPY_VARIABLE, "8")
    monkeypatch.setattr(probe.subprocess, "run", answer)
    probe.run_probe("cpu", ["null"])
    probe.run_probe("cpu", ["null"], with_system=False)  # no peaks measured: nothing to copy
    assert [request.peak_copy_bytes for request in asked] == [8 << 20, None]


def test_jobs_slots_on_cores_of_unequal_speed_are_said() -> None:
    """`--jobs 2` on a hybrid CPU: one slot on performance cores, one on efficiency cores; fusion on
    drew one and off the other, and the report set them side by side as a fusion speedup."""
    hybrid = {"0": 10.0, "1": 10.2, "2": 19.0, "3": 19.4}
    said = machine_noise.unequal_slots([(0, 1), (2, 3)], hybrid)
    assert said.startswith("the --jobs slots' cores are unequal: the probe's pinned loop took slot 0 10.1 ms, "
                           "slot 1 19.2 ms a chunk") and "1.90x apart" in said, said
    assert machine_noise.unequal_slots([(0, 2), (1, 3)], hybrid) == ""  # each slot one of each kind: alike
    assert machine_noise.unequal_slots([(0, 1)], hybrid) == ""  # one slot
    assert machine_noise.unequal_slots([(0, 1), (2, 3)], None) == ""  # no pinned pass recorded
    assert machine_noise.unequal_slots([(0, 1), (20, 21)], hybrid) == ""  # a slot past the cores sampled
    assert machine_noise.unequal_slots([(0, 1), (2, 3)], {"0": 10.0, "1": "x", "2": -1, "3": 10.5}) == ""
