"""What a cell's Dynamo record says beside its time outside kernels, where a compiler is set against eager:
the graphs `torch.compile` split the model into, the breaks between them and their most frequent reason,
and the frames compiled again during the timed calls, round 1's and a further round's (`3 graphs, 2 breaks:
Tensor.item() ... (x1), and 1 other reason`; `1 recompile in the timed calls, 2 in round 2's`). Eager
Python runs between the graphs, and a compile in the timed calls is in the figures: both are time a
kernel comparison does not show. Nothing is said of a cell compiled whole into one graph with no
recompile, nor of one with no record (not compiled through `torch.compile`, or older than the record)."""

from __future__ import annotations

from harness.bundle.cell_record import Dynamo
from harness.bundle.timing_record import TimingRound
from harness.plain_text import shortened, visible

#: A reason's characters shown in the line (the record keeps more).
REASON_SHOWN = 90


def said(dynamo: Dynamo | None, rounds: list[TimingRound] | None = None) -> list[str]:
    """The cell's graphs and breaks, then its timed recompiles, in words: none where there is nothing to
    say. A further round's recompiles (`rounds`) are said with the round they were in: the cell's time
    is its rounds' (`1 recompile in the timed calls, 2 in round 2's, 8 in round 3's`)."""
    parts = []
    if dynamo is not None and dynamo.graphs is not None and dynamo.graph_breaks is not None \
            and (dynamo.graphs > 1 or dynamo.graph_breaks > 0):
        parts.append(f"{_count(dynamo.graphs, 'graph')}, {_count(dynamo.graph_breaks, 'break')}" + _reasons(dynamo))
    first = dynamo.recompiles_timed if dynamo is not None else None
    further = [f"{r.recompiles_timed} in round {r.round}'s" for r in (rounds or [])[1:] if r.recompiles_timed]
    if first:
        parts.append(f"{_count(first, 'recompile')} in the timed calls" + (f", {', '.join(further)}" if further else ""))
    elif further:
        parts.append(f"recompiles in the timed calls: {', '.join(further)}")
    return parts


def _reasons(dynamo: Dynamo) -> str:
    """`: <the most frequent reason> (xN), and K other reasons`; "" without one."""
    if not dynamo.break_reasons:
        return ""
    first = dynamo.break_reasons[0]
    reason = shortened(visible(first.reason), REASON_SHOWN)
    others = (dynamo.distinct_break_reasons or len(dynamo.break_reasons)) - 1
    return f": {reason} (x{first.count})" + (f", and {_count(others, 'other reason')}" if others else "")


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"
