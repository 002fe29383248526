"""findings.md and findings.html: what harness/reporting/findings.py says, as Markdown tables and as
one self-contained page (inline style and SVG, nothing fetched), every bundle string escaped."""

from __future__ import annotations

from html import escape
from pathlib import Path

from harness.bundle.reader import LoadedBundle
from harness.reporting import findings, findings_eager
from harness.reporting.fusion_pairs import MEMORY_NOTE, SPEEDUP_NOTE, SWITCHED_NOTE, FusionPair, switched_table
from harness.reporting.html import STYLE, html_table
from harness.reporting.markdown import md_cell, md_table
from harness.reporting.plots import Series, bar_chart
from harness.reporting.report import write_pages
from harness.stats.intervals import SMALLEST_EFFECT

FINDINGS_MD = "findings.md"
FINDINGS_HTML = "findings.html"

INTRO = (
    "What kernel fusion did to each model, backend by backend, from the bundles below. Fusion speedup = fusion off's "
    "median batch time over fusion on's (below 1: fusion made it slower). vs eager = eager's median over the cell's, "
    "same model and setting: eager's cell of the same bundle, else of another bundle that ran it on the same hardware "
    "and threads (said under the model); with its interval and verdict over the paired rounds where eager's cell is of the same "
    "bundle and the bundle's cells of a setting took turns round by round (runs since 2026-12-01). Kernels per "
    "inference count GPU kernels, or on a CPU each backend's compute dispatches "
    "(docs/metrics.md): compare a backend's on and off, not two backends. A verdict needs rounds "
    "(`timing: {rounds: N}`); a pair of one round is sorted by its point estimate, "
    f"{SMALLEST_EFFECT:.0%} either side of 1 counting as within. `noisy` beside a speedup: a cell's timing samples "
    "spread beyond 10% of their mean (its bundle's warnings say why), so the figure is a guess; `busy`: other processes "
    "took CPU during a cell's timed calls (its warnings say how much), so the figure holds their work too. `(cores busy A "
    "against B)` beside it: the two CPU cells kept cores busy half a core apart or more (a thread pool smaller than "
    "the cores, or work that does not spread over them), so they did not run on equal terms."
)
SUMMARY_NOTE = ("Per backend with a fusion switch: the models (and settings) fusion made faster or slower (by 5% or "
                "more, or `size unclear`: an effect seen whose interval reaches past 5%), those where it had no effect "
                "seen or one under 5%, by their verdicts over rounds; a pair of one round "
                "sorted by its estimate against the same 5%; and the fusions each model got with fusion on (groups of "
                "two operators or more in one kernel), lowest to highest. A model and setting that several bundles "
                "measured counts once for each, named by its bundle.")
SLOWER_THAN_EAGER_NOTE = (
    "Cells that ran slower than eager on the same model and setting, fusion on (and off beside it): by their verdict "
    "over the paired rounds where the bundle's cells of a setting took turns round by round (runs since 2026-12-01), "
    "else by more than 5% in one estimate, each cell's time over its rounds against eager's (their rounds ran at "
    "different times, so they do not pair). Beside each, why: the cell's kernel time per inference less eager's, in "
    "all, then its time outside kernels less eager's (dispatch, launches, the host: the time split's overhead; the two "
    "add up to the difference in time where the kinds add up to the time inside kernels, as in CPU cells since "
    "2026-12-06), then, for a cell compiled through torch.compile, the graphs TorchDynamo split its model into, "
    "the breaks between them with their most frequent reason, and the frames it compiled again during the timed "
    "calls (`3 graphs, 2 breaks: <reason> (x1), and 1 other reason; 1 recompile in the timed calls`: eager Python "
    "runs between graphs, and a recompile's time is in the figures; nothing said of one graph unbroken), then the kernel "
    "time of the four operator classes that differ most (convolution, matrix multiply, attention, normalization, "
    "element-wise and reductions, data movement, other: each side's kinds of kernel summed by class, a fused kernel "
    "in its anchor's class, so TVM's fused_conv2d_add_relu is convolution time, its add and relu included: "
    "docs/metrics.md, \"Operator classes\"), each side's figure beside; `-` where either cell lists no kinds "
    "(bundles written before kinds were kept, a profiler that cannot tell). Then the three kernels each side spends "
    "the most time in, with their time and calls per inference at its time over rounds (`-` where its profile timed "
    "none): what the classes hold, eager's named here as nowhere else."
)
FASTER_THAN_EAGER_NOTE = ("Cells that ran faster than eager on the same model and setting, fusion on, by the same "
                          "rules, with the same kernel time by operator class beside them.")
NO_FEWER_KERNELS_NOTE = ("Pairs whose fusion-on cell reports fusions yet launches as many kernels as fusion off, or more "
                         "(on a CPU: dispatches): the fused nodes still run their parts as kernels of their own, or the "
                         "fused graph adds kernels of another kind, such as layout reorders: the kinds fusion on ran more "
                         "calls of say which, where both cells list their kinds. A fusion count alone would call these "
                         "fusions; the kernels say what ran.")


def _sections(bundles: list[LoadedBundle]) -> tuple[list[findings.Group], bool]:
    all_groups = findings.groups(bundles)
    return all_groups, findings.any_gpu(all_groups)


def _pairs(all_groups: list[findings.Group]) -> list[FusionPair]:
    return [pair for group in all_groups for line in group.lines if (pair := line.pair) is not None]


def markdown(bundles: list[LoadedBundle]) -> str:
    all_groups, gpu = _sections(bundles)
    lines = ["# FusionBench findings", "", INTRO, ""]  # the notes are our own text: their code spans stay code
    lines += [f"- **{md_cell(name)}**: {md_cell(text)}" for name, text in findings.facts(bundles)] + [""]
    lines += ["## Across models", "", SUMMARY_NOTE, "", *md_table(*findings.summary_table(all_groups))]
    if pairs := _pairs(all_groups):
        lines += [SWITCHED_NOTE, "", *md_table(*switched_table(pairs))]
    lines += ["## Slower than eager", "", SLOWER_THAN_EAGER_NOTE, "",
              *md_table(*findings_eager.slower_than_eager(all_groups))]
    lines += ["## Faster than eager", "", FASTER_THAN_EAGER_NOTE, "",
              *md_table(*findings_eager.faster_than_eager(all_groups))]
    lines += ["## Fusions that launched no fewer kernels", "", NO_FEWER_KERNELS_NOTE, "",
              *md_table(*findings.no_fewer_kernels(all_groups))]
    lines += ["## Per model", "", SPEEDUP_NOTE, "", MEMORY_NOTE, ""]
    for group in all_groups:
        lines += [f"### {md_cell(group.title)}", "", md_cell(f"From {group.bundle}. {group.eager_note}".strip()), ""]
        lines += md_table(*findings.model_table(group, gpu))
        notes = findings.slower_notes(group)
        if notes:
            lines += ["Where fusion made it slower:", "", *(f"- {md_cell(note)}" for note in notes), ""]
    return "\n".join(lines)


def html(bundles: list[LoadedBundle]) -> str:
    all_groups, gpu = _sections(bundles)
    parts = ["<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>FusionBench findings</title>"
             f"<style>{STYLE}</style></head><body>", "<h1>FusionBench findings</h1>", f"<p>{escape(INTRO)}</p>",
             html_table(["bundle", "what it is"], [[name, text] for name, text in findings.facts(bundles)])]
    parts += ["<h2>Across models</h2>", f"<p>{escape(SUMMARY_NOTE)}</p>",
              html_table(*findings.summary_table(all_groups))]
    pairs = [(group, line, pair) for group in all_groups for line in group.lines if (pair := line.pair) is not None]
    if pairs:
        parts += [f"<p>{escape(SWITCHED_NOTE)}</p>", html_table(*switched_table([pair for _, _, pair in pairs]))]
        backends = list(dict.fromkeys(line.backend for _, line, _ in pairs))
        titles = list(dict.fromkeys(group.title for group, _, _ in pairs))
        speedups = {(group.title, line.backend): pair.speedup for group, line, pair in pairs}
        parts.append("<figure>" + bar_chart(
            "Fusion speedup per model (fusion-off median / fusion-on median)", titles,
            [Series(backend, tuple(speedups.get((title, backend)) for title in titles)) for backend in backends],
            "speedup (x)", reference=1.0, chart_id="plot-findings-fusion")
            + "<figcaption>Below the dashed line, the estimate is below 1; the verdict in the model's table says whether "
               "fusion made the model slower on that backend.</figcaption></figure>")
    parts += ["<h2>Slower than eager</h2>", f"<p>{escape(SLOWER_THAN_EAGER_NOTE)}</p>",
              html_table(*findings_eager.slower_than_eager(all_groups))]
    parts += ["<h2>Faster than eager</h2>", f"<p>{escape(FASTER_THAN_EAGER_NOTE)}</p>",
              html_table(*findings_eager.faster_than_eager(all_groups))]
    parts += ["<h2>Fusions that launched no fewer kernels</h2>", f"<p>{escape(NO_FEWER_KERNELS_NOTE)}</p>",
              html_table(*findings.no_fewer_kernels(all_groups))]
    parts += ["<h2>Per model</h2>", f"<p>{escape(SPEEDUP_NOTE)}</p>", f"<p>{escape(MEMORY_NOTE)}</p>"]
    for group in all_groups:
        parts += [f"<h3>{escape(group.title)}</h3>", f"<p>{escape(f'From {group.bundle}. {group.eager_note}'.strip())}</p>",
                  html_table(*findings.model_table(group, gpu))]
        notes = findings.slower_notes(group)
        if notes:
            parts.append("<p>Where fusion made it slower:</p><ul>" + "".join(f"<li>{escape(n)}</li>" for n in notes)
                         + "</ul>")
    parts.append("</body></html>")
    return "\n".join(parts)


def render(bundles: list[LoadedBundle], out_dir: Path) -> list[Path]:
    """Write findings.md and findings.html of `bundles` into `out_dir`; return their paths."""
    return write_pages(out_dir, {FINDINGS_MD: markdown(bundles), FINDINGS_HTML: html(bundles)})
