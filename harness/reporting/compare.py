"""`fusionbench compare A B`: which cells got faster, slower, broke or were fixed from A to B.

Cells pair by id (the hash of their config: harness/reporting/pairing.py), so only identical
configurations are compared; each pair is judged by harness/reporting/judging.py (device time by
the ratio of the medians and a test agreeing, every other figure by its row of the metric table).

Labels: improved, regressed, not significant, not comparable (with why), new failure (valid in A,
failed or invalid in B), fixed (the other way). Two valid cells whose math modes differ (IEEE fp32
against TF32, or one that did not record it), that ran on different hardware (or another share of
it: a `--jobs` slot against the whole machine), or with other thread counts or other values of a
variable a scenario's `env:` passed on (OMP_NUM_THREADS 1 against none) are not comparable,
whatever their ids say, and are listed as unpaired with the valid cells whose counterpart is
missing, skipped or interrupted: none was judged, so the exit code cannot pass on them. Cells that
ran on other hardware (and of one math mode) are set side by side all the same, each figure beside
the other's and B/A as information, judged not at all (harness/reporting/judging.py). A cell
only one bundle has says what the other never ran (`B ran no cell on cpu`: the first of device,
model, input size, backend, scenario, dtype and batch it lacks), or that the other listed it and
has no record (its run was stopped). Where one bundle is a `fusionbench rerun` of the other, it says
so (`rerun_of`), and a cell of the original that the rerun's `--only` left out is said to be not
rerun (`not_rerun`), apart from the unpaired: the rerun was asked not to run it. Per backend, the
geometric mean of B/A over its compared pairs. The systems' differences (CPU, GPU, driver, library
versions, container) come first, since a difference between machines explains a difference between figures
(harness/reporting/system_differences.py). Each fusion pair's verdicts in A and in B are set side by
side (harness/reporting/fusion_verdicts.py), but for a pair whose cells ran unlike in A and B, by the
same rule as the cells' pairs, unless the hardware alone sets them apart: there the verdicts are, each
reached on its own machine, and the intervals are not.

This module pairs and labels; harness/reporting/compare_output.py writes the comparison as JSON or
Markdown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness import metric_table
from harness.bundle.cell_record import CellRecord
from harness.bundle.header_record import BundleHeader, Cpu, Gpus
from harness.bundle.manifest import MANIFEST
from harness.bundle.reader import LoadedBundle, lookup
from harness.reporting.fusion_verdicts import FusionVerdict, fusion_verdicts
from harness.reporting.judging import ALPHA, LABELS, VERDICTS, WORSE, Pair, compare_cells
from harness.reporting.pairing import not_in, pairing_key, passed_variables, settings_apart, settings_ran, unlike_runs
from harness.reporting.run_facts import machine_noise
from harness.reporting.system_differences import PACKAGE, system_differences
from harness.scenario.cells import Cell, matches, only_text
from harness.stats.summary import geometric_mean


@dataclass(frozen=True)
class Geomean:
    """One backend's geometric mean of B/A over its compared pairs."""

    pairs: int
    geomean_ratio: float


@dataclass
class Comparison:
    a: str
    b: str
    threshold: float
    alpha: float
    systems: list[tuple[str, str, str]] = field(default_factory=list)  # (what, A, B)
    pairs: list[Pair] = field(default_factory=list)
    #: Cells valid in one bundle with no counterpart in the other to judge them by (missing,
    #: skipped or interrupted there, or valid but of another math mode or hardware): the CLI does
    #: not exit 0 for them unless asked to (`--allow-missing`).
    unpaired: list[str] = field(default_factory=list)
    #: Cells of the original a rerun's `--only` (its bundle.json `only`) left out, each said so: the
    #: rerun was asked not to run them, so they are no gap in it and the exit code does not count them.
    not_rerun: list[str] = field(default_factory=list)
    fusion: list[FusionVerdict] = field(default_factory=list)
    #: Where one bundle is a `fusionbench rerun` of the other (its bundle.json `rerun_of`), in words:
    #: "B is a rerun of A"; empty where neither is.
    rerun: str = ""
    machines: tuple[str, str] = ("", "")  # (A, B): CPU and GPUs, as each run's system record says
    noise: tuple[str, str] = ("", "")  # (A, B): each run's machine-noise floor, in words (run_facts)

    def counts(self) -> dict[str, int]:
        return {label: sum(1 for p in self.pairs if p.verdict == label) for label in LABELS}

    def figure_counts(self) -> dict[str, dict[str, int]]:
        """Per figure of the metric table that some pair has: how many pairs got each verdict."""
        counts = {m.name: dict.fromkeys(VERDICTS, 0) for m in metric_table.compared()}
        for pair in self.pairs:
            for figure in pair.figures:
                counts[figure.metric][figure.verdict] += 1
        return {name: by_verdict for name, by_verdict in counts.items() if any(by_verdict.values())}

    def geomeans(self) -> dict[str, Geomean]:
        by_backend: dict[str, list[float]] = {}
        for pair in self.pairs:
            if pair.ratio is not None:
                by_backend.setdefault(pair.backend, []).append(pair.ratio)
        return {name: Geomean(len(r), geometric_mean(r)) for name, r in sorted(by_backend.items())}

    def systems_apart(self) -> str:
        """What differs between the two runs' systems, in a few words for a line that stands alone
        (`torch, CPU and 3 more`); empty where nothing does."""
        facts = [what for what, _, _ in self.systems if not what.startswith(PACKAGE)]
        shown = facts[:3] or [f"{len(self.systems)} package(s)"]
        more = len(self.systems) - len(shown) if facts else 0
        return (", ".join(shown) + (f" and {more} more" if more else "")) if self.systems else ""

    @property
    def worse(self) -> bool:
        """True when B regressed or newly failed somewhere: CI should stop."""
        return any(p.verdict in WORSE for p in self.pairs)


def compare(a: LoadedBundle, b: LoadedBundle, *, threshold: float = 0.05, alpha: float = ALPHA) -> Comparison:
    """Pair the cells of `a` (the baseline) and `b` by `pairing_key`, and label each pair."""
    # what either run's file passed to its workers (`env:`): the threads and their binding, mostly
    passed = passed_variables(lookup(a.header, "scenario", "env")) | passed_variables(lookup(b.header, "scenario", "env"))
    result = Comparison(a=a.name, b=b.name, threshold=threshold, alpha=alpha,
                        systems=system_differences(a.header_record, b.header_record), fusion=fusion_verdicts(a, b, passed),
                        rerun=rerun_of(a, b, "A", "B") or rerun_of(b, a, "B", "A"),
                        machines=(_run_machine(a.header_record), _run_machine(b.header_record)),
                        noise=(machine_noise(lookup(a.header, "system", "machine_noise")),
                               machine_noise(lookup(b.header, "system", "machine_noise"))))
    # where one bundle is a rerun of the other: the cells its --only chose, which the other's are held to
    chose = {"A": _rerun_only(b, a), "B": _rerun_only(a, b)}  # keyed by the side of the original's cells
    cells_a = {pairing_key(cell): cell for cell in a.records}
    cells_b = {pairing_key(cell): cell for cell in b.records}
    listed = {"A": set(a.missing), "B": set(b.missing)}  # planned, with no record
    ran = {"A": settings_ran(a.records), "B": settings_ran(b.records)}
    named = {"A": {cell.config.shown_label: cell for cell in a.records},  # a cell of each name, per bundle
             "B": {cell.config.shown_label: cell for cell in b.records}}
    for ours, theirs, side, other_side in ((cells_a, cells_b, "A", "B"), (cells_b, cells_a, "B", "A")):
        alike = named[other_side]
        for key, cell in ours.items():
            counterpart = theirs.get(key)
            if cell.status != "valid":
                continue
            if counterpart is None and (left_out := not_rerun(cell, chose[side], other_side)):
                result.not_rerun.append(f"{cell.config.shown_label}: valid in {side}, {left_out}")
            elif counterpart is None and cell.config.shown_label in alike:  # a cell of its name, measured otherwise
                apart = settings_apart(cell, alike[cell.config.shown_label], side, other_side)
                result.unpaired.append(f"{cell.config.shown_label}: valid in {side}; {other_side} ran it with other "
                                       f"settings ({apart})")
            elif counterpart is None and key in listed[other_side]:
                result.unpaired.append(f"{cell.config.shown_label}: valid in {side}, not run in {other_side} (listed there, "
                                       "no record: its run was stopped)")
            elif counterpart is None:
                result.unpaired.append(f"{cell.config.shown_label}: valid in {side}; "
                                       f"{not_in(cell, ran[other_side], other_side)}")
            elif counterpart.status in ("skipped", "interrupted"):
                result.unpaired.append(f"{cell.config.shown_label}: valid in {side}, {counterpart.status} in {other_side}")
            elif side == "A" and counterpart.status == "valid" and (unlike := unlike_runs(cell, counterpart, passed)):
                result.unpaired.append(f"{cell.config.shown_label}: valid in both, but {unlike}")
    def only_in(cell: CellRecord, side: str, other_side: str) -> str:
        """Why a cell of one bundle is in no pair: the other ran one of its name with other settings
        (each named: the two rows read alike), or what the other never ran."""
        alike = named[other_side].get(cell.config.shown_label)
        if left_out := not_rerun(cell, chose[side], other_side):
            return f"only in {side}: {left_out}"
        if alike is not None:
            return f"only in {side}: {other_side} ran it with other settings ({settings_apart(cell, alike, side, other_side)})"
        return f"only in {side}: {not_in(cell, ran[other_side], other_side)}"

    seen = set()
    for cell in a.records:
        seen.add(pairing_key(cell))
        other = cells_b.get(pairing_key(cell))
        if other is None:
            result.pairs.append(Pair(id=cell.id, label=cell.config.shown_label, backend=cell.config.backend,
                                     verdict="not comparable", why=only_in(cell, "A", "B")))
        else:
            pair = compare_cells(cell, other, threshold, alpha, passed)
            rounds = (cell.config.timing.rounds, other.config.timing.rounds)
            if rounds[0] != rounds[1]:
                pair.why = "; ".join(filter(None, (pair.why, f"timed over {rounds[0]} round(s) in A, {rounds[1]} in B")))
            result.pairs.append(pair)
    for cell in b.records:
        if pairing_key(cell) not in seen:
            result.pairs.append(Pair(id=cell.id, label=cell.config.shown_label, backend=cell.config.backend,
                                     verdict="not comparable", why=only_in(cell, "B", "A")))
    _scored_on_other_images(result.pairs, a.header_record.inputs_sha256, b.header_record.inputs_sha256)
    return result


def rerun_of(original: LoadedBundle, rerun: LoadedBundle, original_side: str, rerun_side: str) -> str:
    """"B is a rerun of A" where `rerun`'s bundle.json names `original`'s run as the one it ran again
    (`rerun_of`), saying so where it was another copy of that run (its MANIFEST.sha256 not this
    one's: a bundle edited, reported again or resumed since); empty otherwise."""
    record = rerun.header_record.rerun_of
    if record is None or record.run_id != original.name or record.created != original.header.get("created"):
        return ""
    said = f"{rerun_side} is a rerun of {original_side}: {original_side}'s cells, run again from the scenario it stores"
    manifest = original.files.sha256(MANIFEST) if (original.root / MANIFEST).is_file() else None
    if record.manifest_sha256 is not None and manifest != record.manifest_sha256:
        said += (f", made from another copy of {original_side}'s run: its MANIFEST.sha256 then was "
                 f"{record.manifest_sha256[:12]}..., {original_side}'s is {str(manifest)[:12]}...")
    return said


def _rerun_only(rerun: LoadedBundle, original: LoadedBundle) -> dict[str, Any] | None:
    """The cells `rerun` chose to run again of `original`'s (its bundle.json `only`, the original's
    narrowed by the rerun's `--only`) where it is a rerun of `original` and chose some; else None."""
    only = rerun.header_record.only
    return only if only and rerun_of(original, rerun, "", "") else None


def not_rerun(cell: CellRecord, chosen: dict[str, Any] | None, rerun_side: str) -> str:
    """"not rerun in B (--only backend=null)" where the rerun's `--only` (`chosen`) left `cell` of the
    original out, "" otherwise: a cell the rerun was asked not to run is no cell it lacks."""
    if chosen is None or matches(Cell(cell.id, cell.config), chosen):
        return ""
    return f"not rerun in {rerun_side} (--only {only_text(chosen)})"


def _scored_on_other_images(pairs: list[Pair], digest_a: str | None, digest_b: str | None) -> None:
    """Accuracy is not compared between runs that read other images from their input folders (the
    same path and names, another content): the digests differ. Their times still are: the images'
    shape is the cells' config."""
    if digest_a is None or digest_b is None or digest_a == digest_b:
        return
    for figure in (f for pair in pairs for f in pair.figures if f.metric == "accuracy"):
        figure.verdict, figure.ratio = "not comparable", None
        figure.why = f"the runs read other images (inputs_sha256 A {digest_a[:12]}, B {digest_b[:12]})"


def _run_machine(header: BundleHeader) -> str:
    """A run's machine in words: its CPU and logical cores, its GPUs or none."""
    cpu, gpus = header.system.cpu or Cpu(), (header.system.gpu or Gpus()).gpus
    cores = f" x{cpu.logical_cores}" if cpu.logical_cores else ""
    named = [str(g.name) for g in gpus if g.name]
    return f"{cpu.model or 'an unrecorded CPU'}{cores}, " + (", ".join(named) or (f"{len(gpus)} GPU(s)" if gpus else "no GPU"))
