"""The variables a plugin model's own code looks up (harness/models/plugin_reads.py): seen as its
module loads and as its build runs, lower-case names and reads with a default among them; the run
says, as it starts, which of those its module read that this shell sets and no worker gets, and each
cell, which its worker lacked (docs/adding_a_model.md, "Workers and containers")."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.bundle.reader import load
from harness.measure.protocol import WorkerAnswer, WorkerRequest
from harness.models import plugin_reads, plugins, zoo
from harness.run.executors import CellTask, Finished, node_info
from harness.run.isolation import WorkerOutcome
from harness.run.sweep import finished_record
from harness.run.unseen_environment import read_as_loaded, unseen
from tests.model_plugin_site import forget_modules, write_site
from tests.unit.test_last_words import GOLDEN

READER = """import os

from harness.models.extra_models import ExtraModel

MODE = os.environ.get("acme_mode", "fast")  # as the module loads: lower case, a default


def build(seed):
    import torch  # torch looks up variables of its own as it loads: not the plugin's
    from torch import nn

    width = int(os.getenv("ACME_WIDTH", "64"))  # a default: no failure where it is missing
    torch.manual_seed(seed)
    return nn.Conv2d(64, width, 1)


MODEL = ExtraModel("acme", "planes", 16, "reads its width", build=build)
"""


@pytest.fixture
def reader(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    site = write_site(tmp_path, extra_entry_points={"acme_reader": "acme_models.reader:MODEL",
                                                    "acme_reader_too": "acme_models.reader:MODEL"})
    (site / "acme_models" / "reader.py").write_text(READER)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(zoo, "BUILD_READS", [])
    for name in ("acme_mode", "ACME_WIDTH"):
        monkeypatch.delenv(name, raising=False)
    forget_modules()
    plugins.found.cache_clear()
    yield site
    forget_modules()
    plugins.found.cache_clear()


def test_each_look_up_is_seen_with_the_line_that_made_it_and_whether_it_was_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACME_SET", "1")
    monkeypatch.delenv("acme_unset", raising=False)
    with plugin_reads.watched() as reads:
        assert os.environ.get("acme_unset", "default") == "default" and os.getenv("ACME_SET") == "1"
        assert "acme_unset" not in os.environ
        with pytest.raises(KeyError):
            os.environ["acme_unset"]
    assert [(read.name, read.found) for read in reads] == [("acme_unset", False), ("ACME_SET", True), ("acme_unset", False),
                                                           ("acme_unset", False)]
    assert {read.file for read in reads} == {__file__}  # this test's lines, not os's or Mapping's
    assert plugin_reads.by(reads, os.path.dirname(__file__)) == ["ACME_SET", "acme_unset"]
    assert plugin_reads.by(reads, "/elsewhere") == [] and plugin_reads.unset(reads) == ["acme_unset"]
    os.environ.get("acme_after")
    assert len(reads) == 4  # not watched once the block ends


def test_a_run_says_as_it_starts_which_variable_the_plugins_module_reads_that_no_worker_gets(
        reader: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before, a variable read with a default, or in lower case, was said nowhere: each cell ran the default."""
    monkeypatch.setenv("acme_mode", "slow")
    told = read_as_loaded(["acme_reader", "resnet18"], os.environ, [])
    assert told == ["model 'acme_reader' from acme-models 1.0 looks up acme_mode as its module loads, set in this shell, "
                    "which no cell's worker gets: each loads it without it, and runs the plugin's default or fails; add it "
                    "to the scenario's env: (`env: [acme_mode]`, which records its value in each cell)"]
    assert read_as_loaded(["acme_reader"], os.environ, ["acme_mode"]) == []  # env: passes it on
    [stored] = read_as_loaded(["acme_reader"], os.environ, [], stored_scenario=True)
    assert "a resume or a rerun runs the scenario its bundle stores" in stored
    monkeypatch.delenv("acme_mode")
    assert read_as_loaded(["acme_reader"], os.environ, []) == []  # the shell does not set it either


def test_two_models_of_one_package_are_told_once_of_what_its_module_read_as_it_loaded(
        reader: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The read is the package's, made once as its module loaded: a line a model said it twice, word
    for word but the model's name, and a package of ten models said it ten times."""
    monkeypatch.setenv("acme_mode", "slow")
    # acme_conv_block's module is another of the package's: a worker of its cells loads reader.py too (every
    # plugin's entry point is loaded to know the models), and reads acme_mode
    assert read_as_loaded(["acme_reader", "acme_reader_too", "resnet18", "acme_conv_block"], os.environ, []) == [
        "models 'acme_reader', 'acme_reader_too' and 'acme_conv_block' from acme-models 1.0 look up acme_mode as their "
        "package loads, set in this shell, which no cell's worker gets: each loads it without it, and runs the plugin's "
        "default or fails; add it to the scenario's env: (`env: [acme_mode]`, which records its value in each cell)"]


def test_a_variable_the_runs_start_says_no_worker_gets_is_said_once(reader: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A package that read OMP_NUM_THREADS as it loaded was said to read a variable 'no cell's worker
    gets', which under --jobs each gets with its slot's own value, after the run's line of variables
    no cell sees had named it: a figure-moving variable is that line's alone."""
    (reader / "acme_models" / "reader.py").write_text(READER.replace(
        "MODE = ", "THREADS = os.environ.get('OMP_NUM_THREADS')\nMODE = "))
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    monkeypatch.setenv("acme_mode", "slow")
    told = read_as_loaded(["acme_reader"], os.environ, [])
    assert len(told) == 1 and "looks up acme_mode as its module loads" in told[0], told
    assert "OMP_NUM_THREADS" in unseen(os.environ, [])  # the run's own line says it
    monkeypatch.delenv("acme_mode")
    assert read_as_loaded(["acme_reader"], os.environ, []) == []


def test_a_cell_whose_plugin_read_a_variable_its_worker_lacked_says_so_though_it_ran(
        reader: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker's side: its build looks up ACME_WIDTH, which it was not given, and runs at the
    default width; the parent, whose shell sets it, warns on the valid cell."""
    zoo.build_model("acme_reader", pretrained=False, seed=0, device="cpu", dtype="fp32")
    assert zoo.unset_plugin_reads("acme_reader") == ["ACME_WIDTH", "acme_mode"]
    assert zoo.unset_plugin_reads("resnet18") == []
    golden = next(r for r in load(GOLDEN).records if r.status == "valid")
    config = golden.config
    task = CellTask(cell_id="0123456789abcdef", label=config.shown_label,
                    request=WorkerRequest(cell=config, artifact_dir=str(tmp_path)), artifacts=tmp_path,
                    timeout_s=60, memory_limit_bytes=None, env_names=["acme_mode"], scratch_env={}, device="cpu")
    answer = WorkerAnswer(status="valid", metrics=golden.metrics, phases_s=dict(golden.phases_s),
                          environment={"variables": {"acme_mode": "slow"}, "plugin_reads_unset": ["ACME_WIDTH", "acme_mode"]})
    monkeypatch.setenv("ACME_WIDTH", "128")
    monkeypatch.setenv("acme_mode", "slow")
    base = {"id": task.cell_id, "label": config.shown_label, "config": config.recorded()}
    record = finished_record(base, Finished(task, WorkerOutcome(answer, 0, False, "passes", 2.0), node_info(None)))
    assert record["status"] == "valid", record["reasons"]
    assert record["warnings"] == [
        "the plugin model's code looked up ACME_WIDTH in its worker's environment, which did not have it, though this "
        "shell sets it: the cell ran with what the plugin does without it (a default), not with this shell's value; add "
        "it to the scenario's env: (`env: [ACME_WIDTH]`, which records its value in each cell)"]
    # a failed cell whose reason names one in lower case: the hint goes after the reason, as for a capital's
    failed = WorkerAnswer(status="failed", reasons=["build: KeyError: 'acme_dir' (at reader.py:3)"],
                          environment={"plugin_reads_unset": ["acme_dir"]})
    monkeypatch.setenv("acme_dir", "/data")
    record = finished_record(base, Finished(task, WorkerOutcome(failed, 0, False, "build", 2.0), node_info(None)))
    assert record["reasons"] == ["build: KeyError: 'acme_dir' (at reader.py:3); acme_dir is set in this shell but not "
                                 "passed to workers: add it to the scenario's env: (`env: [acme_dir]`, which records its "
                                 "value in each cell)"] and record["warnings"] == []


def test_a_walk_over_the_whole_environment_is_no_look_up_of_each_variable(
        reader: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before, a module that copied the environment as it loaded (`dict(os.environ)`, `os.environ.copy()`,
    `{**os.environ}`, a subprocess's `env=`) was said, as the run started, to look up every variable of
    the shell that no worker gets (ACME_TOKEN, the shell's own): each key of the walk was read as a look-up."""
    (reader / "acme_models" / "reader.py").write_text(READER.replace(
        "MODE = ", "CHILD_ENV = dict(os.environ)\nCOPIED = {**os.environ.copy(), 'ACME_CHILD': '1'}\n"
        "PICKED = [os.environ[key] for key in os.environ if key == 'ACME_PICKED']\nMODE = "))
    monkeypatch.setenv("ACME_TOKEN", "secret")
    monkeypatch.setenv("ACME_PICKED", "1")
    monkeypatch.setenv("acme_mode", "slow")
    told = read_as_loaded(["acme_reader"], os.environ, [])
    assert len(told) == 1 and "looks up ACME_PICKED, acme_mode as its module loads" in told[0], told
    with plugin_reads.watched() as reads:
        assert dict(os.environ)["ACME_TOKEN"] == "secret" and len(os.environ.copy()) == len(os.environ)
        assert [os.environ[key] for key in os.environ if key == "ACME_TOKEN"] == ["secret"]
    assert [(read.name, read.found) for read in reads] == [("ACME_TOKEN", True)]  # the last line's look-up alone
