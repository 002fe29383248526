"""Validate's figures layer (harness/bundle/figures_check.py): a figure edited against the figures
it is computed from, then re-hashed into MANIFEST.sha256, is one clear problem line; a cell
copied in from another bundle is one too; every golden bundle stays valid."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness import allocator
from harness.bundle import figures_check, manifest, recompiles_check
from harness.bundle.validate import validate
from harness.scenario.cells import cell_id
from harness.scenario.loading import sha256 as scenario_sha256
from tests.unit.test_validate import GOLDEN, edit_json

EAGER_SINGLE = "d6ad8d78d7ec3683"  # v3: eager SingleStream, LoadGen within 5% of the device timing
INDUCTOR_OFFLINE = "1ad3c90970f5dd56"  # v3: inductor fusion off Offline, 6% apart: its warning says so
NULL_SINGLE = "27f04dd008f2ed2d"  # v3: null SingleStream, device-time CV 42%
GLIBC = "glibc 2.36"


@pytest.fixture
def v3(tmp_path: Path) -> Path:
    root = tmp_path / "v3"
    shutil.copytree(GOLDEN / "v3", root)
    return root


def forge(root: Path, cell: str, change: Callable[[dict[str, Any]], None]) -> list[str]:
    """Edit one cell, re-hash the manifest, and return what validate says."""
    edit_json(root / "cells" / f"{cell}.json", change)
    return validate(root).problems


def without(prefix: str) -> Callable[[dict[str, Any]], None]:
    def change(cell: dict[str, Any]) -> None:
        cell["warnings"] = [w for w in cell["warnings"] if not w.startswith(prefix)]

    return change


def both(*changes: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    def change(cell: dict[str, Any]) -> None:
        for each in changes:
            each(cell)

    return change


def only_lines(problems: list[str], cell: str, *starts: str) -> None:
    """`problems` are exactly one line per `starts`, in order, each about `cell`."""
    assert len(problems) == len(starts), problems
    for line, start in zip(problems, starts, strict=True):
        assert line.startswith(f"cells/{cell}.json: {start}"), problems


@pytest.mark.parametrize("version", ["v1", "v2", "v3", "mlperf"])
def test_every_golden_bundle_passes_the_figures_layer(version: str, tmp_path: Path) -> None:
    root = tmp_path / version
    shutil.copytree(GOLDEN / version, root)
    verdict = validate(root)
    assert verdict.ok, verdict.problems


def agreement(cell: dict[str, Any]) -> dict[str, Any]:
    record: dict[str, Any] = cell["metrics"]["latency_agreement"]
    return record


def test_a_gap_edited_against_its_two_figures(v3: Path) -> None:
    only_lines(
        forge(v3, EAGER_SINGLE, lambda c: agreement(c).update(gap=0.0)),
        EAGER_SINGLE,
        "latency_agreement: gap 0.0 but LoadGen's 6.84968e+06 ns over the device's 6.83611e+06 ns is +0.001985",
    )


def test_within_edited_against_the_gap_and_its_warning_removed(v3: Path) -> None:
    problems = forge(v3, INDUCTOR_OFFLINE, both(lambda c: agreement(c).update(within=True), without(figures_check.DISAGREE)))
    only_lines(problems, INDUCTOR_OFFLINE, "latency_agreement: within is True but a gap of -6.01% is outside the limit of 5%")


def test_a_disagreement_whose_warning_was_removed(v3: Path) -> None:
    only_lines(
        forge(v3, INDUCTOR_OFFLINE, without(figures_check.DISAGREE)),
        INDUCTOR_OFFLINE,
        "warnings: none begins 'LoadGen and device timing disagree', yet its LoadGen figure",
    )


def test_a_raised_limit(v3: Path) -> None:
    problems = forge(
        v3, INDUCTOR_OFFLINE, both(lambda c: agreement(c).update(limit=0.5, within=True), without(figures_check.DISAGREE))
    )
    only_lines(problems, INDUCTOR_OFFLINE, "latency_agreement: limit 0.5 but the harness's is 0.05")


def test_a_loadgen_figure_moved_onto_the_device_time(v3: Path) -> None:
    """Gap and within consistent with the figures, but LoadGen's figure is not what LoadGen measured."""

    def agree(cell: dict[str, Any]) -> None:
        record = agreement(cell)
        record.update(loadgen_ns_per_batch=record["device_ns_per_batch"], gap=0.0, within=True, why="")

    problems = forge(v3, INDUCTOR_OFFLINE, both(agree, without(figures_check.DISAGREE)))
    only_lines(
        problems,
        INDUCTOR_OFFLINE,
        "latency_agreement: loadgen_ns_per_batch 6.05914e+06 but the cell's LoadGen results give 5.69517e+06",
    )


def test_a_device_figure_that_is_not_the_samples(v3: Path) -> None:
    problems = forge(v3, EAGER_SINGLE, lambda c: agreement(c).update(device_ns_per_batch=6849684.0, gap=0.0))
    only_lines(problems, EAGER_SINGLE, "latency_agreement: device_ns_per_batch 6849684.0 but the samples' median is 6.83611e+06")


def test_a_wall_time_divided_by_three(v3: Path) -> None:
    def third(cell: dict[str, Any]) -> None:
        cell["metrics"]["time_split"]["wall_ns"] /= 3

    only_lines(
        forge(v3, EAGER_SINGLE, third),
        EAGER_SINGLE,
        "time_split: wall_ns 2278704.6666666665 but the samples and the profile give 6.83611e+06",
    )


def test_a_kernel_share_that_is_not_its_kernel_time(v3: Path) -> None:
    def share(cell: dict[str, Any]) -> None:
        cell["metrics"]["time_split"].update(kernel_share=0.95)

    only_lines(
        forge(v3, EAGER_SINGLE, share), EAGER_SINGLE, "time_split: kernel_share 0.95 but the samples and the profile give 0.75454"
    )


def test_noisy_cleared_with_its_warning(v3: Path) -> None:
    problems = forge(
        v3, NULL_SINGLE, both(lambda c: c["metrics"]["device_time"]["summary"].update(noisy=False), without(figures_check.NOISE))
    )
    only_lines(
        problems,
        NULL_SINGLE,
        "device_time: summary noisy is False but the samples' CV is 41.7% (noisy over 10%)",
        "warnings: none begins 'noisy:', yet its device-time CV is 42% (over 10%)",
    )


def test_a_recompile_in_the_timed_calls_without_its_warning(v3: Path) -> None:
    """Dynamo compiling during the timed calls puts a compile into the figures: the cell warns, and a
    record of recompiles whose warning was taken out is found."""
    recompiled = {"graphs": 1, "graph_breaks": 0, "distinct_break_reasons": 0, "break_reasons": [], "recompiles_timed": 1}
    problems = forge(v3, INDUCTOR_OFFLINE, lambda c: c["metrics"].update(dynamo=recompiled))
    only_lines(problems, INDUCTOR_OFFLINE,
               "warnings: none begins 'recompiled:', yet Dynamo compiled 1 frame(s) during its timed calls")


@pytest.mark.parametrize(("recorded", "said"), [
    (0, "yet metrics.dynamo.recompiles_timed is 0"),
    (None, "yet metrics.dynamo.recompiles_timed is absent"),  # no Dynamo record at all
    (1, "yet metrics.dynamo.recompiles_timed is 1"),  # the warning says 3
])
def test_a_recompile_warning_that_is_not_its_records_count(v3: Path, recorded: int | None, said: str) -> None:
    """The reverse of the test above: a `recompiled:` warning beside a record of no recompile, of none
    at all, or of another count passed validate (the record and its warning were edited apart)."""
    warning = ("recompiled: Dynamo compiled 3 frames again during the timed calls, after the warm-up (a guard that "
               "failed there, or a path first taken there): the compile's time is in the timed figures")

    def change(cell: dict[str, Any]) -> None:
        cell["warnings"].append(warning)
        if recorded is not None:
            cell["metrics"]["dynamo"] = {"graphs": 1, "graph_breaks": 0, "distinct_break_reasons": 0,
                                         "break_reasons": [], "recompiles_timed": recorded}

    only_lines(forge(v3, INDUCTOR_OFFLINE, change), INDUCTOR_OFFLINE,
               f"warnings: 'recompiled:' says Dynamo compiled 3 frame(s) in the timed calls, {said}")


def test_a_repetition_median_that_is_not_its_samples(v3: Path) -> None:
    def faster(cell: dict[str, Any]) -> None:
        cell["metrics"]["device_time"]["repetitions"][2]["median_ns"] = 5700000.0

    only_lines(
        forge(v3, EAGER_SINGLE, faster), EAGER_SINGLE, "device_time: repetition 3 median 5700000.0 but its samples' is 7.27988e+06"
    )


def test_a_drift_hidden_by_a_smaller_spread(v3: Path) -> None:
    problems = forge(
        v3, EAGER_SINGLE, both(lambda c: c["metrics"]["device_time"].update(repetition_spread=0.01), without(figures_check.DRIFT))
    )
    only_lines(problems, EAGER_SINGLE, "device_time: repetition_spread 0.01 but the repetitions' medians spread 0.241129")


def test_repetitions_that_do_not_hold_the_samples(v3: Path) -> None:
    def dropped(cell: dict[str, Any]) -> None:
        cell["metrics"]["device_time"]["repetitions"].pop()

    problems = forge(v3, EAGER_SINGLE, dropped)
    only_lines(
        problems,
        EAGER_SINGLE,
        "device_time: 3 repetitions but the config asks for 4",
        "device_time: the repetitions hold 27 calls but there are 36 samples",
    )


def test_a_warm_up_said_not_to_settle_against_its_samples(v3: Path) -> None:
    problems = forge(v3, EAGER_SINGLE, lambda c: c["metrics"]["device_time"]["warmup"].update(steady=False))
    only_lines(
        problems,
        EAGER_SINGLE,
        "device_time: warm-up steady is False but its samples say True",
        "warnings: none begins 'the warm-up did not settle'",
    )


def test_slow_warm_up_calls_dropped(v3: Path) -> None:
    def dropped(cell: dict[str, Any]) -> None:
        timing = cell["metrics"]["device_time"]
        timing["warmup_samples_ns"] = timing["warmup_samples_ns"][:-3]
        timing["warmup"].update(calls=len(timing["warmup_samples_ns"]), seconds=sum(timing["warmup_samples_ns"]) / 1e9)

    only_lines(
        forge(v3, EAGER_SINGLE, dropped),
        EAGER_SINGLE,
        "device_time: the warm-up's stopping rule, replayed over its 50 samples, does not stop where they end",
    )


def _math(**changes: Any) -> Callable[[dict[str, Any]], None]:
    def change(cell: dict[str, Any]) -> None:
        record = cell["metrics"]["math_mode"]
        for key, value in changes.items():
            if key == "torch":
                record["torch"].update(value)
            else:
                record[key] = value

    return change


TF32_ON_CPU = {"mkldnn_matmul_fp32_precision": "tf32", "mkldnn_conv_fp32_precision": "tf32"}


def test_a_valid_cell_with_math_mode_problems(v3: Path) -> None:
    problem = "asked for IEEE fp32, but TF32 was allowed in: torch oneDNN matmul, torch oneDNN convolution"
    problems = forge(v3, EAGER_SINGLE, _math(torch=TF32_ON_CPU, effective="tf32", problems=[problem]))
    only_lines(
        problems,
        EAGER_SINGLE,
        f"status valid, yet its math mode has problems: {problem}",
        "status valid, yet its math ran tf32 where its dtype asks for ieee",
    )


def test_tf32_math_with_its_problems_cleared(v3: Path) -> None:
    problems = forge(v3, EAGER_SINGLE, _math(torch=TF32_ON_CPU, effective="tf32"))
    only_lines(
        problems,
        EAGER_SINGLE,
        "math_mode: no problems, yet the settings read back say: asked for IEEE fp32",
        "status valid, yet its math ran tf32 where its dtype asks for ieee",
    )


def test_tf32_settings_recorded_as_ieee(v3: Path) -> None:
    only_lines(
        forge(v3, EAGER_SINGLE, _math(torch=TF32_ON_CPU)),
        EAGER_SINGLE,
        "math_mode: effective ieee but the settings read back say tf32",
        "math_mode: no problems, yet the settings read back say: asked for IEEE fp32",
    )


def _started(moment: str) -> Callable[[dict[str, Any]], None]:
    def change(cell: dict[str, Any]) -> None:
        cell["started"] = moment

    return change


@pytest.mark.parametrize("tf32", [None, 0])
def test_a_non_bool_backend_tf32_in_a_cell_of_before_2026_12_05_is_read_as_the_harness_then_read_it(v3: Path, tf32: Any) -> None:
    """The harness read a backend's tf32 as its truth value then, and recorded no problem of it: None
    and 0 read as TF32 off (v3's cells started on 2026-11-23), as 2 minutes before the change."""
    assert forge(v3, EAGER_SINGLE, _math(backend={"tf32": tf32})) == []
    assert forge(v3, EAGER_SINGLE, _started("2026-12-05T00:59:00+00:00")) == []


def test_a_cell_without_its_start_is_dated_by_its_bundle(v3: Path) -> None:
    """A start deleted from a cell of a bundle made since does not take the cell back to the old rule."""
    def unstarted(cell: dict[str, Any]) -> None:
        del cell["started"]

    assert forge(v3, EAGER_SINGLE, both(_math(backend={"tf32": None}), unstarted)) == []  # v3 made on 2026-11-23
    header = json.loads((v3 / "bundle.json").read_text())
    header["created"] = "2026-12-06T00:00:00+00:00"
    (v3 / "bundle.json").write_text(json.dumps(header))
    # the header re-hashed by an edit of nothing; its other cells now start before it (belonging's lines)
    problems = [line for line in forge(v3, EAGER_SINGLE, lambda cell: None) if "math_mode" in line]
    assert problems == [f"cells/{EAGER_SINGLE}.json: math_mode: no problems, yet the settings read back say: the backend's "
                        "math_mode() gave tf32 as None (NoneType), not a bool: whether its library ran TF32 is not known"]


@pytest.mark.parametrize("tf32", [None, 0, "0"])
def test_a_non_bool_backend_tf32_in_a_cell_started_since_must_be_its_problem(v3: Path, tf32: Any) -> None:
    only_lines(forge(v3, EAGER_SINGLE, both(_math(backend={"tf32": tf32}), _started("2026-12-05T01:02:00+00:00"))),
               EAGER_SINGLE,
               f"math_mode: no problems, yet the settings read back say: the backend's math_mode() gave tf32 as {tf32!r}")


def steady_bundle(root: Path) -> Path:
    """The v3 golden bundle as if its scenario had asked for the steady allocator on glibc: each
    cell's config, id, file and folder follow, and each records the allocator as the worker does."""
    header = json.loads((root / "bundle.json").read_text())
    header["scenario"]["allocator"] = "steady"
    header["scenario_sha256"] = scenario_sha256(header["scenario"])
    for entry in header["cells"]:
        path = root / "cells" / f"{entry['id']}.json"
        cell = json.loads(path.read_text())
        cell["config"]["allocator"] = "steady"
        new = cell_id(cell["config"])
        if "environment" in cell:
            cell["environment"]["variables"][allocator.VARIABLE] = allocator.STEADY_TUNABLES
            cell["environment"]["allocator"] = {
                "setting": "steady",
                "libc": GLIBC,
                "in_effect": True,
                "tunables": allocator.STEADY_TUNABLES,
            }
        if "log" in cell:
            cell["log"] = cell["log"].replace(entry["id"], new)
        cell["id"] = new
        path.unlink()
        (root / "cells" / f"{new}.json").write_text(json.dumps(cell, indent=1))
        if (root / "cells" / entry["id"]).is_dir():
            (root / "cells" / entry["id"]).rename(root / "cells" / new)
        entry["id"] = new
    (root / "bundle.json").write_text(json.dumps(header, indent=1))
    manifest.write(root)
    return root


def _musl(in_effect: bool) -> Callable[[dict[str, Any]], None]:
    def change(cell: dict[str, Any]) -> None:
        cell["environment"]["allocator"].update(libc="musl 1.2.4", in_effect=in_effect)

    return change


def test_an_allocator_in_effect_under_a_c_library_that_cannot_apply_it(v3: Path) -> None:
    root = steady_bundle(v3)
    assert validate(root).ok, validate(root).problems
    cell = sorted(p.stem for p in (root / "cells").glob("*.json"))[0]
    only_lines(
        forge(root, cell, _musl(True)),
        cell,
        "environment: allocator in_effect is True but steady cannot take effect under C library 'musl 1.2.4'",
    )


def test_an_allocator_not_in_effect_without_its_warning(v3: Path) -> None:
    root = steady_bundle(v3)
    cell = next(p.stem for p in sorted((root / "cells").glob("*.json")) if json.loads(p.read_text())["status"] == "valid")
    only_lines(forge(root, cell, _musl(False)), cell, "warnings: none begins 'allocator steady asked for but not in effect'")


def test_allocator_tunables_the_worker_did_not_have(v3: Path) -> None:
    root = steady_bundle(v3)
    cell = sorted(p.stem for p in (root / "cells").glob("*.json"))[0]
    only_lines(
        forge(root, cell, lambda c: c["environment"]["variables"].pop(allocator.VARIABLE)), cell, "environment: allocator tunables"
    )


def test_a_cell_copied_in_from_another_bundle(v3: Path) -> None:
    """A cell record and its folder from another bundle, listed in bundle.json, re-hashed."""
    foreign = "fe0739a275a7c07b"  # the mlperf bundle's null Offline cell
    shutil.copy(GOLDEN / "mlperf" / "cells" / f"{foreign}.json", v3 / "cells")
    shutil.copytree(GOLDEN / "mlperf" / "cells" / foreign, v3 / "cells" / foreign)
    label = json.loads((v3 / "cells" / f"{foreign}.json").read_text())["label"]
    edit_json(v3 / "bundle.json", lambda h: h["cells"].append({"id": foreign, "label": label}))
    only_lines(
        validate(v3).problems,
        foreign,
        "not a cell of this bundle: its config is none of the cells bundle.json's scenario expands to on cpu",
    )


def test_a_cell_of_the_same_scenario_from_another_run_is_named(tmp_path: Path) -> None:
    """A cell of an earlier run of the same scenario, or of a run on another machine, moved in over
    this run's own (its config, id and label are this bundle's): each is named."""
    root = tmp_path / "v12"
    shutil.copytree(GOLDEN / "v12", root)
    created = json.loads((root / "bundle.json").read_text())["created"]
    cells = sorted(p.stem for p in (root / "cells").glob("*.json"))
    earlier, elsewhere = cells[0], cells[1]

    def an_hour_earlier(cell: dict[str, Any]) -> None:
        cell["started"], cell["finished"] = "2026-12-04T17:40:00+00:00", "2026-12-04T17:41:00+00:00"

    edit_json(root / "cells" / f"{earlier}.json", an_hour_earlier)
    problems = forge(root, elsewhere, lambda c: c["node"].update(hostname="gpu-box-7"))
    assert problems == [
        f"cells/{earlier}.json: started 2026-12-04T17:40:00+00:00, before its bundle was made ({created}): a cell of an "
        "earlier run",
        f"cells/{elsewhere}.json: ran on 'gpu-box-7', a machine bundle.json does not list among its nodes",
    ], problems


def test_a_cell_of_a_later_run_put_in_place_of_this_runs_is_named(tmp_path: Path) -> None:
    """A cell run again later and copied over this run's (its result the better one) passed: a bundle
    kept no end. One closed since 2026-12-05 says when its run ended (`ended`); a bundle without it
    still passes such a cell."""
    root = tmp_path / "v12"
    shutil.copytree(GOLDEN / "v12", root)
    later = sorted(p.stem for p in (root / "cells").glob("*.json"))[0]

    def the_next_day(cell: dict[str, Any]) -> None:
        cell["started"], cell["finished"] = "2026-12-05T09:00:00+00:00", "2026-12-05T09:01:00+00:00"

    edit_json(root / "cells" / f"{later}.json", the_next_day)
    assert validate(root).problems == []  # the bundle keeps no end
    started = [json.loads(p.read_text())["started"] for p in (root / "cells").glob("*.json") if p.stem != later]
    edit_json(root / "bundle.json", lambda h: h.update(ended=max(started)))
    problems = forge(root, later, lambda c: None)
    assert problems == [f"cells/{later}.json: started 2026-12-05T09:00:00+00:00, after its run ended ({max(started)}): "
                        "a cell of a later run"], problems


def test_a_label_that_is_not_its_configs(v3: Path) -> None:
    label = "resnet18 eager fusion-off SingleStream cpu fp32 b1"
    edit_json(v3 / "bundle.json", lambda h: next(e for e in h["cells"] if e["id"] == EAGER_SINGLE).update(label=label))
    only_lines(forge(v3, EAGER_SINGLE, lambda c: c.update(label=label)), EAGER_SINGLE, f"label {label!r} but its config's is")


def test_a_roofline_fraction_edited(v3: Path) -> None:
    def closer(cell: dict[str, Any]) -> None:
        cell["metrics"]["roofline"]["fraction_of_bound"] = 0.9

    only_lines(forge(v3, EAGER_SINGLE, closer), EAGER_SINGLE, "roofline: fraction_of_bound 0.9 but its costs and peaks give 0.214206")


def test_a_kernel_floor_other_than_the_one_the_worker_writes(v3: Path) -> None:
    """The floor is 1 by definition (one kernel could compute the whole model), and the report prints
    'floor 1' whatever the record holds: a floor of 10 reached a reader of the record alone."""
    only_lines(forge(v3, EAGER_SINGLE, lambda c: c["metrics"]["roofline"].update(kernels_per_inference_floor=10)),
               EAGER_SINGLE, "metrics/roofline/kernels_per_inference_floor: Input should be 1")


def test_a_first_call_ratio_that_its_figures_do_not_give_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "v4"
    shutil.copytree(GOLDEN / "v4", root)
    eager = next(
        p.stem
        for p in (root / "cells").glob("*.json")
        if json.loads(p.read_text())["label"] == "resnet18 eager fusion-on SingleStream cpu fp32 b1"
    )

    def forged(cell: dict[str, Any]) -> None:
        cell["metrics"]["first_call_ratio"] = 99.0

    only_lines(forge(root, eager, forged), eager, "metrics: Value error, first_call_ratio 99 but first_call_s over")

    def unmeasured(cell: dict[str, Any]) -> None:
        del cell["metrics"]["first_call_s"]

    only_lines(forge(root, eager, unmeasured), eager, "metrics: Value error, first_call_ratio without the first call")


def test_the_warnings_validate_expects_are_the_ones_the_worker_gives() -> None:
    """figures_check may not import the measure layer: its openings of the worker's warnings must
    not drift from the ones harness/measure/trust.py writes (the limits both read from harness/stats/thresholds.py)."""
    from harness.bundle.cell_record import Metrics
    from harness.measure import trust

    cpu = {"wall_s": 1.0, "other_processes_cpu_s": 0.5, "stolen_cpu_s": 0.5, "cpus": 2}
    metrics = {
        "device_time": {
            "samples_ns": [],
            "summary": {"n": 10, "median_ns": 1.5e6, "cv": 0.5},
            "warmup": {"steady": False, "calls": 3, "tolerance": 0.02},
            "repetition_spread": 0.5,
            "repetitions": [
                {"when": "before loadgen", "n": 5, "median_ns": 1e6, "beside": {"cpu": cpu}},
                {"when": "after loadgen", "n": 5, "median_ns": 2e6, "beside": {"cpu": cpu}},
            ],
        },
        "latency_agreement": {"within": False, "gap": 0.5, "limit": 0.05, "why": "a reason"},
        "dynamo": {"graphs": 1, "graph_breaks": 0, "distinct_break_reasons": 0, "recompiles_timed": 2},
    }
    said = trust.warnings(Metrics.model_validate(metrics))
    for stem in (
        figures_check.NOISE,
        figures_check.WARMUP,
        figures_check.DRIFT,
        figures_check.BUSY,
        figures_check.SHARED,
        figures_check.DISAGREE,
        figures_check.RECOMPILED,
    ):
        assert any(line.startswith(stem) for line in said), (stem, said)
    implied = figures_check._implied_warnings({"metrics": metrics, "environment": {}})
    assert len(implied) == len(said) == 7
    # validate reads the count the worker's warning says (harness/bundle/recompiles_check.py)
    assert [recompiles_check.said_count(line) for line in said if line.startswith(figures_check.RECOMPILED)] == [2]
    assert recompiles_check.problems({"status": "valid", "metrics": metrics, "warnings": said}) == []
    record = {"setting": "steady", "libc": "musl 1.2.4", "tunables": None, "in_effect": False}
    assert allocator.warnings(record)[0].startswith("allocator steady asked for but not in effect")


@pytest.mark.parametrize(("wall_s", "others_s", "stolen_s", "said"), [
    (0.0075, 0.0075, 0.0, False),  # a kernel tick over a region of 7.5 ms: "1.00 cores", which the tick alone can read
    (0.0075, 0.0, 0.01, False),  # a stolen tick over it: "7% of the CPUs"
    (1.0, 0.3, 0.1, True),  # 0.3 cores and 5% over a second: the tick cannot read that much
    (0.2, 0.1, 0.05, False),  # half a core over 0.8 s: 40 ticks, but under the second `cpu_cores` needs too
    (1.245, 0.16, 0.11, True),  # 0.13 cores and 4.4% over 5 s: said, as before
])
def test_both_judges_leave_a_busy_or_shared_machine_unsaid_where_the_tick_alone_could_read_it(
        wall_s: float, others_s: float, stolen_s: float, said: bool) -> None:
    """The MMoE cells of the global-analysis suite timed four repetitions of 7 to 45 ms, where one
    tick of /proc's CPU time read as a third of a core to a whole one: they warned of a busy machine,
    and every speedup from them carried `busy`. Timed calls of under a second in all are not judged;
    longer ones as before."""
    from harness.bundle.cell_record import Metrics
    from harness.measure import trust

    cpu = {"wall_s": wall_s, "other_processes_cpu_s": others_s, "stolen_cpu_s": stolen_s, "cpus": 2}
    metrics = {"device_time": {"samples_ns": [], "summary": {"n": 8, "median_ns": 1e6, "cv": 0.01},
                               "repetitions": [{"when": f"repetition {i}", "n": 2, "median_ns": 1e6, "beside": {"cpu": cpu}}
                                               for i in range(4)]}}
    said_by_worker = [line for line in trust.warnings(Metrics.model_validate(metrics))
                      if line.startswith((figures_check.BUSY, figures_check.SHARED))]
    implied = [stem for stem, _ in figures_check._implied_warnings({"metrics": metrics, "environment": {}})]
    assert bool(said_by_worker) == said and len(said_by_worker) == len(implied) == 2 * said, (said_by_worker, implied)


def test_a_gpu_time_split_made_by_the_worker_passes() -> None:
    """The GPU's split (kernel time from the profiler) as harness/measure/passes.py makes it."""
    from harness.bundle.passes_record import Kernels
    from harness.measure.passes import time_split

    samples = [1_000_000 + 1000 * i for i in range(21)]
    kernels = {"kernel_time_ns_per_inference": 750_000.0, "kernel_time_method": "the GPU's busy time"}
    cell = {
        "id": "0" * 16,
        "status": "failed",
        "reasons": ["x"],
        "config": {"scenario": "SingleStream", "batch": 1},
        "metrics": {
            "correctness": {"ok": True, "reference": "eager, fp32"},
            "kernels": kernels,
            "device_time": {"samples_ns": samples, "summary": {}},
            "time_split": time_split(1_010_000.0, Kernels(kernels_per_inference=None, kernel_count_method="x", **kernels), "cuda"),
        },
    }
    assert figures_check.cell_problems(cell) == []
    cell["metrics"]["time_split"]["overhead_ns"] = 0.0
    assert figures_check.cell_problems(cell) == ["time_split: overhead_ns 0.0 but the samples and the profile give 260000"]


def test_the_cells_of_one_model_scenario_and_dtype_share_one_expansion(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each cell's config is looked for among its scenario's cells expanded on its own model,
    scenario and dtype (harness/bundle/belonging.py); the cells that share the three (each backend,
    fusion on and off) are looked for in one expansion, where each cell expanded its own again."""
    from harness.bundle import belonging
    from harness.bundle.reader import load
    from harness.scenario import cells

    expanded: list[object] = []
    real = cells.expand
    monkeypatch.setattr(cells, "expand", lambda scenario, device, *rest: expanded.append(scenario) or real(scenario, device, *rest))
    loaded = load(GOLDEN / "v12")
    shared = {json.dumps([c["config"]["model"], c["config"]["scenario"], c["config"]["dtype"]], sort_keys=True)
              for c in loaded.cells}
    assert belonging.problems(loaded) == []
    assert len(expanded) == len(shared) < len(loaded.cells) // 3


@pytest.mark.parametrize(("rounds", "lines"),
                         [(["x", "y"], ("metrics/rounds/0", "metrics/rounds/1")), ({"a": 1}, ("metrics/rounds",))])
def test_rounds_a_schema_before_them_let_through_as_another_shape(v3: Path, rounds: Any, lines: tuple[str, ...]) -> None:
    """v3's schema knew no rounds and let any value through: a cell whose `metrics.rounds` was a list
    of strings, or an object, ended validate in an AttributeError, where the typed record's line says it."""
    only_lines(forge(v3, INDUCTOR_OFFLINE, lambda cell: cell["metrics"].update(rounds=rounds)), INDUCTOR_OFFLINE, *lines)
