"""The samples a cell's correctness checks run on, from its sample set's size and its batch: the
worker builds `inputs.samples` samples, or from a folder as many of its images as it holds up to
that (`counts_read`). The worker checks the example batch and, after the timing, another
(harness/measure/phases.py); validate holds the rows each check records to these
(harness/bundle/validate.py)."""

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


def counts_read(count: int, batch: int, from_folder: bool) -> list[int]:
    """How many samples a cell of `inputs.samples` `count` may have read, each giving its own rows:
    `count` drawn; from a folder, which gives at most `count` (as many images as it holds, a number
    no record keeps), any up to it, of which those under two batches wrap round onto rows of their
    own and any larger gives `count`'s."""
    return [*range(1, min(count, 2 * batch)), count] if from_folder else [count]
