"""Charts as inline SVG text: grouped bars and a scatter with a log axis. No plotting library
and nothing fetched, so a report is one self-contained file that opens offline.

Every label is XML-escaped (cell labels and backend names come from bundles, which may be
hostile). Colours come from a fixed palette, one per series, in the order series are given.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape

PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22", "#17becf")
_FONT = 'font-family="sans-serif" font-size="12"'


@dataclass(frozen=True)
class Series:
    name: str
    values: tuple[float | None, ...]  # one per group; None: no bar


@dataclass(frozen=True)
class Point:
    x: float
    y: float
    series: str
    label: str


def _nice_max(value: float) -> float:
    """The smallest 1, 2 or 5 times a power of ten at or above `value`."""
    if value <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(value))
    for step in (1, 2, 5, 10):
        if step * power >= value:
            return step * power
    return 10 * power


def _fmt(value: float) -> str:
    return f"{value:.6g}"


def _legend(names: list[str], x: float, y: float) -> list[str]:
    parts = []
    for i, name in enumerate(names):
        colour = PALETTE[i % len(PALETTE)]
        parts.append(f'<rect x="{x:.1f}" y="{y + 18 * i:.1f}" width="12" height="12" fill="{colour}"/>')
        parts.append(f'<text x="{x + 18:.1f}" y="{y + 18 * i + 10:.1f}" {_FONT}>{escape(name)}</text>')
    return parts


def bar_chart(title: str, groups: list[str], series: list[Series], y_label: str, *,
              chart_id: str, reference: float | None = None) -> str:
    """Grouped vertical bars: one group per `groups` entry, one bar per series in each group.
    `reference` draws a dashed horizontal line (1.0 for a speedup)."""
    width_per_group = max(40, 24 * len(series) + 16)
    plot_w = max(300, width_per_group * len(groups))
    # Group labels are rotated 35 degrees: make room for the longest to the left and below.
    label_px = 6.5 * max((len(g) for g in groups), default=0)
    left = max(70, int(label_px * 0.82 - width_per_group / 2) + 10)
    top, bottom, legend_w, plot_h = 40, max(60, int(label_px * 0.58) + 30), 200, 260
    width, height = left + plot_w + legend_w, top + plot_h + bottom
    values = [v for s in series for v in s.values if v is not None]
    y_max = _nice_max(max(values + [reference or 0.0])) if values else 1.0
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" id="{escape(chart_id)}" width="{width}" '
             f'height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}">',
             f'<text x="{left}" y="20" {_FONT} font-weight="bold">{escape(title)}</text>']
    for i in range(6):  # grid and y ticks
        value = y_max * i / 5
        y = top + plot_h - plot_h * i / 5
        parts.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" stroke="#ddd"/>')
        parts.append(f'<text x="{left - 6}" y="{y + 4:.1f}" {_FONT} text-anchor="end">{_fmt(value)}</text>')
    label_x = left - 50
    parts.append(f'<text x="{label_x}" y="{top + plot_h / 2:.1f}" {_FONT} '
                 f'transform="rotate(-90 {label_x} {top + plot_h / 2:.1f})" text-anchor="middle">{escape(y_label)}</text>')
    bar_w = (width_per_group - 16) / max(len(series), 1)
    for g, group in enumerate(groups):
        x0 = left + g * width_per_group + 8
        for s_index, s in enumerate(series):
            bar = s.values[g]
            if bar is None:
                continue
            h = plot_h * bar / y_max
            x = x0 + s_index * bar_w
            parts.append(f'<rect class="bar" x="{x:.1f}" y="{top + plot_h - h:.1f}" width="{bar_w - 2:.1f}" '
                         f'height="{h:.1f}" fill="{PALETTE[s_index % len(PALETTE)]}">'
                         f'<title>{escape(group)}, {escape(s.name)}: {_fmt(bar)}</title></rect>')
        group_x = x0 + (width_per_group - 16) / 2
        parts.append(f'<text x="{group_x:.1f}" y="{top + plot_h + 14}" {_FONT} text-anchor="end" '
                     f'transform="rotate(-35 {group_x:.1f} {top + plot_h + 14})">{escape(group)}</text>')
    if reference is not None:
        y = top + plot_h - plot_h * reference / y_max
        parts.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" stroke="#333" '
                     f'stroke-dasharray="6 4"/>')
    parts.append(f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" stroke="#333"/>')
    parts += _legend([s.name for s in series], left + plot_w + 20, top)
    parts.append("</svg>")
    return "\n".join(parts)


def scatter(title: str, points: list[Point], x_label: str, y_label: str, *, chart_id: str) -> str:
    """Points coloured by series, both axes logarithmic (kernel counts and latencies span decades)."""
    left, top, plot_w, plot_h, legend_w = 70, 40, 520, 320, 200
    width, height = left + plot_w + legend_w, top + plot_h + 60
    positive = [p for p in points if p.x > 0 and p.y > 0]
    names = list(dict.fromkeys(p.series for p in positive))
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" id="{escape(chart_id)}" width="{width}" '
             f'height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}">',
             f'<text x="{left}" y="20" {_FONT} font-weight="bold">{escape(title)}</text>']
    if positive:
        x_lo, x_hi = _log_range([p.x for p in positive])
        y_lo, y_hi = _log_range([p.y for p in positive])
        for decade in range(int(x_lo), int(x_hi) + 1):
            x = left + plot_w * (decade - x_lo) / (x_hi - x_lo)
            parts.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + plot_h}" stroke="#ddd"/>')
            parts.append(f'<text x="{x:.1f}" y="{top + plot_h + 16}" {_FONT} text-anchor="middle">{_fmt(10.0 ** decade)}</text>')
        for decade in range(int(y_lo), int(y_hi) + 1):
            y = top + plot_h - plot_h * (decade - y_lo) / (y_hi - y_lo)
            parts.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" stroke="#ddd"/>')
            parts.append(f'<text x="{left - 6}" y="{y + 4:.1f}" {_FONT} text-anchor="end">{_fmt(10.0 ** decade)}</text>')
        for p in positive:
            x = left + plot_w * (math.log10(p.x) - x_lo) / (x_hi - x_lo)
            y = top + plot_h - plot_h * (math.log10(p.y) - y_lo) / (y_hi - y_lo)
            colour = PALETTE[names.index(p.series) % len(PALETTE)]
            parts.append(f'<circle class="point" cx="{x:.1f}" cy="{y:.1f}" r="6" fill="{colour}" fill-opacity="0.85">'
                         f'<title>{escape(p.label)}: {_fmt(p.x)}, {_fmt(p.y)}</title></circle>')
    parts.append(f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="#333"/>')
    parts.append(f'<text x="{left + plot_w / 2}" y="{top + plot_h + 40}" {_FONT} text-anchor="middle">{escape(x_label)}</text>')
    parts.append(f'<text x="14" y="{top + plot_h / 2:.1f}" {_FONT} transform="rotate(-90 14 {top + plot_h / 2:.1f})" '
                 f'text-anchor="middle">{escape(y_label)}</text>')
    parts += _legend(names, left + plot_w + 20, top)
    parts.append("</svg>")
    return "\n".join(parts)


def _log_range(values: list[float]) -> tuple[float, float]:
    """Decade bounds (log10) around `values`, at least one decade wide."""
    lo, hi = math.floor(math.log10(min(values))), math.ceil(math.log10(max(values)))
    return float(lo), float(max(hi, lo + 1))
