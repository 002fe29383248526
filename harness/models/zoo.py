"""The model zoo: torchvision classification models, the fusion-pattern micro-models and the
non-vision models of the literature suites (`harness.models.extra_models`), and the models installed
packages register (`harness.models.plugins`), by name, and their inputs.

Random weights by default (seeded, so every cell of a run sees the same model); `pretrained`
asks torchvision for its published weights, which needs a machine that can fetch them. Inputs
are seeded synthetic samples of the model's input kind, or, for torchvision models, real images
read from a folder and passed through the model's own preprocessing (the transforms of its
DEFAULT weights, which are defined in code and need no download). torch is imported inside the
functions: only worker processes call them.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from harness.artifact_cache import PLUGIN_CODE, PROVIDED_BY
from harness.errors import HarnessError
from harness.models import extra_models, plugin_reads, plugin_source, plugins
from harness.models.catalog import CLASSIFICATION_MODELS, described
from harness.models.extra_models import EXTRA_MODELS
from harness.precision import torch_dtype

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")


def missing_requirement(name: str) -> str | None:
    """Why model `name` cannot be built here (a package it needs is not installed), or None."""
    spec = described(name)
    for package in spec.requires if spec else ():
        if importlib.util.find_spec(package) is None:
            return f"model {name} needs the Python package {package!r}, which is not installed (pip install {package})"
    return None


def build_model(name: str, *, pretrained: bool, seed: int, device: str, dtype: str) -> Any:
    """A model of the zoo in eval mode on `device` in `dtype`."""
    if described(name) is not None:
        return _build_extra(name, seed, device, dtype)
    if name not in CLASSIFICATION_MODELS:
        raise HarnessError(plugins.found().why_not(name) or f"unknown model {name!r}")
    import torch
    import torchvision

    torch.manual_seed(seed)
    try:
        model = torchvision.models.get_model(name, weights="DEFAULT" if pretrained else None,
                                             **({} if pretrained else random_weights_arguments(name)))
    except (OSError, RuntimeError, ValueError) as exc:
        if not pretrained:
            raise
        raise HarnessError(
            f"cannot load torchvision's pretrained weights for {name} ({type(exc).__name__}: {exc}); "
            "this machine may not reach the download server: use `pretrained: false` (random weights) "
            "or put the weights file in $TORCH_HOME/hub/checkpoints first"
        ) from None
    if not pretrained:
        _condition_random_weights(model, CLASSIFICATION_MODELS[name][1], seed)
    return model.eval().to(device=device, dtype=torch_dtype(dtype))


def random_weights_arguments(name: str) -> dict[str, Any]:
    """What torchvision builds `name` with when no weights set it: a ViT for its catalogue input
    size, which its default weights set (vit_h_14's 518; without weights torchvision built it for
    224, and a random-weight cell at its catalogue size failed)."""
    family, size = CLASSIFICATION_MODELS[name]
    return {"image_size": size} if family == "vision_transformer" else {}


def _condition_random_weights(model: Any, input_size: int, seed: int) -> None:
    """Make a randomly initialised model compute a non-degenerate function.

    torchvision initialises weights for training. In eval mode, with batch norms at their default
    running statistics (mean 0, variance 1), activations shrink layer after layer (efficientnet_b0's
    logits come out near 1e-14), and some layers start at zero (vit_b_16's head), so every output
    is 0 and a comparison with eager could not tell a right backend from a wrong one. So weight
    tensors that start at zero get small random values, and batch norms take their running
    statistics from one seeded random batch, as after a first training step."""
    import torch

    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.dim() >= 2 and not bool(parameter.any()):
                parameter.normal_(0.0, 0.02)
        norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
        if not norms:
            return
        momenta = [m.momentum for m in norms]
        for norm in norms:
            norm.reset_running_stats()
            norm.momentum = None  # a cumulative average: after one batch, that batch's statistics
        generator = torch.Generator().manual_seed(seed)
        model.train()
        model(torch.randn(2, 3, input_size, input_size, generator=generator))
        model.eval()
        for norm, momentum in zip(norms, momenta, strict=True):
            norm.momentum = momentum


def _build_extra(name: str, seed: int, device: str, dtype: str) -> Any:
    import torch

    reason = missing_requirement(name)
    if reason:
        raise HarnessError(reason)
    torch.manual_seed(seed)
    plugin = None if name in EXTRA_MODELS else plugins.found().models[name]
    model = extra_models.build(name) if plugin is None else _built_by(plugin, seed)
    with torch.no_grad():  # non-trivial statistics, so that folding a batch norm changes the weights
        for module in model.modules():
            if isinstance(module, torch.nn.modules.batchnorm._BatchNorm):
                module.running_mean.uniform_(-0.5, 0.5)
                module.running_var.uniform_(0.5, 2.0)
    return model.to(device=device, dtype=torch_dtype(dtype))


#: The look-ups in os.environ a plugin's `build` made by its package's own lines in this process (a
#: worker builds one model): harness/models/plugin_reads.py.
BUILD_READS: list[plugin_reads.Read] = []


def unset_plugin_reads(name: str) -> list[str]:
    """The variables the plugin model `name`'s own code looked up in this process's environment and did
    not find, as its module loaded and as its `build` ran, sorted; [] for any other model."""
    if name not in plugins.found().models:
        return []
    return plugin_reads.unset([*plugins.found().load_reads.get(name, []), *BUILD_READS])


def _built_by(plugin: plugins.PluginModel, seed: int) -> Any:
    """The plugin's module, in eval mode, tagged with its package's name and version and the digest
    of its package's files, which the artifact cache's keys hold: a plugin's module may be made of
    torch's own classes (an nn.Sequential), whose defining library is torch, so that another version
    of the plugin, with another forward from the same weights, found the last one's compiled
    artifact; and a forward edited at the same version (an editable install) found it too."""
    import torch

    assert plugin.spec.build is not None  # plugins.description_fault refused one without
    with plugin_reads.watched() as reads:
        try:
            model = plugin.spec.build(seed)
        finally:  # a read of a variable the worker lacks may be what raised
            BUILD_READS.extend(plugin_reads.made_under(reads, plugin.package_files))
    if not isinstance(model, torch.nn.Module):
        raise HarnessError(f"model from {plugin.distribution} {plugin.version} ({plugin.entry_point}): its build "
                           f"returned {type(model).__name__}, not a torch.nn.Module")
    setattr(model, PROVIDED_BY, plugin.provided_by)
    if plugin.code_folder:  # its files as they are now: an edit at the same version is another key
        setattr(model, PLUGIN_CODE, plugin_source.digest(plugin.package_files))
    return model.eval()


def make_samples(
    count: int, *, model: str, input_size: int, device: str, dtype: str, seed: int = 0, folder: Path | None = None,
    labels: str | None = None,
) -> list[Any]:
    """The sample library: `count` one-sample tensors ([1, ...]) on `device`, in `dtype` except for
    token ids: seeded synthetic inputs, or with `folder` its images (in the order of its `labels`
    file when one is named)."""
    spec = described(model)
    if spec is not None:
        if folder is not None:
            raise HarnessError(f"inputs from a folder are images, for torchvision models; {model} takes synthetic inputs")
        samples = extra_models.make_inputs(spec, input_size, count, seed)
        cast = torch_dtype(dtype) if extra_models.casts_inputs(spec) else None
        return [s.to(device=device, dtype=cast).contiguous() for s in samples]
    if folder is None:
        return _synthetic(count, seed, input_size, device, dtype)
    return _from_folder(folder, count, model, input_size, device, dtype, labels)


def _synthetic(count: int, seed: int, size: int, device: str, dtype: str) -> list[Any]:
    import torch

    generator = torch.Generator().manual_seed(seed)
    images = torch.randn((count, 3, size, size), generator=generator)
    return [img.unsqueeze(0).to(device=device, dtype=torch_dtype(dtype)).contiguous() for img in images]


def folder_images(folder: Path, count: int, labels: str | None = None) -> list[Path]:
    """The images a cell reads from `folder`, in the order it reads them: the first `count` in name
    order, or in the labels file's order (LoadGen's sample k is its line k)."""
    from harness.models.labels import read_labels

    if not folder.is_dir():
        raise HarnessError(f"input folder {folder} does not exist")
    if labels:
        return [folder / name for name, _ in read_labels(folder / labels)[:count]]
    return sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)[:count]


def _from_folder(folder: Path, count: int, model: str, size: int, device: str, dtype: str,
                 labels: str | None) -> list[Any]:
    """The folder's images in name order, or in the labels file's order (LoadGen's sample k is
    its line k, as MLPerf's ImageNet accuracy script reads val_map.txt)."""
    from PIL import Image
    from torchvision.models import get_model_weights

    files = folder_images(folder, count, labels)
    if not files:
        raise HarnessError(f"input folder {folder} has no {'/'.join(IMAGE_SUFFIXES)} images")
    weights = get_model_weights(model).DEFAULT
    default_crop = int(weights.transforms().crop_size[0])
    transform = weights.transforms() if size == default_crop else weights.transforms(crop_size=size, resize_size=size)
    samples = []
    for file in files:
        try:
            with Image.open(file) as image:
                tensor = transform(image.convert("RGB"))
        except Exception as exc:  # noqa: BLE001 - PIL picks its decoder by the file's contents: any error is the file's
            raise HarnessError(f"cannot read image {file}: {str(exc) or type(exc).__name__}") from None
        samples.append(tensor.unsqueeze(0).to(device=device, dtype=torch_dtype(dtype)).contiguous())
    return samples
