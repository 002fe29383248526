"""The samples a cell's correctness checks run on, from its config alone: its sample set's size
(`inputs.samples`, which the worker builds that many of) and its batch. The worker checks the
example batch and, after the timing, another (harness/measure/phases.py); validate holds the rows
each check records to these (harness/bundle/validate.py)."""

from __future__ import annotations


def example_rows(count: int, batch: int) -> list[int]:
    """The samples of the example batch: the first `batch`, wrapping round."""
    return [row % count for row in range(batch)]


def later_rows(count: int, batch: int) -> list[int]:
    """The samples of the batch the timed callable is checked on once more after its timing: the
    timing's second batch (samples `batch` to `2 * batch - 1`, wrapping round), or where the set
    holds no more than one batch, the example's samples one row on (the example's own where there
    is one sample). A callable right on the example alone, or on its first calls alone, fails it."""
    start = batch if count > batch else 1
    return [(start + row) % count for row in range(batch)]
