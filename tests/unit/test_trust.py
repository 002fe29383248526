"""Whether figures can be trusted: LoadGen against device timing (and why they differ), noise,
drift, a busy or shared machine, a throttling GPU; and the readers behind them (/proc, NVML)."""

from __future__ import annotations

import os
import shutil
import types
from pathlib import Path
from typing import Any

import pytest

from harness.bundle.cell_record import Metrics
from harness.bundle.loadgen_record import LoadGenMetric, LoadGenRun, SutFigures
from harness.bundle.passes_record import TimeSplit
from harness.bundle.timing_record import DeviceTime, Repetition, TimeSummary
from harness.measure import activity, gpu_state
from harness.measure.trust import latency_agreement, overlap_explained, warnings


def loadgen(results: dict[str, Any], **sut: Any) -> LoadGenRun:
    metric = LoadGenMetric(name="offline_samples_per_s", unit="samples/s", value=1.0)
    return LoadGenRun(scenario="Offline", validity="VALID", metric=metric, log_dir="loadgen/attempt-1", results=results,
                      sut=SutFigures(**{"batches_in_flight": 1, **sut}))


def timing(median_ns: float, mean_ns: float | None = None, repetitions: list[dict[str, Any]] | None = None) -> DeviceTime:
    summary = TimeSummary(n=10, median_ns=median_ns, mean_ns=mean_ns if mean_ns is not None else median_ns)
    return DeviceTime(samples_ns=[], summary=summary,
                      repetitions=[Repetition.model_validate({"when": "r", "n": 10, **r}) for r in repetitions or []])


def measured(**records: Any) -> Metrics:
    """Metrics with a device-timing record of these summary figures and repetitions, and these others."""
    timing_record = records.pop("device_time")
    timing_record.setdefault("samples_ns", [])
    timing_record["summary"] = {"n": 10, "median_ns": 10e6, **timing_record["summary"]}
    timing_record["repetitions"] = [{"n": 10, **r} for r in timing_record.get("repetitions", [])]
    return Metrics.model_validate({"device_time": timing_record, **records})


def test_singlestream_and_offline_agree_within_five_percent_like_with_like() -> None:
    single = latency_agreement("SingleStream", 1, loadgen({"result_50.00_percentile_latency_ns": 10.3e6}),
                               timing(10e6, 11e6))
    assert single.gap == pytest.approx(0.03) and single.within and single.why == ""
    assert single.device_statistic == "median"
    # Offline's throughput is a mean over the run: compared with the timing's mean, not its median
    offline = latency_agreement("Offline", 8, loadgen({"result_samples_per_second": 800.0}), timing(9e6, 10e6))
    assert offline.loadgen_ns_per_batch == pytest.approx(10e6) and offline.within
    assert offline.device_statistic == "mean"


def test_a_model_that_ran_slower_under_loadgen_is_named_as_the_cause() -> None:
    result = latency_agreement("Offline", 8, loadgen({"result_samples_per_second": 449.0}, call_mean_ns=17.5e6,
                                                     gather_median_ns=0, respond_median_ns=4e3), timing(7.35e6))
    assert not result.within and result.gap > 1
    assert result.why.startswith("the model itself ran 138% slower inside LoadGen's run")


def test_the_null_backends_gap_is_the_harnesss_own_work_not_a_model_that_ran_slower() -> None:
    """The null backend's cells read "the model itself ran 185% slower inside LoadGen's run": it has
    no model; its gap is LoadGen's and the system under test's work, what it is there to measure."""
    run = loadgen({"result_50.00_percentile_latency_ns": 1602.0}, call_median_ns=371.0)
    blamed = latency_agreement("SingleStream", 1, run, timing(130.0))
    assert blamed.why.startswith("the model itself ran"), "a backend with a model keeps its reasons"
    null = latency_agreement("SingleStream", 1, run, timing(130.0), computes_model=False)
    assert not null.within and null.gap == blamed.gap
    assert null.why == ("the backend computes nothing: the device timing is the bare call (130 ns), and LoadGen's "
                        "1.60 us a batch is LoadGen's and the system under test's own work around it, the overhead "
                        "this cell exists to measure")


def test_a_model_that_ran_faster_under_loadgen_is_said_to_be_faster() -> None:
    result = latency_agreement("Offline", 8, loadgen({"result_samples_per_second": 8 / 12e-3}, call_mean_ns=9e-3 * 1e9,
                                                     batches=40, samples=320), timing(10e6))
    assert result.why.startswith("the model itself ran 10% faster inside LoadGen's run")


def test_a_padded_last_batch_is_named_with_the_gap_it_leaves() -> None:
    """10 samples at batch 8 ran as two batches of 10.4 s: LoadGen's rate, 10 samples in 20.7 s,
    is 16.6 s a batch of 8 against the timing's 10.8 s."""
    run = loadgen({"result_samples_per_second": 10 / 20.73}, call_mean_ns=10.36e9, batches=2, samples=10)
    result = latency_agreement("Offline", 8, run, timing(10.8e9))
    assert result.gap == pytest.approx(0.535, abs=0.005)
    assert result.why == ("a padded batch: the query's 10 samples ran as 2 batches of 8, and LoadGen's rate counts the "
                          "samples, not the 60% more that were computed (without it the gap is -4%)")


def test_the_harnesss_own_work_is_named_when_the_model_was_not_slower() -> None:
    result = latency_agreement("MultiStream", 8, loadgen({"result_50.00_percentile_per_query_latency_ns": 11.2e6},
                                                         call_median_ns=10.1e6, gather_median_ns=1.0e6,
                                                         respond_median_ns=0.05e6), timing(10e6))
    assert not result.within and "the system under test's own work per batch" in result.why


def test_batches_in_flight_may_beat_the_sequential_timing_but_not_fall_behind() -> None:
    ahead = latency_agreement("Offline", 64, loadgen({"result_samples_per_second": 17_000.0}, batches_in_flight=2),
                              timing(3.96e6))
    assert ahead.gap < -0.04 and ahead.within
    behind = latency_agreement("Offline", 64, loadgen({"result_samples_per_second": 12_120.0}, batches_in_flight=2),
                               timing(3.96e6))
    assert not behind.within and "fell 33% behind" in behind.why


def test_a_gpu_cell_ahead_with_batches_in_flight_says_what_the_overlap_hides() -> None:
    """The synchronised timing counts the host's work outside the kernels; overlapping batches hide it."""
    run = loadgen({"result_samples_per_second": 17_000.0}, batches_in_flight=2)
    ahead = latency_agreement("Offline", 64, run, timing(3.96e6))  # 4.9% ahead
    split = TimeSplit(wall_ns=3.96e6, kernel_ns=3.72e6, kernel_share=0.94, method="CUPTI")
    said = overlap_explained(ahead, run, split, "cuda")
    assert said.why.startswith("LoadGen 4.9% faster than the device timing with 2 batches in flight")
    assert "(6.0% of a batch by the profile" in said.why and "unexplained" not in said.why
    assert said.gap == ahead.gap and said.within
    busy = TimeSplit(wall_ns=3.96e6, kernel_ns=3.9e6, kernel_share=0.985, method="CUPTI")
    assert "; 3.4% of the gap is beyond that share, unexplained" in overlap_explained(ahead, run, busy, "cuda").why
    for unchanged in (overlap_explained(ahead, run, split, "cpu"),
                      overlap_explained(ahead, loadgen({}, batches_in_flight=1), split, "cuda"),
                      overlap_explained(ahead, run, None, "cuda")):
        assert unchanged == ahead
    level = latency_agreement("Offline", 64, loadgen({"result_samples_per_second": 16_200.0}, batches_in_flight=2),
                              timing(3.96e6))
    assert overlap_explained(level, run, split, "cuda") == level  # 0.3% ahead: nothing to explain


def test_server_is_not_compared() -> None:
    assert latency_agreement("Server", 1, loadgen({}), timing(1e6)).gap is None


def test_warnings_name_noise_drift_the_machine_and_the_gpu() -> None:
    beside = {"cpu": {"wall_s": 1.0, "other_processes_cpu_s": 0.3, "stolen_cpu_s": 0.1, "cpus": 2},
              "gpu_before": {"clocks_event_reasons": ["gpu_idle"]},
              "gpu_after": {"clocks_event_reasons": ["sw_thermal_slowdown"]}}
    metrics = {
        "device_time": {"summary": {"cv": 0.14}, "warmup": {"steady": False, "seconds": 5.0, "calls": 9, "tolerance": 0.02},
                        "repetition_spread": 0.06, "repetitions": [
                            {"when": "before loadgen", "median_ns": 10e6, "beside": beside},
                            {"when": "after loadgen", "median_ns": 10.6e6, "beside": beside}]},
        "latency_agreement": {"within": False, "gap": 0.12, "limit": 0.05, "why": "because"},
    }
    found = warnings(measured(**metrics))
    assert found[0] == "noisy: device-time CV 14% (over 10%)"
    assert found[1].startswith("the warm-up did not settle within 5.0 s")
    assert found[2].startswith("drift: the timed repetitions' medians spread 6% (before loadgen 10.0 ms")
    assert "other processes used 0.30 cores" in found[3]
    assert "the hypervisor took 5% of the CPUs" in found[4]
    assert found[5] == "the GPU held its clocks down during the timed calls (sw_thermal_slowdown)"
    assert found[6] == "LoadGen and device timing disagree by +12% (limit 5%): because"
    assert warnings(measured(device_time={"summary": {"cv": 0.01}})) == []


@pytest.mark.parametrize("threads", [1, 2])
def test_a_busy_machine_says_why_it_costs_a_cell_of_several_threads_more(threads: int) -> None:
    busy = [{"tid": 100 + i, "name": "python", "cpu_s": 0.9, "last_cpu": i} for i in range(threads)]
    beside = {"cpu": {"wall_s": 1.0, "other_processes_cpu_s": 0.8, "stolen_cpu_s": 0.0, "cpus": 2, "busy_threads": busy}}
    (found,) = warnings(measured(device_time={"summary": {"cv": 0.01}, "repetitions": [
        {"when": "before loadgen", "median_ns": 10e6, "beside": beside}]}))
    assert found.startswith("a busy machine: other processes used 0.80 cores during the timed calls")
    assert ("2 of its threads were busy during the calls, and an operator run on several waits for the slowest"
            in found) is (threads == 2)
    assert ("OMP_NUM_THREADS=1" in found) is (threads == 2)


def speed(before_ms: float, after_ms: float, memory_ms: float = 10.0) -> dict[str, Any]:
    def read(ms: float) -> dict[str, Any]:
        return {"cores_ms": {"0": ms, "1": ms}, "memory_ms": memory_ms}
    return {"machine_speed": {"before": read(before_ms), "after": read(after_ms)}}


def drifting(*reference_ms: float) -> dict[str, Any]:
    repetitions = [{"when": f"r{i}", "median_ns": median, "beside": speed(ms, ms)}
                   for i, (median, ms) in enumerate(zip((10e6, 10.6e6), reference_ms))]
    return {"device_time": {"summary": {"cv": 0.01}, "repetition_spread": 0.06, "repetitions": repetitions}}


def test_a_drift_says_whether_the_reference_loops_moved_with_it() -> None:
    moved = warnings(measured(**drifting(1.0, 1.04)))
    assert moved[0].endswith("(r0 10.0 ms, r1 10.6 ms); around the slowest repetition (6% slower) against the fastest, the "
                             "reference loops were 4.0% slower (cores) and 0.0% slower (memory): the machine's speed moved (cores)")
    small = warnings(measured(**drifting(1.0, 1.01)))  # 1% against the figures' 6%
    assert small[0].endswith("1.0% slower (cores) and 0.0% slower (memory), none beyond its own jitter and half the "
                            "figures' change: the machine's own speed does not explain it")
    opposite = warnings(measured(**drifting(1.0, 0.85)))
    assert "15% faster (cores)" in opposite[0] and opposite[0].endswith("does not explain it")
    unread = drifting(1.0, 1.08)
    unread["device_time"]["repetitions"][1]["beside"] = {}
    assert warnings(measured(**unread))[0].endswith("(r0 10.0 ms, r1 10.6 ms)")


def test_a_slower_model_under_loadgen_says_whether_the_machine_was_slower_then() -> None:
    repetitions = [{"median_ns": 7.35e6, "beside": speed(1.0, 1.0)}, {"median_ns": 7.35e6, "beside": speed(1.0, 1.02)}]
    run = loadgen({"result_samples_per_second": 449.0}, call_mean_ns=17.5e6, gather_median_ns=0, respond_median_ns=4e3)
    run.beside = speed(1.0, 1.0, memory_ms=22.0)  # memory 120% slower, for a model 138% slower
    result = latency_agreement("Offline", 8, run, timing(7.35e6, repetitions=repetitions))
    assert result.why.endswith("(the cell's other warnings, and `beside` in its record, say what ran); around "
                               "LoadGen's run against the repetitions, the reference loops were 0.5% faster (cores) "
                               "and 120% slower (memory): the machine's speed moved (memory)")
    run.beside = speed(1.2, 1.3)  # cores 24% slower: not enough for a model 138% slower
    assert latency_agreement("Offline", 8, run, timing(7.35e6, repetitions=repetitions)).why.endswith(
        "24% slower (cores) and 0.0% slower (memory), none beyond its own jitter and half the figures' change: the "
        "machine's own speed does not explain it")
    run.beside = {}
    assert latency_agreement("Offline", 8, run, timing(7.35e6, repetitions=repetitions)).why.endswith(
        "(the cell's other warnings, and `beside` in its record, say what ran)")


def test_activity_reads_busy_threads_others_and_steal_from_proc(tmp_path: Path) -> None:
    def fake_proc(ticks: int, steal: int, machine_user: int) -> Path:
        root = tmp_path / f"proc-{ticks}"
        (root / "self" / "task" / "101").mkdir(parents=True)
        (root / "self" / "task" / "102").mkdir(parents=True)
        fields = lambda utime: " ".join(["S"] + ["0"] * 10 + [str(utime), "0"] + ["0"] * 23 + ["1"])  # noqa: E731
        (root / "self" / "task" / "101" / "stat").write_text(f"101 (python) {fields(ticks)}")
        (root / "self" / "task" / "102" / "stat").write_text(f"102 (Log IO (x)) {fields(0)}")
        (root / "self" / "stat").write_text(f"101 (python) {fields(ticks)}")
        (root / "stat").write_text(f"cpu  {machine_user} 0 0 1000 0 0 0 {steal} 0 0\ncpu0 1 2 3\n")
        return root

    before = activity.snapshot(fake_proc(100, 5, 300))
    after = activity.snapshot(fake_proc(200, 15, 450))
    assert before is not None and after is not None
    object.__setattr__(after, "wall_ns", before.wall_ns + 1_000_000_000)
    used = activity.compare(before, after)
    assert used["busy_threads"] == [{"tid": 101, "name": "python", "cpu_s": 1.0, "last_cpu": 1}]
    assert used["process_cpu_s"] == 1.0 and used["other_processes_cpu_s"] == 0.5 and used["stolen_cpu_s"] == 0.1
    assert activity.snapshot(tmp_path / "nothing") is None
    assert "unavailable" in activity.compare(None, after)


def test_other_processes_are_counted_on_the_cells_own_cpus_only(tmp_path: Path) -> None:
    """A worker that may run on CPUs 2 and 3 of four (a cpuset container, a `--jobs` slot): the whole
    host's busy time less the worker's own read the work on CPUs 0 and 1, which the cell never
    touches, as a busy machine, and the time stolen there as the cell's."""
    from harness.stats.thresholds import busy_machine

    def fake_proc(name: str, per_cpu: list[tuple[int, int]], own_ticks: int, cpu2: str = "") -> Path:
        root = tmp_path / name
        fields = lambda utime: " ".join(["S"] + ["0"] * 10 + [str(utime), "0"] + ["0"] * 23 + ["2"])  # noqa: E731
        for tid, ticks in (("101", own_ticks), ("102", 0)):
            (root / "self" / "task" / tid).mkdir(parents=True)
            (root / "self" / "task" / tid / "stat").write_text(f"{tid} (python) {fields(ticks)}")
        (root / "self" / "stat").write_text(f"101 (python) {fields(own_ticks)}")
        lines = [f"cpu{n} {user} 0 0 1000 0 0 0 {steal} 0 0" for n, (user, steal) in enumerate(per_cpu)]
        if cpu2:
            lines[2] = cpu2
        total = [sum(ticks[k] for ticks in per_cpu) for k in (0, 1)]
        (root / "stat").write_text("\n".join([f"cpu  {total[0]} 0 0 4000 0 0 0 {total[1]} 0 0", *lines, "intr 1 2"]))
        return root

    # over one second other processes kept CPUs 0 and 1 busy (and had 50 ticks stolen on CPU 0); on the
    # cell's CPUs its own 150 ticks and 5 of another process's, 4 stolen
    idle, busy = [(0, 0)] * 4, [(100, 50), (100, 0), (80, 0), (75, 4)]

    def used(allowed: dict[int, set[int]], cpu2: str = "") -> dict[str, Any]:
        shutil.rmtree(tmp_path)
        before = activity.snapshot(fake_proc("before", idle, 0, cpu2), lambda tid: allowed[tid])
        after = activity.snapshot(fake_proc("after", busy, 150, cpu2), lambda tid: allowed[tid])
        assert before is not None and after is not None
        object.__setattr__(after, "wall_ns", before.wall_ns + 1_000_000_000)
        return activity.compare(before, after)

    own = used({0: {2, 3}, 101: {2, 3}, 102: {2, 3}})
    assert (own["other_processes_cpu_s"], own["stolen_cpu_s"], own["cpus"]) == (0.05, 0.04, 2)
    assert not busy_machine(own["other_processes_cpu_s"], own["wall_s"])
    # a pool that pins each thread to a core of its own (TVM's) pins this thread too: the cell's CPUs
    # are where any of its threads may run
    assert used({0: {2}, 101: {2}, 102: {3}}) == own
    # per-CPU lines that cannot be read: the whole machine, as /proc/stat's first line counts it
    whole = used({0: {2, 3}, 101: {2, 3}, 102: {2, 3}}, cpu2="cpu2 1 2")
    assert (whole["other_processes_cpu_s"], whole["stolen_cpu_s"], whole["cpus"]) == (2.05, 0.54, os.cpu_count())
    assert busy_machine(whole["other_processes_cpu_s"], whole["wall_s"])
    assert used({0: {2, 7}, 101: {2, 3}, 102: {2, 3}})["cpus"] == os.cpu_count()  # a CPU /proc/stat does not list


def test_gpu_state_reads_clocks_and_names_the_slowdowns() -> None:
    nvml = types.SimpleNamespace(
        NVML_CLOCK_SM=0, NVML_CLOCK_MEM=1, NVML_TEMPERATURE_GPU=0,
        nvmlDeviceGetClockInfo=lambda h, kind: 1980 if kind == 0 else 2619,
        nvmlDeviceGetTemperature=lambda h, kind: 71, nvmlDeviceGetPowerUsage=lambda h: 512_000,
        nvmlDeviceGetCurrentClocksEventReasons=lambda h: 0x4 | 0x1,
    )
    import harness.measure.memory

    original = harness.measure.memory.device_handle
    harness.measure.memory.device_handle = lambda nvml: "handle"
    try:
        state = gpu_state.read(nvml)
    finally:
        harness.measure.memory.device_handle = original
    assert state == {"sm_clock_mhz": 1980, "mem_clock_mhz": 2619, "temperature_c": 71, "power_w": 512.0,
                     "clocks_event_reasons": ["gpu_idle", "sw_power_cap"]}
    assert gpu_state.slowdowns([state]) == ["sw_power_cap"]
    assert "unavailable" in gpu_state.read(types.SimpleNamespace())


def test_a_headline_latency_far_above_loadgens_median_is_a_heavy_tail() -> None:
    """SingleStream said p90 524 ms beside a device median of 3.95 ms and a gap of +2.0%: the gap
    compares medians, and nothing said a few slow queries made the headline figure."""
    from harness.measure.trust import _tail

    def run(p90_ns: float) -> LoadGenRun:
        metric = LoadGenMetric(name="latency_p90_early_stopping_ns", unit="ns", value=p90_ns)
        return LoadGenRun(scenario="SingleStream", validity="VALID", metric=metric, log_dir="loadgen/attempt-1",
                          results={"result_50.00_percentile_latency_ns": 4.03e6})

    said = ("a heavy tail: LoadGen's p90 524 ms is 130x its median 4.03 ms: a few slow queries decide the figure "
            "(what ran beside them: `beside` in the LoadGen record)")
    assert _tail(run(524e6), True) == [said + "; the median agrees with the device timing, this figure does not"]
    # beside a gap over the limit it said the median agreed, next to the warning that it did not
    assert _tail(run(524e6), False) == [said + "; the median does not agree with the device timing either (below)"]
    assert _tail(run(524e6)) == [said]  # no agreement checked
    assert _tail(run(4.6e6)) == []
    assert _tail(loadgen({"result_samples_per_second": 800.0})) == [], "a rate has no tail"
