"""The summary table printed at the end of a run: one row per cell, the figures that matter."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text

from harness import metric_table
from harness.bundle.cell_record import CellRecord
from harness.measure.protocol import PHASE_KINDS, PHASES
from harness.plain_text import one_line, visible
from harness.run.isolation import stopped_in

STATUS_STYLE = {"valid": "green", "invalid": "yellow", "failed": "red", "skipped": "dim", "interrupted": "magenta"}
# A phase in a record that this harness does not know (a worker of another version): counted on its
# own, never as process start and exit.
OTHER_PHASES = "other phases"
_KIND = {phase.name: phase.kind for phase in PHASES}
FURTHER_ROUNDS = "further rounds"  # the time line's share of the rounds after each cell's first
# The time of a cell whose worker gave no answer (killed, out of memory, past its time limit): its
# phases are unknown, and its minutes are neither process start nor exit.
NO_ANSWER = "cells with no answer"


def time_by_kind(record: CellRecord) -> dict[str, float]:
    """Seconds of a cell's worker by kind of phase (harness/measure/protocol.py), unknown phases apart.
    A worker stopped in a phase (its time limit, a kill) records only the phases that ended: the rest
    of its time, up to the stop, is the phase it was stopped in, where it was counted as process
    start and exit ("40 s: 3 passes, 0 LoadGen" for a cell its limit stopped in LoadGen)."""
    kinds = dict.fromkeys((*PHASE_KINDS, OTHER_PHASES), 0.0)
    for name, seconds in record.phases_s.items():
        kinds[_KIND.get(name, OTHER_PHASES)] += seconds
    stopped = stopped_in(record.reasons[0]) if record.status == "failed" and record.phases_s and record.reasons else None
    if stopped in _KIND and stopped not in record.phases_s:
        kinds[_KIND[stopped]] += max((record.wall_s or 0.0) - sum(record.phases_s.values()), 0.0)
    return kinds


def further_rounds(record: CellRecord) -> tuple[int, float]:
    """How many further rounds the cell ran (`timing: {rounds: N}`, harness/run/rounds.py) and their
    workers' seconds: the record's own `wall_s` and phases are round 1's."""
    rounds = [r for r in record.metrics.rounds or () if r.round > 1]
    return len(rounds), sum(r.wall_s or 0.0 for r in rounds)


def _cell_time(record: CellRecord) -> str:
    wall = record.wall_s or 0.0
    count, further = further_rounds(record)
    more = f"; {count} further round{'s' if count != 1 else ''} {further:.0f} s" if count else ""
    if not record.phases_s:
        return f"{wall:.0f} s{more}"
    kinds = time_by_kind(record)
    shown = ("tuning", "compile", "passes", "LoadGen") if kinds["tuning"] >= 0.5 else ("compile", "passes", "LoadGen")
    return f"{wall:.0f} s: " + ", ".join(f"{kinds[k]:.0f} {k}" for k in shown) + more


def time_line(records: list[CellRecord]) -> str:
    """Where the whole run's time went, one line; further rounds are a kind of their own."""
    further = sum(further_rounds(r)[1] for r in records)
    wall = sum(r.wall_s or 0.0 for r in records) + further
    if wall <= 0:
        return "no cell ran"
    kinds = dict.fromkeys((*PHASE_KINDS, OTHER_PHASES), 0.0)
    for record in records:
        for kind, seconds in time_by_kind(record).items():
            kinds[kind] += seconds
    if not kinds[OTHER_PHASES]:
        del kinds[OTHER_PHASES]
    if further:
        kinds[FURTHER_ROUNDS] = further
    unanswered = sum(r.wall_s or 0.0 for r in records if r.status == "failed" and not r.phases_s)
    if unanswered:
        kinds[NO_ANSWER] = unanswered
    kinds["process start and exit"] = max(wall - sum(kinds.values()), 0.0)
    return f"cells took {wall / 60:.1f} min: " + ", ".join(f"{k} {v / wall:.0%}" for k, v in kinds.items())


def summary_table(records: list[CellRecord]) -> Table:
    table = Table(title="FusionBench results", show_lines=False)
    columns = metric_table.present(metric_table.CONSOLE, records)
    for head in ("cell", "status", *(metric_table.label(c) for c in columns), "cell time"):
        table.add_column(head)
    for r in records:
        c, status = r.config, r.status
        lines = (f"{c.model.name} {c.variant_label}{c.options_label}", f"{c.scenario} {c.dtype} b{c.batch}{c.model_detail}")
        cell = "\n".join(visible(line) for line in lines)
        table.add_row(Text(cell), Text(status, style=STATUS_STYLE.get(status, "")),
                      *(Text(visible(metric_table.figure(column, r))) for column in columns), _cell_time(r))
    return table


def fusion_summary(records: list[CellRecord], resumed: list[Any] | None) -> Table | None:
    """Fusion on vs off for every model, backend and setting that ran both, or None; `resumed`: when
    the run was resumed (bundle.json's `resumed`), which tells the pairs whose rounds did not pair."""
    from harness.reporting.cell_rows import rows_of
    from harness.reporting.fusion_pairs import fusion_pairs, fusion_pairs_apart, fusion_table

    rows = rows_of(records, resumed)
    pairs = fusion_pairs(rows)
    apart = fusion_pairs_apart(rows)
    if not pairs and not apart:  # a run whose only pairs ran apart still says so
        return None
    head, body = fusion_table(pairs)
    table = Table(title="Fusion on vs off (speedup = off / on, the geometric mean over the paired rounds; in "
                        "brackets its confidence interval; the verdict: faster, slower, under 5%, size unclear or no effect seen "
                        "at that confidence, or one round: `timing: {rounds: N}` gives an interval (none where every round gives one "
                        "ratio: rounds alike); in red where "
                        "fusion made the cell slower by its verdict, or by more than 5% in one round)",
                  caption=(f"{len(apart)} pair(s) not set side by side: their cells ran on other shares of the "
                           "machine, other hardware or two starts of it (report.md says which)") if apart else None)
    for column in head:
        table.add_column(column)
    for row, pair in zip(body, pairs):
        style = "red" if pair.made_slower else ""  # as the reports' "where fusion made things slower"
        table.add_row(*(Text(visible(value)) for value in row), style=style)
    return table


def skipped_lines(records: list[CellRecord], shown: int) -> list[str]:
    """Why cells were skipped, a line a reason with how many cells it skipped (most first, at most
    `shown`): the table says only `skipped`, and a plugin that failed to load is skipped too."""
    counts: dict[str, int] = {}
    for record in records:
        if record.status == "skipped":
            reason = one_line(record.reasons[0]) if record.reasons else "no reason recorded"
            counts[reason] = counts.get(reason, 0) + 1
    if not counts:
        return []
    ranked = sorted(counts.items(), key=lambda item: -item[1])
    lines = [f"{sum(counts.values())} cell(s) skipped:"] + [f"  {n} cell(s): {reason}" for reason, n in ranked[:shown]]
    if len(ranked) > shown:
        lines.append(f"  ({len(ranked) - shown} more reasons, each in its cells' JSON and report.md)")
    return lines
