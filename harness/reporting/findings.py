"""What several bundles say together about fusion: the questions the tool exists for, answered per
model and across models (`fusionbench findings BUNDLE... --out DIR`; findings_page.py renders them).

Per model and setting (scenario, batch, dtype, device; the input size, said where another bundle ran
the model at another), one line per backend: fusions by class
(fusion on), kernels per inference on and off, the fusion speedup with its interval and verdict,
each variant against eager, host and GPU memory on and off, the tuning a backend did; where
fusion made the model slower, the fused kernels, the kernels the time went to (GPU) and the share
of time inside kernels on and off. Across models, per backend: how many models fusion made
faster, slower or left unchanged (a verdict needs rounds and an effect of `SMALLEST_EFFECT`, 5%, at
least: harness/stats/intervals.py; a one-round pair is sorted by its point estimate against the same 5%
and says so), the range of fusions per model, and the pairs whose fusions launched no fewer
kernels than fusion off (fusions of graph nodes, not of kernels). Which cells ran slower or faster
than eager, and why by operator class, is findings_eager.py's.

Latency is the device-timing median per batch (over the rounds where a cell has several), as in
the report (harness/reporting/cell_rows.py and fusion_pairs.py), whose rows and pairs this reuses.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from harness import metric_table
from harness.bundle.header_record import Node
from harness.bundle.reader import LoadedBundle, lookup
from harness.bundle.record_base import read_as
from harness.metric_table import format_times
from harness.plain_text import one_line
from harness.reporting import kind_moves
from harness.reporting.cell_rows import Row, bundle_rows, fmt_time_over_rounds, planned_configs, setting_of, setting_paired
from harness.reporting.fusion_pairs import FusionPair, fusions_by_class, on_off
from harness.reporting.kernels import fused_kernels, slowest_kernels_by_side, time_moved
from harness.reporting.pairing import other_threads, passed_variables
from harness.reporting.run_facts import apart, other_cpus, ran_on
from harness.reporting.run_facts import facts as bundle_facts
from harness.reporting.speedups import one_estimate_text, over_baseline, slower_beyond_noise, speedup_marks
from harness.scenario.cell_config import CellConfig
from harness.stats.intervals import (
    FASTER,
    FASTER_UNCLEAR,
    NEGLIGIBLE,
    NO_EFFECT,
    ROUNDS_ALIKE,
    SLOWER,
    SLOWER_UNCLEAR,
    SMALLEST_EFFECT,
)

# Memory on and off; a backend's arena where a cell of the model reports one; the GPU figures (its
# peak, the DRAM bytes from its counters) on a GPU only.
MEMORY = ("peak_rss", "arena_peak", "gpu_peak", "dram_bytes")
BASELINE = "eager"


@dataclass(frozen=True)
class Line:
    """One backend (its options and graphs setting) on one model and setting: its fusion-on and
    fusion-off cells, either possibly missing or not valid."""

    backend: str
    on: Row | None
    off: Row | None
    off_listed: bool = False  # bundle.json lists a fusion-off cell that has no record (the run stopped first)

    @property
    def both_valid(self) -> bool:
        return self.on is not None and self.off is not None and is_valid(self.on) and is_valid(self.off)

    @property
    def pair(self) -> FusionPair | None:
        """Fusion on and off, both valid and run where they can be set side by side (`run_facts.apart`)."""
        if self.both_valid and self.on is not None and self.off is not None and not apart(self.on.record, self.off.record):
            return FusionPair(self.on, self.off)
        return None

    @property
    def has_switch(self) -> bool:
        """Whether the backend has fusion off here at all (eager has no switch): a cell of it ran, or was
        listed and never run."""
        return self.off is not None or self.off_listed


@dataclass(frozen=True)
class Group:
    """One model in one setting, as one bundle measured it; `named` where another bundle measured
    the same model and setting (its title then names the bundle). `borrowed`: eager's cell from
    another bundle, where this one has none of its own and the other ran it on the same hardware
    and share of it, with the same threads (the vision suite's eager and TVM cells were run as
    bundles of their own)."""

    model: str
    setting: str
    bundle: str
    lines: tuple[Line, ...]
    named: bool = False
    borrowed: tuple[Row, str] | None = None  # (eager's cell, its bundle)
    paired: bool = False  # whether the bundle's rounds took turns by setting (`cell_rows.setting_paired`)
    input_size: int | None = None
    sized: bool = False  # another group of the model ran it at another input size

    @property
    def title(self) -> str:
        # The setting says an input size only where it is not the model's own, and a plugin model's own
        # size is its bundle's record: two versions' bundles, each at its own size, read alike but for
        # the bundle's name.
        size = f" input {self.input_size}"
        said = size if self.sized and f"{size} " not in f"{self.setting} " else ""
        return f"{self.model} {self.setting}{said}" + (f" ({self.bundle})" if self.named else "")

    @property
    def measured(self) -> tuple[str, str, int | None]:
        """What sets this model's measurement apart from another bundle's: the setting and the input size."""
        return self.model, self.setting, self.input_size

    @property
    def own_eager(self) -> Row | None:
        """Eager's valid cell in this bundle, checked against itself."""
        for line in self.lines:
            if line.backend == BASELINE and line.on is not None and is_valid(line.on) and line.on.checked_against_eager:
                return line.on
        return None

    @property
    def eager(self) -> Row | None:
        """What each variant's speed is measured against: eager's cell here, else the one borrowed."""
        return self.own_eager or (self.borrowed[0] if self.borrowed is not None else None)

    @property
    def eager_note(self) -> str:
        """Where `eager` came from, where not from this bundle: said beside the model's table (nothing
        where no cell here gave a time to set against it)."""
        if self.own_eager is not None or not any(is_valid(row) for line in self.lines for row in (line.on, line.off) if row):
            return ""
        if self.borrowed is not None:
            return (f"vs eager: eager's cell from {self.borrowed[1]}, the same model and setting on the same hardware "
                    "and threads in another run.")
        return ("vs eager: no valid eager cell of this model and setting on the same hardware and threads in these "
                "bundles.")


def is_valid(row: Row) -> bool:
    """A cell that gave a figure: valid, with a median."""
    return row.status == "valid" and row.median_ns is not None


def _label(config: CellConfig) -> str:
    graphs = " graphs" if config.variant.graphs == "on" else ""
    return f"{config.backend}{graphs}{config.options_label}"


def groups(bundles: list[LoadedBundle]) -> list[Group]:
    """Every model and setting of the bundles, in the order first met, one line per backend; a cell
    bundle.json lists with no record (an interrupted run) is on its line as not run (None), never left
    out: a TVM pair whose fusion-off cell never ran read `no switch`, and left the summary's counts."""
    found: dict[tuple[str, str, int, str], dict[str, dict[str, Row | None]]] = {}
    paired = {loaded.name: setting_paired(loaded) for loaded in bundles}
    for loaded in bundles:
        for row in bundle_rows(loaded):
            lines = found.setdefault((row.model, row.setting, row.config.input_size, loaded.name), {})
            lines.setdefault(_label(row.config), {})[row.fusion] = row
        for config in planned_configs(loaded):
            lines = found.setdefault((config.model.name, setting_of(config), config.input_size, loaded.name), {})
            lines.setdefault(_label(config), {}).setdefault(config.variant.fusion, None)
    seen = [(model, setting, size) for model, setting, size, _ in found]
    sizes: dict[str, set[int]] = {}
    for model, _, size, _ in found:
        sizes.setdefault(model, set()).add(size)
    made = [Group(model, setting, bundle, tuple(Line(label, sides.get("on"), sides.get("off"), "off" in sides)
                                                for label, sides in lines.items()), seen.count((model, setting, size)) > 1,
                  paired=paired[bundle], input_size=size, sized=len(sizes[model]) > 1)
            for (model, setting, size, bundle), lines in found.items()]
    passed = frozenset().union(*(passed_variables(lookup(loaded.header, "scenario", "env")) for loaded in bundles))
    return [_with_eager_from_elsewhere(group, made, passed) for group in made]


def _with_eager_from_elsewhere(group: Group, every: list[Group], passed: frozenset[str]) -> Group:
    """`group` with eager's cell borrowed from another bundle's group of its model and setting,
    where it has none of its own and that one ran where its cells did (hardware and share) and as
    they did (torch's threads, and the variables `passed`, any bundle's `env:` names: `other_threads`)."""
    rows = [row for line in group.lines for row in (line.on, line.off) if row is not None and is_valid(row)]
    if group.own_eager is not None or not rows:
        return group
    where = {ran_on(row.record) for row in rows}
    if any(hardware is None for hardware, _ in where):  # a cell that did not record its machine: none to match
        return group
    for other in every:
        eager = other.own_eager
        if (other.bundle != group.bundle and other.measured == group.measured
                and eager is not None and where == {ran_on(eager.record)}
                and all(other_cpus(read_as(Node, row.record.node), read_as(Node, eager.record.node)) is None
                        and not other_threads(row.record, eager.record, passed) for row in rows)):
            return replace(group, borrowed=(eager, other.bundle))
    return group


def _status(row: Row | None) -> str:
    """A cell that gave no figure, in a few words: `failed: prepare: ...`, `skipped: ...`, `not run`."""
    if row is None:
        return "not run"
    reasons = "; ".join(map(one_line, row.record.reasons))
    return f"{row.status}: {reasons}" if reasons else row.status


def _side(row: Row | None, column: str) -> str:
    if row is None or not is_valid(row):
        return "-"
    return row.figure(column)


def _on_off(line: Line, column: str) -> str:
    on = _side(line.on, column)
    if not line.has_switch:
        return on
    if line.on is not None and line.off is not None and is_valid(line.on) and is_valid(line.off):
        return on_off(column, line.on, line.off)
    return f"{on} / {_side(line.off, column)}"


def against_eager(group: Group, row: Row | None) -> str:
    """`row` against its group's eager cell as the tables show it: the paired rounds' speedup with its
    interval and verdict where they pair, else one estimate; `-` where there is none to give."""
    eager = group.eager
    if row is None or not is_valid(row) or eager is None or not row.checked_against_eager:
        return "-"
    if apart(row.record, eager.record):
        return "- (ran apart from eager)"
    mark = speedup_marks(row, eager) if row is not eager else ""
    paired = over_baseline(row, eager, group.paired and eager is group.own_eager) if row is not eager else None
    if paired is not None:
        return paired.text() + mark
    if row is eager:
        return format_times(1.0)
    estimate = one_estimate_text(row, eager)
    return "-" if estimate is None else estimate + mark


def _speedup(line: Line) -> str:
    pair = line.pair
    if pair is not None:
        return pair.result.text() + speedup_marks(pair.on, pair.off)
    if not line.has_switch:
        return "no switch" if line.on is not None and is_valid(line.on) else _status(line.on)
    if line.both_valid and line.on is not None and line.off is not None:  # then they ran apart
        return f"not set side by side: {apart(line.on.record, line.off.record)}"
    broken = [(side, _status(row)) for side, row in (("on", line.on), ("off", line.off)) if row is None or not is_valid(row)]
    if len(broken) == 2 and broken[0][1] == broken[1][1]:
        return broken[0][1]  # both sides alike (TensorRT skipped on a CPU): said once
    return "; ".join(f"{side} {status}" for side, status in broken)


def _tuning(line: Line) -> str:
    tunings = [row.metrics.tuning for row in (line.on, line.off) if row is not None and row.metrics.tuning is not None]
    if not tunings:
        return "-"
    parts = []
    for tuning in tunings:
        if not tuning.tuned:
            parts.append("untuned")
        else:
            parts.append(f"{tuning.trials_per_task}/task, {tuning.tasks_tuned} of {tuning.tasks} tasks, "
                         f"{metric_table.format_value(tuning.tuning_s, 's')} ({tuning.cache})")
    return " / ".join(parts)


def model_table(group: Group, gpu: bool) -> tuple[list[str], list[list[str]]]:
    """One line per backend of `group`: fusions, kernels, speedup, against eager, memory, tuning."""
    records = [row.record for line in group.lines for row in (line.on, line.off) if row is not None]
    # the arena where a cell has one (metric_table.present); the GPU's figures on a GPU, shown "-" where absent
    memory = [name for name in metric_table.present(MEMORY, records, optional=("arena_peak",))
              if gpu or name in ("peak_rss", "arena_peak")]
    head = ["backend", "fusions on (by class)", "kernels/inf on / off", "time on / off", "fusion speedup (off / on)",
            "vs eager on / off", *(f"{metric_table.label(name)} on / off" for name in memory), "tuning"]
    body = []
    for line in group.lines:
        fusions = fusions_by_class(line.on) if line.on is not None and is_valid(line.on) else "-"
        valid_on, valid_off = (row is not None and is_valid(row) for row in (line.on, line.off))
        times = fmt_time_over_rounds(line.on) if valid_on and line.on is not None else "-"
        if line.has_switch:
            times += " / " + (fmt_time_over_rounds(line.off) if valid_off and line.off is not None else "-")
        against = against_eager(group, line.on)
        if line.has_switch:
            against += f" / {against_eager(group, line.off)}"
        body.append([line.backend, fusions, _on_off(line, "kernels_per_inference"), times, _speedup(line), against,
                     *(_on_off(line, name) for name in memory), _tuning(line)])
    return head, body


def slower_notes(group: Group) -> list[str]:
    """Each pair of `group` whose fusion made it slower: what was fused, where the time went."""
    notes = []
    for line in group.lines:
        pair = line.pair
        if pair is None or not pair.made_slower:
            continue
        split = "; ".join(f"{side} {share}" for side, row in (("on", pair.on), ("off", pair.off))
                          if (share := _kernel_share(row)) is not None)
        notes.append(
            f"{line.backend}: {pair.result.text()}{speedup_marks(pair.on, pair.off)}. "
            f"Fused kernels: {'; '.join(fused_kernels(pair.on)) or 'none reported'}"
            + "".join(f". Most time with fusion {side}: {'; '.join(slowest)}" for side, slowest in slowest_kernels_by_side(pair))
            + (f". Time moved by kind (on less off): {'; '.join(moved)}" if (moved := time_moved(pair)) else "")
            + (f". Time inside kernels: {split}" if split else ""))
    return notes


def _kernel_share(row: Row) -> str | None:
    split = row.metrics.time_split
    if split is None or split.kernel_ns is None or row.median_ns is None or row.median_ns <= 0:
        return None
    return f"{split.kernel_ns / row.median_ns:.0%}"


@dataclass(frozen=True)
class Tally:
    """How fusion moved one backend's models."""

    faster: list[str] = field(default_factory=list)
    slower: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    negligible: list[str] = field(default_factory=list)  # an effect seen, under the smallest one
    one_round_up: list[str] = field(default_factory=list)
    one_round_down: list[str] = field(default_factory=list)
    one_round_flat: list[str] = field(default_factory=list)
    broken: list[str] = field(default_factory=list)  # a pair without two valid cells, or whose cells ran apart


def tally(all_groups: list[Group], backend: str) -> Tally:
    counted = Tally()
    by_verdict = {FASTER: counted.faster, FASTER_UNCLEAR: counted.faster, SLOWER: counted.slower,
                  SLOWER_UNCLEAR: counted.slower, NO_EFFECT: counted.unchanged, NEGLIGIBLE: counted.negligible}
    for group in all_groups:
        for line in group.lines:
            if line.backend != backend or not line.has_switch:
                continue
            pair = line.pair
            if pair is None:
                counted.broken.append(group.title + (" (ran apart)" if line.both_valid else ""))
                continue
            result = pair.result
            if result.interval is not None:
                bucket = by_verdict[result.verdict]
            elif result.value > 1 + SMALLEST_EFFECT:
                bucket = counted.one_round_up
            elif slower_beyond_noise(result.value):
                bucket = counted.one_round_down
            else:
                bucket = counted.one_round_flat
            unclear = " size unclear" if result.verdict in (FASTER_UNCLEAR, SLOWER_UNCLEAR) else ""
            alike = f" ({result.verdict_counted()})" if result.verdict == ROUNDS_ALIKE else ""  # counted as one round
            bucket.append(f"{group.title} {format_times(result.value)}{unclear}{alike}")
    return counted


def _names(items: list[str]) -> str:
    return f"{len(items)}" + (f" ({', '.join(items)})" if items else "")


def summary_table(all_groups: list[Group]) -> tuple[list[str], list[list[str]]]:
    """Per backend with a fusion switch: how fusion moved its models, and the fusions per model."""
    head = ["backend", "faster", "slower", "no effect seen", "under 5%", "one round: above 1.05x",
            f"one round: below {1 / (1 + SMALLEST_EFFECT):.3f}x", "one round: within 5%",
            "no pair (a side not valid, or the two ran apart)",
            "fusions per model (fusion on)"]
    body = []
    backends = list(dict.fromkeys(line.backend for g in all_groups for line in g.lines if line.has_switch))
    for backend in backends:
        t = tally(all_groups, backend)
        body.append([backend, *(_names(items) for items in (t.faster, t.slower, t.unchanged, t.negligible,
                                                              t.one_round_up, t.one_round_down, t.one_round_flat,
                                                              t.broken)),
                     fusion_range(all_groups, backend)])
    return head, body


def fusion_counts(all_groups: list[Group], backend: str) -> list[tuple[Group, int]]:
    """(model and setting, fusions) of each valid fusion-on cell of `backend`."""
    counts = []
    for group in all_groups:
        for line in group.lines:
            if line.backend == backend and line.on is not None and is_valid(line.on) and line.on.metrics.fusion_report:
                counts.append((group, line.on.metrics.fusion_report.fusion_count))
    return counts


def fusion_range(all_groups: list[Group], backend: str) -> str:
    """The fewest and most fusions of `backend` over its valid fusion-on cells, and over how many
    models and settings: where several bundles measured one, how many measurements of how many (two
    runs of one file read as twice the models)."""
    counts = fusion_counts(all_groups, backend)
    if not counts:
        return "-"
    low = min(counts, key=lambda c: c[1])
    high = max(counts, key=lambda c: c[1])
    distinct = len({group.measured for group, _ in counts})
    kinds = f"{distinct} model{'s' if distinct > 1 else ''} and setting{'s' if distinct > 1 else ''}"
    over = kinds if distinct == len(counts) else f"{len(counts)} measurements of {kinds}"
    if low[1] == high[1]:
        return f"{low[1]} in each of {over}" if len(counts) > 1 else f"{low[1]} in {over}"
    return f"{low[1]} ({low[0].title}) to {high[1]} ({high[0].title}), over {over}"


def no_fewer_kernels(all_groups: list[Group]) -> tuple[list[str], list[list[str]]]:
    """Every valid pair whose fusion-on cell reports fusions yet launches (on a CPU, dispatches) as
    many kernels as fusion off, or more: fusions of graph nodes that are not fusions of kernels (a
    fused node that still runs its parts as kernels of their own), or fusions paid for with kernels
    of another kind (layout reorders)."""
    head = ["model and setting", "backend", "fusions (fusion on)", "kernels/inf on / off",
            "kinds run more often (calls on, off)", "DRAM/inf on / off", "fusion speedup (off / on)"]
    body = []
    for group in all_groups:
        for line in group.lines:
            pair = line.pair
            if pair is None:
                continue
            report = pair.on.metrics.fusion_report
            on, off = pair.on.kernels, pair.off.kernels
            if report is None or report.fusion_count == 0 or on is None or off is None or on < off:
                continue
            added = kind_moves.calls_added(pair.on.metrics.kernels, pair.off.metrics.kernels)
            body.append([group.title, line.backend, fusions_by_class(pair.on), _on_off(line, "kernels_per_inference"),
                         "; ".join(added) or "-", _on_off(line, "dram_bytes"), _speedup(line)])
    return head, body


def facts(bundles: list[LoadedBundle]) -> list[tuple[str, str]]:
    """Which bundles, machines and cells the findings stand on."""
    out = []
    for loaded in bundles:
        known = dict(bundle_facts(loaded))
        out.append((loaded.name, "; ".join(f"{key} {known[key]}" for key in
                                           ("scenario file", "LoadGen profile", "device", "CPU", "GPU", "libraries",
                                            "plugin models", "harness", "cells", "interrupted")
                                           if key in known)))
    return out


def any_gpu(all_groups: list[Group]) -> bool:
    return any(metric_table.value("gpu_peak", row.record) is not None
               for g in all_groups for line in g.lines for row in (line.on, line.off) if row is not None)
