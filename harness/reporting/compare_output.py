"""What `fusionbench compare` writes: a comparison (harness/reporting/compare.py) as JSON (every
pair, figure and verdict, and the rules they were judged by) or as Markdown (the systems'
differences first, then the summary, the per-backend geometric means, the cells, the fusion
verdicts and the other figures; the packages that differ last, where they are more than a few).
Text from the bundles is shown through `md_cell` and
`visible_lines`: nothing in a bundle reaches the reader as markup or a control character.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from harness import metric_table
from harness.metric_table import format_value
from harness.plain_text import visible_lines
from harness.reporting.compare import Comparison
from harness.reporting.fusion_verdicts import verdict_line
from harness.reporting.judging import LABELS, VERDICTS, percent
from harness.reporting.markdown import md_cell
from harness.reporting.system_differences import PACKAGE
from harness.stats.summary import EXACT_MAX_PRODUCT, EXACT_MAX_SMALLER

#: Packages that differ shown among the systems' differences; more are listed at the end (two
#: machines' images can differ in hundreds, which would push the summary out of sight).
MOST_PACKAGES_AHEAD = 10


@dataclass(frozen=True)
class Judged:
    """How one figure of the metric table is judged, in words: the JSON's `figures` holds one per figure."""

    label: str
    definition: str
    better: str  # "lower", "higher" or "neither" (a changed figure is neither worse nor better)
    rule: metric_table.Rule  # "rank test", "ratio" or "exact"
    test: str  # what makes a difference count


def _rules(threshold: float) -> dict[str, Judged]:
    """How each figure is judged, in words: what `to_json` and `to_markdown` say."""
    said = {"rank test": f"B/A of the medians beyond {percent(threshold)} and a test agreeing (t on the logs of the rounds' medians, "
                         "or Mann-Whitney U on one process's samples a side)",
            # a further round times the model and nothing else: every other figure is its round 1's
            "ratio": f"one reading a side, its round 1's whatever its rounds (no spread to judge by): B/A beyond "
                     f"{percent(threshold)}",
            "exact": "one reading a side, its round 1's: any change"}
    return {m.name: Judged(m.label, m.definition, m.better or "neither", m.rule,
                           said[m.rule] + (f", {format_value(m.floor, m.unit)} apart or more" if m.floor else ""))
            for m in metric_table.compared()}


def to_json(comparison: Comparison) -> str:
    data = {
        "a": comparison.a, "b": comparison.b, "rerun": comparison.rerun or None, "threshold": comparison.threshold,
        "alpha": comparison.alpha,
        "test": ("where either cell was timed over several rounds, Student's t on the logs of the rounds' medians "
                 "(two-sided, the variance pooled from both sides' rounds: the variation between processes is in it; "
                 "where every round of each side gave one median, nothing to test against, the rank test below); "
                 "else Mann-Whitney U on the device-timing samples (two-sided; exact where no two samples of either "
                 f"side are equal, the smaller side has at most {EXACT_MAX_SMALLER} and the two sizes' product is at "
                 f"most {EXACT_MAX_PRODUCT:,}, else the normal approximation); each pair's "
                 "`test` says which. A change needs the test below alpha, pointing the way the medians' ratio does, "
                 "and the ratio beyond the threshold either way (B/A above 1 + t or below 1 / (1 + t))"),
        "counts": comparison.counts(), "worse": comparison.worse, "unpaired": comparison.unpaired,
        "not_rerun": comparison.not_rerun,
        "figures": {name: asdict(rule) for name, rule in _rules(comparison.threshold).items()},
        "figure_counts": comparison.figure_counts(),
        "systems": [{"what": w, "a": x, "b": y} for w, x, y in comparison.systems],
        "machines": {"a": comparison.machines[0], "b": comparison.machines[1]},
        "machine_noise": {"a": comparison.noise[0], "b": comparison.noise[1]},
        "geomean_by_backend": {name: asdict(g) for name, g in comparison.geomeans().items()},
        "pairs": [asdict(p) for p in comparison.pairs],
        "fusion_verdicts": [v.recorded() for v in comparison.fusion],
        "fusion_verdicts_line": verdict_line(comparison.fusion),
    }
    return json.dumps(data, indent=1) + "\n"


def _figures(comparison: Comparison) -> list[str]:
    """The other figures of the valid pairs: how each is judged, the verdicts, and every change."""
    counts = comparison.figure_counts()
    rules = _rules(comparison.threshold)
    if not any(name != "device_time" for name in counts):
        return []
    lines = ["## Other figures", "",
             "Each figure of two valid cells by its row of the metric table (docs/metrics.md). These verdicts "
             "inform: the labels above and the exit code follow device time and failures only.", "",
             "| figure | better | judged by | " + " | ".join(VERDICTS) + " |", "|---|---|---|" + "---:|" * len(VERDICTS)]
    lines += [f"| {rules[name].label} | {rules[name].better} | {rules[name].test} | "
              + " | ".join(str(by[v]) for v in VERDICTS) + " |" for name, by in counts.items() if name != "device_time"]
    changed = [(p, f) for p in comparison.pairs for f in p.figures if f.metric != "device_time" and f.verdict != "same"]
    lines += ["", f"Every figure not the same ({len(changed)}):" if changed else "Every other figure is the same.", ""]
    if changed:
        order = {verdict: i for i, verdict in enumerate(VERDICTS)}
        lines += ["| cell | figure | A | B | B/A | verdict | why |", "|---|---|---:|---:|---:|---|---|"]
        for pair, f in sorted(changed, key=lambda item: (order[item[1].verdict], item[0].label, item[1].metric)):
            ratio = "-" if f.ratio is None else f"{f.ratio:.3f}"
            lines.append(f"| {md_cell(pair.label)} | {rules[f.metric].label} | {md_cell(f.a_shown)} | "
                         f"{md_cell(f.b_shown)} | {ratio} | **{f.verdict}** | {md_cell(f.why)} |")
    return [*lines, ""]


def _fusion(comparison: Comparison) -> list[str]:
    """Each fusion pair's speedup, interval and verdict in A and B, and whether they agree."""
    if not comparison.fusion:
        return []
    lines = ["## Fusion speedups", "",
             "Fusion off over on in each bundle, with its confidence interval over the paired rounds and its verdict "
             "(docs/metrics.md, Speedups); `ran apart` where its cells ran where their times cannot be set side by "
             "side in that bundle (no speedup is taken from them; listed below with why), `-` where the pair is not "
             "valid there; `not comparable` where A's cells and B's ran unlike (other math modes, hardware, share, "
             "torch or backend pool threads or `env:` values: listed below with why, as unpaired cells are), but "
             "where the hardware alone differs: there each bundle's verdict, reached on its own machine, is set "
             "beside the other's (`yes (other hardware)`; `, direction yes` where the words differ and both "
             "intervals lie on one side of 1, or both hold it), and the intervals are not (a speedup's size is its "
             "machine's).", "",
             "| pair | A | B | verdicts agree | intervals overlap |", "|---|---|---|---|---|"]
    for v in comparison.fusion:
        lines.append("| " + " | ".join(md_cell(text) for text in (v.name, *v.shown())) + " |")
    # the cell holds two words; the reason (another share, other hardware, another start of the machine) is here
    apart = [f"- {md_cell(v.name)}, in {side}: {md_cell(why)}" for v in comparison.fusion
             for side, why in (("A", v.apart_a), ("B", v.apart_b)) if why]
    unlike = [f"- {md_cell(v.name)}: {md_cell(v.unlike)}" for v in comparison.fusion if v.unlike and not v.across_hardware]
    across = [f"- {md_cell(v.name)}: {md_cell(v.unlike)}" for v in comparison.fusion if v.across_hardware]
    return [*lines, "", verdict_line(comparison.fusion), "", *(["Ran apart:", "", *apart, ""] if apart else []),
            *(["On other hardware, their verdicts set side by side, their intervals not:", "", *across, ""]
              if across else []),
            *(["Not comparable, A's cells and B's ran unlike:", "", *unlike, ""] if unlike else [])]


def _information(ratio: float | None) -> str:
    """B/A of a pair set side by side but not judged (other hardware): in brackets, never a verdict."""
    return "-" if ratio is None else f"({ratio:.3f})"


def to_markdown(comparison: Comparison) -> str:
    c = comparison
    lines = [
        "# FusionBench comparison", "",
        f"A (baseline): {md_cell(c.a)}  ", f"B: {md_cell(c.b)}  ", *([f"{md_cell(c.rerun)}  "] if c.rerun else []),
        f"A difference counts when B/A is beyond {percent(c.threshold)} either way and a test agrees, p < {c.alpha:g} "
        "the same way: Student's t on the logs of the rounds' medians where a cell was timed over several rounds, else a "
        "Mann-Whitney U test on the raw device-timing samples.", "",
    ]
    packages = [row for row in c.systems if row[0].startswith(PACKAGE)]
    if c.systems:
        lines += ["## The systems differ", "", "| what | A | B |", "|---|---|---|"]
        lines += [f"| {md_cell(w)} | {md_cell(x)} | {md_cell(y)} |" for w, x, y in c.systems if not w.startswith(PACKAGE)]
        if len(packages) > MOST_PACKAGES_AHEAD:  # hundreds between two machines: listed at the end
            lines.append(f"| packages | {len(packages)} differ, listed at the end | |")
        else:
            lines += [f"| {md_cell(w)} | {md_cell(x)} | {md_cell(y)} |" for w, x, y in packages]
    else:
        lines += ["## The systems are the same", "", f"Same harness, hardware ({md_cell(c.machines[0])}), driver and "
                  "library versions."]
    lines += ["", "Machine noise, measured by each run as it started (a change smaller than either floor is the "
              "machine's as much as the code's):", "", f"- A: {md_cell(c.noise[0])}", f"- B: {md_cell(c.noise[1])}"]
    counts = c.counts()
    lines += ["", "## Summary", "", " · ".join(f"{label}: {counts[label]}" for label in LABELS), ""]
    noisy = [p for p in c.pairs if p.noisy and p.verdict in ("regressed", "improved")]
    if noisy:
        rounds = " or timed over rounds" if any(max(p.valid_rounds) <= 1 for p in noisy) else ""  # as each why advises
        lines += [f"{len(noisy)} of the improved and regressed pairs rest on noisy cells (their why says which): a "
                  f"guess, not a figure, until rerun{rounds}.", ""]
    apart = [p for p in c.pairs if p.not_judged]
    if apart:
        lines += [f"{len(apart)} pair(s) ran on other hardware: their figures are set side by side below, not judged "
                  "(B/A in brackets, for information only; another machine's speed is not the code's).", ""]
    machine = [p for p in c.pairs if p.machine_moved and p.verdict in ("regressed", "improved")]
    if machine:
        lines += [f"{len(machine)} of the improved and regressed pairs moved with the machine itself: its reference "
                  "loops, read around each timed repetition, moved the same way by half the change or more (their "
                  "why says which): the host's speed, not the code's, until a rerun says otherwise.", ""]
    if c.unpaired:
        lines += [f"## Unpaired: {len(c.unpaired)} valid cell(s) with nothing to compare against", "",
                  *(f"- {md_cell(line)}" for line in c.unpaired), ""]
    if c.not_rerun:
        lines += [f"## Not rerun: {len(c.not_rerun)} valid cell(s) the rerun's --only left out", "",
                  *(f"- {md_cell(line)}" for line in c.not_rerun), ""]
    geomeans = c.geomeans()
    if geomeans:
        lines += ["## Per backend", "", "Geometric mean of B/A median batch time (below 1: B is faster).", "",
                  "| backend | pairs | B/A |", "|---|---:|---:|"]
        lines += [f"| {md_cell(name)} | {g.pairs} | {g.geomean_ratio:.3f} |" for name, g in geomeans.items()]
        lines.append("")
    lines += ["## Cells", "", ("Device time: the median batch time of each side's timing samples; of a cell timed over several "
                          "rounds, the median of its rounds' medians, and p from Student's t on the logs of the rounds' "
                          "medians (the variation between processes is in it; the samples of one process are not "
                          "independent draws of another's); "
                          "with one round a side, p from the Mann-Whitney U test on the samples."), "",
              "| cell | A median | B median | B/A | p | verdict | why |", "|---|---:|---:|---:|---:|---|---|"]
    order = {label: i for i, label in enumerate(LABELS)}
    for p in sorted(c.pairs, key=lambda p: (order[p.verdict], p.label)):
        ratio = f"{p.ratio:.3f}" if p.ratio is not None else _information(p.ratio_not_judged)
        p_value = "-" if p.p_value is None else f"{p.p_value:.2g}"
        why = f"not judged: {p.not_judged}; B/A for information only" if p.not_judged else p.why
        lines.append(f"| {md_cell(p.label)} | {format_value(p.median_a_ns, 'ns')} | {format_value(p.median_b_ns, 'ns')} | "
                     f"{ratio} | {p_value} | **{p.verdict}**{' noisy' if p.noisy else ''} | {md_cell(why)} |")
    lines += ["", *_fusion(c), *_figures(c)]
    if len(packages) > MOST_PACKAGES_AHEAD:
        lines += [f"## Packages that differ ({len(packages)})", "", "| package | A | B |", "|---|---|---|"]
        lines += [f"| {md_cell(w.removeprefix(PACKAGE))} | {md_cell(x)} | {md_cell(y)} |" for w, x, y in packages]
        lines.append("")
    return visible_lines("\n".join(lines) + "\n")
