"""`fusionbench report`: report.md and a self-contained report.html with its plots, from the
golden bundles and from hostile labels."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pydantic
import pytest

from harness.bundle.cell_record import BreakReason, Dynamo
from harness.bundle.cell_record import CellRecord as CellRecordModel
from harness.bundle.migrations import SCHEMA_VERSION
from harness.bundle.reader import load
from harness.bundle.validate import validate
from harness.metric_table import format_value
from harness.reporting.baseline_speedups import speedup_table
from harness.reporting.cell_rows import Row, bundle_rows, setting_paired
from harness.reporting.cell_tables import fmt_fraction, roofline_table, time_split_series
from harness.reporting.fusion_pairs import FusionPair, fmt_speedup, fusion_pairs
from harness.reporting.html import html
from harness.reporting.kernels import NOISY_CELL, fused_kernels, kernels_by_pair, slowest_kernels
from harness.reporting.markdown import markdown, md_cell
from harness.reporting.report import REPORT_HTML, REPORT_MD, render
from harness.reporting.run_facts import machine_noise, peaks
from harness.reporting.speedups import busy_mark, noisy_mark, over_baseline, speedup_marks
from harness.stats.intervals import paired_speedup, unpaired_speedup
from tests.cell_configs import cell_record

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
REPO = GOLDEN.parents[1]


def test_markdown_has_every_section_and_the_figures() -> None:
    text = markdown(load(GOLDEN / "v2"))
    for heading in ("## LoadGen validity at a glance", "## Cells", "## Speedup over eager", "## Fusion on vs off",
                    "## Where fusion made things slower", "## Skipped, failed and invalid cells"):
        assert heading in text
    assert "| resnet18 | inductor fusion-on bogus=1 | SingleStream b1 fp32 cpu input 32 | failed |" in text
    assert "prepare: unknown inductor option(s) bogus" in text
    speedups = text[text.index("## Speedup over eager"):text.index("## Fusion on vs off")]
    assert "| resnet18 Offline b4 fp32 cpu input 32 | inductor fusion-on |" in speedups
    assert "null" not in speedups, "a backend that computes nothing has no speedup"


def test_html_is_self_contained_with_its_plots() -> None:
    page = html(load(GOLDEN / "v2"))
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    for chart in ("plot-speedup", "plot-kernels", "plot-memory"):
        assert f'id="{chart}"' in page
    assert page.count('class="bar"') >= 3 and page.count('class="point"') >= 2
    # Nothing to fetch: no scripts, stylesheets, images or links; the only URL is SVG's namespace.
    assert not re.search(r"<(script|link|img|iframe)\b", page)
    assert set(re.findall(r"https?://[^\s\"']+", page)) == {"http://www.w3.org/2000/svg"}


def test_fusion_on_off_pairs_need_both_variants_valid() -> None:
    v1 = [Row(c) for c in load(GOLDEN / "v1").records]
    assert fusion_pairs(v1) == []  # v1 skipped Inductor fusion off
    assert '<p class="empty">No valid cell has both fusion on and fusion off in this run.</p>' in html(load(GOLDEN / "v1"))
    pairs = fusion_pairs([Row(c) for c in load(GOLDEN / "v2").records])
    assert sorted((p.on.backend, p.on.config.scenario) for p in pairs) == [("inductor", "Offline"), ("inductor", "SingleStream")]
    assert all(p.on.config.variant.options == {} and p.speedup > 0 for p in pairs)
    assert 'id="plot-fusion"' in html(load(GOLDEN / "v2"))


def timed(median_ms: float, repetitions_ms: object) -> Row:
    repetitions = ([{"when": "r", "n": 10, "median_ns": m * 1e6 if isinstance(m, (int, float)) and not isinstance(m, bool) else m}
                    for m in repetitions_ms] if isinstance(repetitions_ms, list) else repetitions_ms)
    timing = {"samples_ns": [], "summary": {"n": 10, "median_ns": median_ms * 1e6}}
    if repetitions is not None:
        timing["repetitions"] = repetitions
    return Row(cell_record(metrics={"device_time": timing}))


def test_a_cell_of_one_round_gives_no_interval_whatever_its_repetitions() -> None:
    # The repetitions of one process are too narrow a range (docs/metrics.md, Speedups): only rounds make one.
    for repetitions in (None, [], [10.0], [9.5, 10, 10.5, 10]):
        pair = FusionPair(on=timed(10, repetitions), off=timed(20, [19, 20, 21, 20]))
        assert pair.result.interval is None and fmt_speedup(pair) == "2.00x (one round)", repetitions
    for hostile in ("x", [10.0, float("nan")], [10.0, -1.0], [10.0, [9]]):  # never a record a report reads
        with pytest.raises(pydantic.ValidationError):
            timed(10, hostile)


def test_the_reports_give_each_fusion_speedup_its_interval_and_verdict() -> None:
    v6 = load(GOLDEN / "v6")
    pairs = fusion_pairs([Row(r) for r in v6.records])
    assert len(pairs) == 2 and all(p.result.rounds == 2 and p.result.interval is not None for p in pairs)
    for pair in pairs:
        shown = fmt_speedup(pair) + noisy_mark(pair.on, pair.off) + busy_mark(pair.on, pair.off)
        assert f"| {md_cell(shown)} |" in markdown(v6) and f"<td>{shown}</td>" in html(v6)
        assert fmt_speedup(pair).endswith(("faster", "slower", "no effect seen"))
    # before rounds: one round, no interval; its cells' samples spread beyond 10% of their mean: said beside it
    assert "| 1.30x (one round) noisy busy |" in markdown(load(GOLDEN / "v3"))


def test_a_speedup_from_a_cell_timed_beside_other_work_says_so_beside_it() -> None:
    """resnet50's TVM pair read 0.84x [0.76-0.94], slower, while a test run at the lowest priority
    took up to 0.8 of a core during its timed calls, and 0.94x [0.80-1.12] with the machine idle:
    the cells warned of a busy machine, the speedup stood bare."""
    pair = next(p for p in fusion_pairs([Row(r) for r in load(GOLDEN / "v3").records]) if "1.30x" in fmt_speedup(p))
    assert busy_mark(pair.on, pair.off) == " busy"
    quiet = []
    for row in (pair.on, pair.off):
        record = row.record.model_copy(deep=True)
        record.warnings = [line for line in record.warnings if "a busy machine:" not in line]
        quiet.append(Row(record))
    assert busy_mark(*quiet) == ""
    # a further round's warning counts as round 1's does
    quiet[1].record.warnings.append("round 3: a busy machine: other processes used 0.80 cores during the timed calls")
    assert busy_mark(*quiet) == " busy"


def test_a_slower_pairs_speedup_carries_its_marks_in_every_place_it_is_given(tmp_path: Path) -> None:
    """The fusion table's speedups said `noisy` and `busy`; the same pair's speedup in the section on
    slowdowns, in `findings`' note on it and in the kernels table stood bare of them."""
    from harness.reporting import findings

    root = tmp_path / "busy"
    shutil.copytree(GOLDEN / "v7", root)
    for path in (root / "cells").glob("*.json"):  # golden v7's slower pair: TVM's Offline cells
        record = json.loads(path.read_text())
        if record["config"]["backend"] == "tvm" and record["config"]["scenario"] == "Offline":
            record["warnings"].append("round 2: a busy machine: other processes used 0.80 cores during the timed calls")
            path.write_text(json.dumps(record))
    bundle = load(root)
    (pair,) = [p for p in fusion_pairs([Row(r) for r in bundle.records]) if p.made_slower]
    marks = speedup_marks(pair.on, pair.off)
    assert marks.endswith(" busy"), marks
    page = markdown(bundle)
    slower = page[page.index("## Where fusion made things slower"):page.index("## What each pair's fusion ran")]
    assert f"speedup {fmt_speedup(pair)}{marks}. Fused kernels:" in slower, slower
    assert kernels_by_pair([pair])[1][0][1] == fmt_speedup(pair) + marks
    (group,) = [g for g in findings.groups([bundle]) if g.setting.startswith("Offline")]
    (note,) = findings.slower_notes(group)
    assert note.startswith(f"tvm tuning_trials=1: {pair.result.text()}{marks}. Fused kernels:"), note


def test_a_slower_pair_says_where_its_kernel_time_moved_kind_by_kind_in_every_place_it_is_described(tmp_path: Path) -> None:
    """Fused kernels and each side's slowest kernels named no counterpart for a fused kernel: the
    section on slowdowns, the kernels table and `findings` now set each kind's time on against off."""
    from harness.reporting import findings

    root = tmp_path / "kinds"
    shutil.copytree(GOLDEN / "v7", root)
    kinds = {"on": [("fused_conv2d_add_relu", 3, 6e6), ("add", 1, 0.5e6)],
             "off": [("conv2d", 3, 4e6), ("add", 4, 1.5e6), ("relu", 3, 0.5e6)]}
    # each side's kinds are applied to its time over its two rounds, as the fusion table gives it:
    # recorded at round 1's, they are written here so that they come to the figures above
    (golden,) = [p for p in fusion_pairs([Row(r) for r in load(GOLDEN / "v7").records]) if p.made_slower]
    over_round_one = {side: row.time_ns / row.median_ns for side, row in (("on", golden.on), ("off", golden.off))}
    assert over_round_one["on"] != 1 and over_round_one["off"] != 1
    for path in (root / "cells").glob("*.json"):  # golden v7's slower pair: TVM's Offline cells
        record = json.loads(path.read_text())
        if record["config"]["backend"] == "tvm" and record["config"]["scenario"] == "Offline":
            fusion = record["config"]["variant"]["fusion"]
            record["metrics"]["kernels"]["by_kind"] = [
                {"kind": kind, "kernels": calls, "calls_per_inference": calls, "ns_per_inference": ns / over_round_one[fusion]}
                for kind, calls, ns in kinds[fusion]]
            path.write_text(json.dumps(record))
    bundle = load(root)
    (pair,) = [p for p in fusion_pairs([Row(r) for r in bundle.records]) if p.made_slower]
    moved = ("kernels in all +500 us; fused_conv2d_add_relu +6.00 ms (3 calls on, none off); "
             "conv2d -4.00 ms (none on, 3 calls off); add -1.00 ms (1 call on, 4 calls off); "
             "relu -500 us (none on, 3 calls off)")
    page = markdown(bundle)
    slower = page[page.index("## Where fusion made things slower"):page.index("## What each pair's fusion ran")]
    assert f"Time moved by kind (on less off): {md_cell(moved)}" in slower, slower
    head, body = kernels_by_pair([pair])
    assert body[0][head.index("time moved by kind (on less off)")] == moved
    (group,) = [g for g in findings.groups([bundle]) if g.setting.startswith("Offline")]
    (note,) = findings.slower_notes(group)
    assert f". Time moved by kind (on less off): {moved}" in note, note
    # a pair whose cells list no kinds (GPU, or written before kinds were kept) says nothing of them
    assert "Time moved by kind" not in markdown(load(GOLDEN / "v7"))


def test_a_speedup_from_a_noisy_cell_says_so_beside_it() -> None:
    """A speedup over eager of 1,672x from an eager cell whose repetitions flipped between 14 ms and
    1.45 s stood in the table as a figure; the noise was said only among the warnings."""
    pair = next(p for p in fusion_pairs([Row(r) for r in load(GOLDEN / "v3").records]) if "1.30x" in fmt_speedup(p))
    assert noisy_mark(pair.on, pair.off) == " noisy"
    steady = []
    for row in (pair.on, pair.off):
        record = row.record.model_copy(deep=True)
        assert record.metrics.device_time is not None
        record.metrics.device_time.summary.noisy = False
        steady.append(Row(record))
    assert noisy_mark(*steady) == ""


def test_a_speedup_over_rounds_is_marked_noisy_by_a_noisy_further_round() -> None:
    """Only round 1's CV was read: a speedup over three rounds whose second round spread 25% stood
    unmarked."""
    rows = [Row(r) for r in load(GOLDEN / "v10").records]  # a pair of two rounds, neither noisy
    pair = next(p for p in fusion_pairs(rows) if len(p.on.round_medians) > 1 and noisy_mark(p.on, p.off) == "")
    record = pair.off.record.model_copy(deep=True)
    assert record.metrics.rounds is not None and record.metrics.rounds[1].status == "valid"
    record.metrics.rounds[1].cv = 0.25
    assert noisy_mark(pair.on, Row(record)) == " noisy"


def test_the_machine_noise_line_gives_the_pinned_spread_where_measured() -> None:
    older = {"compute_cv": 0.02, "memory_cv": 0.05, "warning": ""}
    assert machine_noise(older) == ("a fixed compute loop's CV 2.0%, a memory-bound one's 5.0% "
                                    "(the floor no figure of this run can go below)")
    warned = {**older, "pinned_spread": 1.68, "warning": "this machine's own speed varies: a fixed compute loop has a "
              "CV of 2%", "core_chunk_ms": {"0": 17.3, "1": 19.04}}
    line = machine_noise(warned)  # the warning's figures are the line's: said once (a CV of 2.0% and then of 2%)
    assert line.endswith("; pinned to each core in turn, its chunks span 1.68x (10th to 90th percentile); beyond a "
                         "steady machine's, as the run warned: no figure measured here can be steadier; median chunk "
                         "by core: core 0 17.3 ms, core 1 19.0 ms") and "CV of 2%" not in line
    assert machine_noise({"compute_cv": True, "memory_cv": 0.1}) == "not measured"
    assert machine_noise({**older, "cross_core_ns": [52.0, 61.2, 330.0]}).endswith(
        "; a round trip between two cores 52 / 61 / 330 ns (10th / 50th / 90th)")
    assert "round trip" not in machine_noise({**older, "cross_core_ns": [52.0, True, 330.0]})


def test_the_peaks_line_gives_each_peak_with_the_lowest_and_median_of_its_runs() -> None:
    """The roofline's bounds come from the probe's peaks; a probe that met other work reads them low,
    and every cell closer to its roof: the line says how steady the probe's runs were."""
    probed = {"flops_per_s": {"fp32": 159e9}, "bytes_per_s": 55.6e9,
              "spread": {"fp32": {"min": 98e9, "median": 151e9, "max": 159e9},
                         "copy": {"min": 50.1e9, "median": 54e9, "max": 55.6e9}}}
    assert peaks(probed) == ("fp32 matmul 159 GFLOP/s (its runs' lowest 98.0, median 151); "
                             "copy 55.6 GB/s (its runs' lowest 50.1, median 54.0)")
    assert peaks({**probed, "spread": None}) == "fp32 matmul 159 GFLOP/s; copy 55.6 GB/s"  # before 2026-12-04
    assert peaks({"error": "no torch\x1b[31m"}) == "not measured: no torch\\x1b[31m"
    assert peaks({"flops_per_s": {"fp\u202e32": 1e9, "bf16": True}, "bytes_per_s": "fast"}) == "fp\\u202e32 matmul 1.00 GFLOP/s"
    assert peaks(None) == "not measured"


def test_a_gpus_peaks_are_written_under_their_prefix_never_as_an_exponent() -> None:
    """The H200's run (docs/results/bundles/gpu-h200-2026-12-04-inductor-layout) read its peaks as
    `bf16 matmul 7.72e+05 GFLOP/s` and `copy 4.06e+03 GB/s`, in its facts and in every roofline row:
    an exponent where the metric table writes three figures under the unit that fits."""
    probed = {"flops_per_s": {"bf16": 7.72e14, "fp32": 5.05e13}, "bytes_per_s": 4.06e12,
              "spread": {"fp32": {"min": 5.01e13, "median": 5.03e13, "max": 5.05e13},
                         "copy": {"min": 3.87e12, "median": 4.01e12, "max": 4.06e12}}}
    assert peaks(probed) == ("bf16 matmul 772 TFLOP/s; fp32 matmul 50.5 TFLOP/s (its runs' lowest 50.1, median 50.3); "
                             "copy 4.06 TB/s (its runs' lowest 3.87, median 4.01)")
    roofline = {"flops": 1.16e14, "compulsory_bytes": 1.5e12, "peak_flops_per_s": 5.05e13, "peak_bytes_per_s": 4.06e12,
                "time_bound_ns": 2.3e6, "measured_ns": 4.75e6, "fraction_of_bound": 0.484, "bound_by": "compute"}
    timing = {"samples_ns": [4750000], "summary": {"n": 1, "median_ns": 4.75e6, "cv": 0.0}}
    head, (line,) = roofline_table([Row(cell_record(metrics={"device_time": timing, "roofline": roofline}))])
    cells = dict(zip(head, line))
    assert (cells["peaks"], cells["FLOP/batch"], cells["compulsory bytes"]) == ("50.5 TFLOP/s, 4.06 TB/s", "116 TFLOP", "1.50 TB")
    assert "e+" not in " ".join(line)


def test_hostile_labels_are_escaped(tmp_path: Path) -> None:
    root = tmp_path / "bundle"
    shutil.copytree(GOLDEN / "v2", root)
    for path in (root / "cells").glob("*.json"):
        record = json.loads(path.read_text())
        record["config"]["backend"] = "<script>alert(1)</script>|x"  # a plugin's name: a config's free text
        record["reasons"] = ["<img src=x onerror=alert(1)>"] if record["reasons"] else []
        path.write_text(json.dumps(record))
    loaded = load(root)
    page = html(loaded)
    assert "<script>" not in page and "<img" not in page and "&lt;script&gt;" in page
    assert "\\|x" in markdown(loaded)


@pytest.mark.slow
def test_render_writes_both_files_and_the_cli_keeps_the_bundle_valid(tmp_path: Path) -> None:
    written = render(load(GOLDEN / "v1"), tmp_path / "out")
    assert [p.name for p in written] == [REPORT_MD, REPORT_HTML] and all(p.stat().st_size > 1000 for p in written)
    root = tmp_path / "v1"
    shutil.copytree(GOLDEN / "v1", root)
    done = subprocess.run([sys.executable, "-m", "harness.cli", "report", str(root)], capture_output=True, text=True,
                          cwd=REPO, timeout=120)
    assert done.returncode == 0, done.stderr
    assert (root / REPORT_HTML).exists() and validate(root).ok, validate(root).problems
    (root / "cells" / "stray.txt").write_text("x")
    done = subprocess.run([sys.executable, "-m", "harness.cli", "report", str(root)], capture_output=True, text=True,
                          cwd=REPO, timeout=120)
    assert done.returncode == 2 and "fails validation: cells/stray.txt: added" in done.stderr


def test_fused_kernel_lists_name_each_kernel_once_with_its_count() -> None:
    def kernel(name: str, cls: str) -> dict:
        return {"kernel": name, "ops": ["aten.addmm", "aten.tanh"], "class": cls}

    kernels = [kernel("step", "tensor+element"), kernel("mm", "single"), kernel("step", "tensor+element"),
               kernel("last", "tensor+element"), kernel("step", "tensor+element")]
    row = Row(cell_record(metrics={"fusion_report": {"kernel_count": 5, "fusion_count": 4, "kernels": kernels}}))
    assert fused_kernels(row) == ["step (aten.addmm + aten.tanh) x3", "last (aten.addmm + aten.tanh)"]


def _profiled(kernels: list[dict], top: list[dict]) -> Row:
    """A cell whose fusion report lists `kernels` and whose profile timed `top`."""
    return Row(cell_record(metrics={
        "fusion_report": {"kernel_count": len(kernels), "fusion_count": sum(k["class"] != "single" for k in kernels),
                          "kernels": kernels},
        "kernels": {"kernels_per_inference": float(len(kernels)), "kernel_count_method": "x", "top_kernels": top}}))


def test_fused_kernels_the_profile_timed_come_first_the_costliest_first_and_the_rest_are_counted() -> None:
    """A cell of 11 fused kernels listed the first 8 it ran and nothing more: the one that held a
    slowdown (the 11th here, and the costliest) was not among them."""
    kernels = [{"kernel": f"fused_{i}", "ops": ["relax.matmul", "relax.add"], "class": "tensor+element"} for i in range(11)]
    top = [{"name": "fused_10", "calls_per_inference": 1.0, "ns_per_inference": 1.78e9},
           {"name": "fused_3", "calls_per_inference": 1.0, "ns_per_inference": 2e6},
           {"name": "matmul", "calls_per_inference": 1.0, "ns_per_inference": 5e9}]
    row = _profiled(kernels, top)
    shown = fused_kernels(row)
    assert shown[:3] == ["fused_10 (relax.matmul + relax.add), 1.78 s", "fused_3 (relax.matmul + relax.add), 2.00 ms",
                         "fused_0 (relax.matmul + relax.add)"]
    assert len(shown) == 9 and shown[-1] == "and 3 more (the cell's fusion_report)"
    # one kernel name for groups of other operators (a library call several fusions make): no time for any
    kernels[4] = {"kernel": "fused_10", "ops": ["relax.conv2d", "relax.relu"], "class": "tensor+element"}
    row = _profiled(kernels, top)
    assert fused_kernels(row)[0] == "fused_3 (relax.matmul + relax.add), 2.00 ms"
    assert not any("1.78 s" in text for text in fused_kernels(row))


def test_a_backends_speedup_over_the_baseline_gets_an_interval_where_the_settings_rounds_took_turns() -> None:
    """Inductor over eager was one estimate, no verdict, though both cells had rounds: the literature's
    question (did Inductor make a model slower than eager?) had no answer a report could stand on."""
    golden = load(GOLDEN / "v10")
    rows = bundle_rows(golden)
    eager = next(r for r in rows if r.backend == "eager" and r.config.scenario == "Offline")
    inductor = next(r for r in rows if r.backend == "inductor" and r.fusion == "on" and r.config.scenario == "Offline")
    assert not setting_paired(golden)  # written before the rounds of a setting took turns: one estimate, as it was
    assert over_baseline(inductor, eager, False) is None
    golden.header["rounds_paired"] = "setting"
    assert setting_paired(golden) and {r.start for r in rows} == {0}
    result = over_baseline(inductor, eager, True)
    assert result is not None and result.rounds == 2 and result.interval is not None
    expected = paired_speedup([inductor.round_medians[r] for r in (1, 2)], [eager.round_medians[r] for r in (1, 2)])
    assert result.value == pytest.approx(expected.value)
    _, _, before = speedup_table(rows, "eager", False)
    _, _, after = speedup_table(rows, "eager", True)
    row = next(i for i, line in enumerate(after)
               if line[1].startswith("inductor fusion-on") and line[0].startswith("resnet18 Offline"))
    assert "[" not in before[row][2] and after[row][2].startswith(result.text())
    assert md_cell(result.text()) in markdown(golden)
    # a --resume between eager's cell and Inductor's: their rounds did not take turns
    latest = max(r.started for r in golden.records if r.started)
    golden.header["resumed"] = [latest]
    resumed = bundle_rows(golden)
    assert {r.start for r in resumed} == {1}  # every golden cell started at one time: resumed then, all ran after it
    assert over_baseline(replace(inductor, start=1), replace(eager, start=0), True) is None


def test_a_fusion_pair_split_by_a_resume_is_not_paired_by_round_number() -> None:
    """Fusion on finished before a `--budget-s` stop, fusion off ran whole after the `--resume`: their
    round i met different stretches of the machine, so pairing them by number claimed what did not
    happen; the two cells' rounds are then two samples, and the text says so."""
    on_rounds, off_rounds = [10e6, 12e6, 11e6], [13e6, 12e6, 14e6]

    def row(medians: list[float], start: int) -> Row:
        rounds = [{"round": i, "status": "valid", "median_ns": m, "n": 1, "cv": 0.0,
                   **({"samples_ns": [round(m)]} if i > 1 else {})} for i, m in enumerate(medians, 1)]
        timing = {"samples_ns": [round(medians[0])], "summary": {"n": 1, "median_ns": medians[0], "cv": 0.0}}
        return Row(cell_record(metrics={"device_time": timing, "rounds": rounds}), start)

    together = FusionPair(row(on_rounds, 0), row(off_rounds, 0)).result
    assert together.paired and together.value == pytest.approx(paired_speedup(on_rounds, off_rounds).value)
    split = FusionPair(row(on_rounds, 0), row(off_rounds, 1)).result
    assert not split.paired and split.value == pytest.approx(unpaired_speedup(on_rounds, off_rounds).value)
    assert split.interval is not None and together.interval is not None
    assert split.text().endswith("(rounds not paired)") and "not paired" not in together.text()
    # one round a side, split by the resume: the ratio of two starts said nothing of them
    one = FusionPair(row(on_rounds[:1], 0), row(off_rounds[:1], 1)).result
    assert one.text() == "1.30x (one round) (rounds not paired)", one.text()
    # a record that does not say when it started (older bundles): paired by round, as before
    assert FusionPair(row(on_rounds, 0), row(off_rounds, 0)).result == together
    unknown = FusionPair(replace(row(on_rounds, 0), start=None), row(off_rounds, 1)).result
    assert unknown.paired


def test_a_fraction_above_the_roof_is_marked() -> None:
    assert fmt_fraction(0.5) == "0.500"
    assert fmt_fraction(3.013) == "3.013 above roof"
    assert fmt_fraction(None) == "-"


def test_a_gpu_cell_names_the_kernels_it_spends_the_most_time_in() -> None:
    top = [{"name": "mean_kernel", "calls_per_inference": 3.0, "ns_per_inference": 2e5},
           {"name": "fused_conv2d_kernel", "calls_per_inference": 3.0, "ns_per_inference": 18.2e6},
           {"name": "add_kernel", "calls_per_inference": 1.0, "ns_per_inference": 1e3},
           {"name": "relu_kernel", "calls_per_inference": 1.0, "ns_per_inference": 5e5}]
    kernels = {"kernels_per_inference": 8.0, "kernel_count_method": "CUDA kernels", "top_kernels": top}
    row = Row(cell_record(metrics={"kernels": kernels}))
    assert slowest_kernels(row) == ["fused_conv2d_kernel 18.2 ms (3 calls)", "relu_kernel 500 us (1 call)",
                                    "mean_kernel 200 us (3 calls)"]
    # kernels listed by calls only (bundles written before each kernel's time was kept), or a CPU cell
    untimed = {**kernels, "top_kernels": [{"name": "mm", "calls_per_inference": 2.0}]}
    assert slowest_kernels(Row(cell_record(metrics={"kernels": untimed}))) == []
    assert slowest_kernels(Row(cell_record(metrics={}))) == []


def test_fusion_pairs_match_the_whole_config_and_settings_name_the_input_size() -> None:
    """A model at two input sizes: each fusion pair pairs its own size, and each reads apart."""
    golden = [json.loads(p.read_text()) for p in sorted((GOLDEN / "v7" / "cells").glob("*.json"))]
    inductor = [c for c in golden if c["config"]["backend"] == "inductor" and c["config"]["scenario"] == "Offline"]
    rows = []
    for size, scale in ((32, 1.0), (64, 3.0)):
        for cell in inductor:
            data = json.loads(json.dumps(cell))
            data["schema_version"] = SCHEMA_VERSION  # v7's record, read as the current one (unchanged since)
            data["config"]["input_size"] = size
            data["config"]["model"]["input_size"] = size
            time = data["metrics"]["device_time"]
            time["summary"]["median_ns"] *= scale
            data["metrics"]["first_call_ratio"] /= scale  # derived from the median: follows it
            for r in data["metrics"].get("rounds") or []:
                r["median_ns"] *= scale
            rows.append(Row(CellRecordModel.model_validate(data)))
    pairs = fusion_pairs(rows)
    assert len(pairs) == 2
    for pair in pairs:
        assert pair.on.config.input_size == pair.off.config.input_size
    assert sorted(p.name for p in pairs) == ["resnet18 inductor Offline b4 fp32 cpu input 32",
                                             "resnet18 inductor Offline b4 fp32 cpu input 64"]
    assert [round(p.speedup, 6) for p in pairs] == [round(pairs[0].speedup, 6)] * 2  # each pair its own medians


def test_bundle_text_forms_no_emphasis_strike_or_autolink_in_markdown() -> None:
    text = md_cell("_emph_ ~~strike~~ https://example.org www.example.org")
    assert text == "\\_emph\\_ \\~\\~strike\\~\\~ https\\://example.org www\\.example.org"


def test_where_fusion_made_things_slower_lists_only_what_the_verdict_calls_slower() -> None:
    """Golden v7 has Inductor's Offline pair at 0.89x and TVM's SingleStream pair at 0.99x, each
    with "no effect seen" over its rounds, and TVM's Offline pair slower: only that one is a finding
    (as `findings` counts it); the section listed all three by their speedup below 1."""
    bundle = load(GOLDEN / "v7")
    for page, start, end in ((markdown(bundle), "## Where fusion made things slower", "\n## "),
                             (html(bundle), "<h3>Where fusion made things slower</h3>", "<h")):
        section = page[page.index(start):page.index(end, page.index(start) + len(start))]
        assert re.search(r"resnet18 tvm tuning\\?_trials=1 Offline b4", section), section
        assert "inductor" not in section and "SingleStream" not in section


def test_a_bundle_whose_every_cell_is_missing_has_a_validity_grid_of_whole_rows() -> None:
    from dataclasses import replace

    from harness.reporting.cell_tables import validity_grid
    from harness.scenario.cells import expand

    bundle = load(GOLDEN / f"v{SCHEMA_VERSION}")
    none_run = replace(bundle, cells=[], missing=[c["id"] for c in bundle.cells])
    head, body = validity_grid(none_run, [])
    assert head == ["model · variant", "status"]  # each cell named (it was "14 listed cell(s)"), as --resume will run it
    shown = {cell.id: cell.config.shown_label for cell in expand(bundle.header["scenario"], bundle.header["device"])}
    assert body == [[f"{shown[planned.id]} (listed)", "not run"] for planned in bundle.header_record.cells]
    assert all(" input " in line for line, _ in body), body  # the golden run's models ran at 32, not their own size
    head, body = validity_grid(bundle, [Row(c) for c in bundle.records])
    assert len(head) > 2 and all(len(row) == len(head) for row in body)


def test_a_report_into_a_bundle_another_process_writes_is_refused_and_one_elsewhere_is_not(tmp_path: Path) -> None:
    """Its manifest, written after the report, would list a bundle a run or resume is writing."""
    import os

    from harness.bundle import lock

    root = tmp_path / "run"
    shutil.copytree(GOLDEN / f"v{SCHEMA_VERSION}", root)
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    held = lock.hold(root)  # as a resume holds it (a lock of another open file, refused to this process too)
    try:
        done = subprocess.run([sys.executable, "-m", "harness.cli", "report", str(root)], capture_output=True,
                              text=True, cwd=REPO, timeout=120)
        assert done.returncode == 2 and f"{root}: pid {os.getpid()} is running or resuming this bundle" in done.stderr
        assert done.stderr.rstrip().endswith("then write its report")
        assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before
        elsewhere = subprocess.run([sys.executable, "-m", "harness.cli", "report", str(root), "--out", str(tmp_path / "r")],
                                   capture_output=True, text=True, cwd=REPO, timeout=120)
        assert elsewhere.returncode == 0, elsewhere.stderr
    finally:
        os.close(held)


def test_reading_a_bundle_a_run_is_writing_names_the_run_not_its_missing_manifest(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`report --out`, `compare` and `findings` on a live run said "MANIFEST.sha256: missing"."""
    from harness.cli.main import main

    root = tmp_path / "run"
    shutil.copytree(GOLDEN / f"v{SCHEMA_VERSION}", root)
    header = json.loads((root / "bundle.json").read_text())
    (root / "bundle.json").write_text(json.dumps({**header, "state": "running"}))
    (root / "MANIFEST.sha256").unlink()  # as a run or resume leaves it while it writes cells
    holding = ("import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDONLY); fcntl.flock(fd, fcntl.LOCK_EX); "
               "print('held', flush=True); time.sleep(120)")  # as a run holds its bundle (harness/bundle/lock.py)
    run = subprocess.Popen([sys.executable, "-c", holding, str(root)], stdout=subprocess.PIPE, text=True)
    try:
        assert run.stdout is not None and run.stdout.readline() == "held\n"
        for command in (["report", str(root), "--out", str(tmp_path / "r")], ["compare", str(GOLDEN / f"v{SCHEMA_VERSION}"),
                        str(root)], ["findings", str(root), "--out", str(tmp_path / "f")]):
            assert main(command) == 2, command
            err = capsys.readouterr().err
            assert f"{root}: pid {run.pid} is writing this bundle" in err and "MANIFEST" not in err, err
        # validate lists the problems as they stand (exit 1), and names the writer, where it said only
        # "where no process runs it, finish it with --resume"
        assert main(["validate", str(root)]) == 1
        err = capsys.readouterr().err
        assert f"{root}: note: pid {run.pid} is writing this bundle now" in err, err
    finally:
        run.kill()
        run.wait()
    assert main(["report", str(root), "--out", str(tmp_path / "r")]) == 2  # no run has it: its problems, as before
    assert "MANIFEST.sha256" in capsys.readouterr().err


def test_an_out_that_is_a_file_is_refused_by_name(tmp_path: Path) -> None:
    afile = tmp_path / "report.txt"
    afile.write_text("keep me")
    done = subprocess.run([sys.executable, "-m", "harness.cli", "report", str(GOLDEN / "v9"), "--out", str(afile)],
                          capture_output=True, text=True, cwd=REPO, timeout=120)
    assert done.returncode == 2 and f"--out {afile}: a file, not a directory" in done.stderr  # was "File exists"
    assert afile.read_text() == "keep me"


def _one_cell_on_a_slot(tmp_path: Path) -> Path:
    """The golden bundle with resnet18's inductor fusion-on Offline cell run in a 1-core slot, as a
    serial resume of a `--jobs 2` run left it, its pair's other cell on the whole machine."""
    root = tmp_path / "run"
    shutil.copytree(GOLDEN / f"v{SCHEMA_VERSION}", root)
    for path in (root / "cells").glob("*.json"):
        record = json.loads(path.read_text())
        if record["label"] == "resnet18 inductor fusion-on Offline cpu fp32 b4":
            record["node"]["slot"] = {"index": 0, "cpus": [0], "gpu": None, "gpu_order": None}
            path.write_text(json.dumps(record))
    return root


def test_cells_that_ran_on_other_shares_of_the_machine_are_not_set_side_by_side(tmp_path: Path) -> None:
    """A `--jobs 2` run resumed serially (before such a resume was refused) ran fusion on in a 1-core
    slot and off on the whole machine: the report set the two side by side as a 6.02x speedup. Now
    it takes no speedup from them, and says which and why; the findings too."""
    from harness.reporting import findings_page

    root = _one_cell_on_a_slot(tmp_path)
    before = markdown(load(GOLDEN / f"v{SCHEMA_VERSION}"))
    text = markdown(load(root))
    fusion = text[text.index("## Fusion on vs off"):text.index("## Where fusion made things slower")]
    old_fusion = before[before.index("## Fusion on vs off"):before.index("## Where fusion made things slower")]
    assert "| resnet18 inductor Offline b4 fp32 cpu" in old_fusion, "the golden bundle pairs these cells"
    assert "| resnet18 inductor Offline b4 fp32 cpu" not in fusion
    assert ("- resnet18 inductor Offline b4 fp32 cpu input 32: fusion on and off not set side by side: one ran on a slot of "
            "1 core(s), the other on the whole machine") in fusion, fusion
    assert ("- resnet18 inductor fusion-on Offline b4 fp32 cpu input 32: not set beside eager: one ran on a slot of 1 core(s), "
            "the other on the whole machine") in fusion, fusion
    speedups = text[text.index("## Speedup over eager"):text.index("## Fusion on vs off")]
    assert not [line for line in speedups.splitlines() if "Offline b4" in line and "inductor fusion-on" in line]
    assert "not set side by side" in html(load(root))
    findings = findings_page.markdown([load(root)])
    assert "not set side by side: one ran on a slot of 1 core(s), the other on the whole machine" in findings, findings
    assert "- (ran apart from eager)" in findings


def test_the_console_and_findings_count_a_pair_that_ran_apart(tmp_path: Path) -> None:
    """The console's fusion table dropped such a pair without a word, and `findings` counted it as
    having 'a side not valid'."""
    from rich.console import Console

    from harness.reporting import findings
    from harness.run.summary import fusion_summary

    root = _one_cell_on_a_slot(tmp_path)
    table = fusion_summary(load(root).records, [])
    assert table is not None
    console = Console(width=400, record=True)
    console.print(table)
    assert "1 pair(s) not set side by side: their cells ran on other shares of the machine" in console.export_text()
    lone = fusion_summary([r for r in load(root).records if "resnet18 inductor" in r.label and "Offline" in r.label], [])
    assert lone is not None, "a run whose one pair ran apart said nothing of it"
    console = Console(width=400, record=True)
    console.print(lone)
    assert "1 pair(s) not set side by side" in console.export_text()
    counted = findings.tally(findings.groups([load(root)]), "inductor")
    assert [t for t in counted.broken if t.endswith("(ran apart)")] == ["resnet18 Offline b4 fp32 cpu input 32 (ran apart)"]


def _booted(tmp_path: Path, boots: dict[str, str], executor: str = "local", hostnames: dict[str, str] | None = None) -> Path:
    """The golden bundle with every cell that ran given `node.boot_id` "a" * 32, and the cells `boots`
    names by label theirs (and `hostnames` theirs), each run by `executor`."""
    root = tmp_path / "run"
    shutil.copytree(GOLDEN / f"v{SCHEMA_VERSION}", root)
    for path in (root / "cells").glob("*.json"):
        record = json.loads(path.read_text())
        if record.get("node") is not None:  # a cell skipped before it ran has none
            record["node"].update(boot_id=boots.get(record["label"], "a" * 32), executor=executor)
            record["node"]["hostname"] = (hostnames or {}).get(record["label"], record["node"]["hostname"])
            path.write_text(json.dumps(record))
    return root


def test_cells_that_ran_on_two_starts_of_the_machine_are_not_set_side_by_side(tmp_path: Path) -> None:
    """A resume on a fresh start of the same kind of VM ran densenet121's fusion-off cell 1.75 times
    slower than the first start ran its fusion-on cell, and the pair read 2.68x faster. Cells whose
    boot ids differ are not set side by side now; a Ray run's cells on two of its machines are still
    (the hardware check is theirs), and a bundle without boot ids reads as before."""
    from harness.reporting import findings_page

    label = "resnet18 inductor fusion-on Offline cpu fp32 b4"
    pair = "| resnet18 inductor Offline b4 fp32 cpu"

    def fusion_of(root: Path) -> str:
        text = markdown(load(root))
        return text[text.index("## Fusion on vs off"):text.index("## Where fusion made things slower")]

    same = fusion_of(_booted(tmp_path / "same", {}))
    assert pair in same and "not set side by side" not in same
    root = _booted(tmp_path / "two", {label: "b" * 32})
    fusion = fusion_of(root)
    assert pair not in fusion
    why = f"they ran on two starts of the machine (boot {'b' * 8} and {'a' * 8})"  # the cell's, then its counterpart's
    assert f"- resnet18 inductor Offline b4 fp32 cpu input 32: fusion on and off not set side by side: {why}" in fusion, fusion
    assert f"- resnet18 inductor fusion-on Offline b4 fp32 cpu input 32: not set beside eager: {why}" in fusion, fusion
    assert f"not set side by side: {why}" in findings_page.markdown([load(root)])
    ray = _booted(tmp_path / "ray", {label: "b" * 32}, "ray", {label: "node-2"})
    assert pair in fusion_of(ray), "a Ray run's cells on two machines of one kind were set apart by their boots"
    restarted = _booted(tmp_path / "ray-restart", {label: "b" * 32}, "ray")
    assert pair not in fusion_of(restarted), "a Ray node restarted between two cells"


def test_compares_fusion_table_says_where_a_pair_ran_apart_not_that_it_was_not_valid(tmp_path: Path) -> None:
    """`compare` showed such a pair as `-`, which its caption reads as "not valid in that bundle"."""
    from harness.reporting.fusion_verdicts import fusion_verdicts

    golden, root = load(GOLDEN / f"v{SCHEMA_VERSION}"), load(_one_cell_on_a_slot(tmp_path))
    verdicts = fusion_verdicts(golden, root)
    [pair] = [v for v in verdicts if v.name.startswith("resnet18 inductor Offline b4")]
    assert pair.a is not None and pair.b is None
    assert pair.shown()[1] == "ran apart" and pair.apart_b == "one ran on a slot of 1 core(s), the other on the whole machine"
    assert pair.recorded()["ran_apart"] == {"a": None, "b": pair.apart_b}
    assert all(v.b is not None for v in verdicts if v is not pair), "the golden bundle's other pairs are valid in both"
    # the Markdown said `ran apart` and a caption naming shares and hardware only, never why (two boots read alike)
    from harness.reporting.compare import compare
    from harness.reporting.compare_output import to_markdown
    shown = to_markdown(compare(golden, root))
    assert f"- {pair.name}, in B: {md_cell(pair.apart_b)}" in shown, shown


def test_a_library_whose_cells_ran_on_two_versions_is_named_with_both(tmp_path: Path) -> None:
    """The report's libraries took the last cell's version: a bundle resumed after an upgrade (from
    before the resume's refusal) named the new version alone."""
    from harness.bundle import manifest
    from harness.reporting.run_facts import library_versions

    root = tmp_path / "run"
    shutil.copytree(GOLDEN / f"v{SCHEMA_VERSION}", root)
    path = next(p for p in sorted((root / "cells").glob("*.json")) if json.loads(p.read_text())["status"] == "valid")
    record = json.loads(path.read_text())
    torch_version = record["environment"]["backend_versions"]["torch"]
    record["environment"]["backend_versions"]["torch"] = "2.0.0"
    path.write_text(json.dumps(record))
    manifest.write(root)
    assert library_versions(load(GOLDEN / f"v{SCHEMA_VERSION}"))["torch"] == torch_version
    said = library_versions(load(root))["torch"]
    assert said in (f"2.0.0 and {torch_version} (its cells differ)", f"{torch_version} and 2.0.0 (its cells differ)"), said
    assert f"torch {said}" in markdown(load(root))


def test_the_report_says_the_loadgen_profile_and_what_an_mlperf_run_overrode() -> None:
    """Only pack said a run was not official: the report, findings and the console never named the
    profile, so a short mlperf run with overrides read as a submission's figures."""
    assert ("- **LoadGen profile**: mlperf, overriding mlperf.conf's min\\_duration\\_s 1.0, min\\_query\\_count 256: "
            "not an official run") in markdown(load(GOLDEN / "mlperf"))
    assert "<td>LoadGen profile</td><td>dev: the harness&#x27;s own short settings, not MLPerf&#x27;s (pack takes no " \
           "cell of it)</td>" in html(load(GOLDEN / f"v{SCHEMA_VERSION}"))


def test_the_roofline_sets_each_cell_at_its_time_over_rounds_with_the_peaks_it_was_bound_by() -> None:
    """BERT base on ONNX Runtime (docs/results/bundles/cpu-2core-amd-2026-12-02-ort-bert-kinds): fusion
    on's round 1 ran while the machine was slow, 134 ms against 77.6 ms over its five rounds. The
    record's fraction is round 1's; the report's is the cell's time over its rounds, as its fusion
    table gives the time."""
    medians = [133.9e6, 75.0e6, 77.6e6, 72.0e6, 77.9e6]
    rounds = [{"round": i, "status": "valid", "median_ns": m, "n": 1, "cv": 0.0,
               **({"samples_ns": [round(m)]} if i > 1 else {})} for i, m in enumerate(medians, 1)]
    timing = {"samples_ns": [round(medians[0])], "summary": {"n": 1, "median_ns": medians[0], "cv": 0.0}}
    roofline = {"flops": 22347251712, "compulsory_bytes": 435969024, "peak_flops_per_s": 159351669198.8255,
                "peak_bytes_per_s": 55564038905.1459, "time_bound_ns": 140238579.39082518, "measured_ns": medians[0],
                "fraction_of_bound": 140238579.39082518 / medians[0], "bound_by": "compute"}
    row = Row(cell_record(metrics={"device_time": timing, "rounds": rounds, "roofline": roofline}))
    head, (line,) = roofline_table([row])
    cells = dict(zip(head, line))
    assert cells["measured"] == "77.6 ms" and cells["fraction of bound"] == "1.807 above roof"
    assert cells["peaks"] == "159 GFLOP/s, 55.6 GB/s"
    one_round = Row(cell_record(metrics={"device_time": timing, "roofline": roofline}))
    assert dict(zip(head, roofline_table([one_round])[1][0]))["fraction of bound"] == "1.047 above roof"


def test_the_roofline_gives_a_small_models_work_in_three_figures_under_its_prefix() -> None:
    """resnet18 and mobilenet_v3_small at input 32 (75.0 and 6.37 MFLOP a batch, 46.8 and 10.2 MB
    compulsory): in GFLOP with two decimals the first read 0.08 (one figure, 7% off), the second
    0.00637, and the bytes in MB 46.8 and 10.2; each now reads as the peaks beside it do."""
    timing = {"samples_ns": [6310685], "summary": {"n": 1, "median_ns": 6310685.0, "cv": 0.0}}
    figures = {}
    for flops, compulsory in ((75046912, 46812736), (6367104, 10236160), (167772160, 21086208)):
        roofline = {"flops": flops, "compulsory_bytes": compulsory, "peak_flops_per_s": 6.79e10,
                    "peak_bytes_per_s": 2.24e10, "time_bound_ns": 2.09e6, "measured_ns": 6310685.0,
                    "fraction_of_bound": 0.331, "bound_by": "memory"}
        head, (line,) = roofline_table([Row(cell_record(metrics={"device_time": timing, "roofline": roofline}))])
        cells = dict(zip(head, line))
        figures[flops] = (cells["FLOP/batch"], cells["compulsory bytes"])
    assert figures == {75046912: ("75.0 MFLOP", "46.8 MB"), 6367104: ("6.37 MFLOP", "10.2 MB"),
                       167772160: ("168 MFLOP", "21.1 MB")}


def test_cells_of_one_bundle_on_two_cpu_generations_are_set_apart() -> None:
    """A run resumed on another VM of the same name ("AMD EPYC", one Zen 3 and one Zen 4) ran its
    cells on two CPUs: their pairs are not set side by side. Cells that recorded no identity (before
    2026-12-04) are paired as before."""
    from harness.reporting.run_facts import apart

    a, b = load(GOLDEN / f"v{SCHEMA_VERSION}").records[:2]

    def on(record: CellRecordModel, identity: str | None) -> CellRecordModel:
        node = {**record.node, "cpu": {**record.node["cpu"], "identity": identity}}
        return record.model_copy(update={"node": node})

    zen3, zen4 = (f"vendor_id AuthenticAMD, cpu family 25, model {m}, stepping 1" for m in (1, 17))
    assert apart(on(a, zen3), on(b, zen4)) == f"one ran on a CPU of {zen3}, the other on a CPU of {zen4}"
    assert apart(on(a, zen3), on(b, None)) == apart(a, b) == ""


def test_a_pair_whose_fusion_reports_are_the_same_on_and_off_says_its_speedup_is_not_fusions() -> None:
    """A plugin that ignored `variant.fusion` ran the same code for both cells; the fusion table set
    1.30x (one round) beside it as fusion's effect, with nothing to say that no fusion was switched."""
    from harness.reporting.fusion_pairs import SAME_KERNELS_MARK, fusion_table

    pair = next(p for p in fusion_pairs([Row(r) for r in load(GOLDEN / "v3").records]) if "1.30x" in fmt_speedup(p))
    _, body = fusion_table([pair])
    assert SAME_KERNELS_MARK not in body[0][3]
    off = pair.off.record.model_copy(deep=True)
    off.metrics.fusion_report = pair.on.record.metrics.fusion_report
    _, body = fusion_table([FusionPair(pair.on, Row(off))])
    assert body[0][3].endswith(SAME_KERNELS_MARK), body[0][3]


def test_a_pair_whose_fusion_reports_list_no_kernel_is_not_said_to_run_the_same_kernels() -> None:
    """A backend that cannot see its kernels reports none, on and off: the fusion table said of its
    pair `the same kernels on and off: not fusion's effect`, of a backend that switched fusion."""
    from harness.fusion.report import counts
    from harness.reporting.fusion_pairs import SAME_KERNELS_MARK, fusion_table

    pair = next(p for p in fusion_pairs([Row(r) for r in load(GOLDEN / "v3").records]) if "1.30x" in fmt_speedup(p))
    on, off = (row.record.model_copy(deep=True) for row in (pair.on, pair.off))
    for record in (on, off):
        assert record.metrics.fusion_report is not None
        record.metrics.fusion_report = record.metrics.fusion_report.model_copy(update={"kernels": [], **counts([])})
    _, body = fusion_table([FusionPair(Row(on), Row(off))])
    assert SAME_KERNELS_MARK not in body[0][3], body[0][3]
    assert body[0][3].startswith("1.30x"), body[0][3]


def test_the_report_says_what_each_backends_fusion_off_changed_besides_the_kernels(tmp_path: Path) -> None:
    """ONNX Runtime's fusion off on CPU also leaves its blocked NCHWc layout out (it comes only with its
    fusions): efficientnet_b0's 2.62x was set beside fusion alone, the layout recorded in the cells'
    `rewrites` and shown nowhere. A setting tuned per model (TVM's schedule database) is said once."""
    from harness.reporting.fusion_pairs import switched_table

    pair = next(p for p in fusion_pairs([Row(r) for r in load(GOLDEN / "v3").records]) if "1.30x" in fmt_speedup(p))

    def with_rewrites(row: Row, model: str, backend: str, rewrites: dict) -> Row:
        record = row.record.model_copy(deep=True)
        record.metrics.rewrites = rewrites
        config = record.config.model_copy(update={"backend": backend,
                                                  "model": record.config.model.model_copy(update={"name": model})})
        return Row(record.model_copy(update={"config": config}))

    def ort(model: str, layout_on: str) -> FusionPair:
        return FusionPair(with_rewrites(pair.on, model, "onnxruntime", {"layout": layout_on, "left_out": []}),
                          with_rewrites(pair.off, model, "onnxruntime",
                                        {"layout": "as exported (NCHW)", "left_out": [f"F{i}" for i in range(10)]}))

    def tvm(model: str) -> FusionPair:
        return FusionPair(with_rewrites(pair.on, model, "tvm", {"left out": [], "schedules": f"db {model} on"}),
                          with_rewrites(pair.off, model, "tvm", {"left out": ["FuseOps"], "schedules": f"db {model} off"}))

    head, body = switched_table([tvm("bert_base"), ort("efficientnet_b0", "NCHWc (blocked)"), tvm("resnet18"),
                                 ort("bert_base", "as exported (NCHW)"), ort("resnet18", "NCHWc (blocked)")])
    assert head == ["backend", "models", "what fusion off changed (on / off)"]
    assert body == [
        ["onnxruntime", "efficientnet_b0, resnet18",
         "layout: NCHWc (blocked) / as exported (NCHW); left_out: none / F0, F1, F2, F3, F4, F5, F6, F7 and 2 more"],
        ["onnxruntime", "bert_base", "left_out: none / F0, F1, F2, F3, F4, F5, F6, F7 and 2 more"],
        ["tvm", "bert_base, resnet18", "left out: none / FuseOps; schedules: on differs from off, and from pair to pair"],
    ]
    unrecorded = FusionPair(with_rewrites(pair.on, "m", "plugin", {}), with_rewrites(pair.off, "m", "plugin", {}))
    assert switched_table([unrecorded])[1] == [["plugin", "m", "nothing its cells record"]]
    loaded = load(GOLDEN / "v3")
    assert "What fusion off changed besides the kernels" in markdown(loaded)


def test_what_fusion_off_changed_cuts_a_long_text_or_mapping_as_it_cuts_a_list() -> None:
    """A list showed eight names and counted the rest, but a plugin's setting that is a long text (a
    pass pipeline written out) or a mapping of 60 flags was shown whole: one table cell of 1,671
    characters."""
    from harness.reporting.fusion_pairs import switched_table

    pair = next(p for p in fusion_pairs([Row(r) for r in load(GOLDEN / "v3").records]) if "1.30x" in fmt_speedup(p))

    def with_rewrites(row: Row, rewrites: dict) -> Row:
        record = row.record.model_copy(deep=True)
        record.metrics.rewrites = rewrites
        return Row(record)

    on = {"pipeline": "pass;" * 200, "flags": {f"k{i:02}": i for i in range(60)}, "names": ["x" * 100]}
    off = {"pipeline": "none", "flags": {"k00": [1, 2]}, "names": []}
    said = switched_table([FusionPair(with_rewrites(pair.on, on), with_rewrites(pair.off, off))])[1][0][2]
    assert said == ("flags: k00: 0, k01: 1, k02: 2, k03: 3, k04: 4, k05: 5, k06: 6, k07: 7 and 52 more / k00: [1, 2]; "
                    f"names: {'x' * 80}... (100 characters) / none; "
                    f"pipeline: {'pass;' * 16}... (1000 characters) / none")


def test_each_kernels_time_and_the_time_split_stand_on_the_cells_time_over_its_rounds() -> None:
    """The profile is round 1's: its slowest kernels and its split between kernels and overhead were shown
    at round 1's median beside the kinds' time moved and every speedup, which take the time over rounds.
    A round 1 the machine slowed put eager's shufflenet_v2 at 216 ms in kernels where the speedup table
    gave it 116 ms, and Inductor's convolutions at 5.22 against 13.8 ms on and off beside their time
    moved, -6.25 ms."""
    rows = [Row(r) for r in load(GOLDEN / "v12").records]  # Inductor's Offline cells: 1.06 and 1.18 over round 1
    (pair,) = [p for p in fusion_pairs(rows) if p.on.backend == "inductor" and p.on.setting.startswith("Offline")]
    for row in (pair.on, pair.off):
        assert row.time_ns / row.median_ns != pytest.approx(1, abs=0.05)
        (top, *_) = row.metrics.kernels.top_kernels if row.metrics.kernels else []
        at_time_over_rounds = format_value(top["ns_per_inference"] * row.time_ns / row.median_ns, "ns")
        noisy = NOISY_CELL if noisy_mark(row) else ""  # both are: the mark comes first (the next test)
        assert slowest_kernels(row)[0].startswith(f"{noisy}{top['name']} {at_time_over_rounds} ")
    groups, (kernels, overhead) = time_split_series(rows, "inductor")
    for group, in_kernels, rest in zip(groups, kernels.values, overhead.values):
        (row,) = [r for r in rows
                  if r.backend == "inductor" and f"{r.model} {r.variant.removeprefix('inductor ')} {r.setting}" == group]
        assert (in_kernels or 0) + (rest or 0) == pytest.approx(row.time_ns / 1e6)  # the plots' ms


def test_the_kernel_figures_of_a_noisy_cell_say_so_where_they_are_read() -> None:
    """Golden v12's TVM Offline pair: its fusion-off cell's timing samples spread beyond 10%, and its
    speedup said `noisy`, but the kernels it spends most time in, the time moved by kind and its time
    against eager by class (each a share of that noisy time) read as firm figures in every table and
    why-slower line that cites them. Each now begins `(a noisy cell's)`; the steady fusion-on cell's
    own kernels do not."""
    from harness.reporting.kernels import classes_against, slowest_kernels_by_side, time_moved

    rows = [Row(r) for r in load(GOLDEN / "v12").records]
    (pair,) = [p for p in fusion_pairs(rows) if p.on.backend == "tvm" and p.on.setting.startswith("Offline")]
    assert not noisy_mark(pair.on) and noisy_mark(pair.off)
    assert not slowest_kernels(pair.on)[0].startswith(NOISY_CELL) and not fused_kernels(pair.on)[0].startswith(NOISY_CELL)
    assert slowest_kernels(pair.off)[0].startswith(NOISY_CELL + "conv2d")
    assert [slowest[0].startswith(NOISY_CELL) for _, slowest in slowest_kernels_by_side(pair)] == [False, True]
    assert time_moved(pair)[0].startswith(f"{NOISY_CELL}kernels in all ")  # either side's noise is in it
    assert all(NOISY_CELL not in line for line in time_moved(pair)[1:])  # said once, before the first
    (eager,) = [r for r in rows if r.backend == "eager" and r.setting == pair.off.setting]
    assert classes_against(pair.off, eager)[0].startswith(f"{NOISY_CELL}kernels in all ")
    # where a side lists no kinds the graphs and breaks are said alone: Dynamo's counts, no share of its time
    dynamo = Dynamo(graphs=3, graph_breaks=2, distinct_break_reasons=1, break_reasons=[BreakReason(reason="print", count=2)])
    unprofiled = Row(pair.off.record.model_copy(update={"metrics": pair.off.metrics.model_copy(
        update={"kernels": None, "dynamo": dynamo})}))
    assert noisy_mark(unprofiled) and classes_against(unprofiled, eager) == ["3 graphs, 2 breaks: print (x2)"]
    head, body = kernels_by_pair([pair])
    (row,) = body
    assert row[head.index("most time with fusion off")].startswith(NOISY_CELL)
    assert not row[head.index("most time with fusion on")].startswith(NOISY_CELL)
    assert row[head.index("time moved by kind (on less off)")].startswith(NOISY_CELL)


def test_a_slowest_kernel_whose_name_leaves_out_what_it_runs_says_what_it_runs() -> None:
    """Inductor names a generated kernel after operators near it: resnet18's copy of its input into
    channels-last, with fusion off, is `cpp_fused_convolution_0`, and it stood second among the kernels
    the cell spends most time in as if it were a convolution. Its fusion report says it runs
    `inductor.layout_copy`; a kernel whose name says what it runs, or one several groups share (oneDNN's
    calls), is given as it was."""
    kernels = [{"kernel": "cpp_fused_convolution_0", "ops": ["inductor.layout_copy"], "class": "single"},
               {"kernel": "torch.ops.mkldnn._convolution_pointwise", "ops": ["mkldnn._convolution_pointwise"], "class": "single"},
               {"kernel": "torch.ops.mkldnn._convolution_pointwise", "ops": ["aten.relu"], "class": "single"},
               {"kernel": "cpp_fused__native_batch_norm_legit_no_training_1",
                "ops": ["aten._native_batch_norm_legit_no_training"], "class": "single"}]
    top = [{"name": "mkldnn::_convolution_pointwise", "calls_per_inference": 20.0, "ns_per_inference": 41.4e6},
           {"name": "cpp_fused_convolution_0", "calls_per_inference": 1.0, "ns_per_inference": 31.8e6},
           {"name": "cpp_fused__native_batch_norm_legit_no_training_1", "calls_per_inference": 1.0, "ns_per_inference": 1e6}]
    assert slowest_kernels(_profiled(kernels, top)) == ["mkldnn::_convolution_pointwise 41.4 ms (20 calls)",
                                    "cpp_fused_convolution_0, running inductor.layout_copy, 31.8 ms (1 call)",
                                    "cpp_fused__native_batch_norm_legit_no_training_1 1.00 ms (1 call)"]
