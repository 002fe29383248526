"""The torchvision classification models the zoo offers, without importing torch.

Generated from torchvision 0.29.1 (`list_models(module=torchvision.models)` and each model's
DEFAULT weights transforms). tests/unit/test_zoo.py checks it still matches the installed torchvision.
`all_models()` adds the models of `harness.models.extra_models`.
"""

from __future__ import annotations

# name -> (family, default input size in pixels)
CLASSIFICATION_MODELS: dict[str, tuple[str, int]] = {
    "alexnet": ("alexnet", 224),
    "convnext_base": ("convnext", 224),
    "convnext_large": ("convnext", 224),
    "convnext_small": ("convnext", 224),
    "convnext_tiny": ("convnext", 224),
    "densenet121": ("densenet", 224),
    "densenet161": ("densenet", 224),
    "densenet169": ("densenet", 224),
    "densenet201": ("densenet", 224),
    "efficientnet_b0": ("efficientnet", 224),
    "efficientnet_b1": ("efficientnet", 240),
    "efficientnet_b2": ("efficientnet", 288),
    "efficientnet_b3": ("efficientnet", 300),
    "efficientnet_b4": ("efficientnet", 380),
    "efficientnet_b5": ("efficientnet", 456),
    "efficientnet_b6": ("efficientnet", 528),
    "efficientnet_b7": ("efficientnet", 600),
    "efficientnet_v2_l": ("efficientnet", 480),
    "efficientnet_v2_m": ("efficientnet", 480),
    "efficientnet_v2_s": ("efficientnet", 384),
    "googlenet": ("googlenet", 224),
    "inception_v3": ("inception", 299),
    "maxvit_t": ("maxvit", 224),
    "mnasnet0_5": ("mnasnet", 224),
    "mnasnet0_75": ("mnasnet", 224),
    "mnasnet1_0": ("mnasnet", 224),
    "mnasnet1_3": ("mnasnet", 224),
    "mobilenet_v2": ("mobilenetv2", 224),
    "mobilenet_v3_large": ("mobilenetv3", 224),
    "mobilenet_v3_small": ("mobilenetv3", 224),
    "regnet_x_16gf": ("regnet", 224),
    "regnet_x_1_6gf": ("regnet", 224),
    "regnet_x_32gf": ("regnet", 224),
    "regnet_x_3_2gf": ("regnet", 224),
    "regnet_x_400mf": ("regnet", 224),
    "regnet_x_800mf": ("regnet", 224),
    "regnet_x_8gf": ("regnet", 224),
    "regnet_y_128gf": ("regnet", 384),
    "regnet_y_16gf": ("regnet", 224),
    "regnet_y_1_6gf": ("regnet", 224),
    "regnet_y_32gf": ("regnet", 224),
    "regnet_y_3_2gf": ("regnet", 224),
    "regnet_y_400mf": ("regnet", 224),
    "regnet_y_800mf": ("regnet", 224),
    "regnet_y_8gf": ("regnet", 224),
    "resnet101": ("resnet", 224),
    "resnet152": ("resnet", 224),
    "resnet18": ("resnet", 224),
    "resnet34": ("resnet", 224),
    "resnet50": ("resnet", 224),
    "resnext101_32x8d": ("resnet", 224),
    "resnext101_64x4d": ("resnet", 224),
    "resnext50_32x4d": ("resnet", 224),
    "shufflenet_v2_x0_5": ("shufflenetv2", 224),
    "shufflenet_v2_x1_0": ("shufflenetv2", 224),
    "shufflenet_v2_x1_5": ("shufflenetv2", 224),
    "shufflenet_v2_x2_0": ("shufflenetv2", 224),
    "squeezenet1_0": ("squeezenet", 224),
    "squeezenet1_1": ("squeezenet", 224),
    "swin_b": ("swin_transformer", 224),
    "swin_s": ("swin_transformer", 224),
    "swin_t": ("swin_transformer", 224),
    "swin_v2_b": ("swin_transformer", 256),
    "swin_v2_s": ("swin_transformer", 256),
    "swin_v2_t": ("swin_transformer", 256),
    "vgg11": ("vgg", 224),
    "vgg11_bn": ("vgg", 224),
    "vgg13": ("vgg", 224),
    "vgg13_bn": ("vgg", 224),
    "vgg16": ("vgg", 224),
    "vgg16_bn": ("vgg", 224),
    "vgg19": ("vgg", 224),
    "vgg19_bn": ("vgg", 224),
    "vit_b_16": ("vision_transformer", 224),
    "vit_b_32": ("vision_transformer", 224),
    "vit_h_14": ("vision_transformer", 518),
    "vit_l_16": ("vision_transformer", 224),
    "vit_l_32": ("vision_transformer", 224),
    "wide_resnet101_2": ("resnet", 224),
    "wide_resnet50_2": ("resnet", 224),
}


def all_models() -> dict[str, tuple[str, int]]:
    """Every model the zoo offers, name -> (family, default input size): torchvision's
    classifiers above, then the pattern micro-models and non-vision models of
    `harness.models.extra_models`."""
    from harness.models.extra_models import EXTRA_MODELS

    return {**CLASSIFICATION_MODELS, **{name: (m.family, m.input_size) for name, m in EXTRA_MODELS.items()}}


def default_input_size(name: str) -> int | None:
    """The input size `name` takes when a scenario gives none, or None for a model the zoo lacks (a
    bundle written by another version may name one)."""
    known = all_models().get(name)
    return None if known is None else known[1]
