"""Models as plugins (harness/models/plugins.py, docs/adding_a_model.md): the page's worked example,
written into a site folder on sys.path, is named by a scenario like any model; a misspelt name, a
plugin that does not load or describes no model, and one that takes a built-in's name are refused
in one line naming its package, the other models unaffected; the bundle's record of it, the
refusal of a rerun where it is missing, and the artifact cache's key holding its version."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pydantic
import pytest

from harness import artifact_cache
from harness.errors import HarnessError
from harness.models import plugins
from harness.models.catalog import RECORD, all_models, plugin_records
from harness.scenario.schema import json_schema
from harness.scenario.specs import ModelSpec
from tests.model_plugin_site import forget_modules, write_site

NAME = "acme_conv_block"


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The example package on sys.path, beside a broken entry point, one to what is no model, and
    one that takes resnet18's name."""
    folder = write_site(tmp_path, extra_entry_points={
        "acme_gone": "acme_models.nowhere:MODEL",
        "acme_raises": "acme_models.raises:MODEL",
        "acme_function": "acme_models.blocks:build_conv_block",
        "resnet18": "acme_models.blocks:CONV_BLOCK",
        "acme_no_module": "acme_models.no_module:MODEL",
        "acme_short": "acme_models.short:MODEL",
        "acme_sizes_wrong": "acme_models.short:SIZES_WRONG",
        "acme_heavy": "acme_models.heavy:MODEL",
    })
    (folder / "acme_models" / "no_module.py").write_text(
        "from harness.models.extra_models import ExtraModel\n"
        "MODEL = ExtraModel('acme', 'features', 16, 'builds no module', build=lambda seed: 42)\n")
    (folder / "acme_models" / "short.py").write_text(
        "from harness.models.extra_models import ExtraModel\n"
        "MODEL = ExtraModel('acme', 'sequence', 32, 'learned positions: 64 steps at most', features=8,\n"
        "                   input_sizes=(16, 64), build=lambda seed: None)\n"
        "SIZES_WRONG = ExtraModel('acme', 'features', 32, 'sizes from 8', input_sizes=(8, None), build=lambda seed: None)\n")
    (folder / "acme_models" / "heavy.py").write_text(  # a library imported at its top, as torch would be
        "import acme_heavy_library\nfrom acme_models.blocks import CONV_BLOCK as MODEL\n")
    (folder / "acme_heavy_library.py").write_text("")
    (folder / "acme_models" / "raises.py").write_text("raise RuntimeError('no GPU\\n  try again')\n")
    monkeypatch.syspath_prepend(str(folder))
    forget_modules()
    plugins.found.cache_clear()
    yield folder
    forget_modules()
    plugins.found.cache_clear()


def refusal(name: str) -> str:
    with pytest.raises(pydantic.ValidationError) as caught:
        ModelSpec.model_validate({"name": name})
    errors = caught.value.errors()
    assert len(errors) == 1
    return str(errors[0]["msg"]).removeprefix("Value error, ")


def test_a_scenario_names_a_plugin_model_as_any_other_and_a_misspelt_one_is_told_the_nearest(site: Path) -> None:
    assert ModelSpec.model_validate({"name": NAME}).name == NAME
    assert all_models()[NAME] == ("acme", 16)
    # the schema `fusionbench schema` writes here lists it among the names a file may give
    assert NAME in json_schema()["$defs"]["ModelSpec"]["properties"]["name"]["enum"]
    assert refusal("acme_conv_blok").startswith("unknown model 'acme_conv_blok' (did you mean 'acme_conv_block'?);")


def test_a_plugin_that_does_not_load_or_is_no_model_is_refused_naming_its_package_and_the_others_run(site: Path) -> None:
    gone = refusal("acme_gone")
    assert gone == (f"model 'acme_gone' from acme-models 1.0 (acme_models.nowhere:MODEL, in {site}) does not load: "
                    "ModuleNotFoundError: No module named 'acme_models.nowhere'"), gone
    raises = refusal("acme_raises")  # an exception over several lines: one line, as every refusal
    assert raises.endswith("does not load: RuntimeError: no GPU / try again"), raises
    function = refusal("acme_function")
    assert function.startswith(f"model 'acme_function' from acme-models 1.0 (acme_models.blocks:build_conv_block, in {site}) "
                               "loads to function <function build_conv_block"), function
    assert function.endswith(", not a harness.models.extra_models.ExtraModel (family, input kind, input size, about, build)")
    for other in (NAME, "mobilenet_v2", "pattern_conv_bn_relu"):
        assert ModelSpec.model_validate({"name": other}).name == other


def test_a_model_two_packages_register_is_refused_naming_both_and_their_other_models_run(
        site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A second package registering acme_conv_block: the refusal named the second alone (`uninstall
    one (one is other-models 2.0 ...)`), leaving the user to find the first."""
    other = tmp_path / "other-site"
    (other / "other_models").mkdir(parents=True)
    (other / "other_models" / "__init__.py").write_text(
        "from harness.models.extra_models import ExtraModel\n"
        "MODEL = ExtraModel('other', 'features', 16, 'theirs', build=lambda seed: None)\n")
    info = other / "other_models-2.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: other-models\nVersion: 2.0\n")
    (info / "entry_points.txt").write_text(
        f"[fusionbench.models]\n{NAME} = other_models:MODEL\nother_block = other_models:MODEL\n")
    monkeypatch.syspath_prepend(str(other))
    plugins.found.cache_clear()
    assert refusal(NAME) == (
        f"two installed packages register the model {NAME!r}: other-models 2.0 (other_models:MODEL, in {other}) and "
        f"acme-models 1.0 (acme_models.blocks:CONV_BLOCK, in {site}); uninstall one (pip uninstall other-models or "
        "pip uninstall acme-models), or take it off PYTHONPATH")
    for name in ("other_block", "acme_short", "resnet18"):  # each package's other models, and the zoo's
        assert ModelSpec.model_validate({"name": name}).name == name



def test_two_copies_of_one_version_are_one_package_and_of_two_versions_each_command_says_which_runs(
        site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The package installed in the venv and again in a folder on PYTHONPATH: importlib reads the first
    copy on sys.path alone. Of one version, nothing to say; of another, the first ran without a word of
    the other, and a rerun of a bundle that ran the other asked for its `pip install`, which changed
    nothing: that copy was there, behind the one that runs."""
    from harness.cli.main import main

    same = write_site(tmp_path / "same-version-site")
    monkeypatch.syspath_prepend(str(same))
    plugins.found.cache_clear()
    assert ModelSpec.model_validate({"name": NAME}).name == NAME and plugins.found().shadowed == {}
    newer = write_site(tmp_path / "newer-site", version="2.0")
    monkeypatch.syspath_prepend(str(newer))
    forget_modules()  # as in a fresh process, which imports the first copy's
    plugins.found.cache_clear()
    assert ModelSpec.model_validate({"name": NAME}).name == NAME  # not refused as a clash: one package
    assert plugins.found().models[NAME].version == "2.0"
    told = (f"model '{NAME}' runs from acme-models 2.0 (acme_models.blocks:CONV_BLOCK, in {newer}), the copy first on "
            f"sys.path; acme-models 1.0 (acme_models.blocks:CONV_BLOCK, in {same}), acme-models 1.0 "
            f"(acme_models.blocks:CONV_BLOCK, in {site}) are installed too and never load: take the copy you do not mean "
            "to run off PYTHONPATH, or uninstall it")
    assert plugins.found().shadowed == {NAME: told}
    assert main(["models", "--family", "acme"]) == 0
    assert f"fusionbench: warning: {told}" in " ".join(capsys.readouterr().out.split())
    ran = {NAME: {"distribution": "acme-models", "version": "1.0", "entry_point": "acme_models.blocks:CONV_BLOCK",
                  "family": "acme", "input_kind": "planes", "input_size": 16}}
    assert plugins.provider_missing(ran, [NAME]) == (
        f"its model '{NAME}' came from acme-models 1.0 (acme_models.blocks:CONV_BLOCK) and acme-models==2.0 provides it "
        f"here, from {newer}; acme-models 1.0 is installed too and never loads, {newer} coming first on sys.path: take "
        "that copy off PYTHONPATH, or uninstall it")
    assert plugins.provider_missing({NAME: {**ran[NAME], "version": "0.9"}}, [NAME]).endswith(
        "pip install acme-models==0.9")  # installed nowhere: installing it is the way
    # one version registering the model at another object: not the same package either
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(newer)])
    moved = write_site(tmp_path / "moved-site", extra_entry_points={NAME: "acme_models.moved:BLOCK"})
    (moved / "acme_models" / "moved.py").write_text("from acme_models.blocks import CONV_BLOCK as BLOCK\n")
    monkeypatch.syspath_prepend(str(moved))
    for module in [m for m in sys.modules if m.split(".")[0] == "acme_models"]:  # as in a fresh process
        monkeypatch.delitem(sys.modules, module)
    plugins.found.cache_clear()
    assert plugins.found().shadowed[NAME].startswith(
        f"model '{NAME}' runs from acme-models 1.0 (acme_models.moved:BLOCK, in {moved}), the copy first on sys.path; "
        f"acme-models 1.0 (acme_models.blocks:CONV_BLOCK, in {same}), ")

def test_a_plugin_model_named_as_a_built_in_is_refused_naming_both_where_a_run_starts(
        site: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A new run's file that names resnet18 might mean either, and is refused before anything runs; a
    bundle that ran torchvision's resnet18 still validates (it failed, its scenario's every cell
    refused, when the clash was the scenario format's refusal)."""
    from harness.bundle.validate import validate
    from harness.cli.main import main

    golden = Path(__file__).resolve().parents[1] / "golden" / "v12"
    verdict = validate(golden)
    assert verdict.ok, verdict.problems
    assert ModelSpec.model_validate({"name": "resnet18"}).name == "resnet18"
    scenario = tmp_path / "s.yaml"
    scenario.write_text("models: [{name: resnet18, input_size: 32}]\nbackends: [eager]\nscenarios: [SingleStream]\n")
    assert main(["run", str(scenario), "--dry-run", "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == (
        "fusionbench: error: the model name 'resnet18' is a built-in model's (one of torchvision's classifiers), and "
        "acme-models 1.0 (acme_models.blocks:CONV_BLOCK) registers it too: rename the plugin's model (its entry "
        "point's name)"), err


def test_the_bundle_records_the_package_and_a_rerun_without_it_is_refused_naming_it(site: Path,
                                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    recorded = plugin_records([NAME, "resnet18", NAME])
    assert recorded == {NAME: {"distribution": "acme-models", "version": "1.0", "entry_point": "acme_models.blocks:CONV_BLOCK",
                               "family": "acme", "input_kind": "planes", "input_size": 16, "code_folder": str(site)}}
    assert plugins.provider_missing(recorded, [NAME]) == ""
    older = {NAME: {**recorded[NAME], "version": "0.9"}}
    assert plugins.provider_missing(older, [NAME]) == (
        f"its model '{NAME}' came from acme-models 0.9 (acme_models.blocks:CONV_BLOCK) and acme-models==1.0 provides "
        "it here: pip install acme-models==0.9")
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(site)])  # the package uninstalled
    plugins.found.cache_clear()
    assert refusal(NAME).startswith(f"unknown model '{NAME}'")
    # a bundle read here: its cells expand from its record, and from nothing else
    assert ModelSpec.model_validate({"name": NAME}, context={RECORD: recorded}).name == NAME
    assert all_models(recorded)[NAME] == ("acme", 16) and NAME not in all_models()
    assert plugins.provider_missing(recorded, ["resnet18", NAME]) == (
        f"its model '{NAME}' came from acme-models 1.0 (acme_models.blocks:CONV_BLOCK) and no package here provides "
        "it: pip install acme-models==1.0")


def test_the_zoo_builds_it_and_the_artifact_cache_key_holds_its_version(site: Path) -> None:
    """Its module is torch's nn.Sequential, whose defining library is torch: without the package's
    version in the key, version 1.1's forward found version 1.0's compiled artifact."""
    from harness.models import zoo

    model = zoo.build_model(NAME, pretrained=False, seed=0, device="cpu", dtype="fp32")
    samples = zoo.make_samples(2, model=NAME, input_size=16, device="cpu", dtype="fp32")
    assert [tuple(s.shape) for s in samples] == [(1, 64, 16, 16)] * 2
    assert not model.training and getattr(model, artifact_cache.PROVIDED_BY) == "acme-models==1.0"
    key = artifact_cache.fingerprint(model, samples[0], torch="x")
    setattr(model, artifact_cache.PROVIDED_BY, "acme-models==1.1")
    assert artifact_cache.fingerprint(model, samples[0], torch="x") != key
    with pytest.raises(HarnessError) as caught:  # its cell fails at `build`, saying why
        zoo.build_model("acme_no_module", pretrained=False, seed=0, device="cpu", dtype="fp32")
    assert str(caught.value) == ("model from acme-models 1.0 (acme_models.no_module:MODEL): its build returned int, "
                                 "not a torch.nn.Module")


def test_the_artifact_cache_key_follows_an_edit_of_its_forward_at_the_same_version(site: Path) -> None:
    """An author edits the model's code in place (an editable install) and runs again at the same
    version: the key holding the package's name and version alone found the artifact compiled from
    the old forward (harness/models/plugin_source.py). Rebuilt from unchanged files, the key is the same."""
    from harness.models import plugin_source, zoo

    def key() -> str:
        model = zoo.build_model(NAME, pretrained=False, seed=0, device="cpu", dtype="fp32")
        return artifact_cache.fingerprint(model, zoo.make_samples(1, model=NAME, input_size=16, device="cpu",
                                                                  dtype="fp32")[0], torch="x")

    first = key()
    plugin_source.digest.cache_clear()  # a new process: the next cell's worker
    assert key() == first
    blocks = site / "acme_models" / "blocks.py"
    blocks.write_text(blocks.read_text().replace("nn.ReLU()", "nn.Sigmoid()"))  # the same class, weights and shapes
    plugin_source.digest.cache_clear()
    assert key() != first


def test_models_lists_it_with_its_package_and_says_which_plugins_it_could_not_list(
        site: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from harness.cli.main import main

    monkeypatch.setenv("COLUMNS", "400")  # a row on one line
    assert main(["models", "--family", "acme"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"{NAME} │ acme │ planes [1, 64, 16, 16] │ 16 and up │ our 3x3 conv + batch norm + ReLU + 1x1 conv (from " \
           "acme-models 1.0)" in out, out
    assert "acme_short │ acme │ sequence [1, 32, 8] │ 16 to 64 │" in out, out  # the sizes its description gives
    for said in ("model 'acme_gone' from acme-models 1.0", "model 'acme_function' from acme-models 1.0",
                 "the model name 'resnet18' is a built-in model's"):
        assert f"fusionbench: warning: {said}" in out, said


def test_models_says_a_plugin_whose_module_imports_torch_as_it_loads(
        site: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A plugin importing torch at its module's top runs, and made every command that reads model
    names (validate, report, compare of bundles that never ran it among them) import torch, said
    nowhere. Here torch is imported already: a library of the site's stands for it."""
    from harness.cli.main import main

    monkeypatch.setattr(plugins, "HEAVY_LIBRARIES", ("acme_heavy_library",))
    for module in ("acme_heavy_library", "acme_models.heavy"):  # as in a fresh process: another test's found() loaded them
        monkeypatch.delitem(sys.modules, module, raising=False)
    plugins.found.cache_clear()
    monkeypatch.setenv("COLUMNS", "400")
    assert main(["models", "--family", "acme"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert (f"fusionbench: warning: model 'acme_heavy' from acme-models 1.0 (acme_models.heavy:MODEL, in {site}) imports "
            "acme_heavy_library as its module loads: every fusionbench command that reads model names (run, validate, "
            "report, compare, models) imports it too; import it inside `build`") in out, out
    assert "acme_heavy │ acme │" in out  # it runs
    assert list(plugins.found().heavy) == ["acme_heavy"]  # the example, which imports torch inside `build`, is not said


def test_a_scenarios_pythonpath_that_leaves_out_the_plugins_folder_is_refused_before_anything_runs(
        site: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The plugin's folder on the shell's PYTHONPATH, and `env: [PYTHONPATH=...]` naming another: its
    workers got env:'s value in place of the shell's, and its cell failed `worker exited with code 2
    without an answer (in phase start)`, `unknown model` in the worker's log alone."""
    from harness.cli.main import main
    from harness.run.worker_path import plugins_left_out

    monkeypatch.setenv("PYTHONPATH", str(site))
    elsewhere = tmp_path / "elsewhere"
    scenario = tmp_path / "s.yaml"
    scenario.write_text(f"models: [{{name: {NAME}, input_size: 16}}]\nbackends: [eager]\nscenarios: [SingleStream]\n"
                        f"env: [PYTHONPATH={elsewhere}]\n")
    assert main(["run", str(scenario), "--dry-run", "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == (
        f"fusionbench: error: env: PYTHONPATH={elsewhere} leaves out {site}, on this shell's PYTHONPATH, where this "
        f"process found the model '{NAME}' from acme-models 1.0: each cell's worker gets env:'s PYTHONPATH in place of "
        f"this shell's, and would not find it; add the folder to the value ({elsewhere}:{site}) or leave PYTHONPATH out "
        "of env: (every worker gets this shell's)"), err
    environ = {"PYTHONPATH": str(site)}
    for named in ([f"PYTHONPATH={elsewhere}:{site}"], ["PYTHONPATH"], [], [f"PYTHONPATH={elsewhere}", "OMP_NUM_THREADS=1"]):
        models = [NAME] if named != [f"PYTHONPATH={elsewhere}", "OMP_NUM_THREADS=1"] else ["resnet18"]
        assert plugins_left_out(named, models, ["eager"], environ) == "", named  # kept, or no plugin of the run's there


def test_the_report_names_the_package_each_plugin_model_came_from(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The report's facts named the libraries the backends ran on and never the package the model
    was: two bundles of two versions of it read alike."""
    import json
    import shutil

    from harness.bundle import manifest
    from harness.bundle.reader import load
    from harness.bundle.validate import validate
    from harness.reporting.run_facts import facts

    root = tmp_path / "bundle"
    shutil.copytree(Path(__file__).resolve().parents[1] / "golden" / "v12", root)
    assert "plugin models" not in dict(facts(load(root)))
    header = json.loads((root / "bundle.json").read_text())
    header["model_plugins"] = {NAME: {"distribution": "acme-models", "version": "1.0", "family": "acme",
                                      "entry_point": "acme_models.blocks:CONV_BLOCK", "input_kind": "planes",
                                      "input_size": 16}}
    (root / "bundle.json").write_text(json.dumps(header))
    assert dict(facts(load(root)))["plugin models"] == f"{NAME} from acme-models 1.0 (acme_models.blocks:CONV_BLOCK)"
    # a record of a model the run did not run as a plugin's is found: the facts above name it as one it ran
    header["model_plugins"]["resnet18"] = header["model_plugins"][NAME]
    (root / "bundle.json").write_text(json.dumps(header))
    manifest.write(root)
    problems = validate(root).problems
    assert problems == [f"bundle.json: model_plugins records {NAME!r}, which its scenario does not run",
                        "bundle.json: model_plugins records 'resnet18', a built-in model's name: a run records only "
                        "its plugins' models (a built-in is the zoo's, whatever a plugin names)"], problems


def test_each_bundle_reads_its_plugin_models_by_its_own_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two bundles of one plugin model, from versions that gave it other input sizes (16 and 32), read
    in one process (compare, findings): the last one read stood for both, so the first's cells at
    their own size were labelled `input 16` (compare paired none of them, whichever came first) and
    its stored scenario expanded into cells of the other size, which validate found unlisted."""
    import json
    import shutil

    from harness.bundle.reader import load
    from harness.scenario.cells import expand

    monkeypatch.setattr(sys, "path", [p for p in sys.path if "model-site" not in p])  # the plugin not installed
    plugins.found.cache_clear()
    loaded = []
    for version, size in (("1.0", 16), ("1.1", 32)):
        root = tmp_path / version
        shutil.copytree(Path(__file__).resolve().parents[1] / "golden" / "v12", root)
        header = json.loads((root / "bundle.json").read_text())
        header["model_plugins"] = {NAME: {"distribution": "acme-models", "version": version, "family": "acme",
                                          "entry_point": "acme_models.blocks:CONV_BLOCK", "input_kind": "planes",
                                          "input_size": size}}
        header["scenario"]["models"] = [{"name": NAME, "pretrained": False, "input_size": None}]
        (root / "bundle.json").write_text(json.dumps(header))
        first = header["cells"][0]["id"]
        cell = json.loads((root / "cells" / f"{first}.json").read_text())
        cell["config"]["model"], cell["config"]["input_size"] = {"name": NAME}, size
        (root / "cells" / f"{first}.json").write_text(json.dumps(cell))
        loaded.append(load(root))
    for bundle, size in zip(loaded, (16, 32)):
        assert bundle.records[0].config.model.name == NAME
        assert "input" not in bundle.records[0].config.shown_label  # its model's own size, by its record
        assert {c.config.input_size for c in expand(bundle.header["scenario"], "cpu", bundle.model_plugins)} == {size}


def test_a_plugin_model_says_the_input_sizes_it_takes_and_a_file_giving_another_is_refused(site: Path) -> None:
    """A transformer block's learned positions of 64 steps: a file giving 80 ran, and its cell failed
    inside the run (`The size of tensor a (80) must match the size of tensor b (64)`), where a
    built-in model's size outside INPUT_SIZE_LIMITS is refused as the file is loaded."""
    from harness.scenario.schema import ScenarioFile

    def scenario(size: int) -> dict[str, object]:
        return {"models": [{"name": "acme_short", "input_size": size}], "backends": ["eager"], "scenarios": ["SingleStream"]}

    assert ScenarioFile.model_validate(scenario(64)).models[0].input_size == 64
    with pytest.raises(pydantic.ValidationError) as caught:
        ScenarioFile.model_validate(scenario(80))
    assert "models Value error, [0] acme_short takes input sizes 16 to 64; input_size is 80" in " ".join(str(caught.value).split())
    assert refusal("acme_sizes_wrong").endswith(
        "has input_sizes (8, None): give (smallest, largest), the smallest an int from 16 up, the largest an int from the "
        "smallest up or None (no largest)")
