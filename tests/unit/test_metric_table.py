"""The metric table: every row reads a field the cell schema defines and the golden bundles hold,
each unit has one format, and the console summary and the report show a figure in the same words."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from harness import metric_table
from harness.bundle.reader import load
from harness.bundle.schema import schema
from harness.metric_table import LOADGEN, METRICS, figure, format_value, present
from harness.reporting.markdown import markdown
from harness.run.summary import summary_table
from harness.scenario.rules import RULES

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
REPO = GOLDEN.parents[1]
BUNDLES = ("v1", "v2", "v3", "v4", "v5", "v6", "v7", "v8", "v9", "v10", "v11", "v12", "mlperf")


def _walk(schema: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any] | None:
    def resolved(node: dict[str, Any]) -> dict[str, Any]:  # "#/$defs/Name": the generated schema's models
        return schema["$defs"][node["$ref"].rsplit("/", 1)[1]] if "$ref" in node else node

    node = schema
    for key in path:
        for branch in map(resolved, node.get("anyOf", [node])):  # a nullable field: its object branch
            branch = resolved(branch["items"]) if "items" in branch else branch  # a list: its items' fields
            if key in branch.get("properties", {}):
                node = resolved(branch["properties"][key])
                break
        else:
            return None
    return node


@pytest.mark.parametrize("row", METRICS.values(), ids=METRICS)
def test_every_row_reads_a_field_the_cell_schema_defines(row: metric_table.Metric) -> None:
    cell = schema("cell")
    for path in (row.path, row.samples, *row.same_in_both, row.only_if[0] if row.only_if else (), *row.sources):
        if path:
            assert _walk(cell, path) is not None, f"{row.name}: {'.'.join(path)} is not a field of a cell record"
    # a figure made from a whole part of the record (`metrics`) names the fields it reads there, each checked above
    assert len(row.path) > 1 or row.sources, f"{row.name}: derived from {'.'.join(row.path)} without naming its sources"


def _expected(bundle: str, cell: dict[str, Any]) -> set[str]:
    """The rows every valid cell of a golden bundle has a figure for."""
    rows = {"device_time", "kernels_per_inference", "fusions", "peak_rss", "compile_time",
            "loadgen_latency" if cell["config"]["scenario"] == "SingleStream" else "loadgen_throughput"}
    if cell["config"]["backend"] != "null":
        rows.add("max_abs_error")
    version = 3 if bundle == "mlperf" else int(bundle.removeprefix("v"))  # the version each was written with
    if version >= 3:
        rows.add("latency_gap")  # one latency truth: since schema version 3
    if version >= 4 and cell["config"]["backend"] != "null":
        rows.add("first_call_ratio")  # since schema version 4
    if version >= 7 and cell["config"]["backend"] == "tvm":
        rows.add("tuning_time")  # since schema version 7: a tuned backend's search
    if bundle == "mlperf":
        rows.add("accuracy")
    repetitions = cell["metrics"]["device_time"].get("repetitions") or []
    if sum(r["beside"]["cpu"]["wall_s"] for r in repetitions if "wall_s" in (r.get("beside") or {}).get("cpu", {})) >= 1:
        rows.add("cpu_cores")  # since schema version 3: a CPU cell timed a second or more in all
    return rows


@pytest.mark.parametrize("bundle", BUNDLES)
def test_every_row_reads_its_figure_from_the_golden_bundles_where_it_exists(bundle: str) -> None:
    valid = [c for c in load(GOLDEN / bundle).cells if c["status"] == "valid"]
    assert valid
    for cell in valid:
        read = {name for name, row in METRICS.items() if row.value(cell) is not None}
        assert read == _expected(bundle, cell), cell["label"]
        assert all(figure(name, cell) != "-" for name in read)


@pytest.mark.parametrize(
    ("value", "unit", "text"),
    [
        (3.2e6, "ns", "3.20 ms"), (207.37e6, "ns", "207 ms"), (3335, "ns", "3.33 us"), (290, "ns", "290 ns"),
        (1.5e9, "ns", "1.50 s"), (21.33, "s", "21.3 s"), (0.000146, "s", "146 us"),
        (858 * 2**20, "bytes", "858 MiB"), (1015 * 2**20, "bytes", "1,015 MiB"), (1.3 * 2**30, "bytes", "1.30 GiB"),
        (512, "bytes", "512 B"), (25, "count", "25"), (31.25, "count", "31.2"), (12345, "count", "12,345"),
        (18919.4, "samples/s", "18,919 samples/s"), (33.94, "samples/s", "33.9 samples/s"),
        (0.09765625, "percent", "0.10%"), (0.021, "signed fraction", "+2.1%"), (-0.105, "signed fraction", "-10.5%"),
        (2.4884e-6, "error", "2.5e-06"), (1.3517, "times", "1.35x"), (12.34, "times", "12.3x"),
        (0.98, "times", "0.98x"), (1520.4, "times", "1,520x"), (0.004123, "times", "0.00412x"),
        (None, "ns", "-"), ("12", "ns", "-"), (float("nan"), "bytes", "-"),
        (True, "count", "-"),
        # the unit and the decimals follow the figure as rounded: never "1,000 us", "100.0 ms" or "10.00 us"
        (999_960, "ns", "1.00 ms"), (99.96e6, "ns", "100 ms"), (9_996, "ns", "10.0 us"), (999.996, "ns", "1.00 us"),
        (0.999999 * 2**30, "bytes", "1.00 GiB"), (1023.6, "bytes", "1.00 KiB"), (1023.4, "bytes", "1023 B"),
        (1000, "bytes", "1000 B"), (99.96, "samples/s", "100 samples/s"),
        # and never a digit early: 99.6 ms, 9.96 ms, 996 us, 1,020 KiB
        (99.6e6, "ns", "99.6 ms"), (9.96e6, "ns", "9.96 ms"), (996_000, "ns", "996 us"), (995_500, "ns", "996 us"),
        (1020 * 2**10, "bytes", "1,020 KiB"),
    ],
)
def test_each_unit_has_one_format(value: Any, unit: metric_table.Unit, text: str) -> None:
    assert format_value(value, unit) == text


def loadgen_cell(name: str, unit: str, value: float, validity: str = "VALID") -> dict[str, Any]:
    return {"metrics": {"loadgen": {"metric": {"name": name, "unit": unit, "value": value}, "validity": validity}}}


@pytest.mark.parametrize("scenario", RULES)
def test_the_loadgen_figure_names_its_percentile_and_its_validity(scenario: str) -> None:
    rule = RULES[scenario]
    cell = loadgen_cell(rule.metric_name, rule.metric_unit, 3.2e6)
    shown = figure(LOADGEN, cell)
    if rule.metric_unit == "ns":
        percentile = {"SingleStream": "p90", "MultiStream": "p99"}[scenario]
        assert shown == f"{percentile} (early stopping) 3.20 ms" and metric_table.value("loadgen_latency", cell) == 3.2e6
        assert metric_table.value("loadgen_throughput", cell) is None
        # no early-stopping estimate (a run too short for one): the plain percentile, named as LoadGen's summary names it
        assert figure(LOADGEN, loadgen_cell(rule.fallback_name, "ns", 3.2e6)) == f"{percentile} 3.20 ms"
        found = rule.metric({rule.metric_keys[0]: 0, rule.metric_keys[1]: 3.2e6})
        assert (found["name"], found["value"]) == (rule.fallback_name, 3.2e6)
    else:
        assert shown == "3,200,000 samples/s" and metric_table.value("loadgen_latency", cell) is None
    assert figure(LOADGEN, loadgen_cell(rule.metric_name, rule.metric_unit, 3.2e6, "INVALID")).endswith(" (INVALID)")


def test_a_server_figure_says_its_p99_against_its_bound() -> None:
    """The rate counts only with its p99 within the bound; a Server cell that met it and one that
    missed it by 500x read alike (`9.57 samples/s (INVALID)`)."""
    rule = RULES["Server"]
    missed = loadgen_cell(rule.metric_name, rule.metric_unit, 9.57, "INVALID")
    missed["metrics"]["loadgen"]["metric"].update(latency_p99_ns=40.5e9, target_latency_ns=80e6,
                                                  scheduled_samples_per_s=39.6)
    assert figure(LOADGEN, missed) == "9.57 samples/s, p99 40.5 s over 80.0 ms (INVALID)"
    met = loadgen_cell(rule.metric_name, rule.metric_unit, 120.0)
    met["metrics"]["loadgen"]["metric"].update(latency_p99_ns=21.3e6, target_latency_ns=50e6)
    assert figure(LOADGEN, met) == "120 samples/s, p99 21.3 ms within 50.0 ms"


def test_device_time_carries_its_spread_and_correctness_its_verdict() -> None:
    cell = {"metrics": {"device_time": {"summary": {"median_ns": 1.62e6, "cv": 0.004, "noisy": False}},
                        "correctness": {"ok": False, "max_abs_error": 0.5}}}
    assert figure("device_time", cell) == "1.62 ms ±0.4%"
    cell["metrics"]["device_time"]["summary"].update(cv=0.14, noisy=True)
    assert figure("device_time", cell) == "1.62 ms ±14% noisy"
    cell["metrics"]["rounds"] = [{"round": 1}, {"round": 2}, {"round": 3}]  # the figure is round 1's: it says so
    assert figure("device_time", cell) == "1.62 ms ±14% noisy (round 1 of 3)"
    assert figure("max_abs_error", cell) == "5.0e-01 FAIL"
    assert figure("max_abs_error", {"metrics": {"correctness": {"ok": True}}}) == "n/a"  # null: not compared
    assert figure("max_abs_error", {"metrics": {"correctness": {"ok": False}}}) == "FAIL"  # NaN, a wrong shape
    assert figure("max_abs_error", {"metrics": {}}) == "-"


def test_the_error_column_shows_the_failed_checks_error_and_names_the_check() -> None:
    """A cell failing only the check after timing read `0.0e+00 FAIL`: the first call's error, which
    passed, beside the other check's verdict."""
    def cell(first: tuple[bool, float | None], after: tuple[bool, float | None]) -> dict[str, Any]:
        check = [{"ok": ok, **({"max_abs_error": error} if error is not None else {})} for ok, error in (first, after)]
        return {"metrics": {"correctness": {**check[0], "after_timing": check[1]}}}

    assert figure("max_abs_error", cell((True, 0.0), (False, 0.05))) == "5.0e-02 FAIL (after timing)"
    assert figure("max_abs_error", cell((False, 0.05), (True, 0.0))) == "5.0e-02 FAIL (first call)"
    assert figure("max_abs_error", cell((False, 0.05), (False, 0.5))) == "5.0e-01 FAIL (both)"
    assert figure("max_abs_error", cell((True, 0.0), (False, None))) == "FAIL (after timing)"  # NaN after timing
    assert figure("max_abs_error", cell((True, 1e-6), (True, 2e-6))) == "2.0e-06"  # the larger, both passing
    assert figure("max_abs_error", cell((True, 2e-6), (True, None))) == "2.0e-06"


def test_the_gpu_memory_column_shows_only_where_a_cell_measured_it() -> None:
    cpu = {"metrics": {"memory": {"peak_rss_bytes": 2**30}}}
    gpu = {"metrics": {"memory": {"peak_rss_bytes": 2**30, "nvml_process_peak_bytes": 3 * 2**30}}}
    columns = ("peak_rss", "gpu_peak")
    assert present(columns, [cpu]) == ["peak_rss"]
    assert present(columns, [cpu, gpu]) == ["peak_rss", "gpu_peak"]
    assert figure("gpu_peak", gpu) == "3.00 GiB" and figure("gpu_peak", cpu) == "-"


def test_the_gpu_peak_says_it_is_the_process_s_memory_with_each_backend_s_allocator_not_the_inference_s() -> None:
    """NVML's figure is all the worker's process holds on the GPU: the CUDA context and the blocks each
    backend's allocator keeps (torch's caching allocator, ONNX Runtime's arena, TVM's pool) beside the
    inference's own. The report's memory chart set backends side by side under "every backend
    alike", which read as one backend's model needing more memory than another's."""
    definition = METRICS["gpu_peak"].definition
    assert "every backend alike" not in definition
    assert all(part in definition for part in ("CUDA context", "allocator", "arena", "memory pass")), definition


def _console_rows(records: list[dict[str, Any]]) -> list[dict[str, str]]:
    console = Console(file=io.StringIO(), width=400)
    console.print(summary_table(records))
    lines = console.file.getvalue().splitlines()
    head = [h.strip() for h in next(line for line in lines if "┃" in line).strip("┃").split("┃")]
    rows = [[v.strip() for v in line.strip("│").split("│")] for line in lines if line.startswith("│")]
    return [dict(zip(head, row)) for row in rows if row[1]]  # a record's first line has its status and figures


def _report_rows(text: str) -> list[dict[str, str]]:
    table = text[text.index("## Cells"):].split("\n\n")[1].splitlines()
    head = [h.strip() for h in table[0].strip("|").split("|")]
    return [dict(zip(head, (v.strip() for v in line.strip("|").split("|")))) for line in table[2:]]


@pytest.mark.parametrize("bundle", BUNDLES)
def test_the_console_and_the_report_show_each_figure_alike(bundle: str) -> None:
    loaded = load(GOLDEN / bundle)
    console, report = _console_rows(loaded.records), _report_rows(markdown(loaded))
    assert len(console) == len(report) == len(loaded.cells)
    shared = set(console[0]) & set(report[0]) - {"status"}
    assert {"LoadGen", "device time (median ±CV)", "kernels/inf", "peak RSS"} <= shared
    for cell, on_console, in_report in zip(loaded.cells, console, report):
        for head in shared:
            assert on_console[head] == in_report[head], (cell["label"], head)
        assert on_console["LoadGen"] == figure(LOADGEN, cell)


def test_the_docs_list_every_row() -> None:
    docs = (REPO / "docs" / "metrics.md").read_text()
    table = docs[docs.index("## The metric table"):]
    for row in METRICS.values():
        assert f"`{row.name}`" in table and row.label in table, row.name


def test_the_gap_names_the_mean_it_was_taken_against_where_the_table_shows_a_median() -> None:
    """Offline's gap is LoadGen's batch time against the timing's mean; beside the median the console
    shows, -11% read as a gap from that median."""

    cells = load(Path(__file__).resolve().parents[1] / "golden" / "v9").records
    gaps = {c.config.scenario: metric_table.figure("latency_gap", c) for c in cells
            if c.status == "valid" and c.metrics.latency_agreement and c.metrics.latency_agreement.gap is not None}
    assert gaps["Offline"].endswith("% vs mean") and gaps["SingleStream"].endswith("%")
    assert "vs" not in gaps["SingleStream"]


def test_a_second_row_of_one_name_or_a_unit_without_its_format_stops_the_import() -> None:
    """A row named as another replaced it without a word (its column vanished); a unit with no
    format ended each run with a KeyError once every cell had been measured."""
    row = METRICS["first_call_ratio"]
    with pytest.raises(ValueError, match="two rows named 'first_call_ratio'"):
        metric_table._by_name((row, row))
    unformatted = metric_table.Metric("achieved_flops", ("metrics", "x"), "flop/s", "higher", "ratio",  # type: ignore[arg-type]
                                      "FLOP/s", "achieved FLOP/s")
    with pytest.raises(ValueError, match="unit 'flop/s' has no format"):
        metric_table._by_name((row, unformatted))


def _timed(*regions: Any, device: str = "cpu") -> dict[str, Any]:
    """A cell whose timed repetitions had `regions` beside them (`beside.cpu`)."""
    return {"config": {"device": device},
            "metrics": {"device_time": {"repetitions": [{"beside": {"cpu": region}} for region in regions]}}}


def test_cpu_cores_busy_is_the_process_cpu_time_over_the_wall_time_of_a_second_or_more() -> None:
    """Every TVM CPU cell kept one thread of two busy and no table said so."""
    cores = METRICS["cpu_cores"]
    assert cores.value(_timed({"wall_s": 0.8, "process_cpu_s": 0.79}, {"wall_s": 0.8, "process_cpu_s": 0.81})) == 1.0
    assert cores.value(_timed({"wall_s": 3.0, "process_cpu_s": 5.9})) == 2.0
    assert figure("cpu_cores", _timed({"wall_s": 3.0, "process_cpu_s": 5.9})) == "2"
    assert cores.value(_timed({"wall_s": 3.0, "process_cpu_s": 5.9}, device="cuda")) is None  # no CPU kernels
    # a tenth of a second at a 10 ms tick: 0 or 8 cores alike, so no figure
    assert cores.value(_timed({"wall_s": 0.06, "process_cpu_s": 0.5})) is None
    assert cores.value(_timed()) is None
    # a record is read, never trusted: a repetition without both figures is left out of both sums
    hostile = _timed({"wall_s": 2.0, "process_cpu_s": 3.0}, {"wall_s": 50.0}, {"unavailable": "no /proc"}, None,
                     {"wall_s": True, "process_cpu_s": 1.0}, {"wall_s": float("nan"), "process_cpu_s": 1.0},
                     {"wall_s": -9.0, "process_cpu_s": 1.0}, "2.0")
    assert cores.value(hostile) == 1.5


def test_per_core_figures_are_in_the_cores_order() -> None:
    """A bundle keeps them under text keys, and `compare` listed core 10 and 11 before core 2."""
    chunks = {str(core): 1.0 + core / 10 for core in (0, 1, 10, 11, 2, 3)}
    assert metric_table.format_per_core(chunks) == ("core 0 1.0 ms, core 1 1.1 ms, core 2 1.2 ms, core 3 1.3 ms, "
                                                    "core 10 2.0 ms, core 11 2.1 ms")
