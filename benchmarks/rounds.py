"""The rounds of the benchmarks that time ways side by side (allocator, helper_exit, worker_start,
ort_skip_layer_norm, overhead, scale_out): what each says of a count of one, and a figure's spread
over the rounds, written once.

A script under benchmarks/ runs as `python benchmarks/SCRIPT`, which puts this folder first on
`sys.path`: `from rounds import ...` finds this module there.
"""

from __future__ import annotations

import statistics
import sys


def warn_if_one_round(script: str, rounds: int) -> None:
    """Say on standard error that one round's figures have no spread, beside figures that look like
    any other's: a smoke test's count, whose ratio cannot be told from the machine's noise."""
    if rounds == 1:
        print(f"{script}: warning: one round has no spread (its min, median and max are one figure), so the ratio "
              "cannot be told from the machine's noise; give --rounds 2 or more", file=sys.stderr)


def spread(values: list[float]) -> dict[str, float]:
    """The min, median and max of one figure over the rounds."""
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}
