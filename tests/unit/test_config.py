"""Scenario files: good ones load, bad ones give a line a problem naming the file, the line and what is allowed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.errors import ConfigError
from harness.scenario import advice
from harness.scenario import loading as scenario_file
from harness.scenario.cells import expand
from harness.scenario.loading import resolved
from harness.scenario.rules import RULES

GOOD = """\
models:
  - resnet18
  - name: mobilenet_v3_small
    input_size: 96
backends:
  - eager
  - name: inductor
    fusion: on
scenarios: [Offline, SingleStream]
"""


def load_text(tmp_path: Path, text: str | bytes, name: str = "s.yaml"):
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return scenario_file.load(path)


def error_of(tmp_path: Path, text: str | bytes) -> str:
    with pytest.raises(ConfigError) as info:
        load_text(tmp_path, text)
    message = str(info.value)
    assert "\n" not in message, "a config error is one line"
    return message


def test_good_file_fills_defaults(tmp_path: Path) -> None:
    scenario = load_text(tmp_path, GOOD)
    assert [m.name for m in scenario.models] == ["resnet18", "mobilenet_v3_small"]
    sizes = {c.config.model.name: c.config.input_size for c in expand(resolved(scenario, "good"), "cpu")}
    assert sizes == {"mobilenet_v3_small": 96, "resnet18": 224}
    assert scenario.backends[1].fusion == ["on"]  # YAML's boolean `on` read back as the word
    assert scenario.dtypes == ["fp32"] and scenario.device == "auto"
    assert {c.config.scenario: c.config.loadgen.min_query_count for c in expand(resolved(scenario, "good"), "cpu")} \
        == {s: RULES[s].default_min_queries for s in scenario.scenarios}


def test_unknown_key_names_line_and_allowed_keys(tmp_path: Path) -> None:
    message = error_of(tmp_path, GOOD + "loadgen:\n  min_duration_s: 1\n  min_durration: 2\n")
    assert message.startswith(f"{tmp_path / 's.yaml'}:12: loadgen: unknown key 'min_durration'")
    assert "min_duration_s" in message and "target_latency_ms" in message


def test_unknown_top_level_key(tmp_path: Path) -> None:
    message = error_of(tmp_path, GOOD + "modles: []\n")
    assert ":10: (top level): unknown key 'modles'" in message
    assert "models" in message


def test_every_problem_of_a_file_is_named_at_its_line_not_only_the_first(tmp_path: Path) -> None:
    """Four mistakes said "(and 3 more problems)" without naming them: the user mended one, ran
    again, and met the next."""
    text = ("models: [resnet18]\nbackends: [eager, nosuchbackend]\nscenarios: [Offline, Sideways]\n"
            "batch_sizes: {cpu: [0]}\ntiming: {warmup_iters: -1}\n")
    with pytest.raises(ConfigError) as info:
        load_text(tmp_path, text)
    where = tmp_path / "s.yaml"
    assert str(info.value).startswith(f"{where}:2: backends[1].name: unknown backend 'nosuchbackend'")
    assert str(info.value).endswith("(and 3 more problems)")
    assert info.value.more == (
        f"{where}:3: scenarios[1]: Input should be 'SingleStream', 'MultiStream', 'Server' or 'Offline'",
        f"{where}:4: batch_sizes.cpu[0]: Input should be greater than or equal to 1",
        f"{where}:5: timing.warmup_iters: Input should be greater than or equal to 0",
    )


def test_the_problems_are_said_in_the_files_order_after_its_unknown_keys(tmp_path: Path) -> None:
    """They came in the order of the model's fields: a file's line 10 before its line 7."""
    text = ("models: [resnet18]\nbackends: [eager]\nscenarios: [Offline]\nloadgen: {min_duration_s: -1}\n"
            "timing: {rounds: 0}\ninputs: {samples: -1}\nlimits: {cel_timeout_s: 5}\n")
    with pytest.raises(ConfigError) as info:
        load_text(tmp_path, text)
    lines = [int(problem.split(":")[1]) for problem in (str(info.value), *info.value.more)]
    assert lines == [7, 4, 5, 6], (str(info.value), info.value.more)


def test_a_file_of_more_problems_than_are_said_says_its_first_lines(tmp_path: Path) -> None:
    """The twenty said were the model's first twenty, then put in the file's order: a problem on
    line 1 went unsaid behind twenty of a list further down."""
    text = ("loadgen: {min_duration_s: -1}\nmodels: [resnet18]\nbackends: [eager]\nscenarios:\n"
            + "  - Sideways\n" * 25)
    with pytest.raises(ConfigError) as info:
        load_text(tmp_path, text)
    assert str(info.value).split(":")[1:3] == ["1", " loadgen.min_duration_s"], str(info.value)
    lines = [int(problem.split(":")[1]) for problem in (str(info.value), *info.value.more[:-1])]
    assert lines == [1, *range(5, 24)], lines


def test_a_file_of_thousands_of_problems_says_at_most_twenty_lines(tmp_path: Path) -> None:
    text = "models: [resnet18]\nbackends: [eager]\nscenarios: [" + ", ".join(["Sideways"] * 500) + "]\n"
    with pytest.raises(ConfigError) as info:
        load_text(tmp_path, text)
    assert str(info.value).endswith("(and 499 more problems)")
    assert len(info.value.more) == scenario_file.MAX_PROBLEMS == 20
    assert info.value.more[-1] == f"{tmp_path / 's.yaml'}: 480 more problems not shown"


def test_a_union_or_an_option_is_one_problem_among_others(tmp_path: Path) -> None:
    text = ("models: [resnet18]\nbackends:\n  - name: onnxruntime\n    options: {disabled_optimizers: [X]}\n"
            "scenarios: [Offline]\nloadgen: {target_qps: fast}\n")
    with pytest.raises(ConfigError) as info:
        load_text(tmp_path, text)
    problems = [str(info.value), *info.value.more]
    assert len(problems) == 2, problems
    assert any(p.endswith(":4: backends[0].options.disabled_optimizers: an option's value is one boolean, number or "
                          "string (and 1 more problem)") for p in problems), problems
    assert any(p.endswith(":6: loadgen.target_qps: Input should be a valid number or 'auto'") for p in problems), problems


def test_unknown_model_suggests_the_closest(tmp_path: Path) -> None:
    message = error_of(tmp_path, GOOD.replace("- resnet18", "- resnet19"))
    assert ":2: models[0].name: unknown model 'resnet19'" in message
    assert "did you mean" in message and "'resnet18'" in message


def test_unknown_backend_lists_registered(tmp_path: Path) -> None:
    message = error_of(tmp_path, GOOD.replace("- eager", "- eagre"))
    assert ":6: backends[0].name: unknown backend 'eagre'" in message
    assert "registered: eager, inductor, null" in message


def test_wrong_type(tmp_path: Path) -> None:
    message = error_of(tmp_path, GOOD + "timing:\n  min_iters: lots\n")
    assert ":11: timing.min_iters: Input should be a valid integer" in message


def test_an_option_of_no_option_type_is_one_problem_at_its_name(tmp_path: Path) -> None:
    """Not four, one per type an option may be ("options.x.bool: Input should be a valid boolean
    (and 3 more problems)"), which sent the reader after a boolean."""
    text = "models: [resnet18]\nbackends:\n  - name: onnxruntime\n    options: {disabled_optimizers: [ConvBNFusion]}\n" \
           "scenarios: [Offline]\n"
    assert error_of(tmp_path, text).endswith(
        ":4: backends[0].options.disabled_optimizers: an option's value is one boolean, number or string")


def test_negative_duration(tmp_path: Path) -> None:
    message = error_of(tmp_path, GOOD + "loadgen:\n  min_duration_s: -5\n")
    assert "loadgen.min_duration_s: Input should be greater than 0" in message


def test_bad_scenario_name_lists_allowed(tmp_path: Path) -> None:
    message = error_of(tmp_path, GOOD.replace("[Offline, SingleStream]", "[Offline, Batch]"))
    assert "scenarios[1]" in message and "'SingleStream'" in message and "'Offline'" in message


def test_invalid_yaml_names_line(tmp_path: Path) -> None:
    message = error_of(tmp_path, "models: [resnet18\nbackends: eager\n")
    assert "invalid YAML" in message and ":2:" in message


def test_not_utf8(tmp_path: Path) -> None:
    assert "not UTF-8" in error_of(tmp_path, b"models: [\xff\xfe]\n")


def test_empty_and_non_mapping(tmp_path: Path) -> None:
    assert "empty" in error_of(tmp_path, "")
    assert "YAML list" in error_of(tmp_path, "- resnet18\n")


def test_missing_required(tmp_path: Path) -> None:
    message = error_of(tmp_path, "models: [resnet18]\nbackends: [eager]\n")
    assert "scenarios: required, but missing" in message


def test_null_backend_survives_yaml_null(tmp_path: Path) -> None:
    scenario = load_text(tmp_path, GOOD.replace("- eager", "- null"))
    assert scenario.backends[0].name == "null"


def test_repeats_rejected(tmp_path: Path) -> None:
    assert ":3: models[1]: repeats models[0]: resnet18 at input size 224" in error_of(
        tmp_path, GOOD.replace("- resnet18", "- resnet18\n  - resnet18"))
    assert "same fusion setting twice" in error_of(tmp_path, GOOD.replace("fusion: on", "fusion: [on, on]"))


@pytest.mark.parametrize(("change", "problem"), [
    # each of these made a cell twice: the run measured it twice and wrote a bundle validate refuses
    (("  - eager\n", "  - eager\n  - {name: eager, graphs: [on, off]}\n"),
     ":7: backends[1]: repeats cells of backends[0]: eager fusion on, graphs off, on resnet18"),
    (("  - eager\n", "  - eager\n  - {name: eager, models: [mobilenet_v3_small]}\n"),
     ":7: backends[1]: repeats cells of backends[0]: eager fusion on, graphs off, on mobilenet_v3_small"),
    (("    fusion: on", "    fusion: [on, off]\n  - {name: inductor, fusion: off}"),
     ":9: backends[2]: repeats cells of backends[1]: inductor fusion off, graphs off, on resnet18"),
    (("  - resnet18\n", "  - resnet18\n  - {name: resnet18, input_size: 224}\n"),
     ":3: models[1]: repeats models[0]: resnet18 at input size 224"),
    (("scenarios: [Offline, SingleStream]", "scenarios: [Offline, SingleStream, Offline]"), ":9: scenarios: lists Offline twice"),
    (("scenarios:", "dtypes: [fp32, bf16, fp32]\nscenarios:"), ":9: dtypes: lists fp32 twice"),
    (("scenarios:", "batch_sizes: {cpu: [8, 1, 8]}\nscenarios:"), ":9: batch_sizes.cpu: lists 8 twice"),
])
def test_a_file_that_makes_a_cell_twice_is_refused_at_the_entry_that_repeats_it(
        tmp_path: Path, change: tuple[str, str], problem: str) -> None:
    assert problem in error_of(tmp_path, GOOD.replace(*change))


def test_the_readmes_scenario_example_loads_and_shows_every_field(tmp_path: Path) -> None:
    """docs/architecture.md: a new scenario field is shown in the README's example; the example's
    every field is one the file format has (it loads), and every field of the format is in it but
    the folder inputs' own and the stored form's `loadgen.overrides` (mlperf only), which its comments name."""
    import yaml

    from harness.scenario.schema import ScenarioFile
    from harness.scenario.settings import SyntheticInputs

    readme = (Path(__file__).parents[2] / "README.md").read_text()
    example = readme.split("## Scenario files", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    cells = expand(resolved(load_text(tmp_path, example), "readme"), "cpu")
    assert len({cell.id for cell in cells}) == len(cells) > 10
    shown = yaml.safe_load(example)
    assert set(ScenarioFile.model_fields) == set(shown), "a field of the format is not in the README's example"
    for section in ("loadgen", "timing", "passes", "limits"):
        fields = ScenarioFile.model_fields[section].annotation.model_fields
        fields = {name: field for name, field in fields.items() if f"{section}.{name}" != "loadgen.overrides"}
        assert set(fields) == set(shown[section]), f"a field of {section} is not in the README's example"
    assert "stored scenario adds overrides" in example
    assert set(SyntheticInputs.model_fields) == set(shown["inputs"])


def test_the_same_model_at_another_size_or_the_same_backend_with_other_options_is_no_repeat(tmp_path: Path) -> None:
    text = GOOD.replace("  - resnet18\n",
                        "  - resnet18\n  - {name: resnet18, input_size: 160}\n  - {name: resnet18, pretrained: true}\n")
    text = text.replace("  - eager\n", "  - eager\n  - {name: eager, graphs: on}\n  - {name: inductor, options: {freezing: false}}\n")
    cells = expand(resolved(load_text(tmp_path, text), "s"), "cpu")
    assert len({cell.id for cell in cells}) == len(cells) == 4 * 4 * 2  # models x backend variants x scenarios


def test_ordering_constraints(tmp_path: Path) -> None:
    assert "min_iters is above max_iters" in error_of(tmp_path, GOOD + "timing:\n  min_iters: 5\n  max_iters: 2\n")


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such scenario file"):
        scenario_file.load(tmp_path / "absent.yaml")
    with pytest.raises(ConfigError, match="is a directory"):
        scenario_file.load(tmp_path)


def test_a_fifo_or_an_endless_device_is_refused_without_reading_forever(tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "scenario.yaml"
    os.mkfifo(fifo)  # nobody writes to it: reading it would block for ever
    with pytest.raises(ConfigError, match="not a regular file"):
        scenario_file.load(fifo)
    with pytest.raises(ConfigError, match="not a regular file"):
        scenario_file.load("/dev/zero")


def test_a_huge_file_is_refused_after_reading_one_byte_past_the_limit(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    with big.open("wb") as file:
        file.truncate(64 << 20)  # 64 MiB of zeros, sparse
    with pytest.raises(ConfigError, match="larger than"):
        scenario_file.load(big)


def test_resolved_hash_changes_with_content(tmp_path: Path) -> None:
    a = scenario_file.resolved(load_text(tmp_path, GOOD), "a")
    b = scenario_file.resolved(load_text(tmp_path, GOOD + "dtypes: bf16\n"), "a")
    assert a["name"] == "a" and a["loadgen"]["min_duration_s"] == 10.0
    assert scenario_file.sha256(a) != scenario_file.sha256(b)
    assert scenario_file.sha256(a) == scenario_file.sha256(dict(reversed(list(a.items()))))


def test_typo_in_a_union_branch_is_reported_first_at_its_line(tmp_path: Path) -> None:
    message = error_of(tmp_path, GOOD + "inputs:\n  source: folder\n  pth: images\n")
    assert ":12: inputs: unknown key 'pth'; allowed here: source, path, samples, labels (and 1 more problem)" in message


def test_backend_models_must_be_the_files_models(tmp_path: Path) -> None:
    text = GOOD.replace("    fusion: on", "    fusion: on\n    models: [vgg11]")
    assert (":7: backends[1]: inductor: models vgg11 not in the file's models (resnet18, mobilenet_v3_small)"
            in error_of(tmp_path, text))


MLPERF = """\
models: [{name: mobilenet_v3_small, input_size: 32}]
backends: [eager]
scenarios: [Offline]
inputs: {source: folder, path: images, labels: val_map.txt, samples: 1024}
"""


@pytest.mark.parametrize(("loadgen", "inputs", "words"), [
    ("{accuracy: true}", "{source: folder, path: images}", ":5: loadgen: accuracy needs labelled images"),
    ("{accuracy: true}", "{samples: 8}", ":5: loadgen: accuracy needs labelled images"),
    ("{compliance: [TEST01]}", None, "compliance tests need profile: mlperf and accuracy: true"),
    ("{profile: mlperf, accuracy: true, compliance: [TEST04, TEST04]}", None, "compliance lists the same test twice"),
    ("{profile: mlperf}", "{source: folder, path: images, samples: 64}",
     ":5: loadgen: profile mlperf: MLPerf's resnet loads 1024 performance samples; inputs.samples is 64"),
    ("{profile: official}", None, "'dev' or 'mlperf'"),
    # it was ignored: the Server runs held to mlperf.conf's bound, the user.conf without it, nothing said
    ("{profile: mlperf, target_latency_ms: 50}", None,
     ":5: loadgen: profile mlperf: Server's latency bound is the benchmark's own in mlperf.conf"),
    ("{compliance: [TEST05]}", None, "'TEST01' or 'TEST04'"),
])
def test_mlperf_settings_are_checked_with_the_rest_of_the_file(tmp_path: Path, loadgen: str, inputs: str | None,
                                                              words: str) -> None:
    text = MLPERF if inputs is None else MLPERF.replace(MLPERF.splitlines()[3], f"inputs: {inputs}")
    assert words in error_of(tmp_path, text + f"loadgen: {loadgen}\n")


def test_mlperf_profile_needs_a_model_that_stands_for_a_benchmark(tmp_path: Path) -> None:
    text = (MLPERF.replace("mobilenet_v3_small, input_size: 32", "bert_base")
            .replace("source: folder, path: images, labels: val_map.txt, ", "") + "loadgen: {profile: mlperf}\n")
    assert "bert_base stands for no MLPerf benchmark" in error_of(tmp_path, text)


def test_a_labels_file_is_a_name_in_the_folder(tmp_path: Path) -> None:
    text = MLPERF.replace("labels: val_map.txt", "labels: ../val_map.txt")
    assert "inputs.labels: a file name in the input folder, not a path: '../val_map.txt'" in error_of(tmp_path, text)


def test_the_mlperf_profile_records_what_the_file_overrides_and_dev_cells_keep_their_ids(tmp_path: Path) -> None:
    official = resolved(load_text(tmp_path, MLPERF + "loadgen: {profile: mlperf, accuracy: true}\n"), "s")
    assert official["loadgen"]["overrides"] == {}
    short = resolved(load_text(tmp_path, MLPERF + "loadgen: {profile: mlperf, min_duration_s: 2}\n"), "s")
    assert short["loadgen"]["overrides"] == {"min_duration_s": 2.0}
    (cell,) = expand(short, "cpu")
    assert cell.config.loadgen.profile == "mlperf" and cell.config.loadgen.overrides == {"min_duration_s": 2.0}
    dev = resolved(load_text(tmp_path, MLPERF), "s")
    (plain,) = expand(dev, "cpu")
    assert not {"profile", "overrides", "accuracy", "compliance"} & set(plain.config.recorded()["loadgen"])


def test_an_mlperf_setting_given_as_null_leaves_mlperf_conf_its_own(tmp_path: Path) -> None:
    """`max_query_count: null` (no maximum, the default) became an override of None, which a cell's
    overrides refuse: `run` and `run --dry-run` ended with pydantic's traceback (exit 1), and the
    warning called the run unofficial for it."""
    text = MLPERF + "loadgen: {profile: mlperf, max_query_count: null, min_query_count: null, min_duration_s: 2}\n"
    scenario = load_text(tmp_path, text)
    stored = resolved(scenario, "s")
    assert stored["loadgen"]["overrides"] == {"min_duration_s": 2.0}
    (cell,) = expand(stored, "cpu")
    assert cell.config.loadgen.overrides == {"min_duration_s": 2.0}
    assert advice.warnings(scenario, "cpu")[0].startswith("loadgen.min_duration_s under profile mlperf overrides")
    official = load_text(tmp_path, MLPERF + "loadgen: {profile: mlperf, max_duration_s: null}\n")
    assert resolved(official, "s")["loadgen"]["overrides"] == {} and advice.warnings(official, "cpu") == []


@pytest.mark.parametrize("loadgen", ["{profile: mlperf}", "{profile: mlperf, min_duration_s: 2, max_query_count: null}"])
def test_an_mlperf_bundles_stored_scenario_run_as_a_file_is_the_same_run(tmp_path: Path, loadgen: str) -> None:
    """bundle.json's scenario fills in every LoadGen setting and adds `overrides`: as a file it was
    refused ("unknown key 'overrides'"), and without that key the official run's stored
    `min_duration_s: 10.0` became an override: another scenario_sha256, an unofficial run."""
    stored = resolved(load_text(tmp_path, MLPERF + f"loadgen: {loadgen}\n"), "s")
    again = load_text(tmp_path, json.dumps(stored), "stored.yaml")
    assert resolved(again, "s") == stored and scenario_file.sha256(resolved(again, "s")) == scenario_file.sha256(stored)
    assert [c.config for c in expand(resolved(again, "s"), "cpu")] == [c.config for c in expand(stored, "cpu")]
    assert advice.warnings(again, "cpu") == advice.warnings(load_text(tmp_path, MLPERF + f"loadgen: {loadgen}\n"), "cpu")


@pytest.mark.parametrize(("loadgen", "words"), [
    ("{profile: dev, overrides: {}}", "only the mlperf profile overrides mlperf.conf"),
    ("{profile: mlperf, min_duration_s: 2, overrides: {min_duration_s: 3}}", "overrides.min_duration_s is 3 where"),
    ("{profile: mlperf, min_duration_s: 2, overrides: {}}", "min_duration_s 2 is not at its default (10.0)"),
    ("{profile: mlperf, overrides: {target_qps: 3}}", "loadgen.overrides.target_qps"),
])
def test_a_stored_scenarios_overrides_are_its_settings(tmp_path: Path, loadgen: str, words: str) -> None:
    assert words in error_of(tmp_path, MLPERF + f"loadgen: {loadgen}\n")


@pytest.mark.parametrize(("setting", "problem"), [
    # YAML reads on/yes/no as booleans: a number field took them as 1 and 0
    ("loadgen: {target_qps: on}", ":10: loadgen.target_qps: Input should be a valid number or 'auto'"),
    ("loadgen: {samples_per_query: yes}", ":10: loadgen.samples_per_query: Input should be a valid integer"),
    ("timing: {warmup_iters: no}", ":10: timing.warmup_iters: Input should be a valid integer"),
    ("loadgen: {min_duration_s: '10'}", ":10: loadgen.min_duration_s: Input should be a valid number"),
    # NaN was refused as "less than or equal to 86400"
    ("loadgen: {min_duration_s: .nan}", ":10: loadgen.min_duration_s: Input should be a finite number"),
    ("limits: {cell_timeout_s: .inf}", ":10: limits.cell_timeout_s: Input should be a finite number"),
    # one problem, not one per branch of the union ("target_qps.float: ... (and 1 more problem)")
    ("loadgen: {target_qps: fast}", ":10: loadgen.target_qps: Input should be a valid number or 'auto'"),
])
def test_a_number_is_a_number_as_written(tmp_path: Path, setting: str, problem: str) -> None:
    message = error_of(tmp_path, GOOD + setting + "\n")
    assert message.endswith(problem), message


@pytest.mark.parametrize(("setting", "problem"), [
    # "Input should be a valid number" said nothing of why a number was no number
    ("loadgen: {min_duration_s: 1e3}", ":10: loadgen.min_duration_s: Input should be a valid number; YAML reads 1e3 "
                                       "as text, not a number (an exponent needs a dot and a sign): write 1000 or 1.0e+3"),
    ("loadgen: {target_qps: 2.5E2}", ":10: loadgen.target_qps: Input should be a valid number or 'auto'; YAML reads "
                                     "2.5E2 as text, not a number (an exponent needs a dot and a sign): write 250 or 2.5e+2"),
    ("inputs: {samples: 1e2}", ":10: inputs.samples: Input should be a valid integer; YAML reads 1e2 as text, not a "
                               "number (an exponent needs a dot and a sign): write 100"),
    ("loadgen: {min_duration_s: 5e-1}", "write 5.0e-1"),
    ("loadgen: {min_duration_s: '1e3'}", ":10: loadgen.min_duration_s: Input should be a valid number"),  # quoted: text
    # the JSON schema lets 64.0 pass (JSON Schema counts it whole); the reader said only "a valid integer"
    ("inputs: {samples: 64.0}", ":10: inputs.samples: Input should be a valid integer; a whole number is written "
                                "without a point: 64"),
])
def test_a_number_yaml_reads_as_text_says_why_and_how_to_write_it(tmp_path: Path, setting: str, problem: str) -> None:
    message = error_of(tmp_path, GOOD + setting + "\n")
    assert message.endswith(problem), message


def test_numbers_and_yaml_booleans_still_load_where_they_belong(tmp_path: Path) -> None:
    scenario = load_text(tmp_path, GOOD + "loadgen: {min_duration_s: 10, target_qps: 5}\nlimits: {cell_timeout_s: 60}\n"
                         "timing: {rounds: 2}\n")
    assert scenario.loadgen.min_duration_s == 10.0 and scenario.loadgen.target_qps == 5.0
    flags = load_text(tmp_path, GOOD.replace("    fusion: on", "    fusion: [on, off]\n    options: {freezing: off}")
                      .replace("  - resnet18\n", "  - {name: resnet18, pretrained: yes}\n"))
    assert flags.backends[1].fusion == ["on", "off"] and flags.backends[1].options == {"freezing": False}
    assert flags.models[0].pretrained is True


def test_the_allocators_variable_in_env_needs_allocator_system(tmp_path: Path) -> None:
    """Refused at the env entry that sets it (it pointed at line 1, at an allocator key the file lacked)."""
    problem = "sets GLIBC_TUNABLES, which allocator: steady (the default) sets itself; add allocator: system"
    assert ":10: env[0]: " + problem in error_of(tmp_path, GOOD + "env: [GLIBC_TUNABLES=glibc.malloc.trim_threshold=1]\n")
    assert ":10: env[1]: " + problem in error_of(tmp_path, GOOD + "env: [A=1, GLIBC_TUNABLES]\nallocator: steady\n")
    assert load_text(tmp_path, GOOD + "env: [GLIBC_TUNABLES]\nallocator: system\n").allocator == "system"


def test_a_model_built_for_one_input_size_is_refused_another_at_load(tmp_path: Path) -> None:
    """vit_b_16 at 32 made a bundle whose cell failed at run time ('Wrong image height! Expected 224');
    so did inception_v3 at 32, BERT beyond its 512 positions and the MMoE at another feature count."""
    text = GOOD.replace("  - resnet18\n", "  - {name: vit_b_16, input_size: 32}\n")
    assert ":2: models[0]: vit_b_16 takes input size 224 only; input_size is 32" in error_of(tmp_path, text)
    assert ":2: models[0]: inception_v3 takes input sizes from 75 (its forward fails below); input_size is 32" in error_of(
        tmp_path, GOOD.replace("  - resnet18\n", "  - {name: inception_v3, input_size: 32}\n"))
    assert ":2: models[0]: bert_base takes input sizes 16 to 512; input_size is 1024" in error_of(
        tmp_path, GOOD.replace("  - resnet18\n", "  - {name: bert_base, input_size: 1024}\n"))
    assert load_text(tmp_path, GOOD.replace("  - resnet18\n", "  - {name: inception_v3, input_size: 75}\n"))
    assert load_text(tmp_path, GOOD.replace("  - resnet18\n", "  - {name: vit_b_16, input_size: 224}\n"))
    assert ":2: models[0]: maxvit_t takes input sizes 221 to 224; input_size is 256" in error_of(
        tmp_path, GOOD.replace("  - resnet18\n", "  - {name: maxvit_t, input_size: 256}\n"))
    # a bundle an older harness wrote with such a cell still reads: the check is the file's, not the record's
    from harness.scenario.cell_config import CellConfig

    cell = expand(resolved(load_text(tmp_path, GOOD), "s"), "cpu")[0].config.recorded()
    cell["model"] = {"name": "vit_b_16", "input_size": 32, "pretrained": False}
    assert CellConfig.model_validate(cell).model.input_size == 32
    # and a killed one resumes: its other cells run, its cells at that size fail again with the reason
    from harness.run.resumable import check_scenario

    stored = resolved(load_text(tmp_path, GOOD.replace("  - resnet18\n", "  - {name: alexnet, input_size: 63}\n")), "s")
    stored["models"][0]["input_size"] = 32
    assert check_scenario(stored, "bundle.json").models[0].input_size == 32


def test_batch_sizes_take_one_value_a_device_and_say_they_are_per_device(tmp_path: Path) -> None:
    """`batch_sizes: {cpu: 8}` was refused where `dtypes: fp32` is taken as one item, and `batch_sizes:
    [8]` was refused as no "valid dictionary or instance of BatchSizes"."""
    head = "models: [resnet18]\nbackends: [eager]\nscenarios: [Offline]\n"
    assert load_text(tmp_path, head + "batch_sizes: {cpu: 8}\n").batch_sizes.cpu == [8]
    assert error_of(tmp_path, head + "batch_sizes: [8]\n").endswith(
        ":4: batch_sizes: batch sizes are given per device: {cpu: [8], cuda: [8]} (or one of the two)")
    assert "{cpu: 16, cuda: 16}" in error_of(tmp_path, head + "batch_sizes: 16\n")


def test_one_model_or_backend_may_stand_alone_and_an_empty_key_is_named(tmp_path: Path) -> None:
    """`models: resnet18` was refused ("Input should be a valid list") where `dtypes: fp32` is taken
    as one item; an empty `models:` said the same, not that it names nothing."""
    one = load_text(tmp_path, "models: resnet18\nbackends: eager\nscenarios: Offline\n")
    assert [m.name for m in one.models] == ["resnet18"] and [b.name for b in one.backends] == ["eager"]
    mapping = load_text(tmp_path, "models: {name: resnet18, input_size: 64}\nbackends: {name: eager}\nscenarios: Offline\n")
    assert mapping.models[0].input_size == 64 and mapping.backends[0].name == "eager"
    assert error_of(tmp_path, "models:\nbackends: [eager]\nscenarios: Offline\n").endswith(
        ":1: models: empty; list at least one entry")
    assert error_of(tmp_path, "models: [resnet18]\nbackends:\nscenarios: Offline\n").endswith(
        ":2: backends: empty; list at least one entry")
    assert "models: List should have at least 1 item" in error_of(tmp_path, "models: []\nbackends: [eager]\nscenarios: Offline\n")
