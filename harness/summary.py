"""The summary table printed at the end of a run: one row per cell, the figures that matter."""

from __future__ import annotations

from typing import Any

from rich.table import Table

STATUS_STYLE = {"valid": "green", "invalid": "yellow", "failed": "red", "skipped": "dim", "interrupted": "magenta"}


def _metric(loadgen: dict[str, Any] | None) -> str:
    if not loadgen:
        return "-"
    metric = loadgen["metric"]
    value = metric.get("value")
    if value is None:
        return "-"
    if metric["unit"] == "ns":
        text = f"{'p90' if 'p90' in metric['name'] else 'p99'} {value / 1e6:.2f} ms"
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


def summary_table(records: list[dict[str, Any]]) -> Table:
    table = Table(title="FusionBench results", show_lines=False)
    for column in ("cell", "status", "LoadGen metric", "device time (median)", "kernels/inf",
                   "peak memory", "max abs err", "prepare"):
        table.add_column(column)
    for r in records:
        c, m = r["config"], r.get("metrics", {})
        status = r["status"]
        prepare = m.get("prepare_s")
        cell = f"{c['model']['name']} {c['backend']} fusion-{c['variant']['fusion']}\n{c['scenario']} {c['dtype']} b{c['batch']}"
        table.add_row(
            cell, f"[{STATUS_STYLE.get(status, '')}]{status}[/]",
            _metric(m.get("loadgen")), _device_time(m), _kernels(m), _memory(m), _correctness(m),
            "-" if prepare is None else f"{prepare:.1f} s",
        )
    return table


def fusion_summary(records: list[dict[str, Any]]) -> Table | None:
    """Fusion on vs off for every model, backend and setting that ran both, or None."""
    from harness.report import Row, fusion_pairs, fusion_table

    pairs = fusion_pairs([Row(r) for r in records])
    if not pairs:
        return None
    head, body = fusion_table(pairs)
    table = Table(title="Fusion on vs off (speedup = off / on; below 1: fusion made it slower)")
    for column in head:
        table.add_column(column)
    for row, pair in zip(body, pairs):
        style = "red" if pair.speedup < 1 else ""
        table.add_row(*row, style=style)
    return table
