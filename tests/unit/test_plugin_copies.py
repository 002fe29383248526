"""Copies of a plugin's package that hide one another or run other code than the copy recorded
(harness/models/plugin_copies.py, docs/adding_a_model.md): a copy first on sys.path that registers
no model hides every later copy's models, and a file naming one is told which copy hides it."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator
from pathlib import Path

import pydantic
import pytest

from harness.models import plugins
from harness.scenario.specs import ModelSpec
from tests.model_plugin_site import forget_modules, write_site

NAME = "acme_conv_block"


@pytest.fixture
def fresh() -> Iterator[None]:
    """The plugins read afresh, and the example's modules imported afresh, as in a new process, and
    forgotten after (another test's site holds other modules of that name)."""
    forget_modules()
    plugins.found.cache_clear()
    yield
    forget_modules()
    plugins.found.cache_clear()


def _old_release(site: Path) -> Path:
    """`site` holding a copy of the example's package from before it had models: no entry point."""
    write_site(site, version="0.9")
    (site / "acme_models-0.9.dist-info" / "entry_points.txt").unlink()
    return site


def test_an_earlier_copy_that_registers_no_model_is_named_where_a_file_names_a_model_it_hides(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], fresh: None) -> None:
    """Before, `fusionbench models` did not list the model and a file naming it was refused as an
    unknown model, without a word of the copy that hid it."""
    from harness.cli.main import main

    later = write_site(tmp_path / "venv-site")
    earlier = _old_release(tmp_path / "old-site")
    monkeypatch.syspath_prepend(str(later))
    monkeypatch.syspath_prepend(str(earlier))  # first on sys.path, as PYTHONPATH's folders come first
    told = (f"unknown model '{NAME}': acme-models 1.0 registers it (acme_models.blocks:CONV_BLOCK, in {later}), but "
            f"acme-models 0.9, in {earlier}, registers no model and comes first on sys.path, where Python reads one copy "
            f"of a package, the first, and never the other: take {earlier} off PYTHONPATH, or uninstall that copy")
    with pytest.raises(pydantic.ValidationError) as caught:
        ModelSpec.model_validate({"name": NAME})
    assert caught.value.errors()[0]["msg"].removeprefix("Value error, ") == told
    assert main(["models", "--family", "acme"]) == 2  # no model of the family is listed: the warning is not reached
    monkeypatch.setenv("COLUMNS", "400")
    capsys.readouterr()
    assert main(["models"]) == 0
    assert f"fusionbench: warning: {told}" in " ".join(capsys.readouterr().out.split())


def test_a_copy_registering_no_model_that_comes_after_the_one_that_runs_is_not_named(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh: None) -> None:
    earlier = write_site(tmp_path / "site")
    monkeypatch.syspath_prepend(str(_old_release(tmp_path / "old-site")))
    monkeypatch.syspath_prepend(str(earlier))
    assert ModelSpec.model_validate({"name": NAME}).name == NAME
    assert plugins.found().hidden == {} and plugins.found().shadowed == {}


def _source_checkout(folder: Path) -> Path:
    """`folder` holding the example's modules alone, no metadata: a checkout of the team's package."""
    write_site(folder)
    for info in folder.glob("*.dist-info"):
        for file in info.iterdir():
            file.unlink()
        info.rmdir()
    return folder


def test_a_model_whose_code_this_process_imports_from_its_working_folder_is_refused_naming_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh: None) -> None:
    """`python -m harness.cli run` started in a checkout of the plugin: the working folder first on
    sys.path gave this process the checkout's module (its description planned the cells) and each
    worker, started elsewhere, the installed copy's (its code ran them), the bundle recording the
    installed package; now refused, naming the folder."""
    installed = write_site(tmp_path / "site-packages")
    checkout = _source_checkout(tmp_path / "acme-models")
    monkeypatch.syspath_prepend(str(installed))
    monkeypatch.syspath_prepend(str(checkout))  # Python's sys.path[0] under `python -m`: the working folder
    monkeypatch.chdir(checkout)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    told = (f"model '{NAME}' from acme-models 1.0 (acme_models.blocks:CONV_BLOCK, in {installed}): this process imports "
            f"acme_models from {checkout}, the folder it was started in, which `python -m` puts first on sys.path; no "
            "cell's worker looks there")
    assert plugins.found().broken[NAME].startswith(told) and NAME not in plugins.found().models
    assert plugins.found().broken[NAME].endswith("start fusionbench from another folder (`./run.sh` does), having "
                                                 "installed the copy you mean to run")
    # the same folder on PYTHONPATH, which every worker gets: no longer this process's alone, but still code
    # that is not the copy recorded
    monkeypatch.setenv("PYTHONPATH", str(checkout))
    plugins.found.cache_clear()
    assert plugins.found().broken[NAME] == (
        f"model '{NAME}' from acme-models 1.0 (acme_models.blocks:CONV_BLOCK, in {installed}) would run other code: "
        f"acme_models is imported from {checkout}, a folder before that copy on sys.path that holds no metadata of its "
        f"package, so a bundle would record acme-models 1.0 and run that folder's code: take {checkout} off PYTHONPATH, "
        "or install the copy you mean to run")


def test_a_package_with_its_metadata_in_the_working_folder_is_refused_and_an_editable_install_of_it_runs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh: None) -> None:
    project = write_site(tmp_path / "acme-models")  # a build's metadata left in the checkout, as setuptools leaves it
    monkeypatch.syspath_prepend(str(project))
    monkeypatch.chdir(project)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    assert "the folder it was started in" in plugins.found().broken[NAME]
    # an editable install: its metadata elsewhere names the checkout, through which every worker imports it too
    forget_modules()
    site = tmp_path / "venv-site"
    site.mkdir()
    (project / "acme_models-1.0.dist-info").rename(site / "acme_models-1.0.dist-info")
    (site / "acme_models-1.0.dist-info" / "direct_url.json").write_text(
        f'{{"dir_info": {{"editable": true}}, "url": "{project.as_uri()}"}}')
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.syspath_prepend(str(project))
    plugins.found.cache_clear()
    assert plugins.found().broken == {} and plugins.found().models[NAME].recorded()["code_folder"] == str(project)


def test_a_bare_copy_first_on_sys_path_that_lacks_the_models_module_is_named_in_its_refusal(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh: None) -> None:
    """Before, the refusal read `No module named 'acme_models.blocks'`, naming the installed copy alone."""
    installed = write_site(tmp_path / "site-packages")
    bare = tmp_path / "old-checkout"
    (bare / "acme_models").mkdir(parents=True)
    (bare / "acme_models" / "__init__.py").touch()
    monkeypatch.syspath_prepend(str(installed))
    monkeypatch.syspath_prepend(str(bare))
    assert plugins.found().broken[NAME] == (
        f"model '{NAME}' from acme-models 1.0 (acme_models.blocks:CONV_BLOCK, in {installed}) does not load: "
        f"ModuleNotFoundError: No module named 'acme_models.blocks' (acme_models is imported from {bare}, a folder "
        "before that copy on sys.path: take it off PYTHONPATH)")


NAMESPACE_MODEL = """from harness.models.extra_models import ExtraModel


def build(seed):
    from torch import nn
    return nn.Conv2d(64, 64, 1)


MODEL = ExtraModel("acme", "planes", 16, "a model of a package that fills a namespace", build=build)
"""


def _namespace_sites(tmp_path: Path, init: str | None) -> tuple[Path, Path]:
    """acme-core in one site and acme-vision in another, both filling the package `acme` (`init`: its
    `__init__.py` in each, a pkgutil-style namespace; None: a PEP 420 one, without); acme-vision's
    model, `acme_ns`, is `acme.vision.models:MODEL`."""
    core, vision = tmp_path / "core-site", tmp_path / "vision-site"
    for site, name, module in ((core, "acme_core", "core"), (vision, "acme_vision", "vision")):
        (site / "acme" / module).mkdir(parents=True)
        (site / "acme" / module / "__init__.py").touch()
        if init is not None:
            (site / "acme" / "__init__.py").write_text(init)
        info = site / f"{name}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name.replace('_', '-')}\nVersion: 1.0\n")
    (vision / "acme" / "vision" / "models.py").write_text(NAMESPACE_MODEL)
    (vision / "acme_vision-1.0.dist-info" / "entry_points.txt").write_text(
        "[fusionbench.models]\nacme_ns = acme.vision.models:MODEL\n")
    return core, vision


@pytest.mark.parametrize("init", ['__path__ = __import__("pkgutil").extend_path(__path__, __name__)\n', None],
                         ids=["pkgutil", "pep420"])
def test_a_model_of_a_namespace_package_that_another_package_fills_first_runs_from_its_own_copy(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, init: str | None) -> None:
    """Before, its copy was read from the namespace's top-level package: a pkgutil-style `acme` whose
    `__init__.py` another package's folder, first on sys.path, held was refused as a bare copy run in
    place of acme-vision's ('acme is imported from .../core-site'); a PEP 420 one, with no file, recorded
    no code_folder and its reads of os.environ were not watched."""
    core, vision = _namespace_sites(tmp_path, init)
    monkeypatch.syspath_prepend(str(vision))
    monkeypatch.syspath_prepend(str(core))  # acme-core's copy of `acme` first
    for module in [name for name in sys.modules if name.split(".")[0] == "acme"]:
        monkeypatch.delitem(sys.modules, module)
    plugins.found.cache_clear()
    try:
        assert plugins.found().broken.get("acme_ns") is None
        model = plugins.found().models["acme_ns"]
        assert model.code_folder == str(vision) and model.package_files == str(vision / "acme")
    finally:
        for module in [name for name in sys.modules if name.split(".")[0] == "acme"]:
            del sys.modules[module]
        plugins.found.cache_clear()


def test_a_develop_install_run_in_its_own_folder_runs_where_every_worker_imports_it_from_there_too(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fresh: None) -> None:
    """A `setup.py develop` install: its metadata in the project folder, which a .pth file puts on every
    process's sys.path. Started in that folder (`python -m`, `python -c`), it was refused as code that no
    worker looks at ('the folder it was started in'), though each worker imports it from there too; it is
    still refused where a folder before the .pth's entry holds another copy, which each worker would import."""
    project = write_site(tmp_path / "acme-models")
    monkeypatch.chdir(project)
    monkeypatch.delenv("PYTHONPATH", raising=False)
    monkeypatch.setattr(sys, "path", [str(project), *sys.path, str(project)])  # first as started there; last by the .pth
    importlib.invalidate_caches()
    assert plugins.found().broken == {} and plugins.found().models[NAME].code_folder == str(project)
    installed = write_site(tmp_path / "site-packages")
    monkeypatch.setattr(sys, "path", [str(project), str(installed), *sys.path[1:]])
    forget_modules()
    plugins.found.cache_clear()
    assert "the folder it was started in" in plugins.found().broken[NAME]
