"""The words a bundle uses for a cell's status and a run's state, and which count as what."""

from __future__ import annotations

from collections.abc import Sequence

STATUSES = ("valid", "invalid", "failed", "skipped", "interrupted")
#: A resumed run does not run these cells again.
FINISHED = ("valid", "invalid", "failed", "skipped")
#: A cell whose worker finished and timed it: it has its figures and its warnings.
MEASURED = ("valid", "invalid")
#: These make a run exit 1 and `compare` call a regression.
BAD = ("failed", "invalid")
STATES = ("running", "interrupted", "complete", "unrecorded")


def nothing_measured(statuses: Sequence[str]) -> bool:
    """Cells ran and every one was skipped: the run exits 4, not 0, so that no script reads it as a pass."""
    return bool(statuses) and all(status == "skipped" for status in statuses)
