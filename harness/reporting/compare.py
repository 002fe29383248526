"""`fusionbench compare A B`: which cells got faster, slower, broke or were fixed from A to B.

Cells pair by id (the hash of their config), so only identical configurations are compared.
For two valid cells the figure is the median of the device-timing samples (per batch, lower is
better) and the ratio B/A. A difference counts only when two tests agree (asv's rule):
- the ratio is beyond the threshold (default 5%): B/A > 1 + t is slower, B/A < 1 - t faster;
- a two-sided Mann-Whitney U test on the two raw sample sets gives p < alpha (0.01).
Device-timing samples are consecutive calls, not independent draws, so p is a guide rather
than an exact error rate; the threshold is what keeps noise out.

Labels: improved, regressed, not significant, not comparable (with why), new failure (valid in A,
failed or invalid in B), fixed (the other way). Two valid cells whose math modes differ (IEEE fp32
against TF32, or one that did not record it) are not comparable, whatever their ids say. Per
backend, the geometric mean of B/A over its compared pairs. The systems' differences (CPU, GPU,
driver, library versions, container) come first, since a difference between machines explains a
difference between figures.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from harness.bundle.reader import LoadedBundle, lookup
from harness.bundle.statuses import BAD
from harness.plain_text import visible_lines
from harness.reporting.markdown import md_cell
from harness.reporting.view import hardware
from harness.stats import geometric_mean, mann_whitney_u

LABELS = ("regressed", "new failure", "improved", "fixed", "not significant", "not comparable")
MIN_SAMPLES = 8
ALPHA = 0.01


@dataclass
class Pair:
    id: str
    label: str
    backend: str
    verdict: str
    why: str = ""
    median_a_ns: float | None = None
    median_b_ns: float | None = None
    ratio: float | None = None  # B/A of the medians; < 1 is faster
    p_value: float | None = None


@dataclass
class Comparison:
    a: str
    b: str
    threshold: float
    alpha: float
    systems: list[tuple[str, str, str]] = field(default_factory=list)  # (what, A, B)
    pairs: list[Pair] = field(default_factory=list)
    #: Cells valid in one bundle with no valid counterpart in the other (missing there, or
    #: skipped): the comparison could not judge them, and the CLI does not exit 0 for it unless
    #: asked to (`--allow-missing`).
    unpaired: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return {label: sum(1 for p in self.pairs if p.verdict == label) for label in LABELS}

    def geomeans(self) -> dict[str, dict[str, float | int]]:
        by_backend: dict[str, list[float]] = {}
        for pair in self.pairs:
            if pair.ratio is not None:
                by_backend.setdefault(pair.backend, []).append(pair.ratio)
        return {name: {"pairs": len(r), "geomean_ratio": geometric_mean(r)} for name, r in sorted(by_backend.items())}

    @property
    def worse(self) -> bool:
        """True when B regressed or newly failed somewhere: CI should stop."""
        counts = self.counts()
        return counts["regressed"] > 0 or counts["new failure"] > 0


def _samples(cell: dict[str, Any]) -> list[int]:
    samples = lookup(cell, "metrics", "device_time", "samples_ns")
    return list(samples) if isinstance(samples, list) else []


def _median(samples: list[int]) -> float:
    values = sorted(samples)
    mid = len(values) // 2
    return float(values[mid]) if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def math_mode(cell: dict[str, Any]) -> str:
    """The math a cell ran with, as recorded (harness/precision.py), or "unrecorded"."""
    recorded = lookup(cell, "metrics", "math_mode", "effective")
    return str(recorded) if recorded else "unrecorded"


def _first_reason(cell: dict[str, Any]) -> str:
    reasons = cell.get("reasons") or []
    return f"{cell['status']}: {reasons[0]}" if reasons else cell["status"]


def compare_cells(cell_a: dict[str, Any], cell_b: dict[str, Any], threshold: float, alpha: float) -> Pair:
    """The verdict for one cell present in both bundles."""
    pair = Pair(id=cell_a["id"], label=cell_a["label"], backend=cell_a["config"]["backend"], verdict="not comparable")
    a, b = cell_a["status"], cell_b["status"]
    if a == "valid" and b in BAD:
        pair.verdict, pair.why = "new failure", f"B {_first_reason(cell_b)}"
        return pair
    if a in BAD and b == "valid":
        pair.verdict, pair.why = "fixed", f"A {_first_reason(cell_a)}"
        return pair
    if a != "valid" or b != "valid":
        reason_a, reason_b = _first_reason(cell_a), _first_reason(cell_b)
        pair.why = f"both {reason_a}" if reason_a == reason_b else f"A {reason_a}; B {reason_b}"
        return pair
    mode_a, mode_b = math_mode(cell_a), math_mode(cell_b)
    if mode_a != mode_b or "unrecorded" in (mode_a, mode_b):
        pair.why = (f"math modes differ: A {mode_a}, B {mode_b}" if mode_a != mode_b
                    else "neither cell recorded its math mode (TF32 may have been on)")
        return pair
    where_a, where_b = hardware(cell_a.get("node")), hardware(cell_b.get("node"))
    if where_a and where_b and where_a != where_b:
        pair.why = f"ran on different hardware: A {where_a}, B {where_b}"
        return pair
    samples_a, samples_b = _samples(cell_a), _samples(cell_b)
    if len(samples_a) < MIN_SAMPLES or len(samples_b) < MIN_SAMPLES:
        pair.why = f"too few timing samples for the rank test ({len(samples_a)} and {len(samples_b)}; {MIN_SAMPLES} needed)"
        return pair
    pair.median_a_ns, pair.median_b_ns = _median(samples_a), _median(samples_b)
    if pair.median_a_ns <= 0 or pair.median_b_ns <= 0:
        pair.why = "a median batch time of 0 ns (the null backend computes nothing)"
        return pair
    pair.ratio = pair.median_b_ns / pair.median_a_ns
    _, pair.p_value = mann_whitney_u(samples_a, samples_b)
    beyond = pair.ratio > 1 + threshold or pair.ratio < 1 - threshold
    if beyond and pair.p_value < alpha:
        pair.verdict = "regressed" if pair.ratio > 1 else "improved"
    else:
        pair.verdict = "not significant"
        pair.why = (f"p = {pair.p_value:.3g} (needs < {alpha:g})" if beyond
                    else f"within {threshold:.0%} (B/A {pair.ratio:.3f})")
    return pair


def _gpus(system: Any) -> str | None:
    gpus = lookup(system, "gpu", "gpus")
    if not isinstance(gpus, list) or not gpus:
        return None
    return ", ".join(str(lookup(g, "name")) for g in gpus)


def system_differences(a: dict[str, Any], b: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(what, A, B) for each fact of the two runs' systems and software that differs."""
    facts = {
        "harness version": ("harness", "version"), "harness git sha": ("harness", "git_sha"),
        "device": ("device",), "CPU": ("system", "cpu", "model"), "logical cores": ("system", "cpu", "logical_cores"),
        "memory bytes": ("system", "cpu", "memory_bytes"), "OS kernel": ("system", "os", "kernel"),
        "Python": ("system", "python", "version"), "torch": ("system", "torch", "version"),
        "CUDA (torch build)": ("system", "torch", "cuda_build"), "cuDNN": ("system", "torch", "cudnn"),
        "GPU driver": ("system", "gpu", "driver"), "in a container": ("system", "container", "in_container"),
        "container image": ("system", "container", "image"), "container image id": ("system", "container", "image_id"),
        "container digest": ("system", "container", "image_digest"),
    }
    rows = []
    for what, path in facts.items():
        left, right = lookup(a, *path), lookup(b, *path)
        if left != right:
            rows.append((what, str(left), str(right)))
    if _gpus(a["system"]) != _gpus(b["system"]):
        rows.append(("GPUs", str(_gpus(a["system"])), str(_gpus(b["system"]))))
    packages_a, packages_b = lookup(a, "system", "packages") or {}, lookup(b, "system", "packages") or {}
    for name in sorted(set(packages_a) | set(packages_b)):
        if packages_a.get(name) != packages_b.get(name):
            rows.append((f"package {name}", str(packages_a.get(name, "-")), str(packages_b.get(name, "-"))))
    return rows


def compare(a: LoadedBundle, b: LoadedBundle, *, threshold: float = 0.05, alpha: float = ALPHA) -> Comparison:
    """Pair the cells of `a` (the baseline) and `b` by id, and label each pair."""
    result = Comparison(a=a.name, b=b.name, threshold=threshold, alpha=alpha,
                        systems=system_differences(a.header, b.header))
    cells_a = {cell["id"]: cell for cell in a.cells}
    cells_b = {cell["id"]: cell for cell in b.cells}
    for ours, theirs, side, other_side in ((cells_a, cells_b, "A", "B"), (cells_b, cells_a, "B", "A")):
        for cell_id, cell in ours.items():
            counterpart = theirs.get(cell_id)
            if cell["status"] == "valid" and (counterpart is None or counterpart["status"] == "skipped"):
                why = "not run" if counterpart is None else "skipped"
                result.unpaired.append(f"{cell['label']}: valid in {side}, {why} in {other_side}")
    seen = set()
    for cell in a.cells:
        seen.add(cell["id"])
        other = cells_b.get(cell["id"])
        if other is None:
            result.pairs.append(Pair(id=cell["id"], label=cell["label"], backend=cell["config"]["backend"],
                                     verdict="not comparable", why="only in A"))
        else:
            result.pairs.append(compare_cells(cell, other, threshold, alpha))
    for cell in b.cells:
        if cell["id"] not in seen:
            result.pairs.append(Pair(id=cell["id"], label=cell["label"], backend=cell["config"]["backend"],
                                     verdict="not comparable", why="only in B"))
    return result


def to_json(comparison: Comparison) -> str:
    data = {
        "a": comparison.a, "b": comparison.b, "threshold": comparison.threshold, "alpha": comparison.alpha,
        "test": "Mann-Whitney U (two-sided, normal approximation) on device-timing samples, and the threshold",
        "counts": comparison.counts(), "worse": comparison.worse, "unpaired": comparison.unpaired,
        "systems": [{"what": w, "a": x, "b": y} for w, x, y in comparison.systems],
        "geomean_by_backend": comparison.geomeans(),
        "pairs": [asdict(p) for p in comparison.pairs],
    }
    return json.dumps(data, indent=1) + "\n"


def _ms(ns: float | None) -> str:
    return "-" if ns is None else f"{ns / 1e6:.3f}"


def to_markdown(comparison: Comparison) -> str:
    c = comparison
    lines = [
        "# FusionBench comparison", "",
        f"A (baseline): {md_cell(c.a)}  ", f"B: {md_cell(c.b)}  ",
        f"A difference counts when B/A is beyond {c.threshold:.0%} and a Mann-Whitney U test on the raw "
        f"device-timing samples gives p < {c.alpha:g}.", "",
    ]
    if c.systems:
        lines += ["## The systems differ", "", "| what | A | B |", "|---|---|---|"]
        lines += [f"| {md_cell(w)} | {md_cell(x)} | {md_cell(y)} |" for w, x, y in c.systems]
    else:
        lines += ["## The systems are the same", "", "Same harness, hardware, driver and library versions."]
    counts = c.counts()
    lines += ["", "## Summary", "", " · ".join(f"{label}: {counts[label]}" for label in LABELS), ""]
    if c.unpaired:
        lines += [f"## Unpaired: {len(c.unpaired)} valid cell(s) with nothing to compare against", "",
                  *(f"- {md_cell(line)}" for line in c.unpaired), ""]
    geomeans = c.geomeans()
    if geomeans:
        lines += ["## Per backend", "", "Geometric mean of B/A median batch time (below 1: B is faster).", "",
                  "| backend | pairs | B/A |", "|---|---:|---:|"]
        lines += [f"| {md_cell(name)} | {g['pairs']} | {g['geomean_ratio']:.3f} |" for name, g in geomeans.items()]
        lines.append("")
    lines += ["## Cells", "", "| cell | A median (ms) | B median (ms) | B/A | p | verdict | why |",
              "|---|---:|---:|---:|---:|---|---|"]
    order = {label: i for i, label in enumerate(LABELS)}
    for p in sorted(c.pairs, key=lambda p: (order[p.verdict], p.label)):
        ratio = "-" if p.ratio is None else f"{p.ratio:.3f}"
        p_value = "-" if p.p_value is None else f"{p.p_value:.2g}"
        lines.append(f"| {md_cell(p.label)} | {_ms(p.median_a_ns)} | {_ms(p.median_b_ns)} | {ratio} | {p_value} | "
                     f"**{p.verdict}** | {md_cell(p.why)} |")
    return visible_lines("\n".join(lines) + "\n")
