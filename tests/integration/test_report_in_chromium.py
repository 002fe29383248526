"""report.html renders in a real browser (headless Chromium, Debian's `chromium` package), with no
network, and its plots are drawn: the page's screenshot holds each plot's colours.
Skipped with the reason where Chromium is not installed."""

from __future__ import annotations

import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from harness.bundle.reader import load
from harness.reporting.plots import PALETTE
from harness.reporting.report import REPORT_HTML, render

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# Without the background-networking flags Chromium keeps reaching for Google's hosts.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars"]

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (apt-get install chromium)")


def _chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={tmp_path / 'profile'}", *args],
                          capture_output=True, text=True, timeout=120)


def test_report_page_and_plots_render(tmp_path: Path) -> None:
    Image = pytest.importorskip("PIL.Image")
    render(load(GOLDEN / "v2"), tmp_path)
    url = (tmp_path / REPORT_HTML).as_uri()

    dom = _chromium(tmp_path, "--dump-dom", url)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert "<h1>FusionBench report:" in dom.stdout
    for chart in ("plot-speedup", "plot-fusion", "plot-kernels", "plot-memory"):
        assert f'id="{chart}"' in dom.stdout, f"{chart} missing from the rendered page"

    shot = tmp_path / "page.png"
    done = _chromium(tmp_path, f"--screenshot={shot}", "--window-size=1400,6000", url)
    assert done.returncode == 0 and shot.exists(), done.stderr[-2000:]
    pixels = Counter({colour: count for count, colour in Image.open(shot).convert("RGB").getcolors(maxcolors=1 << 24)})
    white = pixels[(255, 255, 255)] / sum(pixels.values())
    assert white < 0.97, "the page rendered (almost) blank"
    drawn = {colour: pixels[tuple(int(colour[i:i + 2], 16) for i in (1, 3, 5))] for colour in PALETTE[:3]}
    assert all(count > 200 for count in drawn.values()), f"plot colours barely drawn: {drawn}"


def test_findings_page_and_its_plot_render(tmp_path: Path) -> None:
    Image = pytest.importorskip("PIL.Image")
    from harness.reporting.findings_page import FINDINGS_HTML
    from harness.reporting.findings_page import render as render_findings

    render_findings([load(GOLDEN / "v7"), load(GOLDEN / "v3")], tmp_path)
    url = (tmp_path / FINDINGS_HTML).as_uri()
    dom = _chromium(tmp_path, "--dump-dom", url)
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert "<h1>FusionBench findings</h1>" in dom.stdout and 'id="plot-findings-fusion"' in dom.stdout
    shot = tmp_path / "findings.png"
    done = _chromium(tmp_path, f"--screenshot={shot}", "--window-size=1400,4000", url)
    assert done.returncode == 0 and shot.exists(), done.stderr[-2000:]
    pixels = Counter({colour: count for count, colour in Image.open(shot).convert("RGB").getcolors(maxcolors=1 << 24)})
    drawn = {colour: pixels[tuple(int(colour[i:i + 2], 16) for i in (1, 3, 5))] for colour in PALETTE[:2]}
    assert all(count > 200 for count in drawn.values()), f"plot colours barely drawn: {drawn}"
