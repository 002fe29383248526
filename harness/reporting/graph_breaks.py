"""What a cell's Dynamo record says beside its time outside kernels, where a compiler is set against eager:
the graphs `torch.compile` split the model into, the breaks between them and their most frequent reason,
and the frames compiled again during the timed calls (`3 graphs, 2 breaks: Tensor.item() ... (x1), and
1 other reason`; `1 recompile in the timed calls`). Eager Python runs between the graphs, and a compile in the timed calls is in the
figures: both are time a kernel comparison does not show. Nothing is said of a cell compiled whole
into one graph with no recompile, nor of one with no record (not compiled through `torch.compile`, or
older than the record)."""

from __future__ import annotations

from harness.bundle.cell_record import Dynamo
from harness.plain_text import shortened, visible

#: A reason's characters shown in the line (the record keeps more).
REASON_SHOWN = 90


def said(dynamo: Dynamo | None) -> list[str]:
    """The cell's graphs and breaks, then its timed recompiles, in words: none where there is nothing to say."""
    if dynamo is None:
        return []
    parts = []
    graphs, breaks = dynamo.graphs, dynamo.graph_breaks
    if graphs is not None and breaks is not None and (graphs > 1 or breaks > 0):
        parts.append(f"{_count(graphs, 'graph')}, {_count(breaks, 'break')}" + _reasons(dynamo))
    if dynamo.recompiles_timed:
        parts.append(f"{_count(dynamo.recompiles_timed, 'recompile')} in the timed calls")
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
