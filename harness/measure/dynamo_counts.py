"""What TorchDynamo counted for a cell compiled through `torch.compile` (Inductor's, or a plugin's):
the graphs it compiled, the graph breaks between them with their reasons, and the frames it compiled
again during the timed calls.

A model Dynamo splits into several graphs runs eager Python between them (the code between graphs
is time outside kernels), and a frame compiled during the timed calls (a guard that failed, a
shape or a path first met there) puts a compile into the figures. Both are read from torch's own
counters (`torch._dynamo.utils.counters`, process-wide and cumulative, never cleared by
`torch._dynamo.reset`), as the difference between two snapshots: `graphs` and `graph_breaks` from
before `prepare` to the end of the correctness check (the compile and the untimed calls after it),
`recompiles_timed` from the end of the warm-up to the last timed repetition (LoadGen's run
included), in round 1 and, over its own timed calls, in each further round. Counters of the same
names and meaning are written by torch 2.11 and 2.14:
`stats.unique_graphs` (one per graph handed to the backend) and `frames.total` (one per frame Dynamo
converts; a frame whose compiled code still holds is never converted again). The breaks are
`torch._dynamo.utils.graph_break_reasons`, one entry per break, the list `torch._dynamo.explain`
counts: the `graph_break` counter counts only the breaks at a call, never one at a branch on a
tensor's value (`if x.sum() > 0:`, the commonest), which it recorded as 2 graphs and 0 breaks. That
list is emptied by `torch._dynamo.reset` (Inductor's prepare calls it), so a snapshot keeps its
entries and a break is one that was not among them before.

A cell whose compile converted no frame (eager, ONNX Runtime's and TVM's exports, which do not go
through `torch.compile`) records nothing. A torch without the counters records why (`absent`),
never a zero.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from harness.bundle.cell_record import BREAK_REASONS_KEPT
from harness.plain_text import one_line, shortened

#: A reason's characters kept: its first line (Dynamo's message, before its explanation and hint).
REASON_CHARS = 200
METHOD = ("torch._dynamo.utils: counters stats.unique_graphs and graph_break_reasons (by reason) from before prepare "
          "to the end of the correctness check; counters frames.total from the end of the warm-up to the last timed "
          "repetition")

#: A break at a branch on a traced value: Dynamo's reason names only its bytecode handler
#: (`generic_jump TensorVariable()`); the name its message gives such a break is this.
JUMP = "Data-dependent branching"

#: Why a figure is absent where a counter went down between two readings: something cleared Dynamo's
#: counters (`counters.clear()`, which torch's own test harness calls) while the cell ran.
CLEARED = "torch._dynamo.utils.counters went down between two readings (cleared while the cell ran): not counted"


@dataclass(frozen=True)
class Snapshot:
    """Dynamo's counters at one moment, and the breaks it has listed (torch's own entries: a later
    snapshot tells a new break from these by identity)."""

    graphs: int
    frames: int
    breaks: tuple[Any, ...]


def snapshot() -> Snapshot | str:
    """Dynamo's counters now, or why this torch has none to read (a private torch API, read
    defensively: a missing one is said, never read as zero)."""
    import sys

    if "torch._dynamo" not in sys.modules:  # Dynamo not loaded: nothing has been compiled through it in this process
        return Snapshot(0, 0, ())
    try:
        from torch._dynamo.utils import counters, graph_break_reasons
    except ImportError as exc:
        return f"torch._dynamo.utils.counters is not importable in this torch ({one_line(exc)[:120]})"
    if not callable(getattr(counters, "get", None)):
        return "torch._dynamo.utils.counters is not a mapping in this torch"
    if not isinstance(graph_break_reasons, list):
        return "torch._dynamo.utils.graph_break_reasons is not a list in this torch"
    stats, frames = (counters.get(name) or {} for name in ("stats", "frames"))
    return Snapshot(int(stats.get("unique_graphs", 0)), int(frames.get("total", 0)), tuple(graph_break_reasons))


class Readings:
    """The four snapshots a round of a cell takes, in its order, and the record each point gives:
    made before `prepare` (`harness/measure/phases.py`: round 1's `measure` and each further
    round's `time_a_round`, which read them alike)."""

    def __init__(self) -> None:
        self.before_prepare = snapshot()
        self._after_checks: Snapshot | str | None = None
        self._after_warmup: Snapshot | str | None = None

    def checks_done(self) -> Snapshot | str:
        """Its untimed calls are done (the first call, the correctness check): the compile's graphs
        and breaks are counted to here, in `timed`'s record."""
        self._after_checks = snapshot()
        return self._after_checks

    def checked(self) -> dict[str, Any] | None:
        """`checks_done`, and the compile's record so far: its graphs and breaks, which round 1 keeps
        should a later phase fail (a further round keeps nothing of a failed one)."""
        return record(self.before_prepare, self.checks_done())

    def warmed_up(self) -> None:
        """The warm-up is done: the timed calls' recompiles are counted from here."""
        self._after_warmup = snapshot()

    def timed(self) -> dict[str, Any] | None:
        """The whole record once the last timed call is done, its recompiles in the timed calls with it."""
        if self._after_checks is None:
            raise RuntimeError("Readings.timed before Readings.checks_done: the compile's graphs were never read")
        return record(self.before_prepare, self._after_checks, self._after_warmup, snapshot())


def record(before_prepare: Snapshot | str, after_checks: Snapshot | str, after_warmup: Snapshot | str | None = None,
           after_timing: Snapshot | str | None = None) -> dict[str, Any] | None:
    """The cell's `metrics.dynamo`, or None where Dynamo converted no frame while it prepared (no
    `torch.compile` in it). `after_warmup` and `after_timing` are None where the timed calls did
    not run: `recompiles_timed` is then absent."""
    if isinstance(before_prepare, str) or isinstance(after_checks, str):
        return {"absent": before_prepare if isinstance(before_prepare, str) else after_checks, "method": METHOD}
    if after_checks.frames == before_prepare.frames:
        return None
    if after_checks.frames < before_prepare.frames or after_checks.graphs < before_prepare.graphs:
        return {"absent": CLEARED, "method": METHOD}
    listed = {id(entry) for entry in before_prepare.breaks}
    breaks = [entry for entry in after_checks.breaks if id(entry) not in listed]
    reasons = Counter(reason_text(str(getattr(entry, "reason", entry))) for entry in breaks)
    found: dict[str, Any] = {
        "graphs": after_checks.graphs - before_prepare.graphs,
        "graph_breaks": len(breaks),
        "break_reasons": [{"reason": reason, "count": count} for reason, count in _most_frequent(reasons)],
        "distinct_break_reasons": len(reasons),
        "method": METHOD,
    }
    if isinstance(after_warmup, Snapshot) and isinstance(after_timing, Snapshot):
        if after_timing.frames < after_warmup.frames:
            found["absent"] = f"recompiles_timed: {CLEARED}"
        else:
            found["recompiles_timed"] = after_timing.frames - after_warmup.frames
    return found


def reason_text(message: str) -> str:
    """A break's message made one safe line: its first line and, where Dynamo gives one, its
    explanation (`Failed to trace builtin operator` says which only there: `print`), without the hint
    and debug context that follow; a branch on a traced value named as Dynamo names it (JUMP); cut to REASON_CHARS."""
    lines = [line.strip() for line in str(message).splitlines() if line.strip()]
    first = lines[0] if lines else "no reason given"
    if first.startswith("generic_jump "):
        first = f"{JUMP} ({first})"
    explained = next((line.removeprefix("Explanation:").strip() for line in lines[1:] if line.startswith("Explanation:")), "")
    return shortened(one_line(f"{first}: {explained}" if explained else first), REASON_CHARS)


def _most_frequent(reasons: Counter[str]) -> list[tuple[str, int]]:
    """The BREAK_REASONS_KEPT most frequent reasons, ties in the order of their text (a record the same each run)."""
    return sorted(reasons.items(), key=lambda item: (-item[1], item[0]))[:BREAK_REASONS_KEPT]
