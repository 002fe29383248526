"""Cell expansion, ids and --only selection."""

from __future__ import annotations

import pytest

from harness.bundle.migrations import SCHEMA_VERSION
from harness.errors import ConfigError
from harness.scenario.cells import expand, parse_only, select
from harness.scenario.schema import ScenarioFile


def resolved(**overrides):
    data = {
        "models": ["resnet18", "mobilenet_v3_small"],
        "backends": ["eager", {"name": "inductor", "fusion": ["on", "off"]}],
        "scenarios": ["SingleStream", "MultiStream", "Offline"],
        "batch_sizes": {"cpu": [1, 8], "cuda": [64]},
        "loadgen": {"samples_per_query": 4},
        **overrides,
    }
    out = ScenarioFile.model_validate(data).model_dump(mode="json")
    out["name"] = "t"
    return out


def test_batches_follow_the_scenario() -> None:
    cells = expand(resolved(), "cpu")
    by_scenario = {}
    for c in cells:
        by_scenario.setdefault(c.config.scenario, set()).add(c.config.batch)
    assert by_scenario == {"SingleStream": {1}, "MultiStream": {4}, "Offline": {1, 8}}
    # 2 models x 3 backend variants x (1 + 1 + 2) batches
    assert len(cells) == 2 * 3 * 4
    assert {c.config.batch for c in expand(resolved(), "cuda") if c.config.scenario == "Offline"} == {64}


def test_ids_are_unique_stable_and_device_specific() -> None:
    a, b = expand(resolved(), "cpu"), expand(resolved(), "cpu")
    assert [c.id for c in a] == [c.id for c in b]
    assert len({c.id for c in a}) == len(a)
    assert not {c.id for c in a} & {c.id for c in expand(resolved(), "cuda")}


def test_ids_change_with_what_is_measured_only() -> None:
    base = {c.label: c.id for c in expand(resolved(), "cpu")}
    longer = {c.label: c.id for c in expand(resolved(loadgen={"samples_per_query": 4, "min_duration_s": 3}), "cpu")}
    assert all(base[k] != longer[k] for k in base)
    limits = {c.label: c.id for c in expand(resolved(limits={"cell_timeout_s": 50}), "cpu")}
    assert limits == base, "a time limit does not change what a cell measures"
    server_knob = {c.label: c.id for c in expand(resolved(loadgen={"samples_per_query": 4, "target_qps": 7}), "cpu")}
    assert server_knob == base, "Server-only settings do not change Offline/SingleStream cells"


def test_min_query_count_resolved_per_scenario() -> None:
    cells = expand(resolved(), "cpu")
    counts = {c.config.scenario: c.config.loadgen.min_query_count for c in cells}
    assert counts == {"SingleStream": 100, "MultiStream": 662, "Offline": 1}


def test_only_selects_and_rejects() -> None:
    cells = expand(resolved(), "cpu")
    chosen = select(cells, parse_only("model=resnet18,backend=inductor,fusion=off,batch=8"))
    assert [c.label for c in chosen] == ["resnet18 inductor fusion-off Offline cpu fp32 b8"]
    both = select(cells, parse_only("model=resnet18,model=mobilenet_v3_small,scenario=SingleStream,backend=eager"))
    assert len(both) == 2
    with pytest.raises(ConfigError, match="unknown key 'modle'"):
        parse_only("modle=resnet18")
    with pytest.raises(ConfigError, match="not KEY=VALUE"):
        parse_only("resnet18")
    # pairs joined by a space were one value, "resnet18 backend=eager": it matched no cell, and the
    # refusal listed resnet18 among the model values there are
    for spaced in ("model=resnet18 backend=eager", "model=resnet18 vgg11"):
        with pytest.raises(ConfigError, match="is not one KEY=VALUE; join the pairs with commas, no spaces"):
            parse_only(spaced)
    with pytest.raises(ConfigError, match="matches no cell"):
        select(cells, parse_only("model=vgg11"))
    for empty in ("", ",", " , "):  # an unset shell variable: every cell would run instead
        with pytest.raises(ConfigError, match="give at least one KEY=VALUE"):
            parse_only(empty)


def test_backend_models_restrict_its_cells() -> None:
    data = resolved(backends=["eager", {"name": "inductor", "models": ["mobilenet_v3_small"]}], scenarios=["Offline"])
    cells = expand(data, "cpu")
    pairs = sorted((c.config.backend, c.config.model.name) for c in cells if c.config.batch == 8)
    assert pairs == [("eager", "mobilenet_v3_small"), ("eager", "resnet18"), ("inductor", "mobilenet_v3_small")]


def test_graphs_multiply_the_variants_and_say_so_in_the_label() -> None:
    data = resolved(backends=[{"name": "eager", "graphs": ["on", "off"]}], scenarios=["SingleStream"],
                    models=["resnet18"])
    cells = expand(data, "cuda")
    assert sorted(c.label for c in cells) == ["resnet18 eager fusion-on SingleStream cuda fp32 b1",
                                              "resnet18 eager fusion-on graphs SingleStream cuda fp32 b1"]
    assert [c.config.variant.graphs for c in select(cells, parse_only("graphs=on"))] == ["on"]
    assert len({c.id for c in cells}) == 2


def test_variants_that_differ_only_in_an_option_are_told_apart_where_the_run_shows_them() -> None:
    from rich.console import Console

    from harness.bundle.cell_record import CellRecord
    from harness.run.summary import summary_table

    data = resolved(backends=[{"name": "inductor", "fusion": "on"},
                              {"name": "inductor", "fusion": "on", "options": {"layout_optimization": False}}],
                    scenarios=["Offline"], models=["resnet18"], batch_sizes={"cpu": [8]})
    cells = expand(data, "cpu")
    assert [c.label for c in cells] == ["resnet18 inductor fusion-on Offline cpu fp32 b8"] * 2  # what bundles record
    assert [c.config.shown_label for c in cells] == ["resnet18 inductor fusion-on Offline cpu fp32 b8",
                                                     "resnet18 inductor fusion-on layout_optimization=False Offline cpu fp32 b8"]
    records = [CellRecord.model_validate({
        "id": c.id, "label": c.label, "config": c.config.recorded(), "status": "skipped", "reasons": ["x"], "metrics": {},
        "wall_s": 0.0, "schema_version": SCHEMA_VERSION, "started": "t", "finished": "t"}) for c in cells]
    console = Console(width=300, record=True)
    console.print(summary_table(records))
    assert "inductor fusion-on layout_optimization=False" in console.export_text()


def test_tf32_is_a_dtype_of_its_own() -> None:
    cells = expand(resolved(dtypes=["fp32", "tf32"], scenarios=["SingleStream"], models=["resnet18"]), "cuda")
    assert sorted({c.config.dtype for c in cells}) == ["fp32", "tf32"]
    assert len({c.id for c in cells}) == len(cells)


def test_graph_cells_are_skipped_off_a_gpu_and_on_backends_without_graphs() -> None:
    from harness.bundle.header_record import BackendReport
    from harness.run.skips import skip_reason

    scenario = resolved(backends=[{"name": "eager", "graphs": ["on"]}, {"name": "onnxruntime", "graphs": ["on"]}],
                        scenarios=["Offline"])
    available = {name: BackendReport(available=True, reason="") for name in ("eager", "onnxruntime")}
    on_cpu = expand(scenario, "cpu")
    assert {skip_reason(c, available, []) for c in on_cpu} == {"graphs: CUDA graphs need a GPU (device cuda)"}
    on_gpu = {c.config.backend: skip_reason(c, available, ["9.0"]) for c in expand(scenario, "cuda")}
    assert on_gpu["eager"] is None
    assert on_gpu["onnxruntime"] == "graphs: onnxruntime has no CUDA-graph variant (its backend does not declare cuda_graphs)"


def test_a_value_of_only_that_no_cell_has_is_refused_beside_one_that_does() -> None:
    from harness.scenario.cells import check_values

    cells = expand(resolved(), "cpu")
    check_values(cells, parse_only("model=resnet18,model=mobilenet_v3_small,batch=8"))
    with pytest.raises(ConfigError, match=r"--only model=resnt18 matches no cell of this scenario \(did you mean "
                                          r"'resnet18'\?\); its model values: mobilenet_v3_small, resnet18"):
        check_values(cells, parse_only("model=resnt18,model=resnet18"))
    with pytest.raises(ConfigError, match="--only batch=64 matches no cell of this scenario; its batch values: 1, 4, 8"):
        check_values(cells, parse_only("batch=8,batch=64"))


def test_a_selection_of_nothing_names_the_values_there_are() -> None:
    """`run --resume RUN --only model=resnet50` said only that it matched no cell (a new run's
    check named the values; a resume's selection did not)."""
    cells = expand(resolved(), "cpu")
    with pytest.raises(ConfigError, match=r"--only model=resnet50 matches no cell of this scenario \(did you mean "
                                          r"'resnet18'\?\); its model values: mobilenet_v3_small, resnet18"):
        select(cells, parse_only("model=resnet50"))
    with pytest.raises(ConfigError, match=r"^--only scenario=SingleStream, batch=8 matches no cell of this scenario$"):
        select(cells, parse_only("scenario=SingleStream,batch=8"))  # each value is some cell's; together, none


def test_a_resume_whose_only_matches_no_cell_the_bundle_planned_is_refused() -> None:
    from types import SimpleNamespace

    from harness.run.opening import refuse_an_empty_selection

    scenario = resolved()
    planned = [c.id for c in select(expand(scenario, "cpu"), parse_only("model=resnet18"))]
    bundle = SimpleNamespace(cell_ids=planned, header={"only": {"model": ["resnet18"]}}, root="results/run")
    refuse_an_empty_selection(scenario, "cpu", parse_only("backend=eager"), bundle)  # some of them: eager's
    with pytest.raises(ConfigError, match=r"--only model=mobilenet_v3_small matches no cell of results/run, whose "
                                          r"run chose only model=resnet18"):
        refuse_an_empty_selection(scenario, "cpu", parse_only("model=mobilenet_v3_small"), bundle)
    # beside a value that matches, one of the scenario's that the bundle did not plan was dropped without a word
    with pytest.raises(ConfigError, match=r"^--only model=mobilenet_v3_small matches no cell of results/run, whose "
                                          r"run chose only model=resnet18$"):
        refuse_an_empty_selection(scenario, "cpu", parse_only("model=resnet18,model=mobilenet_v3_small"), bundle)
    refuse_an_empty_selection(scenario, "auto", parse_only("batch=8,batch=64"), None)  # cpu's 8, cuda's 64
    with pytest.raises(ConfigError, match="--only batch=128 matches no cell"):
        refuse_an_empty_selection(scenario, "auto", parse_only("batch=8,batch=128"), None)


def test_the_runs_summary_tells_apart_cells_of_another_input_size_or_weights() -> None:
    from rich.console import Console

    from harness.bundle.cell_record import CellRecord
    from harness.run.summary import summary_table

    data = resolved(backends=["eager"], scenarios=["Offline"], batch_sizes={"cpu": [8]},
                    models=["resnet18", {"name": "resnet18", "input_size": 160}, {"name": "resnet18", "pretrained": True}])
    records = [CellRecord.model_validate({
        "id": c.id, "label": c.label, "config": c.config.recorded(), "status": "skipped", "reasons": ["x"], "metrics": {},
        "wall_s": 0.0, "schema_version": SCHEMA_VERSION, "started": "t", "finished": "t"}) for c in expand(data, "cpu")]
    console = Console(width=300, record=True)
    console.print(summary_table(records))
    shown = console.export_text()
    assert "Offline fp32 b8 input 160" in shown and "Offline fp32 b8 pretrained" in shown


def test_the_runs_fusion_table_is_red_only_where_fusion_made_the_cell_slower() -> None:
    """Golden v9's TVM Offline pair, 0.54x [0.25-1.13] no effect seen, was red by its estimate alone."""
    from pathlib import Path

    from harness.bundle.reader import load
    from harness.reporting.cell_rows import Row
    from harness.reporting.fusion_pairs import fusion_pairs
    from harness.run.summary import fusion_summary

    records = load(Path(__file__).resolve().parents[1] / "golden" / "v9").records
    table = fusion_summary(records, [])
    assert table is not None
    pairs = fusion_pairs([Row(r) for r in records])
    assert any(p.speedup < 1 and not p.made_slower for p in pairs)
    assert [row.style == "red" for row in table.rows] == [p.made_slower for p in pairs]
