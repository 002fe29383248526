"""report.md: the report's sections as Markdown tables (cell_tables.py, baseline_speedups.py, fusion_pairs.py
and kernels.py in harness/reporting/ hold what they say)."""

from __future__ import annotations

from typing import Any

from harness.bundle.reader import LoadedBundle
from harness.metric_table import format_value
from harness.plain_text import visible
from harness.reporting.baseline_speedups import APART_NOTE, SPEEDUP_OVER_NOTE, baseline_of, not_side_by_side, speedup_table
from harness.reporting.cell_rows import bundle_rows, fmt_time_over_rounds, setting_paired, valid_rows
from harness.reporting.cell_tables import (
    AGREEMENT_NOTE,
    ROOFLINE_NOTE,
    TIME_SPLIT_NOTE,
    agreement_table,
    cells_table,
    problems,
    roofline_table,
    time_split_series,
    validity_grid,
    warnings_table,
)
from harness.reporting.fusion_pairs import (
    MEMORY_NOTE,
    SLOWER_NOTE,
    SPEEDUP_NOTE,
    SWITCHED_NOTE,
    fmt_speedup,
    fusion_pairs,
    fusion_table,
    switched_table,
)
from harness.reporting.kernels import KERNELS_BY_PAIR_NOTE, fused_kernels, kernels_by_pair, slowest_kernels_by_side, time_moved
from harness.reporting.run_facts import facts
from harness.reporting.speedups import speedup_marks

_MARKDOWN = str.maketrans({c: "\\" + c for c in "\\|`[]*_~"} | {"<": "&lt;", ">": "&gt;", "&": "&amp;"})


def md_cell(text: Any) -> str:
    """Bundle text as inert Markdown on one line (a table cell, a list item): no raw HTML, link
    (GitHub's bare-URL autolinks included), code span, emphasis or strike-through can form, a pipe
    does not end the cell, controls show as codes."""
    return visible(text).translate(_MARKDOWN).replace("://", "\\://").replace("www.", "www\\.")


def md_table(head: list[str], body: list[list[str]]) -> list[str]:
    if not body:
        return ["(none)", ""]
    lines = ["| " + " | ".join(md_cell(h) for h in head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(md_cell(c) for c in row) + " |" for row in body]
    return lines + [""]


def markdown(loaded: LoadedBundle) -> str:
    rows = bundle_rows(loaded)
    lines = [f"# FusionBench report: {md_cell(loaded.name)}", ""]
    lines += [f"- **{what}**: {md_cell(value)}" for what, value in facts(loaded)] + [""]
    lines += ["## LoadGen validity at a glance", "", *md_table(*validity_grid(loaded, rows))]
    lines += ["## Cells", "", *md_table(*cells_table(rows))]
    baseline = baseline_of(loaded)
    _, _, speedups = speedup_table(rows, baseline, setting_paired(loaded))
    lines += [f"## Speedup over {md_cell(baseline)}", "",
              SPEEDUP_OVER_NOTE.format(baseline=md_cell(baseline.capitalize())), "",  # our text: its code spans stay
              *md_table(["model and setting", "backend / variant", "speedup",
                         f"time against {baseline}: in kernels, outside them, by operator class",
                         "most time with the backend", f"most time with {baseline}"], speedups)]
    pairs = fusion_pairs(rows)
    lines += ["## Fusion on vs off", "", SPEEDUP_NOTE, "", MEMORY_NOTE, "",
              *md_table(*fusion_table(pairs))]
    if pairs:
        lines += [SWITCHED_NOTE, "", *md_table(*switched_table(pairs))]
    apart = not_side_by_side(rows, baseline)
    if apart:
        lines += [APART_NOTE, "", *(f"- {md_cell(line)}" for line in apart), ""]
    slower = [p for p in pairs if p.made_slower]
    lines += ["## Where fusion made things slower", "", SLOWER_NOTE, ""]
    if not slower:
        lines += ["Nowhere in this run.", ""]
    for p in slower:
        on, off = fmt_time_over_rounds(p.on), fmt_time_over_rounds(p.off)
        lines += [f"- **{md_cell(p.name)}**: fusion on {on}, off {off}, "
                  f"speedup {fmt_speedup(p)}{speedup_marks(p.on, p.off)}. Fused kernels: "
                  + (md_cell("; ".join(fused_kernels(p.on))) or "none reported")
                  + "".join(f". Most time with fusion {side}: {md_cell('; '.join(slowest))}"
                            for side, slowest in slowest_kernels_by_side(p))
                  + (f". Time moved by kind (on less off): {md_cell('; '.join(moved))}" if (moved := time_moved(p)) else "")]
    if slower:
        lines.append("")
    if pairs:
        lines += ["## What each pair's fusion ran", "", KERNELS_BY_PAIR_NOTE, "", *md_table(*kernels_by_pair(pairs)), ""]
    lines += ["## Where the time goes", "", TIME_SPLIT_NOTE, ""]
    for backend in dict.fromkeys(r.backend for r in valid_rows(rows)):
        groups, series = time_split_series(rows, backend)
        if groups:
            body = [[g, *(format_value(None if ms is None else ms * 1e6, "ns") for ms in (k, o))]  # the plots' ms
                    for g, k, o in zip(groups, series[0].values, series[1].values)]
            lines += [f"### {md_cell(backend)}", "", *md_table(["cell", "in kernels", "overhead"], body)]
    lines += ["## One latency truth", "", AGREEMENT_NOTE, "", *md_table(*agreement_table(rows))]
    lines += ["## Warnings", "", *md_table(*warnings_table(rows))]
    lines += ["## Roofline", "", ROOFLINE_NOTE, "", *md_table(*roofline_table(rows))]
    lines += ["## Skipped, failed and invalid cells", "",
              *md_table(["model", "backend / variant", "setting", "status", "reasons"], problems(rows))]
    return "\n".join(lines)

