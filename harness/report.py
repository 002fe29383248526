"""`fusionbench report RUN_DIR`: report.md and one self-contained report.html of a bundle.

Both give the run's facts, LoadGen validity at a glance, every cell's figures, the speedup of
each backend over eager per model, fusion on against fusion off (and where fusion made a cell
slower, with the fused kernels involved), kernels per inference against latency, memory per
backend, and why cells were skipped or failed. The HTML carries its plots as inline SVG
(`harness.plots`) and its style inline: it opens offline and fetches nothing.

Latency here is the device-timing median per batch (docs/metrics.md); "speedup" is a ratio of
medians of cells that differ only in backend or variant (same model, scenario, batch, dtype).
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Any

from harness.atomic import write_bytes_atomic
from harness.bundle_load import LoadedBundle
from harness.plots import Point, Series, bar_chart, scatter

REPORT_MD = "report.md"
REPORT_HTML = "report.html"
STATUS_COLOURS = {"valid": "#c7e9c0", "invalid": "#fdd0a2", "failed": "#fcbba1", "skipped": "#e0e0e0",
                  "interrupted": "#dadaeb", "not run": "#ffffff"}
_FUSED_KERNELS_SHOWN = 8
ROOFLINE_NOTE = (
    "Bound: the least time one batch could take at the device's measured peaks, max(FLOPs / peak FLOP/s, "
    "compulsory bytes / peak bytes/s); fraction of bound = bound / measured median (1 is the roofline). "
    "A fraction above 1 (marked *above roof*) means the cell beat a measured peak: the copy peak is main "
    "memory's, and a small working set stays in cache between batches; on GPU, TF32 convolutions beat the "
    "fp32 matmul peak. The kernel floor is 1: one kernel could run the whole model."
)


TIME_SPLIT_NOTE = (
    "Per batch: the time inside kernels (GPU: the union of the CUDA kernels' intervals; CPU: the backend's own "
    "profiler) against the device-timing median; the rest is launch and host overhead on a GPU, dispatch overhead "
    "on a CPU. Compare fusion on and off, and graphs on and off, of one backend: fewer launches shrink the "
    "overhead, less memory traffic shrinks the kernels (docs/metrics.md)."
)
AGREEMENT_NOTE = (
    "LoadGen's figure per batch (SingleStream and MultiStream: median query latency, against the device-timing "
    "median; Offline: batch / samples per second, a mean, against the device-timing mean) of the same cell; beyond "
    "5% the cell says why. Offline on a GPU "
    "keeps batches in flight and may beat the sequential timing. Server is not compared (queueing)."
)


@dataclass(frozen=True)
class Row:
    """The figures of one cell that the report uses."""

    cell: dict[str, Any]

    @property
    def config(self) -> dict[str, Any]:
        return self.cell["config"]

    @property
    def model(self) -> str:
        return str(self.config["model"]["name"])

    @property
    def backend(self) -> str:
        return str(self.config["backend"])

    @property
    def fusion(self) -> str:
        return str(self.config["variant"]["fusion"])

    @property
    def graphs(self) -> str:
        return str(self.config["variant"].get("graphs", "off"))

    @property
    def variant(self) -> str:
        options = self.config["variant"].get("options") or {}
        extra = "".join(f" {k}={v}" for k, v in sorted(options.items()))
        graphs = " graphs" if self.graphs == "on" else ""
        return f"{self.backend} fusion-{self.fusion}{graphs}{extra}"

    @property
    def setting(self) -> str:
        """What makes two cells of different backends comparable: scenario, batch, dtype, device."""
        c = self.config
        return f"{c['scenario']} b{c['batch']} {c['dtype']} {c['device']}"

    @property
    def status(self) -> str:
        return str(self.cell["status"])

    def metric(self, *path: str) -> Any:
        data: Any = self.cell.get("metrics") or {}
        for key in path:
            data = data.get(key) if isinstance(data, dict) else None
        return data

    @property
    def median_ns(self) -> float | None:
        value = self.metric("device_time", "summary", "median_ns")
        return float(value) if isinstance(value, (int, float)) and value > 0 else None

    @property
    def checked_against_eager(self) -> bool:
        """Whether the cell's output was compared with eager's: only then does it compute the same
        thing, and only then is its speed a speedup (a backend that computes nothing is not)."""
        return self.metric("correctness", "max_abs_error") is not None

    @property
    def kernels(self) -> float | None:
        return self.metric("kernels", "kernels_per_inference")

    @property
    def memory_bytes(self) -> tuple[str, int | None]:
        gpu = self.metric("memory", "torch_max_allocated_bytes")
        if gpu is not None:
            return "GPU max allocated (torch)", gpu
        return "peak RSS", self.metric("memory", "peak_rss_bytes")


def _valid(rows: list[Row]) -> list[Row]:
    return [r for r in rows if r.status == "valid" and r.median_ns is not None]


def _speedups_over_eager(rows: list[Row]) -> tuple[list[str], list[Series], list[list[str]]]:
    eager = {(r.model, r.setting): r.median_ns for r in _valid(rows) if r.backend == "eager" and r.fusion == "on"}
    others = [r for r in _valid(rows)
              if r.backend != "eager" and r.checked_against_eager and (r.model, r.setting) in eager]
    groups = list(dict.fromkeys(f"{r.model} {r.setting}" for r in others))
    variants = list(dict.fromkeys(r.variant for r in others))
    values = {(f"{r.model} {r.setting}", r.variant): eager[(r.model, r.setting)] / r.median_ns for r in others}
    series = [Series(v, tuple(values.get((g, v)) for g in groups)) for v in variants]
    table = [[g, v, f"{values[(g, v)]:.2f}x"] for g in groups for v in variants if (g, v) in values]
    return groups, series, table


@dataclass(frozen=True)
class FusionPair:
    on: Row
    off: Row

    @property
    def speedup(self) -> float:
        """How much faster fusion on is than fusion off (off median / on median)."""
        return self.off.median_ns / self.on.median_ns  # type: ignore[operator]

    @property
    def name(self) -> str:
        graphs = " graphs" if self.on.graphs == "on" else ""
        return f"{self.on.model} {self.on.backend}{graphs} {self.on.setting}"


def fusion_pairs(rows: list[Row]) -> list[FusionPair]:
    """Valid cells that differ only in fusion on/off."""
    def key(r: Row) -> tuple[Any, ...]:
        options = tuple(sorted((r.config["variant"].get("options") or {}).items()))
        return r.model, r.backend, r.setting, r.graphs, str(options)

    on = {key(r): r for r in _valid(rows) if r.fusion == "on"}
    return [FusionPair(on[key(r)], r) for r in _valid(rows) if r.fusion == "off" and key(r) in on]


def _fused_kernels(row: Row) -> list[str]:
    """The fused kernels of a cell, each once (a kernel an unrolled loop runs many times gets
    its count), in the order they first run."""
    kernels = row.metric("fusion_report", "kernels") or []
    counts: dict[str, int] = {}
    for k in kernels:
        if k.get("class") not in (None, "single"):
            text = f"{k['kernel']} ({' + '.join(k['ops'])})"
            counts[text] = counts.get(text, 0) + 1
    return [text if n == 1 else f"{text} x{n}" for text, n in list(counts.items())[:_FUSED_KERNELS_SHOWN]]


def _fmt_fraction(fraction: float | None) -> str:
    if fraction is None:
        return "-"
    return f"{fraction:.3f} above roof" if fraction > 1 else f"{fraction:.3f}"


def _fmt_ms(ns: float | None) -> str:
    return "-" if ns is None else f"{ns / 1e6:.3f} ms"


def _fmt_metric(row: Row) -> str:
    metric = row.metric("loadgen", "metric") or {}
    value = metric.get("value")
    if value is None:
        return "-"
    text = f"{value / 1e6:.3f} ms" if metric.get("unit") == "ns" else f"{value:.1f} samples/s"
    return text if row.metric("loadgen", "validity") == "VALID" else f"{text} (INVALID)"


def _fmt_bytes(value: int | None) -> str:
    return "-" if value is None else f"{value / 2**20:.0f} MiB"


def _fusions_by_class(row: Row) -> str:
    by_class = row.metric("fusion_report", "fusions_by_class")
    if not isinstance(by_class, dict):  # bundles written before fusions were counted by class
        return str(row.metric("fusion_report", "fusion_count") or 0)
    return ", ".join(f"{count} {cls}" for cls, count in by_class.items() if count) or "0"


def fusion_table(pairs: list[FusionPair]) -> tuple[list[str], list[list[str]]]:
    """Fusion on vs off per model, backend and setting: latency, speedup, kernels, memory, fusions."""
    def kernels(row: Row) -> str:
        return "-" if row.kernels is None else f"{row.kernels:g}"

    head = ["model backend setting", "on", "off", "speedup", "kernels/inf on / off", "memory on / off", "fusions on (by class)"]
    body = [[p.name, _fmt_ms(p.on.median_ns), _fmt_ms(p.off.median_ns), f"{p.speedup:.2f}x",
             f"{kernels(p.on)} / {kernels(p.off)}", f"{_fmt_bytes(p.on.memory_bytes[1])} / {_fmt_bytes(p.off.memory_bytes[1])}",
             _fusions_by_class(p.on)] for p in pairs]
    return head, body


def _roofline_table(rows: list[Row]) -> tuple[list[str], list[list[str]]]:
    head = ["model", "backend / variant", "setting", "GFLOP/batch", "compulsory MB", "bound", "bound by",
            "measured", "fraction of bound", "kernels/inf (floor 1)"]
    body = []
    for r in _valid(rows):
        roof = r.metric("roofline")
        if not roof:
            continue
        bound_ns = roof.get("time_bound_ns")
        fraction = roof.get("fraction_of_bound")
        body.append([r.model, r.variant, r.setting, f"{roof['flops'] / 1e9:.3g}", f"{roof['compulsory_bytes'] / 1e6:.3g}",
                     _fmt_ms(bound_ns), roof.get("bound_by", "-"), _fmt_ms(r.median_ns),
                     _fmt_fraction(fraction), "-" if r.kernels is None else f"{r.kernels:g}"])
    return head, body


def _agreement_table(rows: list[Row]) -> tuple[list[str], list[list[str]]]:
    """LoadGen's figure against the device timing, per measured cell (one latency truth)."""
    head = ["model", "backend / variant", "setting", "LoadGen per batch", "device timing", "gap", "why"]
    body = []
    for r in rows:
        agreement = r.metric("latency_agreement")
        if not isinstance(agreement, dict):
            continue
        gap = agreement.get("gap")
        device = agreement.get("device_ns_per_batch")
        body.append([r.model, r.variant, r.setting, _fmt_ms(agreement.get("loadgen_ns_per_batch")),
                     "-" if device is None else f"{_fmt_ms(device)} ({agreement.get('device_statistic')})",
                     "-" if gap is None else f"{gap:+.1%}",
                     agreement.get("why") or ("within the limit" if agreement.get("within") else "")])
    return head, body


def _warnings_table(rows: list[Row]) -> tuple[list[str], list[list[str]]]:
    head = ["model", "backend / variant", "setting", "warning"]
    return head, [[r.model, r.variant, r.setting, w] for r in rows for w in (r.cell.get("warnings") or [])]


def _time_split_series(rows: list[Row], backend: str) -> tuple[list[str], list[Series]]:
    """Per valid cell of `backend` with a measured split: kernel time and the rest, in ms."""
    split = [(r, r.metric("time_split")) for r in _valid(rows) if r.backend == backend]
    split = [(r, t) for r, t in split if isinstance(t, dict) and t.get("kernel_ns") is not None]
    groups = [f"{r.model} {r.variant.removeprefix(backend + ' ')} {r.setting}" for r, _ in split]
    return groups, [Series("in kernels", tuple(t["kernel_ns"] / 1e6 for _, t in split)),
                    Series("overhead (dispatch, launch, host)", tuple(t["overhead_ns"] / 1e6 for _, t in split))]


def _cells_table(rows: list[Row]) -> tuple[list[str], list[list[str]]]:
    head = ["model", "backend / variant", "setting", "status", "math", "LoadGen metric", "device time (median)",
            "kernels/inf", "fusions", "memory", "prepare"]
    body = []
    for r in rows:
        prepare = r.metric("prepare_s")
        body.append([
            r.model, r.variant, r.setting, r.status, str(r.metric("math_mode", "effective") or "-"), _fmt_metric(r),
            _fmt_ms(r.median_ns),
            "-" if r.kernels is None else f"{r.kernels:g}",
            str(r.metric("fusion_report", "fusion_count") if r.metric("fusion_report") else "-"),
            _fmt_bytes(r.memory_bytes[1]), "-" if prepare is None else f"{prepare:.1f} s",
        ])
    return head, body


def _validity_grid(loaded: LoadedBundle, rows: list[Row]) -> tuple[list[str], list[list[str]]]:
    settings = list(dict.fromkeys(r.setting for r in rows))
    lines = list(dict.fromkeys(f"{r.model} · {r.variant}" for r in rows))
    grid = {(f"{r.model} · {r.variant}", r.setting): r.status for r in rows}
    body = [[line, *[grid.get((line, s), "") for s in settings]] for line in lines]
    if loaded.missing:
        body.append([f"{len(loaded.missing)} listed cell(s)", "not run", *[""] * (len(settings) - 1)])
    return ["model · variant", *settings], body


def _facts(loaded: LoadedBundle) -> list[tuple[str, str]]:
    h = loaded.header
    system = h.get("system") or {}
    cpu = system.get("cpu") or {}
    gpus = (system.get("gpu") or {}).get("gpus") or []
    packages = system.get("packages") or {}
    libraries = ", ".join(f"{name} {packages[name]}" for name in
                          ("torch", "onnxruntime", "onnxruntime-gpu", "apache-tvm", "tensorrt", "mlcommons-loadgen")
                          if name in packages)
    counts: dict[str, int] = {}
    for cell in loaded.cells:
        counts[cell["status"]] = counts.get(cell["status"], 0) + 1
    if loaded.missing:
        counts["not run"] = len(loaded.missing)
    harness = h.get("harness") or {}
    return [
        ("run", f"{loaded.name} ({h.get('created', '?')}), state {h.get('state', '?')}"),
        ("scenario file", str(h.get("scenario_file"))),
        ("device", str(h.get("device"))),
        ("CPU", f"{cpu.get('model')}, {cpu.get('logical_cores')} logical cores"),
        ("GPU", ", ".join(str(g.get("name")) for g in gpus) or "none"),
        ("libraries", libraries or "-"),
        ("harness", f"{harness.get('version')} {harness.get('git_sha') or ''}{' (dirty)' if harness.get('git_dirty') else ''}"),
        ("cells", ", ".join(f"{n} {s}" for s, n in counts.items()) or "none"),
        ("schema", f"written as version {loaded.version}"),
        ("machine noise", _machine_noise(system.get("machine_noise"))),
    ]


def _machine_noise(noise: Any) -> str:
    if not isinstance(noise, dict) or "compute_cv" not in noise:
        return "not measured"
    text = (f"a fixed compute loop's CV {noise['compute_cv']:.1%}, a memory-bound one's {noise['memory_cv']:.1%} "
            "(the floor no figure of this run can go below)")
    return f"{text}; {noise['warning']}" if noise.get("warning") else text


def _problems(rows: list[Row]) -> list[list[str]]:
    return [[r.model, r.variant, r.setting, r.status, "; ".join(r.cell.get("reasons") or [])]
            for r in rows if r.status != "valid"]


# --- Markdown ---------------------------------------------------------------------------------

def _md_cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _md_table(head: list[str], body: list[list[str]]) -> list[str]:
    if not body:
        return ["(none)", ""]
    lines = ["| " + " | ".join(_md_cell(h) for h in head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in body]
    return lines + [""]


def markdown(loaded: LoadedBundle) -> str:
    rows = [Row(c) for c in loaded.cells]
    lines = [f"# FusionBench report: {_md_cell(loaded.name)}", ""]
    lines += [f"- **{what}**: {_md_cell(value)}" for what, value in _facts(loaded)] + [""]
    lines += ["## LoadGen validity at a glance", "", *_md_table(*_validity_grid(loaded, rows))]
    lines += ["## Cells", "", *_md_table(*_cells_table(rows))]
    _, _, speedups = _speedups_over_eager(rows)
    lines += ["## Speedup over eager", "",
              "Eager's median batch time over the cell's (same model and setting; cells whose output was checked "
              "against eager's).", "",
              *_md_table(["model and setting", "backend / variant", "speedup"], speedups)]
    pairs = fusion_pairs(rows)
    lines += ["## Fusion on vs off", "", "Speedup = fusion-off median / fusion-on median (below 1: fusion made it slower).", "",
              *_md_table(*fusion_table(pairs))]
    slower = [p for p in pairs if p.speedup < 1]
    lines += ["## Where fusion made things slower", ""]
    if not slower:
        lines += ["Nowhere in this run.", ""]
    for p in slower:
        lines += [f"- **{_md_cell(p.name)}**: fusion on {_fmt_ms(p.on.median_ns)}, off {_fmt_ms(p.off.median_ns)} "
                  f"({p.speedup:.2f}x). Fused kernels: " + (_md_cell("; ".join(_fused_kernels(p.on))) or "none reported")]
    if slower:
        lines.append("")
    lines += ["## Where the time goes", "", TIME_SPLIT_NOTE, ""]
    for backend in dict.fromkeys(r.backend for r in _valid(rows)):
        groups, series = _time_split_series(rows, backend)
        if groups:
            body = [[g, f"{k:.3f} ms", f"{o:.3f} ms"] for g, k, o in zip(groups, series[0].values, series[1].values)]
            lines += [f"### {_md_cell(backend)}", "", *_md_table(["cell", "in kernels", "overhead"], body)]
    lines += ["## One latency truth", "", AGREEMENT_NOTE, "", *_md_table(*_agreement_table(rows))]
    lines += ["## Warnings", "", *_md_table(*_warnings_table(rows))]
    lines += ["## Roofline", "", ROOFLINE_NOTE, "", *_md_table(*_roofline_table(rows))]
    lines += ["## Skipped, failed and invalid cells", "",
              *_md_table(["model", "backend / variant", "setting", "status", "reasons"], _problems(rows))]
    return "\n".join(lines)


# --- HTML -------------------------------------------------------------------------------------

_STYLE = """
body { font-family: sans-serif; margin: 2em; color: #222; max-width: 1500px; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
figure { margin: 1em 0 2em; }
figcaption { font-size: 13px; color: #555; max-width: 900px; }
.empty { color: #777; font-style: italic; }
"""


def _html_table(head: list[str], body: list[list[str]], *, statuses: bool = False) -> str:
    if not body:
        return '<p class="empty">none</p>'
    parts = ["<table><thead><tr>" + "".join(f"<th>{escape(h)}</th>" for h in head) + "</tr></thead><tbody>"]
    for row in body:
        cells = []
        for value in row:
            colour = STATUS_COLOURS.get(value) if statuses else None
            style = f' style="background:{colour}"' if colour else ""
            cells.append(f"<td{style}>{escape(str(value))}</td>")
        parts.append("<tr>" + "".join(cells) + "</tr>")
    parts.append("</tbody></table>")
    return "\n".join(parts)


def _figure(svg: str | None, caption: str, empty: str) -> str:
    body = svg if svg else f'<p class="empty">{escape(empty)}</p>'
    return f"<figure>{body}<figcaption>{escape(caption)}</figcaption></figure>"


def html(loaded: LoadedBundle) -> str:
    rows = [Row(c) for c in loaded.cells]
    valid = _valid(rows)
    parts = [f"<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
             f"<title>FusionBench report: {escape(loaded.name)}</title><style>{_STYLE}</style></head><body>",
             f"<h1>FusionBench report: {escape(loaded.name)}</h1>",
             _html_table(["what", "value"], [[w, v] for w, v in _facts(loaded)])]

    parts.append("<h2>LoadGen validity at a glance</h2>")
    parts.append(_html_table(*_validity_grid(loaded, rows), statuses=True))

    groups, series, speedups = _speedups_over_eager(rows)
    parts.append("<h2>Speedup over eager</h2>")
    parts.append(_figure(
        bar_chart("Speedup over eager (eager median / cell median)", groups, series, "speedup (x)", reference=1.0,
                  chart_id="plot-speedup") if groups else None,
        "Each bar: how many times faster than eager on the same model, scenario, batch and dtype; the dashed line is eager.",
        "No backend shares a model and setting with a valid eager cell in this run.",
    ))

    pairs = fusion_pairs(rows)
    parts.append("<h2>Fusion on vs off</h2>")
    parts.append(_figure(
        bar_chart("Speedup from fusion (fusion-off median / fusion-on median)", [p.name for p in pairs],
                  [Series("fusion speedup", tuple(p.speedup for p in pairs))], "speedup (x)", reference=1.0,
                  chart_id="plot-fusion") if pairs else None,
        "Below the dashed line, fusion made the cell slower; the section below lists those cells and their fused kernels.",
        "No valid cell has both fusion on and fusion off in this run.",
    ))
    parts.append(_html_table(*fusion_table(pairs)))
    parts.append("<h3>Where fusion made things slower</h3>")
    slower = [p for p in pairs if p.speedup < 1]
    parts.append(_html_table(["cell", "speedup", "fused kernels (first ones)"],
                             [[p.name, f"{p.speedup:.2f}x", "; ".join(_fused_kernels(p.on)) or "none reported"]
                              for p in slower]) if slower else '<p class="empty">Nowhere in this run.</p>')

    parts.append("<h2>Kernels per inference vs latency</h2>")
    points = [Point(float(r.kernels), r.median_ns / 1e6, r.variant, f"{r.model} {r.variant} {r.setting}")
              for r in valid if isinstance(r.kernels, (int, float)) and r.kernels > 0]
    parts.append(_figure(
        scatter("Kernels per inference vs median batch time", points, "kernels (GPU) or dispatches (CPU) per inference",
                "median batch time (ms)", chart_id="plot-kernels") if points else None,
        "On CPU each backend counts dispatches its own way (docs/metrics.md): compare points of one backend.",
        "No valid cell counted kernels in this run.",
    ))

    parts.append("<h2>Memory per backend</h2>")
    memory_rows = [r for r in valid if r.memory_bytes[1] is not None]
    memory_groups = list(dict.fromkeys(f"{r.model} {r.setting}" for r in memory_rows))
    memory_variants = list(dict.fromkeys(r.variant for r in memory_rows))
    memory = {(f"{r.model} {r.setting}", r.variant): r.memory_bytes[1] / 2**20 for r in memory_rows}  # type: ignore[operator]
    kind = memory_rows[0].memory_bytes[0] if memory_rows else ""
    parts.append(_figure(
        bar_chart(f"Memory: {kind} (MiB)", memory_groups,
                  [Series(v, tuple(memory.get((g, v)) for g in memory_groups)) for v in memory_variants], "MiB",
                  chart_id="plot-memory") if memory_rows else None,
        "Peak resident memory of the cell's worker process on CPU; torch's peak allocation on GPU.",
        "No valid cell recorded memory in this run.",
    ))

    parts.append("<h2>Where the time goes</h2>")
    parts.append(f"<p>{escape(TIME_SPLIT_NOTE)}</p>")
    backends = list(dict.fromkeys(r.backend for r in valid))
    for number, backend in enumerate(backends):
        groups, series = _time_split_series(rows, backend)
        parts.append(_figure(
            bar_chart(f"{backend}: time in kernels and overhead per batch (ms)", groups, series, "ms",
                      chart_id=f"plot-split-{number}") if groups else None,
            f"{backend}: each group is one cell; the bars are the time inside kernels and the rest of the median batch time.",
            f"No valid {backend} cell measured its kernel time.",
        ))

    parts.append("<h2>One latency truth</h2>")
    parts.append(f"<p>{escape(AGREEMENT_NOTE)}</p>")
    parts.append(_html_table(*_agreement_table(rows)))
    parts.append("<h2>Warnings</h2>")
    parts.append(_html_table(*_warnings_table(rows)))

    parts.append("<h2>Roofline</h2>")
    parts.append(f"<p>{escape(ROOFLINE_NOTE)}</p>")
    parts.append(_html_table(*_roofline_table(rows)))
    parts.append("<h2>Cells</h2>")
    parts.append(_html_table(*_cells_table(rows), statuses=True))
    parts.append("<h2>Skipped, failed and invalid cells</h2>")
    parts.append(_html_table(["model", "backend / variant", "setting", "status", "reasons"], _problems(rows), statuses=True))
    parts.append("</body></html>")
    return "\n".join(parts)


def render(loaded: LoadedBundle, out_dir: Path) -> list[Path]:
    """Write report.md and report.html of `loaded` into `out_dir`; return their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in ((REPORT_MD, markdown(loaded)), (REPORT_HTML, html(loaded))):
        path = out_dir / name
        write_bytes_atomic(path, text.encode("utf-8"))
        written.append(path)
    return written
