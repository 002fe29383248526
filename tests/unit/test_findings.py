"""`fusionbench findings`: what several bundles say together, per model and across models, from the
golden bundles (v7 has Inductor's and TVM's fusion pairs over two rounds, v3 Inductor's over one)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.bundle.reader import load
from harness.reporting import findings, findings_eager
from harness.reporting.findings_page import FINDINGS_HTML, FINDINGS_MD, html, markdown, render
from harness.reporting.html import html as report_html
from harness.reporting.markdown import markdown as report_markdown
from harness.reporting.markdown import md_cell
from harness.reporting.speedups import busy_mark, noisy_mark

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
REPO = GOLDEN.parents[1]


@pytest.fixture(scope="module")
def v7() -> list[findings.Group]:
    return findings.groups([load(GOLDEN / "v7")])


def _line(groups: list[findings.Group], title: str, backend: str) -> findings.Line:
    (group,) = [g for g in groups if g.title == title]
    (line,) = [line for line in group.lines if line.backend == backend]
    return line


def test_each_model_and_setting_has_one_line_per_backend_with_both_sides(v7: list[findings.Group]) -> None:
    assert [g.title for g in v7] == ["resnet18 SingleStream b1 fp32 cpu input 32", "resnet18 Offline b4 fp32 cpu input 32"]
    for group in v7:
        assert [line.backend for line in group.lines] == [
            "eager", "null", "inductor", "onnxruntime provider=cuda", "tvm tuning_trials=1"]
        tvm = _line(v7, group.title, "tvm tuning_trials=1")
        assert tvm.pair is not None and tvm.pair.result.rounds == 2
        eager = _line(v7, group.title, "eager")
        assert not eager.has_switch and eager.pair is None


def test_the_model_table_gives_fusions_kernels_speedup_eager_memory_and_tuning(v7: list[findings.Group]) -> None:
    group = v7[1]  # Offline b4
    head, body = findings.model_table(group, gpu=False)
    assert head == ["backend", "fusions on (by class)", "kernels/inf on / off", "time on / off",
                    "fusion speedup (off / on)", "vs eager on / off", "peak RSS on / off", "tuning"]
    rows = {row[0]: dict(zip(head, row)) for row in body}
    tvm = rows["tvm tuning_trials=1"]
    assert tvm["fusions on (by class)"] == "21 tensor+element" and tvm["kernels/inf on / off"] == "23 / 129"
    assert tvm["fusion speedup (off / on)"].removesuffix(" busy").removesuffix(" noisy") == "0.59x [0.57-0.60, 95%] slower"
    assert tvm["tuning"] == "1/task, 19 of 19 tasks, 26.2 s (cold) / 1/task, 45 of 45 tasks, 28.3 s (cold)"
    eager, on = group.eager, _line(v7, group.title, "tvm tuning_trials=1").on
    assert eager is not None and on is not None and eager.time_ns and on.time_ns
    assert tvm["vs eager on / off"].startswith(
        f"{eager.time_ns / on.time_ns:.2f}x (one estimate, rounds not paired){noisy_mark(on, eager)}{busy_mark(on, eager)} / ")
    assert rows["eager"]["fusion speedup (off / on)"] == "no switch" and rows["eager"]["vs eager on / off"] == "1.00x"
    assert rows["onnxruntime provider=cuda"]["time on / off"] == "-"
    assert rows["onnxruntime provider=cuda"]["fusion speedup (off / on)"].startswith(
        "failed: prepare: onnxruntime provider=cuda")
    assert rows["null"]["vs eager on / off"] == "-"  # computes nothing: never a speedup
    assert rows["inductor"]["tuning"] == "-"


def test_where_fusion_made_a_model_slower_the_note_says_what_was_fused_and_the_time_inside_kernels(
        v7: list[findings.Group]) -> None:
    (note,) = findings.slower_notes(v7[1])
    assert note.startswith("tvm tuning_trials=1: 0.59x [0.57-0.60, 95%] slower. Fused kernels: fused_conv2d")
    assert "Time inside kernels: on " in note
    assert findings.slower_notes(v7[0]) == []  # 0.99x with an interval across 1: no effect seen, not slower


def test_across_models_each_backend_counts_verdicts_and_one_round_estimates_apart() -> None:
    groups = findings.groups([load(GOLDEN / "v7"), load(GOLDEN / "v3")])
    assert all(g.title.endswith("-golden)") for g in groups)  # both bundles hold resnet18's settings: named
    tvm = findings.tally(groups, "tvm tuning_trials=1")
    assert [len(tvm.slower), len(tvm.unchanged), len(tvm.faster)] == [1, 1, 0]
    inductor = findings.tally(groups, "inductor")
    assert len(inductor.unchanged) == 2  # v7: two rounds, intervals across 1
    assert len(inductor.one_round_up) == 2 and all("20261123-162229-golden" in t for t in inductor.one_round_up)
    head, body = findings.summary_table(groups)
    rows = {row[0]: row for row in body}
    assert set(rows) == {"inductor", "tvm tuning_trials=1"}  # backends with a fusion switch only
    assert rows["inductor"][-1] == "21 in each of 4 measurements of 2 models and settings"  # was "21 in each of 4"
    alone = {row[0]: row for row in findings.summary_table(findings.groups([load(GOLDEN / "v3")]))[1]}
    assert alone["inductor"][-1] == "21 in each of 2 models and settings"


def test_one_round_estimates_sort_by_the_smallest_effect() -> None:
    assert findings.SMALLEST_EFFECT == 0.05  # the verdicts' (harness/stats/intervals.py)
    groups = findings.groups([load(GOLDEN / "v3")])
    for group in groups:
        pair = _line(groups, group.title, "inductor").pair
        assert pair is not None and pair.result.interval is None and pair.result.value > 1.05


def test_slower_than_eager_lists_the_cells_eager_beat(v7: list[findings.Group]) -> None:
    _, body = findings_eager.slower_than_eager(v7)
    assert {(row[0], row[1]) for row in body} == {(g.title, "tvm tuning_trials=1") for g in v7}
    shown = [row[2].removesuffix(" busy").removesuffix(" noisy") for row in body]  # golden cells are noisy and busy: said
    one = " (one estimate, rounds not paired)"  # two rounds each, from before a setting's rounds took turns
    assert all(text.endswith(f"x{one}") and float(text.removesuffix(one)[:-1]) < 1 / 1.05 for text in shown)


def test_against_eager_is_each_cells_time_over_its_rounds_as_the_table_shows_it() -> None:
    """Golden v9's Inductor SingleStream cell: 13.2 ms over its two rounds against eager's 43.7 ms,
    3.3x; its first round alone against eager's gave 1.76x, beside the times the row shows."""
    groups = findings.groups([load(GOLDEN / "v9")])
    group = next(g for g in groups if g.setting.startswith("SingleStream"))
    head, body = findings.model_table(group, gpu=False)
    rows = {row[0]: dict(zip(head, row)) for row in body}
    eager, on = group.eager, _line(groups, group.title, "inductor").on
    assert eager is not None and on is not None and eager.time_ns and on.time_ns and eager.median_ns and on.median_ns
    marks = " (one estimate, rounds not paired)" + noisy_mark(on, eager) + busy_mark(on, eager)
    assert rows["inductor"]["vs eager on / off"].startswith(f"{eager.time_ns / on.time_ns:.2f}x{marks} / ")
    assert f"{eager.time_ns / on.time_ns:.2f}" != f"{eager.median_ns / on.median_ns:.2f}"  # round 1 alone differs
    report = report_markdown(load(GOLDEN / "v9"))
    speedups = report[report.index("## Speedup over eager"):report.index("## Fusion on vs off")]
    assert f"| inductor fusion-on | {eager.time_ns / on.time_ns:.2f}x{marks} |" in speedups


def test_fusions_that_launched_no_fewer_kernels_are_listed(v7: list[findings.Group], tmp_path: Path) -> None:
    """TVM's 21 fusions cut its kernels 129 to 23: not listed. Made to launch 129 with fusion on (as
    ONNX Runtime's fused nodes did on CUDA, each still running its bias and activation as kernels of
    their own), the same pair is listed in both settings, with its fusions and both counts."""
    assert findings.no_fewer_kernels(v7)[1] == []
    root = tmp_path / "bundle"
    shutil.copytree(GOLDEN / "v7", root)
    edited = 0
    for path in (root / "cells").glob("*.json"):
        record = json.loads(path.read_text())
        if record["config"]["backend"] == "tvm" and record["config"]["variant"]["fusion"] == "on":
            record["metrics"]["kernels"]["kernels_per_inference"] = 129.0
            path.write_text(json.dumps(record))
            edited += 1
    assert edited == 2
    groups = findings.groups([load(root)])
    head, body = findings.no_fewer_kernels(groups)
    rows = [dict(zip(head, row)) for row in body]
    assert [(row["model and setting"], row["backend"]) for row in rows] == [
        (g.title, "tvm tuning_trials=1") for g in groups]
    assert all(row["fusions (fusion on)"] == "21 tensor+element" and row["kernels/inf on / off"] == "129 / 129"
               for row in rows)
    assert all(row["kinds run more often (calls on, off)"] == "-" for row in rows), "v7's cells list no kinds"
    assert "## Fusions that launched no fewer kernels" in markdown([load(root)])


def test_the_page_holds_every_section_in_markdown_and_html() -> None:
    bundles = [load(GOLDEN / "v7"), load(GOLDEN / "v3")]
    text, page = markdown(bundles), html(bundles)
    for heading in ("Across models", "Slower than eager", "Faster than eager", "Fusions that launched no fewer kernels",
                    "Per model"):
        assert f"## {heading}" in text and f"<h2>{heading}</h2>" in page
    assert md_cell("0.59x [0.57-0.60, 95%] slower") in text and "0.59x [0.57-0.60, 95%] slower" in page
    # what each backend's fusion off changed besides the kernels, once for all the bundles' pairs
    switched = "conv_bn_folding: true / false; lowering_inlining: true / false; onednn_epilogues: true / false"
    assert text.count(md_cell(switched)) == 1 and page.count(switched) == 1
    assert 'id="plot-findings-fusion"' in page and "http" not in page.replace("http://www.w3.org/2000/svg", "")


def test_hostile_labels_are_escaped(tmp_path: Path) -> None:
    root = tmp_path / "bundle"
    shutil.copytree(GOLDEN / "v7", root)
    for path in (root / "cells").glob("*.json"):
        record = json.loads(path.read_text())
        record["config"]["backend"] = "<script>alert(1)</script>|x"
        path.write_text(json.dumps(record))
    page = html([load(root)])
    assert "<script>" not in page and "&lt;script&gt;" in page and "\\|x" in markdown([load(root)])


def fusionbench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True, cwd=REPO,
                          timeout=120)


@pytest.mark.slow
def test_the_cli_writes_both_files_outside_every_bundle_and_refuses_what_it_cannot_use(tmp_path: Path) -> None:
    written = render([load(GOLDEN / "v7")], tmp_path / "direct")
    assert [p.name for p in written] == [FINDINGS_MD, FINDINGS_HTML]
    done = fusionbench("findings", str(GOLDEN / "v7"), str(GOLDEN / "v6"), "--out", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out" / FINDINGS_MD).read_text().startswith("# FusionBench findings")
    inside = fusionbench("findings", str(GOLDEN / "v7"), "--out", str(GOLDEN / "v7" / "findings"))
    assert inside.returncode == 2 and "inside the bundle" in inside.stderr and not (GOLDEN / "v7" / "findings").exists()
    twice = fusionbench("findings", str(GOLDEN / "v7"), str(GOLDEN / "v7" / "."), "--out", str(tmp_path / "again"))
    assert twice.returncode == 2 and "the same bundle is given twice" in twice.stderr
    shutil.copytree(GOLDEN / "v7", tmp_path / "copy")  # one run's cells merged under its id, without a word
    copies = fusionbench("findings", str(GOLDEN / "v7"), str(tmp_path / "copy"), "--out", str(tmp_path / "copies"))
    assert copies.returncode == 2 and f"{tmp_path / 'copy'} are copies of one run (" in copies.stderr
    assert not (tmp_path / "copies").exists()
    bad = tmp_path / "bad"
    shutil.copytree(GOLDEN / "v7", bad)
    (bad / "cells" / "stray.txt").write_text("x")
    refused = fusionbench("findings", str(bad), "--out", str(tmp_path / "bad-out"))
    assert refused.returncode == 2 and "fails validation" in refused.stderr and not (tmp_path / "bad-out").exists()


def test_an_effect_under_5_percent_is_counted_apart_from_no_effect_seen() -> None:
    from harness.stats.intervals import NEGLIGIBLE, Interval, Speedup

    groups = findings.groups([load(GOLDEN / "v7")])
    pair = _line(groups, groups[0].title, "inductor").pair
    assert pair is not None
    small = Speedup(1.03, 2, Interval(1.02, 1.04, 0.95), NEGLIGIBLE)  # seen (the interval is above 1), under 5%
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(findings.FusionPair, "result", property(lambda self: small))
        counted = findings.tally(groups[:1], "inductor")
    assert counted.negligible == [f"{groups[0].title} 1.03x"] and counted.unchanged == []
    head, _ = findings.summary_table(groups)
    assert "under 5%" in head and "one round: below 0.952x" in head
    unclear = Speedup(1.04, 5, Interval(1.01, 1.07, 0.95), "faster, size unclear")  # 7% not ruled out
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(findings.FusionPair, "result", property(lambda self: unclear))
        counted = findings.tally(groups[:1], "inductor")
    assert counted.faster == [f"{groups[0].title} 1.04x size unclear"] and counted.negligible == []


def test_cells_that_differ_only_in_their_weights_are_set_apart() -> None:
    """A pretrained twin of each cell: findings keyed them by model and setting alone, and one of the
    two went missing from the page without a word."""
    from dataclasses import replace

    bundle = load(GOLDEN / "v9")
    twins = json.loads(json.dumps(bundle.cells))
    for cell in twins:
        cell["config"]["model"]["pretrained"] = True
    both = replace(bundle, cells=[*bundle.cells, *twins])
    settings = [g.setting for g in findings.groups([both])]
    assert len(settings) == len(set(settings)) == 2 * len(findings.groups([bundle]))
    assert sum(s.endswith(" pretrained") for s in settings) == len(settings) // 2
    assert both.records[-1].config.shown_label.endswith(" input 32 pretrained")


def _part(tmp: Path, name: str, eager: bool, cpu: str | None = None) -> Path:
    """Golden v7 with only its eager cells (`eager`) or only the others, as a run of its own
    (`name`), its cells' CPU `cpu` where given."""
    root = tmp / name
    shutil.copytree(GOLDEN / "v7", root)

    def edit(record: dict) -> None:
        if cpu is not None:
            record["node"]["cpu"]["model"] = cpu

    _keep_cells(root, lambda record: (record["config"]["backend"] == "eager") == eager, edit)
    return root


def _keep_cells(root: Path, keep: Callable[[dict], bool], edit: Callable[[dict], None],
                header_edit: Callable[[dict], None] = lambda header: None) -> None:
    """The bundle at `root` with only the cells `keep` answers yes for, each `edit`ed, as a run of its
    own named after its folder."""
    header = json.loads((root / "bundle.json").read_text())
    header_edit(header)
    kept = []
    for entry in header["cells"]:
        path = root / "cells" / f"{entry['id']}.json"
        record = json.loads(path.read_text())
        if not keep(record):
            path.unlink()
            shutil.rmtree(root / "cells" / entry["id"], ignore_errors=True)
            continue
        edit(record)
        path.write_text(json.dumps(record))
        kept.append(entry)
    header.update(cells=kept, run_id=root.name)
    (root / "bundle.json").write_text(json.dumps(header))


def test_a_backend_run_apart_from_eager_is_set_against_eager_of_the_same_machine(tmp_path: Path) -> None:
    """The vision suite's eager and TVM cells were run as bundles of their own: every TVM row said
    "vs eager - / -" and none was listed slower than eager, though TVM ran at 0.02x."""
    together = {g.title: g for g in findings.groups([load(GOLDEN / "v7")])}
    apart = findings.groups([load(_part(tmp_path, "eager-run", eager=True)), load(_part(tmp_path, "tvm-run", eager=False))])
    borrowing = [g for g in apart if g.bundle == "tvm-run"]
    assert len(borrowing) == 2
    for group in borrowing:
        alone = together[group.model + " " + group.setting]
        assert group.borrowed is not None and group.borrowed[1] == "eager-run" and "eager's cell from eager-run" in group.eager_note
        assert findings.model_table(group, gpu=False)[1][0][5] == findings.model_table(alone, gpu=False)[1][1][5]
    assert {row[0].endswith("(eager from eager-run)") for row in findings_eager.slower_than_eager(apart)[1]} == {True}
    elsewhere = findings.groups([load(_part(tmp_path, "eager-other-cpu", eager=True, cpu="EPYC")),
                                 load(_part(tmp_path, "tvm-run-2", eager=False))])
    assert all(g.borrowed is None for g in elsewhere)  # another machine's eager: not set beside it
    unrecorded = _part(tmp_path, "tvm-no-node", eager=False)
    for path in (unrecorded / "cells").glob("*.json"):
        cell = json.loads(path.read_text())
        cell["node"] = {}
        path.write_text(json.dumps(cell))
    groups = findings.groups([load(_part(tmp_path, "eager-run-3", eager=True)), load(unrecorded)])
    assert all(g.borrowed is None for g in groups)  # where a cell ran unrecorded: no machine to match
    assert all("no valid eager cell" in g.eager_note for g in elsewhere if g.bundle == "tvm-run-2")


def test_eager_of_another_bundle_that_ran_on_other_threads_is_not_borrowed(tmp_path: Path) -> None:
    """A bundle run under `env: [OMP_NUM_THREADS=1]` borrowed eager's cell of a bundle on torch's two
    threads: its "vs eager" set one thread against two, on the same machine, with nothing said."""
    eager = _part(tmp_path, "eager-two-threads", eager=True)
    tvm = _part(tmp_path, "tvm-one-thread", eager=False)
    header = json.loads((tvm / "bundle.json").read_text())
    header["scenario"]["env"] = ["OMP_NUM_THREADS=1"]
    (tvm / "bundle.json").write_text(json.dumps(header))
    for path in (tvm / "cells").glob("*.json"):
        cell = json.loads(path.read_text())
        cell["environment"].update(torch_threads=1, variables={**cell["environment"]["variables"], "OMP_NUM_THREADS": "1"})
        path.write_text(json.dumps(cell))
    apart = [g for g in findings.groups([load(eager), load(tvm)]) if g.bundle == "tvm-one-thread"]
    assert apart and all(g.borrowed is None for g in apart)
    assert all("no valid eager cell of this model and setting on the same hardware and threads" in g.eager_note
               for g in apart)


def _with_cores(tmp: Path, cores: dict[tuple[str, str], float]) -> Path:
    """Golden v7 whose cells of (backend, fusion) kept `cores` busy during their timed calls (two
    seconds a repetition); the other cells, two."""
    root = tmp / "cores"
    shutil.copytree(GOLDEN / "v7", root)
    for path in (root / "cells").glob("*.json"):
        record = json.loads(path.read_text())
        busy = cores.get((record["config"]["backend"], record["config"]["variant"]["fusion"]), 2.0)
        for repetition in (record["metrics"] or {}).get("device_time", {}).get("repetitions", []):
            repetition["beside"]["cpu"].update(wall_s=2.0, process_cpu_s=2.0 * busy)
        path.write_text(json.dumps(record))
    return root


def test_a_speedup_between_cells_that_kept_unequal_cores_busy_says_so_beside_it(tmp_path: Path) -> None:
    """Every TVM CPU cell kept one thread of two busy beside eager's two, and nothing said so: TVM
    was 0.35x of eager on BERT, 0.80x once it ran a thread per core."""
    groups = findings.groups([load(_with_cores(tmp_path, {("tvm", "on"): 1.0}))])
    for group in groups:
        head, body = findings.model_table(group, gpu=False)
        rows = {row[0]: dict(zip(head, row)) for row in body}
        tvm_on, tvm_off = rows["tvm tuning_trials=1"]["vs eager on / off"].split(" / ")
        assert tvm_on.endswith(" (cores busy 1 against 2)") and "cores busy" not in tvm_off
        assert rows["tvm tuning_trials=1"]["fusion speedup (off / on)"].endswith(" (cores busy 1 against 2)")
        assert "cores busy" not in rows["inductor"]["vs eager on / off"] + rows["inductor"]["fusion speedup (off / on)"]
    report = report_markdown(load(tmp_path / "cores"))
    speedups = report[report.index("## Speedup over eager"):report.index("## Fusion on vs off")].splitlines()
    against_eager = [line for line in speedups if line.startswith("| resnet18 ") and "| tvm fusion-o" in line]
    assert len(against_eager) == 4
    # the speedup column, before the time by operator class and each side's slowest kernels (none here:
    # golden v7 lists no kinds and times no kernel)
    assert all(line.endswith("(cores busy 1 against 2) | - | - | - |") == ("tvm fusion-on" in line) for line in against_eager)
    # and beside the fusion pair's speedup: its table, its kernels and the note on its slowdown
    assert sum("(cores busy 1 against 2)" in line for line in report.splitlines()) == 2 + 2 + 2 + 1
    # half a core apart is the tick's and the machine's noise: nothing said
    close = findings.groups([load(_with_cores(tmp_path / "close", {("tvm", "on"): 1.6}))])
    assert not any("cores busy" in cell for g in close for row in findings.model_table(g, gpu=False)[1] for cell in row)


def test_vs_eager_takes_its_verdict_from_the_paired_rounds_where_the_bundles_setting_took_turns() -> None:
    """Inductor against eager, both of one bundle with two rounds: one estimate where the bundle's
    rounds paired a fusion pair's alone, the paired rounds' interval and verdict where every cell of the
    setting took turns; eager borrowed from another bundle never pairs."""
    from harness.reporting.speedups import over_baseline

    golden = load(GOLDEN / "v10")  # written before the rounds of a setting took turns
    group = next(g for g in findings.groups([golden]) if g.setting.startswith("Offline"))
    line = next(line for line in group.lines if line.backend.startswith("inductor"))
    assert group.eager is not None and line.on is not None and not group.paired
    before = findings.against_eager(group, line.on)
    assert "[" not in before
    golden.header["rounds_paired"] = "setting"
    group = next(g for g in findings.groups([golden]) if g.setting.startswith("Offline"))
    line = next(line for line in group.lines if line.backend.startswith("inductor"))
    assert group.paired and group.eager is not None and line.on is not None
    result = over_baseline(line.on, group.eager, True)
    assert result is not None and findings.against_eager(group, line.on).startswith(result.text())


def test_slower_and_faster_than_eager_say_where_the_kernel_time_differs_by_operator_class() -> None:
    """Golden v11 (resnet18): TVM Offline at 0.20x eager spends its extra time in convolution (its
    fused_conv2d_... kernels against eager's aten::conv2d); Inductor SingleStream at 3.3x eager saves
    it there too. The report's speedups over eager say the same. Golden v7 lists no kinds: nothing."""
    groups = findings.groups([load(GOLDEN / "v11")])
    head, slower = findings_eager.slower_than_eager(groups)
    why = head.index("time against eager: in kernels, outside them, by operator class (fusion on)")
    (tvm,) = [row for row in slower if row[1].startswith("tvm") and "Offline" in row[0]]
    assert tvm[why].startswith("(a noisy cell's) kernels in all +")  # its cells' samples spread beyond 10%
    assert "; convolution +" in tvm[why] and "(eager " in tvm[why]
    _, faster = findings_eager.faster_than_eager(groups)
    (inductor,) = [row for row in faster if row[1] == "inductor" and "SingleStream" in row[0]]
    assert "; convolution -" in inductor[why]
    report = report_markdown(load(GOLDEN / "v11"))
    speedups = report[report.index("## Speedup over eager"):report.index("## Fusion on vs off")]
    assert md_cell(tvm[why]) in speedups
    assert {row[why] for row in findings_eager.slower_than_eager(findings.groups([load(GOLDEN / "v7")]))[1]} == {"-"}
    page = markdown([load(GOLDEN / "v11")])
    assert "## Faster than eager" in page and md_cell(inductor[why]) in page


def test_a_cell_the_run_listed_and_never_ran_is_shown_not_run_never_left_out(tmp_path: Path) -> None:
    """An interrupted run (docs/results/bundles/gpu-h200-2026-11-28-lstm: 3 of 7 cells not run) kept
    TVM's fusion-on cells and not their fusion-off ones: the page read TVM `no switch` beside its 21
    fusions, and the summary left TVM out, as if it had no fusion switch. The pair is not run, and
    counted among the pairs with no figure."""
    root = tmp_path / "bundle"
    shutil.copytree(GOLDEN / "v7", root)
    header = json.loads((root / "bundle.json").read_text())
    off = [cell["id"] for cell in header["cells"] if cell["label"].startswith("resnet18 tvm fusion-off")]
    assert len(off) == 2
    for cell_id in off:
        shutil.rmtree(root / "cells" / cell_id)
        (root / "cells" / f"{cell_id}.json").unlink()
    loaded = load(root)
    assert sorted(loaded.missing) == sorted(off)
    groups = findings.groups([loaded])
    for group in groups:
        line = _line(groups, group.title, "tvm tuning_trials=1")
        assert line.has_switch and line.off is None
        head, body = findings.model_table(group, gpu=False)
        row = dict(zip(head, next(r for r in body if r[0] == "tvm tuning_trials=1")))
        assert row["fusion speedup (off / on)"] == "off not run"
        assert row["kernels/inf on / off"] == "23 / -"
    summary = {row[0]: row for row in findings.summary_table(groups)[1]}
    assert summary["tvm tuning_trials=1"][8] == f"2 ({', '.join(group.title for group in groups)})"


def test_where_memory_is_set_on_against_off_the_page_says_what_the_figures_hold() -> None:
    """The findings' and the report's fusion tables set peak RSS on and off side by side with nothing
    said of it: resnet18's Inductor cells read 862 / 850 MiB in one run and 850 / 849 in the next, and
    the first read as fusion costing 12 MiB, where the figure is the worker's lifetime peak (its 590 MiB
    of imports, the compile) read once a cell."""
    bundles = [load(GOLDEN / "v7")]
    report = report_markdown(bundles[0])
    for text in (markdown(bundles), html(bundles), report, report_html(bundles[0])):
        assert "Peak RSS on / off: one reading a cell" in text, text[:300]
        assert "lifetime peak" in text and "compile" in text and "CUDA context" in text
    # the report's memory chart sets every backend's peak side by side: its caption said "eager reference and
    # compiler included", not the imports that are most of it (448 of 549 MiB for eager resnet18 at input 32)
    chart = report_html(bundles[0])
    caption = chart[chart.index("<h2>Memory per backend</h2>"):]
    caption = caption[caption.index("<figcaption>"):caption.index("</figcaption>")]
    assert "imports before the model was built" in caption and "compile" in caption and "one reading" in caption, caption
    said = report.index("Peak RSS on / off: one reading a cell")
    assert report.index("## Fusion on vs off") < said < report.index("| model backend setting |")


def test_an_arena_a_backend_reports_is_set_on_against_off_where_memory_is() -> None:
    """ONNX Runtime's cells record their arena's peak, the one memory figure that moves with what fusion
    does to the memory the backend plans (resnet18 at input 32, batch 1: 2.05 MiB on, 2.22 off), and it
    was shown nowhere: the report's and the findings' fusion tables set peak RSS alone on against off."""
    from harness.reporting.cell_rows import Row
    from harness.reporting.fusion_pairs import fusion_pairs, fusion_table

    loaded = load(GOLDEN / "v7")
    for cell in loaded.cells:
        if cell["config"]["backend"] == "tvm" and cell["status"] == "valid":
            on = cell["config"]["variant"]["fusion"] == "on"
            cell["metrics"]["kernels"]["backend_figures"]["arena_peak_in_use_bytes"] = 2150432 if on else 2326560
    group = findings.groups([loaded])[1]
    head, body = findings.model_table(group, gpu=False)
    assert head[6:8] == ["peak RSS on / off", "arena peak on / off"], head
    rows = {row[0]: dict(zip(head, row)) for row in body}
    assert rows["tvm tuning_trials=1"]["arena peak on / off"] == "2.05 MiB / 2.22 MiB"
    assert rows["eager"]["arena peak on / off"] == "-"
    head, body = fusion_table([p for p in fusion_pairs([Row(r) for r in loaded.records]) if p.on.config.backend == "tvm"])
    assert "arena peak on / off" in head and body[0][head.index("arena peak on / off")] == "2.05 MiB / 2.22 MiB"
    # where no cell reports an arena, no empty column
    assert "arena peak on / off" not in findings.model_table(findings.groups([load(GOLDEN / "v7")])[1], gpu=False)[0]
    assert "Arena peak on / off" in markdown([loaded])


def test_a_memory_figure_set_on_against_off_says_where_the_two_cells_compiled_unlike() -> None:
    """resnet18's ONNX Runtime pair at input 32 read 791 / 652 MiB peak RSS, its fusion-on cell compiled
    cold in its worker and its fusion-off cell read from the cache: the fusion tables set them side by
    side bare, as if fusion cost 139 MiB (both warm they read 713 / 652), where compare calls such a pair
    not comparable."""
    from harness.reporting.cell_rows import Row
    from harness.reporting.fusion_pairs import fusion_pairs, fusion_table

    head, body = findings.model_table(findings.groups([load(GOLDEN / "v7")])[1], gpu=False)
    alike = dict(zip(head, next(row for row in body if row[0] == "inductor")))["peak RSS on / off"]
    assert "(" not in alike, alike  # both compiled cold: nothing to say
    loaded = load(GOLDEN / "v7")
    for cell in loaded.cells:
        if cell["config"]["backend"] == "inductor" and cell["config"]["variant"]["fusion"] == "off":
            cell["metrics"]["prepare_cache"] = "warm"
    head, body = findings.model_table(findings.groups([loaded])[1], gpu=False)
    said = dict(zip(head, next(row for row in body if row[0] == "inductor")))["peak RSS on / off"]
    assert said.endswith(" (prepare_cache cold / warm)") and said.startswith(alike), said
    head, body = fusion_table([p for p in fusion_pairs([Row(r) for r in loaded.records]) if p.on.config.backend == "inductor"])
    assert all(row[head.index("peak RSS on / off")].endswith(" (prepare_cache cold / warm)") for row in body), body
    assert all("(" not in row[head.index("kernels/inf on / off")] for row in body)  # a count depends on no cache


def test_against_eager_the_time_outside_kernels_is_said_beside_the_kernel_time() -> None:
    """Inductor's resnet18 on an H200 ran at 0.94x eager, 0.30 ms a batch slower; the table said only
    `kernels in all +171 us`, where its 121 launches against eager's 81 cost as much again outside its
    kernels: the report's speedup over eager says the same."""
    bundle = load(Path(__file__).resolve().parents[2] / "docs/results/bundles/gpu-h200-2026-12-04-inductor-layout")
    head, slower = findings_eager.slower_than_eager(findings.groups([bundle]))
    (inductor,) = [row for row in slower if row[1] == "inductor"]
    why = inductor[head.index("time against eager: in kernels, outside them, by operator class (fusion on)")]
    assert why.startswith("kernels in all +171 us (eager 4.59 ms, inductor 4.76 ms); "
                          "outside kernels +169 us (eager 193 us, inductor 362 us); other +1.14 ms"), why
    report = report_markdown(bundle)
    assert md_cell(why) in report[report.index("## Speedup over eager"):report.index("## Fusion on vs off")]


def _with_dynamo(tmp_path: Path, dynamo: dict[str, object]) -> Path:
    """The H200 bundle with `dynamo` as its Inductor cells' Dynamo record (findings and the report read a
    bundle without validating it again)."""
    root = tmp_path / "bundle"
    shutil.copytree(Path(__file__).resolve().parents[2] / "docs/results/bundles/gpu-h200-2026-12-04-inductor-layout", root)
    for path in (root / "cells").glob("*.json"):
        cell = json.loads(path.read_text())
        if cell["config"]["backend"] == "inductor":
            cell["metrics"]["dynamo"] = dynamo
            path.write_text(json.dumps(cell))
    return root


def test_against_eager_the_graphs_and_breaks_are_said_beside_the_time_outside_kernels(tmp_path: Path) -> None:
    """A model TorchDynamo splits runs eager Python between its graphs: time outside kernels that the line
    `outside kernels +169 us` gave no cause for, and a recompile in the timed calls is in the figures. The
    cell's graphs, breaks, most frequent reason and timed recompiles are said beside it; a cell compiled
    whole into one graph says nothing more."""
    reason = "Unsupported Tensor.item() call with capture_scalar_outputs=False: Dynamo does not support tracing"
    broken = {"graphs": 3, "graph_breaks": 2, "distinct_break_reasons": 2, "recompiles_timed": 1, "method": "m",
              "break_reasons": [{"reason": reason, "count": 1}, {"reason": "Failed to trace builtin operator", "count": 1}]}
    bundle = load(_with_dynamo(tmp_path, broken))
    head, slower = findings_eager.slower_than_eager(findings.groups([bundle]))
    (inductor,) = [row for row in slower if row[1] == "inductor"]
    why = inductor[head.index("time against eager: in kernels, outside them, by operator class (fusion on)")]
    assert ("outside kernels +169 us (eager 193 us, inductor 362 us); 3 graphs, 2 breaks: Unsupported Tensor.item() "
            "call with capture_scalar_outputs=False: Dynamo does not suppo... (x1), and 1 other reason; "
            "1 recompile in the timed calls; other +1.14 ms") in why, why
    report = report_markdown(bundle)
    assert md_cell(why) in report[report.index("## Speedup over eager"):report.index("## Fusion on vs off")]
    whole = {"graphs": 1, "graph_breaks": 0, "distinct_break_reasons": 0, "recompiles_timed": 0, "method": "m", "break_reasons": []}
    head, slower = findings_eager.slower_than_eager(findings.groups([load(_with_dynamo(tmp_path / "whole", whole))]))
    (inductor,) = [row for row in slower if row[1] == "inductor"]
    why = inductor[head.index("time against eager: in kernels, outside them, by operator class (fusion on)")]
    assert "outside kernels +169 us (eager 193 us, inductor 362 us); other +1.14 ms" in why, why


def test_against_eager_a_further_rounds_recompiles_are_said_with_its_round() -> None:
    """The cell's time is its rounds': a recompile in round 2's timed calls (recorded since round 2 is
    watched) is said beside round 1's, or alone where round 1 compiled nothing again."""
    from harness.bundle.cell_record import Dynamo
    from harness.bundle.timing_record import TimingRound
    from harness.reporting import graph_breaks

    def rounds(*recompiles: int | None) -> list[TimingRound]:
        return [TimingRound(round=1, status="valid", median_ns=1e6, cv=0.01, n=10)] + [
            TimingRound(round=i, status="valid", median_ns=1e6, cv=0.01, n=10, recompiles_timed=count)
            for i, count in enumerate(recompiles, 2)]

    def dynamo(recompiles: int) -> Dynamo:
        return Dynamo(graphs=1, graph_breaks=0, distinct_break_reasons=0, recompiles_timed=recompiles)

    assert graph_breaks.said(dynamo(1), rounds(2, 0, 8)) == ["1 recompile in the timed calls, 2 in round 2's, 8 in round 4's"]
    assert graph_breaks.said(dynamo(0), rounds(None, 2)) == ["recompiles in the timed calls: 2 in round 3's"]
    assert graph_breaks.said(dynamo(0), rounds(0, None)) == [] == graph_breaks.said(None, None)


def test_against_eager_each_side_names_the_kernels_it_spends_the_most_time_in() -> None:
    """Eager's kernels were named nowhere, neither in `findings` nor in the report (it has no fusion
    pair), so a cell slower than eager stood beside classes alone: Inductor's resnet18 on an H200 spends
    789 us in cuDNN's FFT convolution (pointwise_mult_and_sum_complex) that eager never runs, which
    its channels-last layout led cuDNN to pick."""
    bundle = load(Path(__file__).resolve().parents[2] / "docs/results/bundles/gpu-h200-2026-12-04-inductor-layout")
    head, slower = findings_eager.slower_than_eager(findings.groups([bundle]))
    (inductor,) = [row for row in slower if row[1] == "inductor"]
    mine, eager = (inductor[head.index(column)] for column in ("most time with the backend (fusion on)", "most time with eager"))
    assert "; void pointwise_mult_and_sum_complex<float2, 8, 4>(" in mine and " 789 us (4 calls); " in mine
    assert eager.startswith("sm80_xmma_fprop_implicit_gemm_") and " 2.94 ms (12 calls); " in eager
    report = report_markdown(bundle)
    speedups = report[report.index("## Speedup over eager"):report.index("## Fusion on vs off")]
    assert f"| {md_cell(mine)} | {md_cell(eager)} |" in speedups


def test_a_speedup_over_eager_with_no_interval_says_it_is_one_estimate_and_why() -> None:
    """A fusion speedup of one round says `(one round)`; a speedup over eager stood bare, `0.94x`,
    as if measured as well as one with its interval: Inductor's resnet18 on the H200 ran one round.
    Cells of two rounds each whose rounds did not take turns (golden v7, before 2026-12-01) say that."""
    bundle = load(Path(__file__).resolve().parents[2] / "docs/results/bundles/gpu-h200-2026-12-04-inductor-layout")
    _, slower = findings_eager.slower_than_eager(findings.groups([bundle]))
    assert [row[2] for row in slower if row[1] == "inductor"] == ["0.94x (one round)"]
    report = report_markdown(bundle)
    assert "| inductor fusion-on | 0.94x (one round) |" in report[report.index("## Speedup over eager"):]
    _, body = findings_eager.slower_than_eager(findings.groups([load(GOLDEN / "v7")]))
    assert body and all(" (one estimate, rounds not paired)" in row[2] for row in body)


def _plugin_run(tmp: Path, version: str, size: int, eager: bool | None = None) -> Path:
    """Golden v12 as a run of a plugin model whose package `version` gave it the input size `size`, its
    cells at that size (the model's own, by the bundle's record); only eager's cells or only the
    others where `eager` is given."""
    name = f"acme-{version.replace('.', '_')}" + ("" if eager is None else "-eager" if eager else "-others")
    root = tmp / name
    shutil.copytree(GOLDEN / "v12", root)

    def plugin(header: dict) -> None:
        header["model_plugins"] = {"acme_conv_block": {
            "distribution": "acme-models", "version": version, "family": "acme",
            "entry_point": "acme_models.blocks:CONV_BLOCK", "input_kind": "planes", "input_size": size}}
        header["scenario"]["models"] = [{"name": "acme_conv_block", "pretrained": False, "input_size": None}]

    def at_size(record: dict) -> None:
        record["config"]["model"], record["config"]["input_size"] = {"name": "acme_conv_block"}, size

    _keep_cells(root, lambda record: eager is None or (record["config"]["backend"] == "eager") == eager, at_size, plugin)
    return root


def test_one_model_at_two_input_sizes_is_told_apart_by_its_size_not_its_bundle(tmp_path: Path) -> None:
    """Two versions of a plugin model, each run at its own input size (16, then 32): each bundle's
    setting said no size, so their rows read `acme_conv_block SingleStream b1 fp32 cpu (acme-1_0)`
    and `(acme-1_1)`, counted as two measurements of one model and setting, and a bundle without
    eager borrowed eager's cell of the other size."""
    groups = findings.groups([load(_plugin_run(tmp_path, "1.0", 16)), load(_plugin_run(tmp_path, "1.1", 32))])
    assert sorted(g.title for g in groups) == sorted(f"acme_conv_block {scenario} fp32 cpu input {size}"
                                                      for size in (16, 32) for scenario in ("Offline b4", "SingleStream b1"))
    assert findings.summary_table(groups)[1][0][-1] == "20 in each of 4 models and settings"
    apart = findings.groups([load(_plugin_run(tmp_path, "1.0", 16, eager=False)),
                             load(_plugin_run(tmp_path, "1.1", 32, eager=True))])
    assert all(g.borrowed is None for g in apart)
    same = findings.groups([load(_plugin_run(tmp_path, "1.2", 32, eager=False)), load(tmp_path / "acme-1_1-eager")])
    assert all(g.borrowed is not None for g in same if g.bundle == "acme-1_2-others")  # one size: borrowed, as before
    # one model at one size, in two bundles: no size said, the bundles named
    twice = findings.groups([load(tmp_path / "acme-1_0"), load(_plugin_run(tmp_path, "1.3", 16))])
    assert {g.title for g in twice} >= {"acme_conv_block SingleStream b1 fp32 cpu (acme-1_0)",
                                        "acme_conv_block SingleStream b1 fp32 cpu (acme-1_3)"}
