"""The limits by which a worker judges its own figures (harness/measure/trust.py, timing.py) and
by which `fusionbench validate` judges them again (harness/bundle/figures_check.py): one copy, so
that the two never disagree. The noise limit is `harness.stats.summary.NOISY_CV`."""

from __future__ import annotations

from harness.metric_table import CORES_MIN_WALL_S

AGREEMENT_LIMIT = 0.05  # LoadGen's figure per batch against the device timing's, relative
DRIFT_LIMIT = 0.03  # spread of the timed repetitions' medians
BUSY_OTHERS_CORES = 0.1  # other processes using a tenth of a core beside the timed calls
STOLEN_SHARE = 0.02  # of the CPUs' time taken by the hypervisor during the timed calls
WARMUP_TOLERANCE = 0.02  # two consecutive warm-up windows' medians agree this closely when steady
WARMUP_WINDOW_S = 0.1  # a warm-up window lasts about this long,
WARMUP_MAX_WINDOW = 50  # and holds at most this many calls (one, for a model slower than the window)
ROUND_OUT_OF_LINE = 1.5  # a round's median this many times the median of the cell's rounds, or below it by as much


def busy_machine(others_s: float, wall_s: float) -> bool:
    """Whether other processes' CPU time beside the timed calls (`wall_s` of them in all) says a
    busy machine: over `BUSY_OTHERS_CORES` of a core, read over a second or more. /proc counts CPU
    time in 10 ms ticks, so one tick over timed calls of 30 ms reads as a third of a core: below
    the second `cpu_cores` needs too (`CORES_MIN_WALL_S`), the reading says nothing either way."""
    return wall_s >= CORES_MIN_WALL_S and others_s / wall_s > BUSY_OTHERS_CORES


def shared_machine(stolen_s: float, wall_s: float, cpus: int) -> bool:
    """Whether the hypervisor took over `STOLEN_SHARE` of the CPUs beside the timed calls, read
    over a second or more, as `busy_machine`."""
    return wall_s >= CORES_MIN_WALL_S and stolen_s / wall_s / max(cpus, 1) > STOLEN_SHARE
