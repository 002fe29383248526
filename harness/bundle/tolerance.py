"""How validate reads a figure and when two figures are the same one.

A figure written twice from one float (a record and a log, a summary and its samples) may differ
in its last printed digits, never more: `close` allows a relative 1e-6, or 1 (ns, or the last
digit a log printed), and nothing else.
"""

from __future__ import annotations

import math
from typing import Any

RELATIVE = 1e-6
#: How close a float LoadGen logs with six significant digits is to the true one, relatively.
SIX_DIGITS = 1e-5


def number(value: Any) -> float | None:
    """`value` as a float, or None where it is not a finite number (a bool is not a number)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return None
    try:
        result = float(value)
    except ValueError:
        return None
    return result if math.isfinite(result) else None


def close(a: float, b: float, *, absolute: float = 1.0) -> bool:
    return math.isclose(a, b, rel_tol=RELATIVE, abs_tol=absolute)


def printed_step(text: str) -> float:
    """The size of the last digit in a number as a log printed it: 1 for `702`, 0.01 for `702.35`."""
    decimals = text.strip().partition(".")[2]
    return 10.0 ** -len(decimals) if decimals.isdigit() else 1.0
