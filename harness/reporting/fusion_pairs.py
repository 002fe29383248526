"""Fusion on against off: the pairs of valid cells that differ in fusion alone (`FusionPair`), those
whose cells ran apart, the speedup of each with its interval and verdict, the report's fusion
table (what the console summary shows too) and what each backend's fusion off changed."""

from __future__ import annotations

import json
from dataclasses import dataclass

from harness import metric_table
from harness.plain_text import visible
from harness.reporting.cell_rows import Row, fmt_time_over_rounds, valid_rows
from harness.reporting.run_facts import apart
from harness.reporting.speedups import is_slower, speedup_marks
from harness.stats.intervals import SMALLEST_EFFECT, Speedup, paired_speedup, unpaired_speedup

SLOWER_NOTE = (
    f"The fusion pairs fusion made slower: slower by their verdict over rounds, or, of one round, a speedup below "
    f"{1 / (1 + SMALLEST_EFFECT):.3f} (a smaller slowdown in one round is within what a rerun moves). `fusionbench "
    "findings` counts them alike. Their speedups carry the fusion table's marks (`noisy`, `busy`, cores busy). Each "
    "says where its kernel time moved kind by kind, where both its cells list kinds, each side's kinds and slowest kernels "
    "at its time over its rounds (the profile is round 1's, applied to that time)."
)
SPEEDUP_NOTE = (
    "Speedup = fusion off over fusion on (below 1: fusion made it slower), the geometric mean over the rounds both "
    "cells ran (`timing: {rounds: N}`: fresh processes, on and off alternating, so round i of both met the same "
    "stretch of the machine). In brackets its confidence interval from those paired rounds (Student's t on their "
    "logs) and the verdict: faster or slower where the whole interval is above or below 1 and the speedup is at "
    "least 5% (1.05x, or 1/1.05 = 0.952x), under 5% where the whole interval lies between 1 and 5%, `size "
    "unclear` where it is on one side of 1 and the speedup is under 5% but the interval reaches past it, else no "
    "effect seen. `rounds not paired`: the two cells ran in different starts of a resumed run, so no round of one "
    "met the stretch of the machine a round of the other met; the interval is then the two samples' (Student's t "
    "on the difference of their mean logs, the variance pooled), wider for the same spread. "
    "A cell of one round has no interval: its process's placement and the machine's phase are in its figure "
    "unseen; nor have `rounds alike`, every round one ratio (a coarse clock's medians), whose spread of 0 is the "
    "clock's resolution. On and off: each cell's median over its rounds, in brackets that median's interval from the order "
    "of the rounds' medians and the coverage so few rounds give it (2 rounds: 50%, 3: 75%, 6: 97%) "
    "(docs/metrics.md, Speedups). `noisy` and `busy`: either cell's timing samples spread beyond 10% of their "
    "mean, or other processes took CPU during its timed calls (its warnings say which). `(cores busy A against "
    "B)`: the two CPU cells kept cores busy half a core apart or more, so the speedup holds how far each spread "
    "its work (or a thread pool's size) beside fusion's effect."
)

# Said where the memory columns set fusion on and off side by side: their difference was read as
# fusion's memory effect, where it is mostly the compile's and the run's noise (docs/metrics.md, Memory).
MEMORY_NOTE = (
    "Peak RSS on / off: one reading a cell (its memory pass runs once, in round 1: no spread to judge a difference "
    "by) of the worker's lifetime peak, which holds the imports before the model was built (`rss_baseline_bytes`: "
    "on the 2-core VM 424 MiB in a run of eager alone, 590 where ONNX Runtime and TVM were preloaded beside it), the "
    "eager reference and the compile besides the inference: two "
    "runs of one Inductor cell there read 850 and 862 MiB, so on and off a few percent apart says nothing of "
    "fusion (a record since 2026-12-06 keeps the memory pass's own peak apart, the compile's passing peak left out: "
    "`inference_peak_rss_delta_bytes`); where one cell compiled cold in its worker and the other read its "
    "compile from the cache, the figure says so beside it (`(prepare_cache cold / warm)`: resnet18's ONNX Runtime "
    "pair read 791 / 652 MiB so, 713 / 652 both warm), and `compare` would not set the two against each other. "
    "Arena peak on / off (a backend that reports its allocator's arena: ONNX "
    "Runtime): the arena at its fullest in the profile pass, one reading a cell, of what the backend allocated "
    "itself: the weights it repacked for its kernels and a run's planned activations and scratch (resnet18 at "
    "input 32, batch 1, on the 2-core VM: 2.05 / 2.22 MiB, of which about 1.95 MiB is in use before a run begins, "
    "its classifier's weight repacked for its Gemm, so fusion saved about 0.17 MiB of activations). GPU peak on / "
    "off: all the process holds on the GPU, its CUDA context and its backend's allocator pool besides the "
    "inference's own (docs/metrics.md, Memory)."
)


@dataclass(frozen=True)
class FusionPair:
    on: Row
    off: Row

    @property
    def result(self) -> Speedup:
        """The speedup of fusion on over off (off over on) from the rounds both cells have, with its
        interval and verdict (harness/stats/intervals.py); one round gives the ratio of the two medians.
        Where the two cells ran in different starts of a resumed run, their rounds did not pair: the
        interval is the two samples' (`unpaired_speedup`)."""
        on, off = self.on.round_medians, self.off.round_medians
        if None not in (self.on.start, self.off.start) and self.on.start != self.off.start:
            return unpaired_speedup(list(on.values()), list(off.values()))
        paired = sorted(set(on) & set(off))
        return paired_speedup([on[r] for r in paired], [off[r] for r in paired])

    @property
    def speedup(self) -> float:
        return self.result.value

    @property
    def made_slower(self) -> bool:
        """Fusion made the pair slower: by its verdict where it has rounds, else by more than the
        smallest effect (a pair of one round at 0.99x is no finding)."""
        return is_slower(self.result)

    @property
    def name(self) -> str:
        graphs = " graphs" if self.on.graphs == "on" else ""
        return f"{self.on.model} {self.on.backend}{graphs}{self.on.options} {self.on.setting}"


def fusion_pairs(rows: list[Row]) -> list[FusionPair]:
    """Valid cells that differ only in fusion on/off (the whole config alike but fusion) and ran where
    their times can be set side by side (`run_facts.apart`; `not_side_by_side` names the others)."""
    return [pair for pair in _alike_in_all_but_fusion(rows) if not apart(pair.on.record, pair.off.record)]


def _alike_in_all_but_fusion(rows: list[Row]) -> list[FusionPair]:
    on = {r.pair_key: r for r in valid_rows(rows) if r.fusion == "on"}
    return [FusionPair(on[r.pair_key], r) for r in valid_rows(rows) if r.fusion == "off" and r.pair_key in on]


def pairs_apart(rows: list[Row]) -> list[tuple[FusionPair, str]]:
    """The fusion pairs whose cells ran apart (`run_facts.apart`), each with why."""
    return [(pair, why) for pair in _alike_in_all_but_fusion(rows) if (why := apart(pair.on.record, pair.off.record))]


def fusion_pairs_apart(rows: list[Row]) -> list[str]:
    """The fusion pairs whose cells ran apart, each with why, in words."""
    return [f"{pair.name}: fusion on and off not set side by side: {why}" for pair, why in pairs_apart(rows)]


#: Beside the speedup of a pair whose two fusion reports list the same kernels, each running the same
#: operators: the backend's switch changed no fusion (a plugin that ignores `variant.fusion`, or a
#: model with nothing to fuse), so the speedup is the two cells' noise, which stood as fusion's effect.
SAME_KERNELS_MARK = " (the same kernels on and off: not fusion's effect)"


def same_kernels_mark(pair: FusionPair) -> str:
    """SAME_KERNELS_MARK where both cells' fusion reports list the same kernels with the same operators; "" otherwise,
    and where they list none (a backend that cannot see its kernels): two empty lists show no kernel alike."""
    on, off = pair.on.metrics.fusion_report, pair.off.metrics.fusion_report
    same = on is not None and off is not None and bool(on.kernels) and on.kernels == off.kernels
    return SAME_KERNELS_MARK if same else ""


def fmt_speedup(pair: FusionPair) -> str:
    """The fusion speedup, its interval over the paired rounds and the verdict: `1.18x [1.09-1.28,
    95%] faster`, or `1.18x (one round)`."""
    return pair.result.text()


def fusions_by_class(row: Row) -> str:
    report = row.metrics.fusion_report
    if report is None:
        return "0"
    if not report.fusions_by_class:  # bundles written before fusions were counted by class
        return str(report.fusion_count)
    return ", ".join(f"{count} {cls}" for cls, count in report.fusions_by_class.items() if count) or "0"


SWITCHED_NOTE = (
    "What fusion off changed besides the kernels, by the rewrites each cell records its backend ran (`rewrites`, "
    "docs/metrics.md): each setting whose value differs between a pair's two cells, fusion on / off. A fusion "
    "switch is expected here; any other setting (ONNX Runtime's blocked NCHWc layout on CPU, which comes only with "
    "its fusions; another schedule database) is in the pair's speedup as well as fusion."
)
#: A list or mapping setting's entries shown at most (the rest counted): ONNX Runtime's fusion off leaves out 30 or so.
_NAMES_SHOWN = 8
#: The characters of one name or value shown at most (the rest counted): a plugin's setting is any JSON, a pass
#: pipeline written out whole among them, and a table cell holds it on one line.
_CHARS_SHOWN = 80


def switched(pair: FusionPair) -> dict[str, tuple[object, object]]:
    """Each rewrite setting the pair's two cells record apart: its value with fusion on and off."""
    on, off = pair.on.metrics.rewrites or {}, pair.off.metrics.rewrites or {}
    return {key: (on.get(key), off.get(key)) for key in sorted(on.keys() | off.keys()) if on.get(key) != off.get(key)}


def _text(value: object) -> str:
    """A text as it is, any other value as JSON."""
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


def _cut(text: str) -> str:
    return visible(text if len(text) <= _CHARS_SHOWN else f"{text[:_CHARS_SHOWN]}... ({len(text)} characters)")


def _setting(value: object) -> str:
    """A setting's value on one line: a list's or a mapping's first entries, the rest counted, and
    each entry, or a text, cut to its first characters."""
    if value is None:
        return "not recorded"
    if isinstance(value, dict):
        value = [f"{key}: {_text(item)}" for key, item in sorted(value.items(), key=lambda entry: str(entry[0]))]
    if isinstance(value, list):
        if not value:
            return "none"
        shown = ", ".join(_cut(_text(item)) for item in value[:_NAMES_SHOWN])
        return shown + (f" and {len(value) - _NAMES_SHOWN} more" if len(value) > _NAMES_SHOWN else "")
    return _cut(_text(value))


def switched_table(pairs: list[FusionPair]) -> tuple[list[str], list[list[str]]]:
    """One line per backend and the settings its fusion off changed, with the models of the pairs it
    changed those for (a CNN's layout can differ where a transformer's does not). A setting whose
    values differ from model to model (TVM's schedule database, tuned for each) is said so, once."""
    groups: dict[tuple[str, tuple[str, ...]], list[dict[str, tuple[object, object]]]] = {}
    models: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for pair in sorted(pairs, key=lambda p: p.on.backend):
        apart = switched(pair)
        key = (pair.on.backend, tuple(apart))
        groups.setdefault(key, []).append(apart)
        if pair.on.model not in models.setdefault(key, []):
            models[key].append(pair.on.model)
    body = []
    for (backend, settings), found in groups.items():
        said = []
        for setting in settings:
            values = {json.dumps(apart[setting], sort_keys=True, default=str): apart[setting] for apart in found}
            if len(values) == 1:
                on, off = next(iter(values.values()))
                said.append(f"{visible(setting)}: {_setting(on)} / {_setting(off)}")
            else:
                said.append(f"{visible(setting)}: on differs from off, and from pair to pair")
        body.append([backend, ", ".join(models[(backend, settings)]), "; ".join(said) or "nothing its cells record"])
    return ["backend", "models", "what fusion off changed (on / off)"], body


def on_off(column: str, on: Row, off: Row) -> str:
    """A figure of fusion on and off side by side (`791 MiB / 652 MiB`), with the setting it depends on
    where the two cells differ in it (`(prepare_cache cold / warm)`: a cold compile's peak is in the
    peak RSS of its cell), which `compare` would not set against each other."""
    text = f"{on.figure(column)} / {off.figure(column)}"
    unlike = metric_table.unlike_setting(metric_table.metric(column), on.record, off.record)
    if unlike is None or metric_table.MISSING in (on.figure(column), off.figure(column)):
        return text
    name, value_on, value_off = unlike
    return f"{text} ({visible(str(name))} {visible(str(value_on))} / {visible(str(value_off))})"


def fusion_table(pairs: list[FusionPair]) -> tuple[list[str], list[list[str]]]:
    """Fusion on vs off per model, backend and setting: latency, speedup, kernels, memory, fusions."""
    columns = metric_table.present(metric_table.REPORT_FUSION, [r.record for p in pairs for r in (p.on, p.off)])
    head = ["model backend setting", "on", "off", "speedup", *(f"{metric_table.label(c)} on / off" for c in columns),
            "fusions on (by class)"]
    body = [[p.name, fmt_time_over_rounds(p.on), fmt_time_over_rounds(p.off),
             fmt_speedup(p) + speedup_marks(p.on, p.off) + same_kernels_mark(p),
             *(on_off(c, p.on, p.off) for c in columns),
             fusions_by_class(p.on)] for p in pairs]
    return head, body
