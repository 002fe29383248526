"""The example out-of-tree plugin (examples/fusionbench-torchscript), pip-installed by
tests/conftest.py, found through its entry point and run through the real CLI. `backends` is
asked once, for the built-in backends and the plugin alike: each call probes every backend
(TVM's and ONNX Runtime's imports among them)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.bundle import manifest
from tests import pip_sites
from tests.integration.test_cli_end_to_end import REPO, cells_of, fusionbench, only_bundle
from tests.model_plugin_site import write_site

pytestmark = pytest.mark.slow
MODEL = "acme_conv_block"  # docs/adding_a_model.md's


def test_backends_lists_the_built_in_backends_and_the_plugin_with_their_versions() -> None:
    done = fusionbench("backends", "--device", "cpu", "--json")
    assert done.returncode == 0, done.stderr
    backends = json.loads(done.stdout)
    assert backends["device"] == "cpu"
    assert backends["backends"]["eager"]["available"] and backends["backends"]["eager"]["versions"]["torch"]
    plugin = backends["backends"]["torchscript"]
    assert plugin["available"], plugin
    assert plugin["versions"]["fusionbench-torchscript"] == "0.1.0"


@pytest.fixture(scope="module")
def plugin_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundle of a run of eager and the plugin, fusion on and off, through the CLI. resnet18 at
    32 pixels, as the other tests run it: its 20 conv+bn pairs and its kernels are those of any size,
    and the run took about 11 CPU-s where at 64 it took 14.5. Beside it, one eager cell of the model
    plugin of docs/adding_a_model.md, its package on this run's PYTHONPATH alone, and an older copy of it
    after it there, which never loads (what the run printed is kept beside the bundle's folder)."""
    scenario = tmp_path_factory.mktemp("plugin") / "plugin.yaml"
    site = write_site(scenario.parent / "model-site")
    older = write_site(scenario.parent / "older-model-site", version="0.9")
    scenario.write_text(
        f"models: [{{name: resnet18, input_size: 32}}, {{name: {MODEL}, input_size: 16}}]\n"
        "backends:\n"
        "  - eager\n"
        "  - {name: torchscript, fusion: [on, off], models: [resnet18]}\n"
        "scenarios: [SingleStream]\n"
        "loadgen: {min_duration_s: 0.5}\n"
        "timing: {min_time_s: 0.2, max_warmup_s: 0.5, repetitions: 2}\n"
        "passes: {memory_iters: 1, profile_iters: 1}\n"
        # one thread a cell: on cores another test keeps busy, two threads wait for each other at
        # every operator (an eager cell took 30-60 CPU-seconds instead of about 12)
        "env: [OMP_NUM_THREADS=1]\n"
    )
    out = scenario.parent / "results"
    with_site = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(site), str(older),
                                                                            os.environ.get("PYTHONPATH"))))}
    done = subprocess.run([sys.executable, "-m", "harness.cli", "run", str(scenario), "--out", str(out), "--device", "cpu"],
                          capture_output=True, text=True, timeout=900, cwd=REPO, env=with_site)
    assert done.returncode == 0, done.stdout + done.stderr
    (out / "run.out").write_text(done.stdout + done.stderr)
    return only_bundle(out)


def test_plugin_runs_fusion_on_and_off_through_the_cli(plugin_run: Path) -> None:
    """The backend plugin's cells; and the model plugin's eager cell, valid, its package recorded in
    bundle.json, and the bundle valid where the model plugin is not installed (this process's
    PYTHONPATH lacks it)."""
    by_model = {c["config"]["model"]["name"]: c for c in cells_of(plugin_run).values() if c["config"]["backend"] == "eager"}
    assert by_model[MODEL]["status"] == "valid", (by_model[MODEL]["reasons"], by_model[MODEL].get("log_tail"))
    recorded = json.loads((plugin_run / "bundle.json").read_text())["model_plugins"]
    assert recorded == {MODEL: {"distribution": "acme-models", "version": "1.0", "entry_point": "acme_models.blocks:CONV_BLOCK",
                                "family": "acme", "input_kind": "planes", "input_size": 16,
                                "code_folder": str(plugin_run.parents[1] / "model-site")}}  # the copy whose code ran
    # the copy that ran, and the older one behind it, said once as the run started (it ran without a word)
    said = " ".join((plugin_run.parent / "run.out").read_text().split())
    older = plugin_run.parent.parent / "older-model-site"
    assert said.count(f"fusionbench: warning: model '{MODEL}' runs from acme-models 1.0 (acme_models.blocks:CONV_BLOCK, in "
                      f"{plugin_run.parent.parent / 'model-site'}), the copy first on sys.path; acme-models 0.9 "
                      f"(acme_models.blocks:CONV_BLOCK, in {older}) is installed too and never loads") == 1, said
    done = fusionbench("validate", str(plugin_run))
    assert done.returncode == 0, done.stdout + done.stderr
    cells = {(c["config"]["backend"], c["config"]["variant"]["fusion"]): c for c in cells_of(plugin_run).values()
             if c["config"]["model"]["name"] == "resnet18"}
    for key, cell in cells.items():
        assert cell["status"] == "valid", (key, cell["reasons"], cell.get("log_tail"))
    on, off = cells[("torchscript", "on")]["metrics"], cells[("torchscript", "off")]["metrics"]
    assert on["fusion_report"]["fusion_count"] == 20  # every conv+bn pair of resnet18 folded
    assert off["fusion_report"]["fusion_count"] == 0
    assert off["kernels"]["kernels_per_inference"] > on["kernels"]["kernels_per_inference"]
    assert cells[("torchscript", "on")]["environment"]["backend_versions"]["fusionbench-torchscript"] == "0.1.0"


def test_a_resume_where_the_plugin_is_not_installed_is_refused_naming_its_package(plugin_run: Path,
                                                                                   tmp_path: Path) -> None:
    """Resumed in a shell without the plugin, its cells left to run were recorded skipped for good
    ("unknown backend 'torchscript'; ... pip install fusionbench-torchscript==0.1.0"), exit 0 and the
    bundle complete, where a resume under another version of it is refused. `run --resume
    --dry-run` says the same; a resume whose --only leaves the plugin's cells out is not refused."""
    root = tmp_path / "run"
    shutil.copytree(plugin_run, root)
    for cell in cells_of(root).values():
        if (cell["config"]["backend"] in ("torchscript", "eager") and cell["config"]["variant"]["fusion"] == "on"
                and cell["config"]["model"]["name"] == "resnet18"):
            (root / "cells" / f"{cell['id']}.json").unlink()
            shutil.rmtree(root / "cells" / cell["id"])
    manifest.write(root)
    before = {p: p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
    site = str(pip_sites.shared_dir() / "plugin-site")  # type: ignore[operator]
    without = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != site)}

    def resume(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "harness.cli", "run", "--resume", str(root), *args],
                              capture_output=True, text=True, timeout=300, cwd=REPO, env=without)

    for args in ((), ("--dry-run",)):
        done = resume(*args)
        assert done.returncode == 2, (args, done.stdout + done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr, done.stderr
        assert (f"--resume {root}: 1 cell(s) left to run are of backend 'torchscript', which the run had when it "
                "started and no package here registers (unknown backend 'torchscript'; registered: ") in done.stderr
        assert done.stderr.rstrip().endswith(
            "the run that made this bundle had it from fusionbench-torchscript 0.1.0: pip install "
            "fusionbench-torchscript==0.1.0"), done.stderr
        assert {p: p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()} == before, args
    done = resume("--only", "backend=eager", "--dry-run")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 of 1 cell(s) would run" in " ".join(done.stdout.split()), done.stdout
    # a rerun here, where neither plugin is installed, is refused naming the model's package first
    done = subprocess.run([sys.executable, "-m", "harness.cli", "rerun", str(plugin_run), "--dry-run"],
                          capture_output=True, text=True, timeout=300, cwd=REPO, env=without)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stdout + done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        f"fusionbench: error: cannot rerun {plugin_run}: its model '{MODEL}' came from acme-models 1.0 "
        "(acme_models.blocks:CONV_BLOCK) and no package here provides it: pip install acme-models==1.0"), done.stderr


def test_a_plugin_model_reading_a_variable_of_the_shell_fails_each_cell_saying_how_to_pass_it_on(tmp_path: Path) -> None:
    """A model whose build reads `os.environ["ACME_WEIGHTS"]`, set in the shell that runs fusionbench:
    found and planned, and its cell failed `build: KeyError: 'ACME_WEIGHTS' (at ...)`, the worker's
    environment a whitelist (docs/adding_a_model.md, "Workers and containers") unsaid. The value,
    never passed on, is nowhere in the bundle."""
    site = write_site(tmp_path / "model-site", extra_entry_points={"acme_weighted": "acme_models.weighted:MODEL"})
    (site / "acme_models" / "weighted.py").write_text(
        "import dataclasses\nimport os\n\nfrom acme_models.blocks import CONV_BLOCK, build_conv_block\n\n\n"
        "def build(seed):\n    os.listdir(os.environ['ACME_WEIGHTS'])  # where its weights would be\n"
        "    return build_conv_block(seed)\n\n\nMODEL = dataclasses.replace(CONV_BLOCK, build=build)\n")
    scenario = tmp_path / "weighted.yaml"
    scenario.write_text("models: [{name: acme_weighted, input_size: 16}]\nbackends: [eager]\nscenarios: [SingleStream]\n"
                        "env: [OMP_NUM_THREADS=1]\n")
    weights = tmp_path / "acme-weights"
    weights.mkdir()
    shell = {**os.environ, "ACME_WEIGHTS": str(weights),
             "PYTHONPATH": os.pathsep.join(filter(None, (str(site), os.environ.get("PYTHONPATH"))))}
    done = subprocess.run([sys.executable, "-m", "harness.cli", "run", str(scenario), "--out", str(tmp_path / "results"),
                           "--device", "cpu"], capture_output=True, text=True, timeout=600, cwd=REPO, env=shell)
    assert done.returncode == 1, done.stdout + done.stderr
    bundle = only_bundle(tmp_path / "results")
    [cell] = cells_of(bundle).values()
    assert cell["status"] == "failed" and cell["reasons"] == [
        f"build: KeyError: 'ACME_WEIGHTS' (at {site / 'acme_models' / 'weighted.py'}:8); ACME_WEIGHTS is set in this "
        "shell but not passed to workers: add it to the scenario's env: (`env: [ACME_WEIGHTS]`, which records its value "
        "in each cell)"], cell["reasons"]
    assert "ACME_WEIGHTS is set in this shell but not passed to workers" in " ".join(done.stdout.split())
    assert not [p for p in bundle.rglob("*") if p.is_file() and str(weights) in p.read_text(errors="replace")]


def test_a_forward_edited_at_the_same_version_is_compiled_afresh_and_valid(tmp_path: Path) -> None:
    """The usual loop of a plugin's author: run, edit the model's forward in place (an editable
    install; here the site's file), run again without bumping the version. The second run's ONNX
    Runtime cell loaded the export of the old forward (`prepare_cache: warm`) and was invalid
    (`output differs from eager: max abs error 0.833`, where the edit made a relu a sigmoid); the
    cache key now holds a digest of the package's files, so it exports afresh and is valid."""
    site = write_site(tmp_path / "model-site")
    scenario = tmp_path / "edit.yaml"
    scenario.write_text(f"models: [{{name: {MODEL}, input_size: 16}}]\nbackends: [eager, {{name: onnxruntime, fusion: [on]}}]\n"
                        "scenarios: [SingleStream]\nloadgen: {min_duration_s: 0.2}\n"
                        "timing: {min_time_s: 0.1, max_warmup_s: 0.2, repetitions: 2}\n"
                        "passes: {memory_iters: 1, profile_iters: 1}\nenv: [OMP_NUM_THREADS=1]\n")
    shell = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(site), os.environ.get("PYTHONPATH"))))}

    def onnxruntime_cell(out: Path) -> dict:
        done = subprocess.run([sys.executable, "-m", "harness.cli", "run", str(scenario), "--out", str(out), "--device",
                               "cpu", "--cache-dir", str(tmp_path / "cache")], capture_output=True, text=True,
                              timeout=600, cwd=REPO, env=shell)
        assert done.returncode == 0, done.stdout + done.stderr
        [cell] = [c for c in cells_of(only_bundle(out)).values() if c["config"]["backend"] == "onnxruntime"]
        return cell

    assert onnxruntime_cell(tmp_path / "first")["metrics"]["prepare_cache"] == "cold"
    blocks = site / "acme_models" / "blocks.py"
    blocks.write_text(blocks.read_text().replace("nn.ReLU()", "nn.Sigmoid()"))
    edited = onnxruntime_cell(tmp_path / "edited")
    assert edited["status"] == "valid" and edited["metrics"]["prepare_cache"] == "cold", (edited["status"], edited["reasons"])
