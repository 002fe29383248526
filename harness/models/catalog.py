"""The torchvision classification models the zoo offers, without importing torch.

Generated from torchvision 0.29.1 (`list_models(module=torchvision.models)` and each model's
DEFAULT weights transforms). tests/unit/test_zoo.py checks it still matches the installed torchvision.
`all_models()` adds the models of `harness.models.extra_models` and those installed packages
register (`harness.models.plugins`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness.did_you_mean import closest
from harness.models import plugins
from harness.models.extra_models import EXTRA_MODELS, INPUT_SIZE_FLOOR, ExtraModel

# defined beside the input kinds, which a plugin's description is checked against; read from here too
__all__ = ["CLASSIFICATION_MODELS", "INPUT_SIZE_FLOOR", "INPUT_SIZE_LIMITS", "RECORD", "all_models", "clash",
           "default_input_size", "described", "input_size_refusal", "input_sizes_text", "plugin_records", "record_of",
           "size_limits", "unknown"]

#: The key under which a bundle's `model_plugins` rides in a pydantic validation context: the
#: stored scenario's models and its cells' configs are read against that bundle's record.
RECORD = "model_plugins"

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


#: The input sizes a model's forward takes, (smallest, largest or None), where they are not every size
#: from INPUT_SIZE_FLOOR up: a cell at another size failed at run time, after its model was
#: built. Measured with random weights on the CPU, each size from 16 to 128 and around the others
#: (tests/unit/test_zoo.py runs each bound and the size beyond it).
INPUT_SIZE_LIMITS: dict[str, tuple[int, int | None]] = {
    # pooling or a kernel larger than what five downsamplings leave
    "alexnet": (63, None),
    **{f"convnext_{v}": (32, None) for v in ("tiny", "small", "base", "large")},
    **{f"densenet{v}": (29, None) for v in (121, 161, 169, 201)},
    "inception_v3": (75, None),
    "squeezenet1_0": (21, None),
    "squeezenet1_1": (17, None),
    **{f"vgg{v}{bn}": (32, None) for v in (11, 13, 16, 19) for bn in ("", "_bn")},
    # built for one size: ViT's position embeddings; MaxViT's attention grid of 7 (every size from 16 to 448 tried)
    **{name: (224, 224) for name in ("vit_b_16", "vit_b_32", "vit_l_16", "vit_l_32")},
    "vit_h_14": (518, 518),
    "maxvit_t": (221, 224),
    # the extra models: a weight's width, BERT's 512 positions, wav2vec 2.0's 400-sample receptive field
    "pattern_matmul_relu": (1024, 1024),
    "mmoe_small": (100, 100),
    "bert_base": (16, 512),
    "wav2vec2_base": (400, None),
}


def size_limits(name: str) -> tuple[int, int | None]:
    """The input sizes `name`'s forward takes, (smallest, largest or None): a built-in's from
    INPUT_SIZE_LIMITS, a plugin's from its description's `input_sizes`, else every size from the floor."""
    spec = None if name in INPUT_SIZE_LIMITS else described(name)
    declared = spec.input_sizes if spec is not None else None
    return INPUT_SIZE_LIMITS.get(name) or declared or (INPUT_SIZE_FLOOR, None)


def input_size_refusal(name: str, size: int) -> str | None:
    """Why `name` cannot run at input size `size`, or None where its forward takes it."""
    low, high = size_limits(name)
    if low <= size and (high is None or size <= high):
        return None
    if low == high:
        return f"{name} takes input size {low} only; input_size is {size}"
    if high is None:
        return f"{name} takes input sizes from {low} (its forward fails below); input_size is {size}"
    return f"{name} takes input sizes {low} to {high}; input_size is {size}"


def input_sizes_text(name: str) -> str:
    """The input sizes `name` takes, as `fusionbench models` lists them."""
    low, high = size_limits(name)
    return f"{low} only" if low == high else f"{low} and up" if high is None else f"{low} to {high}"


def all_models(recorded: object = None) -> dict[str, tuple[str, int]]:
    """Every model the zoo offers, name -> (family, default input size): torchvision's
    classifiers above, the pattern micro-models and non-vision models of
    `harness.models.extra_models`, then the plugins' models that load here (`harness.models.plugins`)
    and take no built-in's name. Reading a bundle, `recorded` is its `model_plugins`: a plugin model
    it ran is known as it recorded it, which its cells were expanded from, whatever is installed here."""
    built_in = {**CLASSIFICATION_MODELS, **{name: (m.family, m.input_size) for name, m in EXTRA_MODELS.items()}}
    loaded = {name: (m.spec.family, m.spec.input_size) for name, m in plugins.found().models.items()}
    return {**loaded, **plugins.described_by(recorded), **built_in}


def record_of(context: Any) -> object:
    """The bundle's `model_plugins` a pydantic validation context carries (under RECORD), or None."""
    return context.get(RECORD) if isinstance(context, Mapping) else None


def described(name: str) -> ExtraModel | None:
    """The description of `name`: a built-in extra model's, or a plugin's that loads here and takes
    no built-in's name; None for torchvision's classifiers and a model the zoo lacks."""
    if name in CLASSIFICATION_MODELS or name in EXTRA_MODELS:
        return EXTRA_MODELS.get(name)
    plugin = plugins.found().models.get(name)
    return plugin.spec if plugin else None


def clash(name: str) -> str:
    """Why a scenario may not name the built-in `name`: an installed plugin registers it too (the
    file might mean either); "" where none does."""
    plugin = plugins.found().models.get(name)
    if plugin is None or not (name in CLASSIFICATION_MODELS or name in EXTRA_MODELS):
        return ""
    built_in = "one of torchvision's classifiers" if name in CLASSIFICATION_MODELS else "one of the zoo's extra models"
    return (f"the model name {name!r} is a built-in model's ({built_in}), and {plugin.distribution} {plugin.version} "
            f"({plugin.entry_point}) registers it too: rename the plugin's model (its entry point's name)")


def plugin_records(names: list[str]) -> dict[str, dict[str, object]]:
    """bundle.json `model_plugins`: the plugin models among `names` (a scenario's; never a built-in
    model, which a plugin of the same name does not replace), each with its package, version and
    description."""
    found = plugins.found().models
    return {name: found[name].recorded() for name in dict.fromkeys(names)
            if name in found and name not in CLASSIFICATION_MODELS and name not in EXTRA_MODELS}


def unknown(name: str, known: list[str]) -> str:
    """What a scenario naming `name`, none of `known` (every model here), is told: why a plugin that
    registers it does not load, else the names nearest it."""
    broken = plugins.found().why_not(name)
    if broken:
        return broken
    return f"unknown model {name!r}{closest(name, known)}; `fusionbench models` lists the {len(known)} models the zoo offers"


def default_input_size(name: str, recorded: object = None) -> int | None:
    """The input size `name` takes when a scenario gives none, or None for a model the zoo lacks (a
    bundle written by another version may name one); `recorded` as for `all_models`."""
    known = all_models(recorded).get(name)
    return None if known is None else known[1]
