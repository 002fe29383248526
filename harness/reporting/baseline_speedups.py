"""Each cell against the scenario's baseline backend (eager by default): the speedup table and chart,
and the cells, fusion pairs included, that ran where no speedup can be taken from them."""

from __future__ import annotations

from harness.bundle.reader import LoadedBundle, lookup
from harness.reporting.cell_rows import Row, valid_rows
from harness.reporting.fusion_pairs import fusion_pairs_apart
from harness.reporting.kernels import classes_against, slowest_kernels
from harness.reporting.plots import Series
from harness.reporting.run_facts import apart
from harness.reporting.speedups import one_estimate_text, over_baseline, speedup_marks, times_faster

SPEEDUP_OVER_NOTE = ("{baseline}'s median batch time over the cell's, each over its rounds where it has several "
                     "(same model and setting; cells whose output was checked against eager's; the baseline's cell "
                     "is its fusion-on cell). Where the cells of a setting took turns round by round (runs since "
                     "2026-12-01) and both have two rounds or more, the geometric mean over their paired rounds with "
                     "its interval and verdict, as a fusion speedup's; else one estimate, no verdict, said beside it "
                     "(`one round`, or `one estimate, rounds not paired`). `noisy` where "
                     "either cell's timing samples spread beyond 10% of their mean (its warnings say why): a guess, "
                     "not a figure. `busy` where either cell warned of a busy machine (other processes took CPU "
                     "during its timed calls): the figure holds their work too. `(cores busy A against B)` where "
                     "the two CPU cells kept cores busy half a core apart or more: unequal terms (a thread pool "
                     "smaller than the cores, or work that does not spread over them), said beside the figure. "
                     "Time against the baseline: the cell's kernel time per inference less the baseline's, in "
                     "all, then its time outside kernels less the baseline's (dispatch, launches, the host: the time "
                     "split's overhead) and, for a cell compiled through torch.compile, its graphs, graph breaks (the most "
                     "frequent reason) and frames compiled again in the timed calls where there are more than one "
                     "graph, any break or any recompile, then the kernel time of the four classes that differ most (each side's "
                     "kinds of kernel summed by class, a fused kernel in its anchor's class: docs/metrics.md, "
                     "\"Operator classes\"); `-` where either cell lists no kinds. Then the three kernels each "
                     "side spends the most time in, at its time over rounds (`-` where its profile timed none).")


APART_NOTE = (
    "Not set side by side: cells that ran on another share of the machine, on other hardware or on another start "
    "of the machine than their counterpart (a 1-core slot's time beside the whole machine's is no speedup, nor is "
    "one of a VM started again, which may run slower as a whole); each cell's `node` says where it ran, and its "
    "own figures stand in the cells table."
)


def baseline_of(loaded: LoadedBundle) -> str:
    """The backend speedups are measured against: the scenario's `baseline` (eager by default)."""
    return str(lookup(loaded.header, "scenario", "baseline") or "eager")


def baselines(rows: list[Row], baseline: str) -> dict[tuple[str, str], Row]:
    """The valid cells of `baseline` (fusion on) whose output was checked against eager's, by model and setting."""
    return {(r.model, r.setting): r for r in valid_rows(rows)
            if r.backend == baseline and r.fusion == "on" and r.checked_against_eager}


def _beside_baseline(rows: list[Row], baseline: str) -> list[tuple[Row, Row]]:
    """Each valid cell of another backend checked against eager, with the baseline's cell of its
    model and setting, where there is one (whether or not the two ran where they can be set side by side)."""
    base = baselines(rows, baseline)
    return [(r, base[(r.model, r.setting)]) for r in valid_rows(rows)
            if r.backend != baseline and r.checked_against_eager and (r.model, r.setting) in base]


def speedup_table(rows: list[Row], baseline: str, paired: bool) -> tuple[list[str], list[Series], list[list[str]]]:
    """Each cell's speedup over the baseline's cell of its model and setting (`over_baseline` where the
    rounds pair, else `times_faster`): the bar chart's groups and series, and the table's rows (each
    with where its time differs from the baseline's, `classes_against`, and the kernels each side
    spends the most time in, `slowest_kernels`)."""
    others = [(r, base) for r, base in _beside_baseline(rows, baseline) if not apart(r.record, base.record)]
    groups = list(dict.fromkeys(f"{r.model} {r.setting}" for r, _ in others))
    variants = list(dict.fromkeys(r.variant for r, _ in others))
    values: dict[tuple[str, str], float] = {}
    texts: dict[tuple[str, str], str] = {}
    by_class: dict[tuple[str, str], str] = {}
    slowest: dict[tuple[str, str], list[str]] = {}
    for r, base in others:
        key = (f"{r.model} {r.setting}", r.variant)
        result = over_baseline(r, base, paired)
        values[key] = result.value if result is not None else times_faster(r, base) or 0.0
        texts[key] = (result.text() if result is not None else one_estimate_text(r, base) or "-") + speedup_marks(r, base)
        by_class[key] = "; ".join(classes_against(r, base)) or "-"
        slowest[key] = ["; ".join(slowest_kernels(row)) or "-" for row in (r, base)]
    series = [Series(v, tuple(values.get((g, v)) for g in groups)) for v in variants]
    table = [[g, v, texts[(g, v)], by_class[(g, v)], *slowest[(g, v)]] for g in groups for v in variants if (g, v) in values]
    return groups, series, table


def not_side_by_side(rows: list[Row], baseline: str) -> list[str]:
    """The fusion pairs, and the cells beside their baseline, whose cells ran on other shares of the
    machine (a serial resume of a `--jobs` run, in a bundle from before such a resume was refused) or
    on other hardware (a Ray run over unlike machines): no speedup is taken from them, and this says
    which and why."""
    return fusion_pairs_apart(rows) + [f"{r.model} {r.variant} {r.setting}: not set beside {baseline}: {why}"
                                       for r, its_base in _beside_baseline(rows, baseline)
                                       if (why := apart(r.record, its_base.record))]
