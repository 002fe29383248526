"""report.html: one self-contained page (inline style, inline SVG plots from harness/reporting/plots.py)
that opens offline and fetches nothing. Every string from the bundle is escaped."""

from __future__ import annotations

from html import escape

from harness import metric_table
from harness.bundle.reader import LoadedBundle
from harness.reporting.baseline_speedups import APART_NOTE, baseline_of, not_side_by_side, speedup_table
from harness.reporting.cell_rows import bundle_rows, setting_paired, valid_rows
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
    fusion_pairs,
    fusion_table,
    switched_table,
)
from harness.reporting.kernels import KERNELS_BY_PAIR_NOTE, kernels_by_pair
from harness.reporting.plots import Point, Series, bar_chart, scatter
from harness.reporting.run_facts import facts

MEMORY_PLOTS = ("peak_rss", "gpu_peak")  # rows of harness/metric_table.py, a GPU plot only where measured
STATUS_COLOURS = {"valid": "#c7e9c0", "invalid": "#fdd0a2", "failed": "#fcbba1", "skipped": "#e0e0e0",
                  "interrupted": "#dadaeb", "not run": "#ffffff"}

STYLE = """
body { font-family: sans-serif; margin: 2em; color: #222; max-width: 1500px; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
figure { margin: 1em 0 2em; }
figcaption { font-size: 13px; color: #555; max-width: 900px; }
.empty { color: #777; font-style: italic; }
"""


def html_table(head: list[str], body: list[list[str]], *, statuses: bool = False) -> str:
    if not body:
        return '<p class="empty">none</p>'
    parts = ["<table><thead><tr>" + "".join(f"<th>{escape(h)}</th>" for h in head) + "</tr></thead><tbody>"]
    for row in body:
        cells = []
        for value in row:
            colour = STATUS_COLOURS.get(value) if statuses else None
            style = f' style="background:{colour}"' if colour else ""
            cells.append(f"<td{style}>{escape(str(value))}</td>")
        parts.append("<tr>" + "".join(cells) + "</tr>")
    parts.append("</tbody></table>")
    return "\n".join(parts)


def _figure(svg: str | None, caption: str, empty: str) -> str:
    body = svg if svg else f'<p class="empty">{escape(empty)}</p>'
    return f"<figure>{body}<figcaption>{escape(caption)}</figcaption></figure>"


def html(loaded: LoadedBundle) -> str:
    rows = bundle_rows(loaded)
    valid = valid_rows(rows)
    parts = [f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
             f"<title>FusionBench report: {escape(loaded.name)}</title><style>{STYLE}</style></head><body>",
             f"<h1>FusionBench report: {escape(loaded.name)}</h1>",
             html_table(["what", "value"], [[w, v] for w, v in facts(loaded)])]

    parts.append("<h2>LoadGen validity at a glance</h2>")
    parts.append(html_table(*validity_grid(loaded, rows), statuses=True))

    baseline = baseline_of(loaded)
    groups, series, speedups = speedup_table(rows, baseline, setting_paired(loaded))
    parts.append(f"<h2>Speedup over {escape(baseline)}</h2>")
    parts.append(_figure(
        bar_chart(f"Speedup over {baseline} ({baseline} median / cell median)", groups, series, "speedup (x)",
                  reference=1.0, chart_id="plot-speedup") if groups else None,
        f"Each bar: how many times faster than {baseline} on the same model, scenario, batch and dtype; "
        f"the dashed line is {baseline}.",
        f"No backend shares a model and setting with a valid {baseline} cell in this run.",
    ))
    by_class = [row for row in speedups if any(why != "-" for why in row[3:])]
    if by_class:  # the chart gives the ratios; this, where the cells list their kinds or kernels, why
        parts.append(f"<p>Where the time differs from {escape(baseline)}'s: inside kernels, outside them, and by operator "
                     f"class (cell less {escape(baseline)}; a fused kernel counts in its anchor's class), and the "
                     f"kernels each side spends the most time in.</p>")
        parts.append(html_table(["model and setting", "backend / variant", "speedup",
                                 f"time against {baseline}: in kernels, outside them, by operator class",
                                 "most time with the backend", f"most time with {baseline}"], by_class))

    pairs = fusion_pairs(rows)
    parts.append("<h2>Fusion on vs off</h2>")
    parts.append(_figure(
        bar_chart("Speedup from fusion (fusion-off median / fusion-on median)", [p.name for p in pairs],
                  [Series("fusion speedup", tuple(p.speedup for p in pairs))], "speedup (x)", reference=1.0,
                  chart_id="plot-fusion") if pairs else None,
        "Below the dashed line, the estimate is below 1; the section below lists the pairs fusion made slower by "
        "their verdict (or, of one round, by more than 5%), and their fused kernels.",
        "No valid cell has both fusion on and fusion off in this run.",
    ))
    parts.append(f"<p>{escape(SPEEDUP_NOTE)}</p>")
    parts.append(f"<p>{escape(MEMORY_NOTE)}</p>")
    parts.append(html_table(*fusion_table(pairs)))
    if pairs:
        parts.append(f"<p>{escape(SWITCHED_NOTE)}</p>")
        parts.append(html_table(*switched_table(pairs)))
    apart = not_side_by_side(rows, baseline)
    if apart:
        parts.append(f"<p>{escape(APART_NOTE)}</p><ul>" + "".join(f"<li>{escape(line)}</li>" for line in apart) + "</ul>")
    parts.append("<h3>Where fusion made things slower</h3>")
    parts.append(f"<p>{escape(SLOWER_NOTE)}</p>")
    slower = [p for p in pairs if p.made_slower]
    parts.append(html_table(*kernels_by_pair(slower)) if slower else '<p class="empty">Nowhere in this run.</p>')
    if pairs:
        parts.append("<h3>What each pair's fusion ran</h3>")
        parts.append(f"<p>{escape(KERNELS_BY_PAIR_NOTE)}</p>")
        parts.append(html_table(*kernels_by_pair(pairs)))

    parts.append("<h2>Kernels per inference vs latency</h2>")
    points = [Point(r.kernels, r.median_ns / 1e6, r.variant, f"{r.model} {r.variant} {r.setting}")
              for r in valid if r.kernels is not None and r.kernels > 0 and r.median_ns is not None]
    parts.append(_figure(
        scatter("Kernels per inference vs median batch time", points, "kernels (GPU) or dispatches (CPU) per inference",
                "median batch time (ms)", chart_id="plot-kernels") if points else None,
        "On CPU each backend counts dispatches its own way (docs/metrics.md): compare points of one backend.",
        "No valid cell counted kernels in this run.",
    ))

    parts.append("<h2>Memory per backend</h2>")
    for number, name in enumerate(metric_table.present(MEMORY_PLOTS, [r.record for r in valid])):
        memory_row = metric_table.metric(name)
        memory = {(f"{r.model} {r.setting}", r.variant): bytes_ / 2**20 for r in valid
                  if (bytes_ := memory_row.value(r.record)) is not None}
        groups = list(dict.fromkeys(group for group, _ in memory))
        variants = list(dict.fromkeys(variant for _, variant in memory))
        parts.append(_figure(
            bar_chart(f"Memory: {memory_row.label} (MiB)", groups,
                      [Series(v, tuple(memory.get((g, v)) for g in groups)) for v in variants], "MiB",
                      chart_id="plot-memory" + ("" if number == 0 else f"-{name}")) if memory else None,
            f"{memory_row.label[0].upper()}{memory_row.label[1:]}: {memory_row.definition}.",
            "No valid cell recorded memory in this run.",
        ))

    parts.append("<h2>Where the time goes</h2>")
    parts.append(f"<p>{escape(TIME_SPLIT_NOTE)}</p>")
    backends = list(dict.fromkeys(r.backend for r in valid))
    for number, backend in enumerate(backends):
        groups, series = time_split_series(rows, backend)
        parts.append(_figure(
            bar_chart(f"{backend}: time in kernels and overhead per batch (ms)", groups, series, "ms",
                      chart_id=f"plot-split-{number}") if groups else None,
            f"{backend}: each group is one cell; the bars are the time inside kernels and the rest of the median batch time.",
            f"No valid {backend} cell measured its kernel time.",
        ))

    parts.append("<h2>One latency truth</h2>")
    parts.append(f"<p>{escape(AGREEMENT_NOTE)}</p>")
    parts.append(html_table(*agreement_table(rows)))
    parts.append("<h2>Warnings</h2>")
    parts.append(html_table(*warnings_table(rows)))

    parts.append("<h2>Roofline</h2>")
    parts.append(f"<p>{escape(ROOFLINE_NOTE)}</p>")
    parts.append(html_table(*roofline_table(rows)))
    parts.append("<h2>Cells</h2>")
    parts.append(html_table(*cells_table(rows), statuses=True))
    parts.append("<h2>Skipped, failed and invalid cells</h2>")
    parts.append(html_table(["model", "backend / variant", "setting", "status", "reasons"], problems(rows), statuses=True))
    parts.append("</body></html>")
    return "\n".join(parts)
