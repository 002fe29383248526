"""Where a cell's time differs from eager's, inside kernels, outside them and by operator class: why a
backend ran slower or faster than eager on a model, beside the ratio of their times.

Two backends' kinds do not pair by name (eager's `aten::linear`, ONNX Runtime's `Gemm`), so each
side's kinds are summed by operator class (harness/reporting/op_classes.py) and the classes set
against each other, the largest difference first (BERT base on ONNX Runtime, fusion on, against
eager: `matrix multiply -40.5 ms (eager 155 ms, onnxruntime 115 ms)`). A fused kernel counts in
its anchor's class, so a class's time holds the epilogues it absorbed, which eager runs as kinds of
another class. Each side's kinds are applied to its time over rounds, as kind_moves.py applies a
fusion pair's, so that a slow round 1 of one side does not read as a class's time.
"""

from __future__ import annotations

from harness.bundle.passes_record import Kernels
from harness.metric_table import format_value
from harness.reporting.kind_moves import scaled_kinds, signed_ns
from harness.reporting.op_classes import CLASSES, class_of

#: The classes a comparison names, the largest difference first.
CLASSES_SHOWN = 4


def class_times(kernels: Kernels | None, scale: float = 1.0) -> dict[str, float]:
    """The kernel time per inference of each operator class the kinds of `kernels` fall in (ns), each
    kind's time multiplied by `scale`; empty where the cell lists no kinds."""
    times: dict[str, float] = {}
    for kind in scaled_kinds(kernels, scale).values():
        cls = class_of(kind.kind)
        times[cls] = times.get(cls, 0.0) + kind.ns_per_inference
    return times


def against(cell: Kernels | None, eager: Kernels | None, labels: tuple[str, str],
            scales: tuple[float, float] = (1.0, 1.0), outside: tuple[float | None, float | None] = (None, None),
            compiled: tuple[str, ...] = ()) -> list[str]:
    """The kernel time of `cell` less eager's, in all, then the time outside kernels (`outside`: each
    side's, where both have one), then the CLASSES_SHOWN classes that differ most, each with both
    sides' times (`labels`: the two sides' names, the cell's first); `scales`: what each side's kind
    times are multiplied by (its time over rounds over round 1's). Empty where either side lists no
    kinds: a figure for one side alone would be no comparison. `compiled`: the cell's graphs, graph
    breaks and timed recompiles in words (harness/reporting/graph_breaks.py), said after the time outside kernels, and alone
    where either side lists no kinds."""
    mine, theirs = class_times(cell, scales[0]), class_times(eager, scales[1])
    beside = list(compiled)
    if not mine or not theirs:
        return beside
    differ = {cls: mine.get(cls, 0.0) - theirs.get(cls, 0.0) for cls in mine.keys() | theirs.keys()}
    largest = sorted(differ, key=lambda cls: (-abs(differ[cls]), CLASSES.index(cls)))[:CLASSES_SHOWN]
    total_mine, total_theirs = (sum(times[cls] for cls in sorted(times)) for times in (mine, theirs))
    # A cell can lose to eager outside its kernels (dispatch, guards, the code between graphs) while its
    # kernels win: the kernels' difference alone would leave that slowdown unexplained.
    out_mine, out_theirs = outside
    rest = ([_line("outside kernels", out_mine - out_theirs, outside, labels)]
            if out_mine is not None and out_theirs is not None else [])
    return [_line("kernels in all", total_mine - total_theirs, (total_mine, total_theirs), labels), *rest, *beside,
            *(_line(cls, differ[cls], (mine.get(cls), theirs.get(cls)), labels) for cls in largest)]


def _line(what: str, differ_ns: float, sides_ns: tuple[float | None, float | None], labels: tuple[str, str]) -> str:
    """`convolution +41.0 ms (eager 30.0 ms, tvm 71.0 ms)`: the baseline's side named first, `none` on a
    side that runs no kind of the class."""
    cell, base = ("none" if ns is None else format_value(ns, "ns") for ns in sides_ns)
    return f"{what} {signed_ns(differ_ns)} ({labels[1]} {base}, {labels[0]} {cell})"
