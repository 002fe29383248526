"""Copies of a plugin's package that hide one another or run other code than the copy recorded
(harness/models/plugin_copies.py, docs/adding_a_model.md): a copy first on sys.path that registers
no model hides every later copy's models, and a file naming one is told which copy hides it."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pydantic
import pytest

from harness.models import plugins
from harness.scenario.specs import ModelSpec
from tests.model_plugin_site import write_site

NAME = "acme_conv_block"


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The plugins read afresh, and the example's modules imported afresh, as in a new process, and
    forgotten after (another test's site holds other modules of that name)."""
    for module in [m for m in sys.modules if m.split(".")[0] == "acme_models"]:
        monkeypatch.delitem(sys.modules, module)
    plugins.found.cache_clear()
    yield
    for module in [m for m in sys.modules if m.split(".")[0] == "acme_models"]:
        del sys.modules[module]
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
