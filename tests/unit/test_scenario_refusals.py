"""Scenario files that loaded before and ran something other than what they said: a key given
twice (the last one silently won), one environment variable named twice, and a `baseline:` the
file does not run (the report silently had no speedups). Each is refused by `fusionbench run`
with exit 2 and one line naming the file and the line, before the system probe and with nothing
written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from harness.cli.main import main
from harness.errors import ConfigError
from harness.run import runner
from harness.scenario import loading
from harness.scenario.schema import json_schema

HEAD = "models: [resnet18]\nbackends: [eager, inductor]\nscenarios: [Offline]\n"


@pytest.fixture(autouse=True)
def no_real_run(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the scenario file was accepted and reached the system probe")

    monkeypatch.setattr(runner, "run_probe", refuse)


def refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str) -> tuple[Path, str]:
    """Run `text` as a scenario file; it must give exit 2, one line on stderr, nothing written."""
    path, out = tmp_path / "s.yaml", tmp_path / "results"
    path.write_text(text)
    code = main(["run", str(path), "--out", str(out), "--device", "cpu", "--no-cache"])
    printed = capsys.readouterr()
    lines = printed.err.splitlines()
    assert code == 2, printed.err
    assert len(lines) == 1 and lines[0].startswith(f"fusionbench: error: {path}:"), lines
    assert "Traceback" not in printed.err and not out.exists()
    return path, lines[0]


@pytest.mark.parametrize(("text", "line", "key", "first"), [
    (HEAD + "models: [vgg11]\n", 4, "models", 1),  # the second list replaced the first
    ("models: [resnet18]\nbackends:\n  - name: inductor\n    fusion: off\n    fusion: on\nscenarios: [Offline]\n",
     5, "fusion", 4),
    ("models: [resnet18]\nbackends: [{name: inductor, options: {mode: default, mode: max-autotune}}]\n"
     "scenarios: Offline\n", 2, "mode", 2),
    (HEAD + "loadgen:\n  min_duration_s: 1\n  min_duration_s: 60\n", 6, "min_duration_s", 5),
])
def test_a_key_given_twice_is_refused_naming_the_line_and_the_key(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, line: int, key: str, first: int) -> None:
    path, message = refused(tmp_path, capsys, text)
    assert message.startswith(f"fusionbench: error: {path}:{line}: ")
    assert f"key '{key}' given twice" in message and f"first on line {first}" in message


def test_a_merge_may_still_override_the_keys_it_brings_in(tmp_path: Path) -> None:
    # `<<: *base` then `fusion: off` is YAML's way of saying "as base, but": not a repeat.
    path = tmp_path / "merge.yaml"
    path.write_text("models: [resnet18]\nbackends:\n  - &base {name: inductor, fusion: on, options: {mode: default}}\n"
                    "  - {<<: *base, fusion: off}\nscenarios: [Offline]\n")
    scenario = loading.load(path)
    assert [(b.name, b.fusion, b.options) for b in scenario.backends] == [
        ("inductor", ["on"], {"mode": "default"}), ("inductor", ["off"], {"mode": "default"})]


@pytest.mark.parametrize("env", ["[OMP_NUM_THREADS=1, OMP_NUM_THREADS=2]", "[OMP_NUM_THREADS, OMP_NUM_THREADS=2]"])
def test_one_environment_variable_named_twice_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         env: str) -> None:
    path, message = refused(tmp_path, capsys, HEAD + f"env: {env}\n")
    assert message.startswith(f"fusionbench: error: {path}:4: env: ") and "OMP_NUM_THREADS twice" in message


@pytest.mark.parametrize(("baseline", "why"), [
    ("onnxruntime", "'onnxruntime' is not run by this file"),  # registered, but not in this file
    ("eagr", "'eagr' is not a registered backend (did you mean 'eager'?)"),
])
def test_a_baseline_the_file_does_not_run_is_refused_with_the_allowed_names(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], baseline: str, why: str) -> None:
    path, message = refused(tmp_path, capsys, HEAD + f"baseline: {baseline}\n")
    assert message.startswith(f"fusionbench: error: {path}:4: baseline: {why}")
    assert message.endswith("allowed: the file's backends (eager, inductor)")


def test_a_baseline_the_file_runs_and_the_default_without_eager_still_load(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(HEAD + "baseline: inductor\nenv: [OMP_NUM_THREADS=1, KMP_AFFINITY]\n")
    assert loading.load(path).baseline == "inductor"
    path.write_text("models: [resnet18]\nbackends: [inductor]\nscenarios: [Offline]\n")
    assert loading.load(path).baseline == "eager", "the default is not checked: a file without eager has no speedups"



def test_the_stored_scenario_of_a_file_without_eager_loads_as_a_file(tmp_path: Path) -> None:
    """bundle.json's scenario spells out the default `baseline: eager`: that of a file without eager
    was refused as a file ("'eager' is not run by this file"), so the run could not be made again."""
    path = tmp_path / "s.yaml"
    path.write_text("models: [resnet18]\nbackends: [inductor, null]\nscenarios: [Offline]\n")
    stored = loading.resolved(loading.load(path), "s")
    path.write_text(yaml.safe_dump(stored))
    again = loading.resolved(loading.load(path), "s")
    assert again == stored and loading.sha256(again) == loading.sha256(stored)

@pytest.mark.parametrize("value", ["true", "'3'", "3.0", "false"])
def test_rounds_are_a_whole_number_as_written(tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str) -> None:
    """`rounds: true` ran one round and `"3"` or `3.0` three: each is refused, as `false` was."""
    _, message = refused(tmp_path, capsys, HEAD + f"timing:\n  rounds: {value}\n")
    assert "rounds" in message and "valid integer" in message


def test_a_loadgen_run_of_no_minimum_duration_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`min_duration_s: 0` ran Offline as one query of one sample, reported valid at its rate."""
    path, message = refused(tmp_path, capsys, HEAD + "loadgen: {min_duration_s: 0}\n")
    assert "min_duration_s" in message and "greater than 0" in message, message


@pytest.mark.parametrize("backend", ["eager", "null"])
def test_fusion_off_of_a_backend_with_no_switch_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                           backend: str) -> None:
    """`{name: eager, fusion: [on, off]}` ran eager twice, and the report's "Where fusion made things
    slower" said fusion made resnet18 0.94x on eager, which has no fusion."""
    text = f"models: [resnet18]\nbackends:\n  - {{name: '{backend}', fusion: [on, off]}}\nscenarios: [Offline]\n"
    _, message = refused(tmp_path, capsys, text)
    assert f"{backend} has no fusion switch: fusion off would run the same code as on; leave `fusion` out" in message


@pytest.mark.parametrize("blank", ["  - ", "  - ~"])
def test_a_blank_backends_entry_is_refused_not_run_as_the_null_backend(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], blank: str) -> None:
    """YAML reads a blank entry as null, which named the null backend: its cells ran with no word."""
    path, said = refused(tmp_path, capsys, f"models: [resnet18]\nbackends:\n  - eager\n{blank}\nscenarios: [Offline]\n")
    assert f"{path}:4: backends[1]: an empty entry; name a backend (the null backend is written `null`)" in said
    (tmp_path / "named.yaml").write_text("models: [resnet18]\nbackends:\n  - eager\n  - null\nscenarios: [Offline]\n")
    assert [b.name for b in loading.load(tmp_path / "named.yaml").backends] == ["eager", "null"]


@pytest.mark.parametrize(("name", "said"), [
    ("null", "YAML reads an unquoted null as no name"), ("~", "an empty name"), ("", "an empty name")])
def test_an_entrys_name_left_null_says_how_to_name_the_null_backend(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, said: str) -> None:
    """`- null` runs the null backend, and `{name: null, models: [resnet18]}` was refused as "Input
    should be a valid string", which says neither what was wrong nor what to write."""
    path, line = refused(tmp_path, capsys, f"models: [resnet18, vgg11]\nbackends:\n  - eager\n"
                                           f"  - {{name: {name}, models: [resnet18]}}\nscenarios: [Offline]\n")
    assert line == (f"fusionbench: error: {path}:4: backends[1].name: {said}; name a backend (the null backend's name "
                    "is quoted within an entry: {name: 'null', ...})")
    (tmp_path / "named.yaml").write_text("models: [resnet18, vgg11]\nbackends:\n  - eager\n"
                                         "  - {name: 'null', models: [resnet18]}\nscenarios: [Offline]\n")
    assert [b.name for b in loading.load(tmp_path / "named.yaml").backends] == ["eager", "null"]


@pytest.mark.parametrize(("backends", "said"), [
    ("{name: null, models: [resnet18]}", "2: backends.name: YAML reads an unquoted null as no name; name a backend "
                                         "(the null backend's name is quoted within an entry: {name: 'null', ...})"),
    ("null", "2: backends: YAML reads an unquoted null as nothing; the null backend alone is written [null] or 'null'"),
])
def test_the_null_backend_standing_alone_says_how_to_name_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], backends: str, said: str) -> None:
    """One entry may stand alone (`backends: eager`); `{name: null, ...}` alone was refused as "Input
    should be a valid string", and `backends: null` as empty, as a list's entries no longer are."""
    path, line = refused(tmp_path, capsys, f"models: [resnet18]\nbackends: {backends}\nscenarios: [Offline]\n")
    assert line == f"fusionbench: error: {path}:{said}"
    for named in ("'null'", "[null]", "{name: 'null'}"):
        (tmp_path / "named.yaml").write_text(f"models: [resnet18]\nbackends: {named}\nscenarios: [Offline]\n")
        assert [b.name for b in loading.load(tmp_path / "named.yaml").backends] == ["null"]


def test_a_max_query_count_below_the_scenarios_least_is_refused(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """`max_query_count: 5` with SingleStream (100 queries at least by default) loaded without a word
    and every cell was INVALID, min queries not met; given with a min_query_count above it, refused."""
    text = "models: [resnet18]\nbackends: [null]\nscenarios: [Offline, SingleStream]\nloadgen: {max_query_count: 5}\n"
    path, line = refused(tmp_path, capsys, text)
    assert line == (f"fusionbench: error: {path}:4: loadgen: max_query_count 5 is below the 100 queries SingleStream runs "
                    "at least (min_query_count, by default): every SingleStream cell would be INVALID; give "
                    "max_query_count 100 or more")
    (tmp_path / "offline.yaml").write_text(text.replace("Offline, SingleStream", "Offline"))  # Offline's least is 1
    assert loading.load(tmp_path / "offline.yaml").loadgen.max_query_count == 5


@pytest.mark.parametrize(("text", "said"), [
    ("models: [resnet18]\nbackends: [eager]\nscenarios: [Offline]\nloadgen:\n",
     "4: loadgen: should be a mapping of keys to values (KEY: VALUE), not nothing"),
    ("models: [resnet18]\nbackends: [eager]\nscenarios: [Offline]\ntiming: 5\n",
     "4: timing: should be a mapping of keys to values (KEY: VALUE), not the number 5"),
    ("models:\n  - 123\nbackends: [eager]\nscenarios: [Offline]\n",
     "2: models[0]: should be a model's name, or a mapping with its name: (name: resnet18), not the number 123"),
    ("models: [resnet18]\nbackends:\n  - 5\nscenarios: [Offline]\n",  # `- eager` is an entry: not a mapping alone
     "3: backends[0]: should be a backend's name, or a mapping with its name: (name: eager), not the number 5"),
])
def test_a_part_that_is_no_mapping_is_said_in_the_files_words(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, said: str) -> None:
    """It said "Input should be a valid dictionary or instance of LoadGenSettings": a class of the harness's."""
    path, message = refused(tmp_path, capsys, text)
    assert message == f"fusionbench: error: {path}:{said}"


@pytest.mark.parametrize("entry", ["needs", "{name: needs, fusion: [on, off]}"])
def test_a_backend_option_without_a_default_is_asked_for_when_the_file_loads(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, entry: str) -> None:
    """An entry without `options:` was never checked against its backend's options model: a plugin's
    option with no default let the file load, `run --dry-run` said each cell would run, and each
    cell failed at run time ("tune: needs options: level: Field required")."""
    from harness import registry
    from harness.contract import Backend
    from harness.options import BackendOptions

    class NeedsOptions(BackendOptions):
        level: int

    class Needs(Backend):
        name = "needs"
        options_model = NeedsOptions

    load, names = registry.load, registry.names
    monkeypatch.setattr(registry, "load", lambda name: Needs if name == "needs" else load(name))
    monkeypatch.setattr(registry, "names", lambda: sorted([*names(), "needs"]))
    path, message = refused(tmp_path, capsys, f"models: [resnet18]\nbackends: [eager, {entry}]\nscenarios: [Offline]\n")
    assert message == f"fusionbench: error: {path}:2: backends[1].options: needs: level: Field required (allowed: level)"
    given = tmp_path / "given.yaml"
    given.write_text("models: [resnet18]\nbackends: [{name: needs, options: {level: 1}}]\nscenarios: [Offline]\n")
    assert loading.load(given).backends[0].options == {"level": 1}


@pytest.mark.parametrize(("setting", "said"), [
    ("batch_sizes: {cpu: [016, 032]}", "5: batch_sizes.cpu[0]: YAML reads 016 as 14 (a leading 0 makes it octal); "
                                       "write 14 if that is meant, or 16 without the 0"),
    ("inputs: {seed: 0777}", "5: inputs.seed: YAML reads 0777 as 511"),
    ("limits: {cell_timeout_s: 1:30}", "5: limits.cell_timeout_s: YAML reads 1:30 as 90 (numbers joined by ':' are one "
                                       "number in base 60); write 90 if that is meant, or '1:30' quoted"),
    ("loadgen:\n  min_duration_s: 1:00.5", "6: loadgen.min_duration_s: YAML reads 1:00.5 as 60.5"),
])
def test_a_number_yaml_reads_as_octal_or_base_60_is_refused_naming_what_it_reads(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], setting: str, said: str) -> None:
    """`batch_sizes: {cpu: [016, 032]}` ran batches 14 and 26, and `cell_timeout_s: 1:30` gave 90
    seconds, without a word: YAML 1.1 reads a leading 0 as octal and `:` as base 60."""
    path, line = refused(tmp_path, capsys, HEAD + "description: '016'\n" + setting + "\n")
    assert line.startswith(f"fusionbench: error: {path}:{said}"), line


def test_numbers_yaml_reads_as_written_still_load(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(HEAD + "batch_sizes: {cpu: [0x10, 1_6, 0]}\ninputs: {seed: 0}\ndescription: '1:30 at 016'\n")
    with pytest.raises(ConfigError, match=r"cpu\[2\]: Input should be greater than or equal to 1"):
        loading.load(path)  # a plain 0 is zero, not octal
    path.write_text(HEAD + "batch_sizes: {cpu: [0x10, 1_8]}\ninputs: {seed: 0}\ndescription: '1:30 at 016'\n")
    assert loading.load(path).batch_sizes.cpu == [16, 18]
    # a leading 0 that changes nothing (`01` is 1 in octal too) was refused as "YAML reads 01 as 1 ...;
    # write 1 if that is meant, or 1 without the 0": the same advice twice, for a file read as written
    path.write_text(HEAD + "batch_sizes: {cpu: [01, 02, 04]}\ninputs: {seed: 00}\ntiming: {warmup_iters: 0_7}\n")
    loaded = loading.load(path)
    assert (loaded.batch_sizes.cpu, loaded.inputs.seed, loaded.timing.warmup_iters) == ([1, 2, 4], 0, 7)


@pytest.mark.parametrize(("text", "said"), [
    ("models: [resnet18]\nbackends: [eager]\nscenarios:\n", "3: scenarios: empty; list at least one entry"),
    (HEAD + "dtypes:\n", "4: dtypes: empty; list at least one entry"),
    (HEAD + "batch_sizes: {cpu: }\n", "4: batch_sizes.cpu: empty; list at least one entry"),
    ("models: [resnet18]\nbackends:\n  - {name: inductor, fusion: }\nscenarios: [Offline]\n",
     "3: backends[0].fusion: empty; list at least one entry"),
])
def test_a_list_left_empty_is_said_empty_not_refused_at_an_item_it_lacks(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, said: str) -> None:
    """`scenarios:` left blank was refused as "scenarios[0]: Input should be 'SingleStream', ...": an
    item the file does not have, as if a value had been misspelt (models and backends said "empty")."""
    path, line = refused(tmp_path, capsys, text)
    assert line == f"fusionbench: error: {path}:{said}"


@pytest.mark.parametrize(("env", "said"), [
    ("[PYTHONUNBUFFERED=0]", "env[0]: sets PYTHONUNBUFFERED, which the harness sets to 1 in every cell's worker"),
    ("[OMP_NUM_THREADS=1, TORCHINDUCTOR_CACHE_DIR=/fast/disk]",
     "env[1]: sets TORCHINDUCTOR_CACHE_DIR, which inductor points at a fresh folder of each cell's own"),
    ("[TRITON_CACHE_DIR]", "env[0]: sets TRITON_CACHE_DIR, which inductor points at"),
])
def test_a_variable_the_harness_sets_itself_is_refused_in_env(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], env: str, said: str) -> None:
    """The worker got the harness's value (PYTHONUNBUFFERED=1, inductor's cache in the cell's own
    folder) over the file's, and the cell's record showed the variable without a word."""
    path, line = refused(tmp_path, capsys, HEAD + f"env: {env}\n")
    assert line.startswith(f"fusionbench: error: {path}:4: {said}"), line
    assert line.endswith("leave it out")
    own = env.replace("PYTHONUNBUFFERED=0", "FOO=1")
    (tmp_path / "eager.yaml").write_text(HEAD.replace("eager, inductor", "eager") + f"env: {own}\n")
    assert loading.load(tmp_path / "eager.yaml").env, "a backend's cache variable is the file's own where it does not run"


def test_a_file_of_more_cells_than_validate_checks_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """1,000 input sizes x 3 dtypes x 7 batch sizes loaded, listed 21,000 cells in the dry run and
    ran; `validate` then refused the bundle ("expands to more than 20000 cells"), and with it
    `report`, `compare` and `--resume`."""
    sizes = "".join(f"  - {{name: resnet18, input_size: {size}}}\n" for size in range(32, 1032))
    text = f"models:\n{sizes}backends: ['null']\nscenarios: [Offline]\ndtypes: [fp32, bf16, fp16, tf32]\n"
    path, line = refused(tmp_path, capsys, text + "batch_sizes: {cpu: [1, 2, 3, 4, 5, 6]}\n")
    assert line == (f"fusionbench: error: {path}:1: (top level): makes up to 24000 cells on cpu (models x backend "
                    "variants x scenarios x dtypes x batch sizes), more than the 20000 a run may have: split it into "
                    "several files")
    (tmp_path / "most.yaml").write_text(text + "batch_sizes: {cpu: [1, 2, 3, 4, 5]}\n")  # 20,000: the most
    assert len(loading.load(tmp_path / "most.yaml").models) == 1000


@pytest.mark.parametrize(("text", "said"), [
    (HEAD + "loadgen: {on: 1}\n", "4: loadgen: key 'on' is read by YAML as a boolean; a key is a name: quote it"),
    (HEAD + "timing:\n  1: 2\n", "5: timing: key '1' is read by YAML as a number; a key is a name: quote it"),
    (HEAD + "~: 1\n", "4: (top level): key '~' is read by YAML as nothing; a key is a name: quote it"),
    ("models: [resnet18]\nbackends: [{name: inductor, options: {2024-01-01: 1}}]\nscenarios: [Offline]\n",
     "2: backends[0].options: key '2024-01-01' is read by YAML as a date; a key is a name: quote it"),
])
def test_a_key_yaml_reads_as_no_text_is_said_as_written_at_its_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, said: str) -> None:
    """`loadgen: {on: 1}` was refused as `loadgen[1]: Keys should be strings`, an item of a list the
    file does not have, and `~: 1` at line 1, wherever it stood."""
    path, line = refused(tmp_path, capsys, text)
    assert line == f"fusionbench: error: {path}:{said}"


@pytest.mark.parametrize(("backends", "said"), [
    ("[inductor, {name: inductor, options: {mode: default}}]",
     'backends[1]: repeats cells of backends[0]: inductor fusion on, graphs off {"mode": "default"}, on resnet18 (the '
     'same options once the backend\'s defaults are filled in: {"freezing": true, "layout_optimization": true, '
     '"mode": "default"})'),
    ("[{name: tvm, options: {tuning_trials: 0}}, {name: tvm, options: {opt_level: 3, tuning_trials: 0}}]",
     "backends[1]: repeats cells of backends[0]: tvm fusion on"),
])
def test_entries_whose_options_differ_only_by_a_default_are_one_cell(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], backends: str, said: str) -> None:
    """`inductor` beside `{name: inductor, options: {mode: default}}` made two cells, each measuring the
    same code under its own id, which the report then set side by side as two variants."""
    path, line = refused(tmp_path, capsys, f"models: [resnet18]\nbackends: {backends}\nscenarios: [Offline]\n")
    assert line.startswith(f"fusionbench: error: {path}:2: {said}"), line
    (tmp_path / "other.yaml").write_text("models: [resnet18]\nbackends: [inductor, {name: inductor, options: "
                                         "{mode: max-autotune}}]\nscenarios: [Offline]\n")
    assert len(loading.load(tmp_path / "other.yaml").backends) == 2


def test_a_whole_number_too_long_to_read_is_said_at_its_line_and_key(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A 5,000-digit seed was refused as "invalid YAML value: Exceeds the limit (4300 digits) for
    integer string conversion", with neither line nor key."""
    path, line = refused(tmp_path, capsys, HEAD + "inputs:\n  seed: " + "7" * 5000 + "\n")
    assert line == (f"fusionbench: error: {path}:5: inputs.seed: a whole number written in 5000 characters; no setting "
                    "takes one of more than 100 digits")


@pytest.mark.parametrize(("setting", "said"), [
    ("name: 2024-05-01", "4: name: Input should be a valid string; YAML reads 2024-05-01 as a date: quote it ('2024-05-01')"),
    ("name: 1.5", "4: name: Input should be a valid string; YAML reads 1.5 as a number: quote it ('1.5')"),
    ("baseline: yes", "4: baseline: Input should be a valid string; YAML reads yes as a boolean: quote it ('yes')"),
    ("env: [FOO=1, 12]", "4: env[1]: Input should be a valid string; YAML reads 12 as a number: quote it ('12')"),
])
def test_a_text_yaml_reads_as_a_date_number_or_boolean_says_to_quote_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], setting: str, said: str) -> None:
    """`name: 2024-05-01` was refused as "Input should be a valid string": the user wrote text, and
    nothing said that YAML had read a date."""
    path, line = refused(tmp_path, capsys, HEAD + setting + "\n")
    assert line == f"fusionbench: error: {path}:{said}"


def test_a_second_yaml_document_is_said_as_such(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Two files pasted into one (a `---` between them) was refused as "invalid YAML: but found
    another document": PyYAML's half of a sentence."""
    path, line = refused(tmp_path, capsys, HEAD + "---\n" + HEAD)
    assert line == (f"fusionbench: error: {path}:4: invalid YAML: a second document begins here (---); a scenario "
                    "file is one document")


@pytest.mark.parametrize("folder", ["~/images", "~"])
def test_an_input_folder_beginning_with_a_tilde_is_refused_at_its_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], folder: str) -> None:
    """`path: ~/images` was looked for as a folder named `~` beside the scenario file and refused as
    "<its folder>/~/images is not a directory", at no line; the schema file took it."""
    text = HEAD + f"inputs: {{source: folder, path: '{folder}'}}\n"
    path, line = refused(tmp_path, capsys, text)
    assert line.startswith(f"fusionbench: error: {path}:4: inputs.path: '{folder}': a ~ is not expanded in a "
                           "scenario file"), line
    assert list(jsonschema.Draft202012Validator(json_schema()).iter_errors(yaml.safe_load(text)))


@pytest.mark.parametrize(("setting", "said"), [
    ("loadgen: {min_duration_s: 6}\nlimits: {cell_timeout_s: 3}",
     "5: limits: cell_timeout_s 3 is not above the 6 s LoadGen runs each cell at least (loadgen.min_duration_s)"),
    ("loadgen: {min_duration_s: 6}\nlimits: {cell_timeout_s: 6}", "5: limits: cell_timeout_s 6 is not above the 6 s"),
    ("loadgen: {profile: mlperf}\ninputs: {samples: 1024}\nlimits: {cell_timeout_s: 300}",
     "6: limits: cell_timeout_s 300 is not above the 600 s LoadGen runs each cell at least (mlperf.conf)"),
    # without `limits:` the default 900 s was never checked: each cell was killed at 900 s of 1000
    ("loadgen: {min_duration_s: 1000}", "1: limits: cell_timeout_s 900 (the default) is not above the 1000 s"),
])
def test_a_cell_time_limit_below_loadgens_minimum_duration_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], setting: str, said: str) -> None:
    """`cell_timeout_s: 3` beside `min_duration_s: 6` loaded, the dry run listed the cell as one
    that would run, and the run killed it: "time limit of 3 s exceeded (in phase loadgen)"."""
    text = "models: [resnet18]\nbackends: ['null']\nscenarios: [Offline]\n" + setting + "\n"
    path, line = refused(tmp_path, capsys, text)
    assert line.startswith(f"fusionbench: error: {path}:{said}"), line
    assert line.endswith("every cell would be stopped in its LoadGen pass; give it well above that")
    (tmp_path / "ok.yaml").write_text(text.replace("cell_timeout_s: 3}", "cell_timeout_s: 60}"))
    if "cell_timeout_s: 3}" in text:
        assert loading.load(tmp_path / "ok.yaml").limits.cell_timeout_s == 60


def test_a_plugin_whose_load_calls_sys_exit_does_not_end_the_files_loading(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check of repeated entries loads each backend to fill in its options' defaults: a plugin
    whose import called sys.exit(0) ended `run` there, with exit 0 and nothing said, where the
    options' and env:'s checks pass it over and its cells are skipped with the reason."""
    from harness import registry

    def quits(name: str) -> Any:
        if name == "quits":
            raise SystemExit(0)
        return load(name)

    load, names = registry.load, registry.names
    monkeypatch.setattr(registry, "load", quits)
    monkeypatch.setattr(registry, "names", lambda: sorted([*names(), "quits"]))
    text = "models: [resnet18]\nbackends: [eager, quits, {name: quits, options: {level: 1}}]\nscenarios: [Offline]\nenv: [FOO=1]\n"
    assert [b.name for b in loading.parse(text.encode(), "s.yaml").backends] == ["eager", "quits", "quits"]
