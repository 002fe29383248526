"""The limits by which a worker judges its own figures (harness/measure/trust.py, timing.py) and
by which `fusionbench validate` judges them again (harness/bundle/figures_check.py): one copy, so
that the two never disagree. The noise limit is `harness.stats.summary.NOISY_CV`."""

from __future__ import annotations

AGREEMENT_LIMIT = 0.05  # LoadGen's figure per batch against the device timing's, relative
DRIFT_LIMIT = 0.03  # spread of the timed repetitions' medians
BUSY_OTHERS_CORES = 0.1  # other processes using a tenth of a core beside the timed calls
STOLEN_SHARE = 0.02  # of the CPUs' time taken by the hypervisor during the timed calls
WARMUP_TOLERANCE = 0.02  # two consecutive warm-up windows' medians agree this closely when steady
WARMUP_WINDOW_S = 0.1  # a warm-up window lasts about this long,
WARMUP_MAX_WINDOW = 50  # and holds at most this many calls (one, for a model slower than the window)
ROUND_OUT_OF_LINE = 1.5  # a round's median this many times the median of the cell's rounds, or below it by as much
#: /proc counts CPU time in clock ticks (USER_HZ: 100 a second on Linux), and a region's reading can be
#: off by about a tick for each CPU's counter and two for this process's own (harness/measure/activity.py).
PROC_TICK_S = 0.01


def _more_than_ticks(cpu_s: float, ticks_a_region: int, regions: int) -> bool:
    """Whether `cpu_s`, read over `regions` regions apart, is more than the ticks alone can read
    where nothing ran."""
    return cpu_s > ticks_a_region * regions * PROC_TICK_S


def busy_machine(others_s: float, wall_s: float, cpus: int, regions: int) -> bool:
    """Whether other processes' CPU time beside the timed calls (`regions` regions of `wall_s` in
    all, read on a machine of `cpus` CPUs) says a busy machine: over `BUSY_OTHERS_CORES` of a core,
    and more than the tick alone can read (a tick a CPU and two for this process, each region). One
    tick over a region of 30 ms reads as a third of a core; a reading that small says nothing."""
    return wall_s > 0 and others_s / wall_s > BUSY_OTHERS_CORES and _more_than_ticks(others_s, cpus + 2, regions)


def shared_machine(stolen_s: float, wall_s: float, cpus: int, regions: int) -> bool:
    """Whether the hypervisor took over `STOLEN_SHARE` of the CPUs beside the timed calls, in a
    reading more than the tick alone can give (one a CPU, each region)."""
    return (wall_s > 0 and stolen_s / wall_s / max(cpus, 1) > STOLEN_SHARE
            and _more_than_ticks(stolen_s, cpus, regions))
