"""The zoo beyond torchvision: pattern micro-models and the literature suites' non-vision models."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from harness.errors import ConfigError, HarnessError
from harness.models import zoo
from harness.models.catalog import CLASSIFICATION_MODELS, all_models
from harness.models.extra_models import EXTRA_MODELS, input_shape
from harness.scenario.loading import parse

torch = pytest.importorskip("torch")


def test_the_catalogue_lists_every_model_once() -> None:
    models = all_models()
    assert set(models) == set(CLASSIFICATION_MODELS) | set(EXTRA_MODELS)
    assert not set(CLASSIFICATION_MODELS) & set(EXTRA_MODELS)
    assert {name for name, (family, _) in models.items() if family == "pattern"} == {
        "pattern_conv_bn_relu", "pattern_dwconv_bn_relu", "pattern_conv_bias_act", "pattern_bn_act",
        "pattern_matmul_relu", "pattern_conv_relu_conv", "pattern_rnn_cell", "pattern_lstm_cell"}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EXTRA_MODELS))
def test_each_model_builds_and_runs_on_its_inputs(name: str) -> None:
    for package in EXTRA_MODELS[name].requires:
        if importlib.util.find_spec(package) is None:
            pytest.skip(f"{name} needs {package}, which is not installed")
    size = min(EXTRA_MODELS[name].input_size, 4000)  # a shorter clip keeps wav2vec2 quick
    model = zoo.build_model(name, pretrained=False, seed=0, device="cpu", dtype="fp32")
    samples = zoo.make_samples(2, model=name, input_size=size, device="cpu", dtype="fp32")
    assert [tuple(s.shape) for s in samples] == [input_shape(EXTRA_MODELS[name], size)] * 2
    batch = torch.cat(samples)
    assert batch.dtype == (torch.int64 if EXTRA_MODELS[name].input_kind == "tokens" else torch.float32)
    with torch.no_grad():
        first, again = model(batch), model(batch)
    assert torch.isfinite(first).all() and torch.equal(first, again)
    rebuilt = zoo.build_model(name, pretrained=False, seed=0, device="cpu", dtype="fp32")
    with torch.no_grad():
        assert torch.equal(rebuilt(batch), first), "the same seed must give the same weights"


def test_pattern_batch_norms_have_statistics_that_matter() -> None:
    model = zoo.build_model("pattern_conv_bn_relu", pretrained=False, seed=0, device="cpu", dtype="fp32")
    bn = model[1]
    assert bn.running_mean.abs().max() > 0.05 and (bn.running_var - 1).abs().max() > 0.05


def test_a_missing_package_is_a_reason_not_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "transformers" else real(name, *a))
    reason = zoo.missing_requirement("bert_base")
    assert reason == "model bert_base needs the Python package 'transformers', which is not installed (pip install transformers)"
    with pytest.raises(HarnessError, match="needs the Python package 'transformers'"):
        zoo.build_model("bert_base", pretrained=False, seed=0, device="cpu", dtype="fp32")
    assert zoo.missing_requirement("pattern_bn_act") is None


def test_folder_inputs_and_pretrained_weights_are_for_torchvision_models_only() -> None:
    with pytest.raises(HarnessError, match="takes synthetic inputs"):
        zoo.make_samples(2, model="pattern_bn_act", input_size=16, folder=Path("images"), device="cpu", dtype="fp32")
    with pytest.raises(ConfigError, match="pattern_bn_act has no pretrained weights"):
        parse(b"models: [{name: pattern_bn_act, pretrained: true}]\nbackends: [eager]\nscenarios: Offline\n", "f.yaml")
