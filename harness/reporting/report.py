"""`fusionbench report RUN_DIR`: report.md and one self-contained report.html of a bundle, written
atomically; `cell_rows`, `cell_tables`, `baseline_speedups`, `fusion_pairs` and `kernels` say what they
show, `markdown` and `html` how.

Both give the run's facts, LoadGen validity at a glance, every cell's figures, the speedup of
each backend over eager per model, fusion on against fusion off (and where fusion made a cell
slower, with the fused kernels involved), kernels per inference against latency, memory per
backend, and why cells were skipped or failed. The HTML carries its plots as inline SVG
(`harness.reporting.plots`) and its style inline: it opens offline and fetches nothing.

Latency here is the device-timing median per batch (docs/metrics.md); "speedup" is a ratio of
medians of cells that differ only in backend or variant (same model, scenario, batch, dtype).
"""

from __future__ import annotations

from pathlib import Path

from harness.bundle.reader import LoadedBundle
from harness.errors import ConfigError
from harness.files.atomic import write_files_atomic
from harness.plain_text import visible_lines
from harness.reporting.html import html
from harness.reporting.markdown import markdown

REPORT_MD = "report.md"
REPORT_HTML = "report.html"


def render(loaded: LoadedBundle, out_dir: Path) -> list[Path]:
    """Write report.md and report.html of `loaded` into `out_dir`; return their paths. Both escape
    the bundle's text where they place it; no control or bidirectional character survives either."""
    return write_pages(out_dir, {REPORT_MD: markdown(loaded), REPORT_HTML: html(loaded)})


def write_pages(out_dir: Path, pages: dict[str, str]) -> list[Path]:
    """Write the pages (file name: text) into `out_dir`, every control or bidirectional character
    shown as its code, all or none (a full disk at the second leaves the first as it was); return
    their paths."""
    if out_dir.exists() and not out_dir.is_dir():
        raise ConfigError(f"--out {out_dir}: a file, not a directory; give a directory for the pages")
    files = {out_dir / name: visible_lines(text).encode("utf-8") for name, text in pages.items()}
    write_files_atomic(files)
    return list(files)
