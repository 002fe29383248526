"""What the report says of the kernels a cell ran: its fused kernels and the slowest, where a fusion
pair's kernel time moved kind by kind (harness/reporting/kind_moves.py), where a cell's differs from
its baseline's by operator class (harness/reporting/class_moves.py), and the table of each fusion
pair's kernels."""

from __future__ import annotations

from collections import Counter

from harness.bundle.passes_record import TopKernel
from harness.bundle.record_base import read_as
from harness.metric_table import format_value
from harness.reporting import class_moves, graph_breaks, kind_moves
from harness.reporting.cell_rows import Row
from harness.reporting.fusion_pairs import FusionPair, fmt_speedup
from harness.reporting.speedups import noisy_mark, speedup_marks

FUSED_KERNELS_SHOWN = 8
SLOWEST_KERNELS_SHOWN = 3
#: Before the kernel figures of a noisy cell (`speedups.noisy_mark`): a kernel's time is its share of the
#: cell's time, applied to it, so it carries the spread the speedup beside it is marked `noisy` for.
NOISY_CELL = "(a noisy cell's) "


def _marked(figures: list[str], *rows: Row) -> list[str]:
    """`figures` with `NOISY_CELL` before the first where a cell of `rows` is noisy: read alone (a
    why-slower line, a table's kernel column), they said nothing of it."""
    if figures and noisy_mark(*rows):
        return [NOISY_CELL + figures[0], *figures[1:]]
    return figures


def fused_kernels(row: Row) -> list[str]:
    """The fused kernels of a cell, each once (a kernel an unrolled loop runs many times gets its
    count): those the profile timed first, the costliest first, each with its time per inference,
    then the others in the order they first run; past FUSED_KERNELS_SHOWN, how many more there are."""
    report = row.metrics.fusion_report
    counts: dict[str, int] = {}
    named: dict[str, str] = {}
    for k in report.kernels if report else []:
        if k.fusion_class != "single":
            text = f"{k.kernel} ({' + '.join(k.ops)})"
            counts[text] = counts.get(text, 0) + 1
            named[text] = k.kernel
    # A kernel name several groups share (Inductor's oneDNN calls) has one time for them all: none is shown.
    groups_named = Counter(named.values())
    timed = {k.name: ns for k, ns in _timed_kernels(row) if groups_named[k.name] == 1}
    ordered = sorted(counts, key=lambda text: -timed.get(named[text], -1.0))  # stable: the untimed keep their order
    shown = [(text if counts[text] == 1 else f"{text} x{counts[text]}")
             + (f", {format_value(timed[named[text]], 'ns')}" if named[text] in timed else "")
             for text in ordered[:FUSED_KERNELS_SHOWN]]
    left = len(ordered) - len(shown)
    shown = _marked(shown, row) if any(named[text] in timed for text in ordered[:FUSED_KERNELS_SHOWN]) else shown
    return shown + ([f"and {left} more (the cell's fusion_report)"] if left else [])


def _timed_kernels(row: Row) -> list[tuple[TopKernel, float]]:
    """The kernels the cell's profile lists with their time per inference (`kernels.top_kernels`), each
    with that time applied to the cell's time over its rounds (`Row.over_round_one`), as the kinds' time
    moved beside them is; empty for bundles from before each kernel's time was kept."""
    kernels = row.metrics.kernels
    listed = [read_as(TopKernel, entry) for entry in (kernels.top_kernels if kernels else [])]
    return [(k, k.ns_per_inference * row.over_round_one) for k in listed if k is not None and k.ns_per_inference is not None]


def slowest_kernels(row: Row) -> list[str]:
    """The kernels a cell spends the most time in, with their time and calls per inference:
    `fused_conv2d_kernel 18.2 ms (3 calls)`, and what the fusion report says a kernel runs where its
    name does not say it (`running inductor.layout_copy`, `_running_ops`). Empty for bundles written
    before each kernel's time was kept (`ns_per_inference`: GPU cells first, CPU cells later) and for a
    backend whose profiler cannot tell."""
    timed = sorted(_timed_kernels(row), key=lambda kernel_ns: -kernel_ns[1])
    running = _running_ops(row)
    return _marked([f"{k.name}{running.get(k.name, '')} {format_value(ns, 'ns')} "
                    f"({k.calls_per_inference:g} call{'' if k.calls_per_inference == 1 else 's'})"
                    for k, ns in timed[:SLOWEST_KERNELS_SHOWN]], row)


def _running_ops(row: Row) -> dict[str, str]:
    """`, running OPS,` for each kernel of the cell's fusion report, named once there, whose name leaves
    out an operator it runs. Inductor names a generated kernel after operators near it: its copy of the
    input into channels-last, before resnet18's first convolution, is `cpp_fused_convolution_0` (its ops
    `inductor.layout_copy`), which read as a convolution among the kernels a cell spends most time in."""
    report = row.metrics.fusion_report
    groups = Counter(k.kernel for k in report.kernels) if report else Counter()
    said = {}
    for k in report.kernels if report else []:
        name = k.kernel.lower()
        if groups[k.kernel] == 1 and any(op.rsplit(".", 1)[-1].strip("_").lower() not in name for op in k.ops):
            said[k.kernel] = f", running {' + '.join(k.ops)},"
    return said


def time_moved(pair: FusionPair) -> list[str]:
    """Where the pair's kernel time moved, kind by kind (harness/reporting/kind_moves.py), each
    side's kinds applied to its time over rounds (`Row.time_ns`), as the profile applied them to
    round 1's median."""
    return _marked(kind_moves.moves(pair.on.metrics.kernels, pair.off.metrics.kernels,
                                    (pair.on.over_round_one, pair.off.over_round_one)), pair.on, pair.off)


def classes_against(row: Row, base: Row) -> list[str]:
    """Where `row`'s time differs from its baseline's cell (eager's): inside kernels, outside them (the
    time split's overhead) with the graphs and breaks `torch.compile` split the cell's model into
    (harness/reporting/graph_breaks.py), and by operator class (harness/reporting/class_moves.py), each
    side's figures applied to its time over rounds, a noisy cell's marked (`NOISY_CELL`); empty where
    either lists no kinds (the graphs and breaks then alone, unmarked: counts, not shares of its time)."""
    compiled = tuple(graph_breaks.said(row.metrics.dynamo, row.metrics.rounds))
    lines = class_moves.against(row.metrics.kernels, base.metrics.kernels, (row.backend, base.backend),
                                (row.over_round_one, base.over_round_one), (_outside(row), _outside(base)), compiled)
    # the graphs and breaks alone (a side lists no kinds) are Dynamo's counts, not shares of a noisy time
    return _marked(lines, row, base) if len(lines) > len(compiled) else lines


def _outside(row: Row) -> float | None:
    """The cell's time per batch outside kernels, round 1's split applied to its time over rounds."""
    split = row.metrics.time_split
    return None if split is None or split.overhead_ns is None else split.overhead_ns * row.over_round_one


def slowest_kernels_by_side(pair: FusionPair) -> list[tuple[str, list[str]]]:
    """("on", ...) and ("off", ...): each side of `pair` that lists its slowest kernels, with them."""
    return [(side, slowest) for side, row in (("on", pair.on), ("off", pair.off)) if (slowest := slowest_kernels(row))]


KERNELS_BY_PAIR_NOTE = (
    "Every fusion pair, slower or not: the fused kernels of its fusion-on cell (each once, with its count; those the "
    "profile timed first, the costliest first, with their time per inference; the whole list is the cell's "
    "`fusion_report`) and the kernels each side spends the most time in. On the CPU a kernel's time is its part of the "
    "time inside kernels, in proportion to its median part of a profiled inference's (docs/metrics.md, Where the time goes). "
    "Each kernel's time and each kind's is applied to the cell's time over its rounds (the profile is round 1's), as the "
    "speedup is taken; the time moved is each kind of kernel's time with fusion on less its time with fusion off, in all "
    "and then the kinds that moved most: a fused kind's time on one side, "
    "the kinds it replaced giving theirs back on the other. "
    "The speedups carry the fusion table's marks (`noisy`, `busy`, cores busy), and a noisy cell's kernel times "
    "(those of either cell, for the time moved) begin `(a noisy cell's)`: each is a share of its time."
)


def kernels_by_pair(pairs: list[FusionPair]) -> tuple[list[str], list[list[str]]]:
    """Per fusion pair: its speedup, its fused kernels, each side's slowest kernels, where its kernel
    time moved kind by kind (`time_moved`) and what each side's fusion report notes (a backend's word
    on what its kernels are not: folded weights, an operator run as several kernels)."""
    head = ["cell", "speedup", "fused kernels (the costliest first)", "most time with fusion on", "most time with fusion off",
            "time moved by kind (on less off)", "fusion report notes"]
    body = [[p.name, fmt_speedup(p) + speedup_marks(p.on, p.off), "; ".join(fused_kernels(p.on)) or "none reported",
             "; ".join(slowest_kernels(p.on)) or "-", "; ".join(slowest_kernels(p.off)) or "-",
             "; ".join(time_moved(p)) or "-", _notes(p)] for p in pairs]
    return head, body


def _notes(pair: FusionPair) -> str:
    said = [(side, report.notes) for side, row in (("on", pair.on), ("off", pair.off))
            if (report := row.metrics.fusion_report) is not None and report.notes]
    if len(said) == 2 and said[0][1] == said[1][1]:
        return said[0][1] or "-"
    return "; ".join(f"{side}: {notes}" for side, notes in said) or "-"
