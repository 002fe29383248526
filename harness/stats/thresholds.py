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
