"""The summary table printed at the end of a run: one row per cell, the figures that matter."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text

from harness.plain_text import visible
from harness.scenario.cells import variant_label
from harness.scenario.rules import rule

STATUS_STYLE = {"valid": "green", "invalid": "yellow", "failed": "red", "skipped": "dim", "interrupted": "magenta"}


def _metric(loadgen: dict[str, Any] | None) -> str:
    if not loadgen:
        return "-"
    metric = loadgen["metric"]
    value = metric.get("value")
    if value is None:
        return "-"
    if metric["unit"] == "ns":
        text = f"{rule(loadgen['scenario']).metric_label} {value / 1e6:.2f} ms"
    else:
        text = f"{value:.1f} samples/s"
    return f"{text} {'' if loadgen['validity'] == 'VALID' else '(INVALID)'}".strip()


def _device_time(metrics: dict[str, Any]) -> str:
    timing = metrics.get("device_time")
    if not timing:
        return "-"
    s = timing["summary"]
    flag = " noisy" if s["noisy"] else ""
    return f"{s['median_ns'] / 1e6:.2f} ms ±{100 * s['cv']:.0f}%{flag}"


def _kernels(metrics: dict[str, Any]) -> str:
    count = (metrics.get("kernels") or {}).get("kernels_per_inference")
    return "-" if count is None else f"{count:g}"


def _memory(metrics: dict[str, Any]) -> str:
    memory = metrics.get("memory")
    if not memory:
        return "-"
    text = f"{memory['peak_rss_bytes'] / 2**20:.0f} MiB"
    if memory.get("torch_max_allocated_bytes") is not None:
        text += f" / GPU {memory['torch_max_allocated_bytes'] / 2**20:.0f} MiB"
    return text


def _correctness(metrics: dict[str, Any]) -> str:
    c = metrics.get("correctness")
    if not c:
        return "-"
    if "max_abs_error" not in c:
        return "n/a" if c["ok"] else "FAIL"
    return f"{c['max_abs_error']:.1e}{'' if c['ok'] else ' FAIL'}"


# Worker phases (harness/measure/worker.py) by what they are for, to say where a cell's time went.
PHASE_KINDS = {
    "start-up": ("import", "build", "reference", "roofline"),
    "compile": ("prepare", "first_call"),
    "passes": ("correctness", "timing", "timing_after_loadgen", "memory", "profile"),
    "LoadGen": ("loadgen", "accuracy", "TEST01", "TEST04"),
}


def time_by_kind(record: dict[str, Any]) -> dict[str, float]:
    """Seconds of a cell's worker by kind of phase."""
    phases = record.get("phases_s") or {}
    return {kind: sum(float(phases.get(name, 0.0)) for name in names) for kind, names in PHASE_KINDS.items()}


def _cell_time(record: dict[str, Any]) -> str:
    wall = record.get("wall_s") or 0.0
    if not record.get("phases_s"):
        return f"{wall:.0f} s"
    kinds = time_by_kind(record)
    return f"{wall:.0f} s: " + ", ".join(f"{kinds[k]:.0f} {k}" for k in ("compile", "passes", "LoadGen"))


def time_line(records: list[dict[str, Any]]) -> str:
    """Where the whole run's time went, one line."""
    wall = sum(float(r.get("wall_s") or 0.0) for r in records)
    if wall <= 0:
        return "no cell ran"
    kinds = {k: sum(time_by_kind(r)[k] for r in records) for k in PHASE_KINDS}
    kinds["process start and exit"] = max(wall - sum(kinds.values()), 0.0)
    return f"cells took {wall / 60:.1f} min: " + ", ".join(f"{k} {v / wall:.0%}" for k, v in kinds.items())


def summary_table(records: list[dict[str, Any]]) -> Table:
    table = Table(title="FusionBench results", show_lines=False)
    for column in ("cell", "status", "LoadGen metric", "device time (median)", "gap", "kernels/inf",
                   "peak memory", "max abs err", "cell time"):
        table.add_column(column)
    for r in records:
        c, m = r["config"], r.get("metrics", {})
        status = r["status"]
        lines = (f"{c['model']['name']} {variant_label(c)}", f"{c['scenario']} {c['dtype']} b{c['batch']}")
        cell = "\n".join(visible(line) for line in lines)
        gap = (m.get("latency_agreement") or {}).get("gap")
        table.add_row(
            Text(cell), Text(status, style=STATUS_STYLE.get(status, "")),
            _metric(m.get("loadgen")), _device_time(m), "-" if gap is None else f"{gap:+.0%}", _kernels(m),
            _memory(m), _correctness(m), _cell_time(r),
        )
    return table


def fusion_summary(records: list[dict[str, Any]]) -> Table | None:
    """Fusion on vs off for every model, backend and setting that ran both, or None."""
    from harness.reporting.view import Row, fusion_pairs, fusion_table

    pairs = fusion_pairs([Row(r) for r in records])
    if not pairs:
        return None
    head, body = fusion_table(pairs)
    table = Table(title="Fusion on vs off (speedup = off / on; below 1: fusion made it slower; in brackets its range "
                        "over the two cells' repetitions)")
    for column in head:
        table.add_column(column)
    for row, pair in zip(body, pairs):
        style = "red" if pair.speedup < 1 else ""
        table.add_row(*(Text(visible(value)) for value in row), style=style)
    return table
