"""The literature suites' models, end to end: every model of scenarios/suite-*.yaml (read from the
files) builds and runs one eager cell through the real CLI at a tiny size, in one run, so a model
the zoo can no longer build, or a suite file naming one it lacks, fails here in about a minute
rather than an hour into the suite. The backends' handling of each model is what the suites
themselves measure (docs/results); which backend fails which model, and why, is in their bundles."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness.models.extra_models import EXTRA_MODELS

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
SUITES = sorted((REPO / "scenarios").glob("suite-*.yaml"))
#: The smallest input each model takes where its own is large (a side in pixels, tokens, steps or
#: samples): ViT and MaxViT need 224, Inception 96, AlexNet 64; the rest of torchvision's run at 32.
TINY = {"alexnet": 64, "inception_v3": 96, "vit_b_16": 224, "maxvit_t": 224, "bert_base": 16, "lstm_10x256": 16,
        "wav2vec2_base": 800}
TORCHVISION_TINY = 32


def _models() -> list[str]:
    names: list[str] = []
    for suite in SUITES:
        for model in yaml.safe_load(suite.read_text())["models"]:
            name = model if isinstance(model, str) else model["name"]
            if name not in names:
                names.append(name)
    return names


def _size(name: str) -> int:
    if name in TINY:
        return TINY[name]
    return EXTRA_MODELS[name].input_size if name in EXTRA_MODELS else TORCHVISION_TINY


def test_there_are_three_suites_and_each_runs_every_backend_on_and_off() -> None:
    assert [s.name for s in SUITES] == ["suite-fusionbench-vision.yaml", "suite-global-analysis.yaml",
                                        "suite-nlp-speech.yaml"]
    for suite in SUITES:
        data = yaml.safe_load(suite.read_text())
        names = {b if isinstance(b, str) else b["name"] for b in data["backends"]}
        assert names == {"eager", "inductor", "onnxruntime", "tvm", "tensorrt"}, suite.name


def test_every_suite_model_runs_one_cell_end_to_end(tmp_path: Path) -> None:
    models = _models()
    missing = {name for name in models if name in EXTRA_MODELS
               for package in EXTRA_MODELS[name].requires if importlib.util.find_spec(package) is None}
    scenario = {
        "description": "every literature suite model, eager, tiny",
        "device": "cpu",
        "models": [{"name": name, "input_size": _size(name)} for name in models],
        "backends": ["eager"],
        "scenarios": ["Offline"],  # one query of the samples: LoadGen's shortest valid run
        "batch_sizes": {"cpu": [1]},
        "inputs": {"samples": 2},
        "loadgen": {"min_duration_s": 0.05},
        "timing": {"warmup_iters": 1, "min_iters": 2, "min_time_s": 0.0, "max_warmup_s": 0.2, "repetitions": 2},
        "passes": {"memory_iters": 1, "profile_iters": 1},
    }
    path = tmp_path / "suites.yaml"
    path.write_text(yaml.safe_dump(scenario, sort_keys=False))
    done = subprocess.run([sys.executable, "-m", "harness.cli", "run", str(path), "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=900, cwd=REPO)
    assert (tmp_path / "out").is_dir(), done.stdout[-3000:] + done.stderr[-3000:]
    (bundle,) = (tmp_path / "out").iterdir()
    cells = [json.loads(p.read_text()) for p in (bundle / "cells").glob("*.json")]
    assert sorted(c["config"]["model"]["name"] for c in cells) == sorted(models)
    for cell in cells:
        name = cell["config"]["model"]["name"]
        if name in missing:  # a package the model needs is not installed: skipped, saying which
            assert cell["status"] == "skipped" and "transformers" in cell["reasons"][0]
            continue
        assert cell["status"] == "valid", (name, cell["reasons"], cell.get("log_tail"))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
