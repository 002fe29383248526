"""How steady the machine is by itself, measured once per run by the system probe.

Two fixed single-threaded workloads, each timed in chunks of about 20 ms for a pass of
`DURATION_S` (1.5 s; FUSIONBENCH_NOISE_PROBE_S sets another, harness/run/probe.py; `MIN_CHUNKS` at least): a matrix
multiplication that stays in the L1 cache (the CPU's own speed) and a sum over 64 MiB
(memory bandwidth). Nothing of the harness or a model runs meanwhile, so their CV is the
machine's noise floor: on a shared virtual machine, whose neighbours and host change its speed
from second to second, no figure can be steadier than this, whatever the harness does. Above
`NOISY_FLOOR` the run warns, as pyperf's checks warn about an unstable system.

The compute workload is also pinned to each usable core in turn, chunk after chunk, so every core
is sampled across the same window: on a shared host a core's speed can step between levels (a
virtual CPU whose physical core a neighbour starts using), one core at a time. The spread of those
pinned chunks (90th over 10th percentile) and each core's median show it; above `STEP_FLOOR` the
warning says so, since a cell whose threads share out an operator's work waits for whichever of
its cores is slow at the moment.

Last, the round trip of a cache line between the first two usable physical cores
(harness/measure/core_latency.py), sampled as long as each pass runs: a thread pool pays it on every
operator it splits, and a host that moves its virtual CPUs between nearby and distant physical
cores makes it step (about 50 and 330 ns on the 2-core AMD VM). Its 10th, 50th and 90th
percentiles are recorded; a 90th over 10th above `CROSS_CORE_FLOOR` is warned about.
"""

from __future__ import annotations

import dataclasses
import os
import statistics
import tempfile
import time
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, NamedTuple

from harness.measure import core_latency
from harness.measure.machine_speed import pinned
from harness.metric_table import format_per_core, format_times
from harness.stats.summary import percentile

NOISY_FLOOR = 0.03
STEP_FLOOR = 1.15  # pinned chunks' 90th over 10th percentile above this: the cores step between speeds
CHUNK_S = 0.02
DURATION_S = 1.5  # each pass; FUSIONBENCH_NOISE_PROBE_S changes it (harness/run/probe.py)
MAX_CORES = 16  # cores sampled by the pinned pass (the first ones the process may use)
MIN_CHUNKS_PER_CORE = 3
MIN_CHUNKS = 3  # each workload's chunks at least: one chunk's CV is no figure (see _chunks)
CROSS_CORE_FLOOR = 1.5  # round trips' 90th over 10th percentile above this: the cores' placement steps


class PinnedCores(NamedTuple):
    """The pinned pass: each core's median chunk (ms, by the core's number) and the spread of every
    pinned chunk (90th over 10th percentile); None for both where the process cannot choose its cores."""

    core_chunk_ms: dict[str, float] | None
    pinned_spread: float | None


@dataclass(frozen=True)
class NoiseFloor:
    """The machine's noise floor, as `measure` found it. `recorded()` is what bundle.json keeps as
    `system.machine_noise` (read back as harness/bundle/header_record.py's `MachineNoise`)."""

    compute_cv: float  # the chunks of the matmul that stays in L1
    memory_cv: float  # the chunks of the sum over 64 MiB
    chunks: list[int]  # how many chunks of each: compute, memory
    core_chunk_ms: dict[str, float] | None  # the pinned pass (`PinnedCores`)
    pinned_spread: float | None
    cross_core_ns: list[float] | None  # the round trip's 10th, 50th and 90th percentiles
    method: str

    @property
    def warning(self) -> str:
        """What makes this machine's own speed vary, or "" where nothing does."""
        return _warning(self)

    def recorded(self) -> dict[str, Any]:
        """The noise floor as bundle.json keeps it: these fields and the warning."""
        return {**dataclasses.asdict(self), "warning": self.warning}


def _repeat(work: Callable[[], Any]) -> int:
    """How many calls of `work` make a chunk of about CHUNK_S."""
    calls = []
    for _ in range(5):
        start = time.perf_counter_ns()
        work()
        calls.append(time.perf_counter_ns() - start)
    return max(int(CHUNK_S * 1e9 / max(min(calls), 1)), 1)


def _chunk(work: Callable[[], Any], repeat: int) -> int:
    t0 = time.perf_counter_ns()
    for _ in range(repeat):
        work()
    return time.perf_counter_ns() - t0


def _chunks(work: Callable[[], Any], duration_s: float) -> list[int]:
    """Chunks of `work` for `duration_s`, or longer to time MIN_CHUNKS: a short pass on a loaded
    machine timed one chunk of the sum over 64 MiB, and its CV, 0, read as the steadiest of machines."""
    repeat = _repeat(work)
    samples: list[int] = []
    deadline = time.perf_counter() + duration_s
    while time.perf_counter() < deadline or len(samples) < MIN_CHUNKS:
        samples.append(_chunk(work, repeat))
    return samples


def _pinned_chunks(work: Callable[[], Any], cores: list[int], duration_s: float) -> dict[int, list[int]]:
    """Chunks of `work` pinned to each of `cores` in turn, round after round, for `duration_s` (or
    longer, to give every core MIN_CHUNKS_PER_CORE); the process's affinity is restored after."""
    samples: dict[int, list[int]] = {core: [] for core in cores}
    with pinned(cores[0]):
        repeat = _repeat(work)
    deadline = time.perf_counter() + duration_s
    while time.perf_counter() < deadline or min(map(len, samples.values())) < MIN_CHUNKS_PER_CORE:
        for core in cores:
            with pinned(core):
                samples[core].append(_chunk(work, repeat))
    return samples


def _percentile(values: list[int] | list[float], q: float) -> float:
    return percentile(sorted(values), q * 100)


def _cores_measure(work: Callable[[], Any], duration_s: float) -> PinnedCores:
    """Each core's median pinned chunk (ms) and the spread of all pinned chunks (p90 / p10), or
    None for both where the process cannot choose its cores (no CPU affinity on this system)."""
    if not hasattr(os, "sched_setaffinity"):
        return PinnedCores(core_chunk_ms=None, pinned_spread=None)
    cores = sorted(os.sched_getaffinity(0))[:MAX_CORES]
    samples = _pinned_chunks(work, cores, duration_s)
    every = [ns for chunks in samples.values() for ns in chunks]
    return PinnedCores(
        core_chunk_ms={str(core): statistics.median(chunks) / 1e6 for core, chunks in samples.items()},
        pinned_spread=_percentile(every, 0.9) / _percentile(every, 0.1),
    )


def _cross_core(duration_s: float, cache_dir: Path | None) -> list[float] | None:
    """10th, 50th and 90th percentiles of the round trip between the first two physical cores (ns), sampled
    for `duration_s`; None without a C compiler or a second core. The loop is compiled into
    `cache_dir` the first time, or into a temporary folder each time where there is none."""
    folder = tempfile.TemporaryDirectory(prefix="fusionbench-probe-") if cache_dir is None else nullcontext(str(cache_dir))
    with folder as work:
        lib = core_latency.load(Path(work))
        if core_latency.measure(lib) is None:  # no compiler or one core: nothing to sample (and a warm-up)
            return None
        samples: list[float] = []
        deadline = time.perf_counter() + duration_s
        while time.perf_counter() < deadline:
            sample = core_latency.measure(lib)
            if sample is not None:
                samples.append(sample)
    if not samples:
        return None
    return [_percentile(samples, q) for q in (0.1, 0.5, 0.9)]


def _cv(samples: list[int]) -> float:
    return statistics.stdev(samples) / statistics.mean(samples)


def measure(duration_s: float = DURATION_S, cache_dir: Path | None = None) -> NoiseFloor:
    """The machine's noise floor: the CVs of the two fixed workloads, the pinned pass over the
    cores, the cross-core round trip (its C loop compiled into `cache_dir` once, or each time
    without one), and a warning when any is high (four passes of `duration_s` each: about 6 s in
    all by default)."""
    import numpy as np

    small = np.random.default_rng(0).random((64, 64), dtype=np.float32)
    big: Any = np.ones(64 << 18, dtype=np.float32)  # 64 MiB: beyond any cache
    compute = _chunks(lambda: small @ small, duration_s)
    memory = _chunks(big.sum, duration_s)
    cores = _cores_measure(lambda: small @ small, duration_s)
    return NoiseFloor(
        compute_cv=_cv(compute),
        memory_cv=_cv(memory),
        chunks=[len(compute), len(memory)],
        core_chunk_ms=cores.core_chunk_ms,
        pinned_spread=cores.pinned_spread,
        cross_core_ns=_cross_core(duration_s, cache_dir),
        method=(
            f"single-threaded: a 64x64 fp32 matmul (L1) and a sum over 64 MiB, each timed in ~{CHUNK_S * 1e3:.0f} ms "
            f"chunks for {duration_s:g} s, CV of the chunks; then the matmul pinned to each core in turn for "
            f"{duration_s:g} s, each core's median chunk and the 90th over 10th percentile of all; then the "
            f"round trip between the first two physical cores for {duration_s:g} s, its 10th, 50th and 90th percentiles"
        ),
    )


def _unequal(core_chunk_ms: dict[str, float] | None) -> float | None:
    """The slowest core's median chunk over the fastest's where that is above `STEP_FLOOR`: cores
    of unequal speed for the whole pass (a hybrid CPU's performance and efficiency cores), not
    cores whose speed steps from moment to moment."""
    medians = [ms for ms in (core_chunk_ms or {}).values() if ms > 0]
    ratio = max(medians) / min(medians) if len(medians) >= 2 else None
    return ratio if ratio is not None and ratio > STEP_FLOOR else None


def _warning(noise: NoiseFloor) -> str:
    said = []
    if max(noise.compute_cv, noise.memory_cv) > NOISY_FLOOR:
        said.append(f"a fixed compute loop has a CV of {noise.compute_cv:.0%} and a memory-bound one {noise.memory_cv:.0%}")
    spread, unequal = noise.pinned_spread, _unequal(noise.core_chunk_ms)
    if spread is not None and spread > STEP_FLOOR:
        cores = format_per_core(noise.core_chunk_ms or {})
        said.append(
            f"the same loop pinned to each core in turn spans {format_times(spread)} (10th to 90th percentile; "
            f"median chunk {cores}): "
            + (f"its cores' medians differ up to {format_times(unequal)}, cores of unequal speed (a hybrid CPU's "
               "performance and efficiency cores, or cores the host gives less of), and a cell whose threads share "
               "out the work waits for the slowest" if unequal is not None else
               "a cell whose threads share out the work waits for whichever core is slow at the moment")
        )
    cross = noise.cross_core_ns
    if cross and cross[0] > 0 and cross[2] / cross[0] > CROSS_CORE_FLOOR:
        said.append(
            f"the round trip between two cores stepped from {cross[0]:.0f} to {cross[2]:.0f} ns (10th to 90th "
            "percentile): a thread pool pays it on every operator it splits"
        )
    if not said:
        return ""
    if unequal is not None and len(said) == 1 and spread is not None and spread > STEP_FLOOR:
        return f"this machine's cores are unequal: {said[0]}; a multi-threaded figure here is paced by the slowest"
    return f"this machine's own speed varies: {'; '.join(said)}; no figure measured here can be steadier"


def unequal_slots(slot_cpus: list[tuple[int, ...]], core_chunk_ms: Any) -> str:
    """What a `--jobs` run says where its slots' cores ran the pinned loop at unequal speeds (by
    over `STEP_FLOOR`: a hybrid CPU's performance and efficiency cores in different slots), from the
    probe's `core_chunk_ms` (the first `MAX_CORES` cores); "" where they are alike or not known.
    The report pairs fusion on with off and each backend with eager whichever slots they ran in."""
    if not isinstance(core_chunk_ms, dict) or len(slot_cpus) < 2:
        return ""
    speeds = {}
    for index, cpus in enumerate(slot_cpus):
        known = [float(core_chunk_ms[str(cpu)]) for cpu in cpus
                 if isinstance(core_chunk_ms.get(str(cpu)), (int, float)) and core_chunk_ms[str(cpu)] > 0]
        if known:
            speeds[index] = statistics.median(known)
    if len(speeds) < 2 or max(speeds.values()) / min(speeds.values()) <= STEP_FLOOR:
        return ""
    shown = ", ".join(f"slot {index} {ms:.1f} ms" for index, ms in speeds.items())
    return (f"the --jobs slots' cores are unequal: the probe's pinned loop took {shown} a chunk (the median of "
            f"each slot's cores), {format_times(max(speeds.values()) / min(speeds.values()))} apart; a cell's time "
            "depends on the slot it drew, and the report sets cells of two slots side by side; run with --jobs 1, "
            "or bind the run to cores of one kind (taskset)")
