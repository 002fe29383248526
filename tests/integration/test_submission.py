"""From a run to a checked submission: the accuracy run end to end through the CLI and LoadGen on
images the test draws and labels itself, and `pack`'s tree through MLCommons' own submission
checker (tools/submission of mlcommons/inference, run where it is, never copied here)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.bundle import manifest
from harness.bundle.reader import load
from harness.reporting.pack import pack
from tests.labelled_images import draw, relabel
from tests.unit.test_pack import MLPERF, SYSTEM_INFO

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
# Where the checker is looked for: a checkout's tools/submission folder (docs/submitting.md says how
# to put it there).
CHECKER = Path(os.environ.get("FUSIONBENCH_MLPERF_CHECKER",
                              Path.home() / ".cache/fusionbench/mlperf-inference/tools/submission"))
# The errors the checker gives every tree made here: docs/submitting.md, "What the checker says".
MIN_DURATION = "Test duration less than 600s"
DATASET_SIZE = "accurcy run does not cover all dataset"  # sic: the checker's own spelling


def checker() -> Path:
    if not (CHECKER / "submission_checker" / "main.py").exists():
        pytest.skip(f"MLCommons' submission checker is not at {CHECKER} (set FUSIONBENCH_MLPERF_CHECKER to the "
                    "tools/submission folder of an mlcommons/inference checkout)")
    return CHECKER


def check(tree: Path, *flags: str) -> tuple[int, list[str]]:
    """The checker's exit status and its ERROR lines (the summary line left out)."""
    done = subprocess.run([sys.executable, "-m", "submission_checker.main", "--input", str(tree), "--version", "v6.1",
                           "--submitter", "Acme", *flags], capture_output=True, text=True, cwd=checker(), timeout=600)
    errors = [line for line in (done.stdout + done.stderr).splitlines()
              if " ERROR] " in line and "SUMMARY" not in line and "checks failed" not in line.lower()
              and "NoResults" not in line]
    return done.returncode, errors


def fusionbench(*args: str, timeout: int = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO)


def test_the_open_division_tree_passes_the_checker_but_for_the_documented_errors(tmp_path: Path) -> None:
    checker()
    pack(load(MLPERF), tmp_path / "sub", org="Acme", system_base="box", system_info=SYSTEM_INFO)
    status, errors = check(tmp_path / "sub")
    assert status == 1
    # the golden bundle was run with short overrides of mlperf.conf, and on 1024 drawn images
    assert len(errors) == 2 and MIN_DURATION in errors[0] and DATASET_SIZE in errors[1], errors


def test_a_system_the_submitter_did_not_describe_fails_the_checker_on_those_fields(tmp_path: Path) -> None:
    checker()
    packed = pack(load(MLPERF), tmp_path / "sub", org="Acme", system_base="box")
    _, errors = check(tmp_path / "sub", "--skip-dataset-size-check")
    empty = {m.group(1) for line in errors if (m := re.search(r"field (\S+) requires a meaningful response", line))}
    assert empty and empty <= set(packed.to_fill["box_eager-fusion-on_fp32"])


@pytest.mark.skipif(os.environ.get("FUSIONBENCH_MLPERF_OFFICIAL") != "1",
                    reason="an official-length run takes over 10 minutes; set FUSIONBENCH_MLPERF_OFFICIAL=1")
def test_an_official_run_passes_the_checker(tmp_path: Path) -> None:
    checker()
    draw(tmp_path / "images", 1024)
    scenario = tmp_path / "official.yaml"
    scenario.write_text(
        "models: [{name: mobilenet_v3_small, input_size: 32}]\nbackends: [eager]\nscenarios: [Offline]\n"
        "batch_sizes: {cpu: [8]}\ninputs: {source: folder, path: images, labels: val_map.txt, samples: 1024}\n"
        "loadgen: {profile: mlperf, accuracy: true}\nlimits: {cell_timeout_s: 3000}\n")
    done = fusionbench("run", str(scenario), "--out", str(tmp_path / "out"), timeout=3600)
    assert done.returncode == 0, done.stdout + done.stderr
    (bundle,) = (tmp_path / "out").iterdir()
    (tmp_path / "info.json").write_text(json.dumps(SYSTEM_INFO))
    packed = fusionbench("pack", str(bundle), "--org", "Acme", "--out", str(tmp_path / "sub"),
                         "--system-info", str(tmp_path / "info.json"))
    assert packed.returncode == 0, packed.stderr
    status, errors = check(tmp_path / "sub", "--skip-dataset-size-check")
    assert status == 0 and errors == [], errors


def test_accuracy_run_scores_the_models_own_answers_end_to_end(tmp_path: Path) -> None:
    """Images labelled with what the model answers for three in four of them, and a wrong class for
    every fourth: the run must score exactly 75%."""
    import torch

    from harness.models import zoo

    folder = draw(tmp_path / "images", 32)
    model = zoo.build_model("mobilenet_v3_small", pretrained=False, seed=0, device="cpu", dtype="fp32")
    samples = zoo.make_samples(32, model="mobilenet_v3_small", input_size=64, folder=folder, labels="val_map.txt",
                               device="cpu", dtype="fp32")
    with torch.no_grad():
        answers = [int(model(sample).argmax()) for sample in samples]
    relabel(folder, [a if k % 4 else (a + 1) % 1000 for k, a in enumerate(answers)])
    scenario = tmp_path / "accuracy.yaml"
    scenario.write_text(
        "models: [{name: mobilenet_v3_small, input_size: 64}]\nbackends: [eager]\nscenarios: [Offline]\n"
        "batch_sizes: {cpu: [4]}\ninputs: {source: folder, path: images, labels: val_map.txt, samples: 32}\n"
        "loadgen: {min_duration_s: 0.3, accuracy: true}\ntiming: {min_time_s: 0.1, max_warmup_s: 0.5}\n")
    done = fusionbench("run", str(scenario), "--out", str(tmp_path / "out"))
    assert done.returncode == 0, done.stdout + done.stderr
    (bundle,) = (tmp_path / "out").iterdir()
    (cell_file,) = (bundle / "cells").glob("*.json")
    cell = json.loads(cell_file.read_text())
    assert cell["metrics"]["accuracy"] == {"top1_percent": 75.0, "good": 24, "total": 32, "log_dir": "loadgen/accuracy",
                                           "labels": "labels.txt"}
    text = (cell_file.with_suffix("") / "loadgen/accuracy/accuracy.txt").read_text()
    assert text == "accuracy=75.000%, good=24, total=32\n"
    validated = fusionbench("validate", str(bundle))
    assert validated.returncode == 0, validated.stdout + validated.stderr
    against = fusionbench("validate", str(bundle), "--labels", str(folder / "val_map.txt"))
    assert against.returncode == 0 and "1 accuracy run(s) scored against" in against.stdout, against.stdout + against.stderr
    # A forger who makes the record and accuracy.txt agree on a better score is caught by the labels kept.
    cell["metrics"]["accuracy"].update(top1_percent=100.0, good=32)
    cell_file.write_text(json.dumps(cell))
    (cell_file.with_suffix("") / "loadgen/accuracy/accuracy.txt").write_text("accuracy=100.000%, good=32, total=32\n")
    manifest.write(bundle)
    forged = fusionbench("validate", str(bundle))
    assert forged.returncode == 1 and "its log scores 24 against its labels" in forged.stdout, forged.stdout
    # One who forges the kept labels too (each the class the model answered) is consistent within the
    # bundle; only the data set's own labels file finds it.
    (cell_file.with_suffix("") / "loadgen/accuracy/labels.txt").write_text("".join(f"{a}\n" for a in answers))
    manifest.write(bundle)
    assert fusionbench("validate", str(bundle)).returncode == 0
    caught = fusionbench("validate", str(bundle), "--labels", str(folder / "val_map.txt"))
    assert caught.returncode == 1, caught.stdout + caught.stderr
    assert f"labels.txt: sample 0 is class {answers[0]}, " in caught.stdout, caught.stdout
    assert "but its log scores 24 against" in caught.stdout and "(75.000%)" in caught.stdout, caught.stdout
    bad = fusionbench("validate", str(bundle), "--labels", str(folder))
    assert bad.returncode == 2 and bad.stderr.startswith("fusionbench: error: --labels:"), bad.stderr
