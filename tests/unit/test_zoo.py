"""The zoo: its static catalogue matches torchvision; models are seeded; folder inputs go through
the model's own preprocessing; pretrained weights that cannot be fetched give a clear error."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torchvision
from PIL import Image

from harness.errors import HarnessError
from harness.models import zoo
from harness.models.catalog import CLASSIFICATION_MODELS, INPUT_SIZE_FLOOR, INPUT_SIZE_LIMITS


def test_catalog_matches_installed_torchvision() -> None:
    assert sorted(CLASSIFICATION_MODELS) == sorted(torchvision.models.list_models(module=torchvision.models))
    weights = torchvision.models.get_model_weights("efficientnet_b3").DEFAULT
    assert CLASSIFICATION_MODELS["efficientnet_b3"][1] == weights.transforms().crop_size[0]


@pytest.mark.slow
def test_random_weights_are_seeded() -> None:
    a = zoo.build_model("resnet18", pretrained=False, seed=3, device="cpu", dtype="fp32")
    b = zoo.build_model("resnet18", pretrained=False, seed=3, device="cpu", dtype="fp32")
    c = zoo.build_model("resnet18", pretrained=False, seed=4, device="cpu", dtype="fp32")
    assert torch.equal(a.conv1.weight, b.conv1.weight) and not torch.equal(a.conv1.weight, c.conv1.weight)
    assert not a.training
    assert zoo.build_model("resnet18", pretrained=False, seed=0, device="cpu", dtype="bf16").fc.weight.dtype == torch.bfloat16


def test_synthetic_samples() -> None:
    samples = zoo.make_samples(3, seed=1, model="resnet18", input_size=40, device="cpu", dtype="fp32")
    again = zoo.make_samples(3, seed=1, model="resnet18", input_size=40, device="cpu", dtype="fp32")
    assert len(samples) == 3 and samples[0].shape == (1, 3, 40, 40)
    assert all(torch.equal(x, y) for x, y in zip(samples, again, strict=True))


def test_folder_samples_use_model_preprocessing(tmp_path: Path) -> None:
    for i, colour in enumerate(["red", "green", "blue"]):
        Image.new("RGB", (300, 200), colour).save(tmp_path / f"img{i}.png")
    (tmp_path / "notes.txt").write_text("not an image")
    samples = zoo.make_samples(2, model="resnet18", input_size=224, folder=tmp_path, device="cpu", dtype="fp32")
    assert len(samples) == 2 and samples[0].shape == (1, 3, 224, 224)
    # ImageNet normalisation of pure red: channel 0 high, channels 1-2 negative
    assert samples[0][0, 0].mean() > 2 and samples[0][0, 1].mean() < -1
    small = zoo.make_samples(2, model="resnet18", input_size=64, folder=tmp_path, device="cpu", dtype="fp32")
    assert small[0].shape == (1, 3, 64, 64)


def test_folder_without_images(tmp_path: Path) -> None:
    with pytest.raises(HarnessError, match="has no .jpg/.jpeg/.png images"):
        zoo.make_samples(2, model="resnet18", input_size=224, folder=tmp_path, device="cpu", dtype="fp32")


def test_pretrained_unreachable_is_explained(monkeypatch: pytest.MonkeyPatch) -> None:
    def offline(name, weights=None):
        raise OSError("<urlopen error [Errno -3] Temporary failure in name resolution>")

    monkeypatch.setattr(torchvision.models, "get_model", offline)
    with pytest.raises(HarnessError, match="cannot load torchvision's pretrained weights for resnet18.*pretrained: false"):
        zoo.build_model("resnet18", pretrained=True, seed=0, device="cpu", dtype="fp32")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["vit_b_16", "efficientnet_b0", "mobilenet_v3_small"])
def test_random_weights_compute_a_non_degenerate_function(name: str) -> None:
    # torchvision's training init gives vit_b_16 a zero head and efficientnet_b0 logits near 1e-14.
    model = zoo.build_model(name, pretrained=False, seed=0, device="cpu", dtype="fp32")
    assert not model.training
    size = CLASSIFICATION_MODELS[name][1]
    x = torch.randn(2, 3, size, size, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        logits = model(x)
    assert 1e-2 < float(logits.std()) < 1e3
    assert float((logits[0] - logits[1]).abs().max()) > 1e-3, "the output must depend on the input"
    again = zoo.build_model(name, pretrained=False, seed=0, device="cpu", dtype="fp32")
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), again.state_dict().values(), strict=True))


#: One model of each kind of limit (the rest of a family share its layers up to the failing one;
#: vit_h_14, 632M weights, is left out for its build time).
LIMITS_RUN = ["alexnet", "convnext_tiny", "densenet121", "inception_v3", "squeezenet1_0", "squeezenet1_1", "vgg11",
              "vit_b_32", "maxvit_t", "pattern_matmul_relu", "mmoe_small", "bert_base", "wav2vec2_base"]


@pytest.mark.slow
@pytest.mark.parametrize("name", LIMITS_RUN)
def test_a_models_input_size_limits_are_where_its_forward_starts_and_stops_working(name: str) -> None:
    """The scenario refuses sizes outside INPUT_SIZE_LIMITS at load; each bound runs and the size
    beyond it fails, so the table neither refuses a size that runs nor lets one through that fails."""
    low, high = INPUT_SIZE_LIMITS[name]
    model = zoo.build_model(name, pretrained=False, seed=0, device="cpu", dtype="fp32")

    def runs(size: int) -> bool:
        sample = zoo.make_samples(1, model=name, input_size=size, device="cpu", dtype="fp32")[0]
        try:
            with torch.no_grad():
                model(sample)
        except (RuntimeError, ValueError, AssertionError):
            return False
        return True

    assert runs(low)
    assert low == INPUT_SIZE_FLOOR or not runs(low - 1)
    if high is not None:
        assert runs(high) if high != low else True
        assert not runs(high + 1)


def test_every_limited_model_is_in_the_zoo() -> None:
    from harness.models.catalog import all_models

    assert set(INPUT_SIZE_LIMITS) <= set(all_models())
    assert set(LIMITS_RUN) <= set(INPUT_SIZE_LIMITS)


def test_a_random_weight_vit_is_built_for_its_catalogue_size() -> None:
    """vit_h_14's default weights set 518; without them torchvision built it for 224, so a random-weight
    cell at its catalogue size (518, the only one INPUT_SIZE_LIMITS lets through) failed."""
    for name in ("vit_h_14", "vit_b_16"):
        with torch.device("meta"):
            model = torchvision.models.get_model(name, weights=None, **zoo.random_weights_arguments(name))
        assert model.image_size == CLASSIFICATION_MODELS[name][1] == INPUT_SIZE_LIMITS[name][0]
    assert zoo.random_weights_arguments("resnet18") == {}
