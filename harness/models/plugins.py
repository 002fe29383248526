"""Models from other packages: the entry-point group `fusionbench.models`, found as backends are
found under `fusionbench.backends` (harness/registry.py).

A package declares, in its pyproject.toml,
    [project.entry-points."fusionbench.models"]
    acme_net = "acme_models.zoo:ACME_NET"
where `ACME_NET` is a `harness.models.extra_models.ExtraModel` whose `build` takes the cell's seed
and returns the module (random weights; torch imported inside it, so the parent, which reads the
description, never imports torch). The entry point's name is the model's name in a scenario file.

A plugin that does not load or describes its model wrongly is `broken` (`found`): a scenario
naming that name is refused with the reason, in one line naming the package, and every other model
is unaffected. One that takes a built-in model's name clashes (`harness.models.catalog.clash`): a
new run's file naming that name is refused (harness/run/start_checks.py).
A bundle records the package and version of each plugin model it ran (bundle.json
`model_plugins`), and the artifact cache's keys hold them
(`harness.artifact_cache.PROVIDED_BY`): another version of the plugin never reuses an artifact.
Where a bundle is read on a machine without its plugin, or with it at another version (validate,
report, compare), its models are known by what that bundle recorded of them (`described_by`), so
that its cells expand as they ran; nothing of one bundle's record outlives its reading or reaches
another bundle's cells.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from harness.models import plugin_code, plugin_copies, plugin_reads
from harness.models.extra_models import INPUT_KINDS, INPUT_SIZE_FLOOR, ExtraModel
from harness.plain_text import one_line
from harness.registry import distribution_name, package_line

GROUP = "fusionbench.models"
#: What the parent never imports (docs/architecture.md, the torch rule): a plugin module that does
#: as it loads makes every command that reads model names import it.
HEAVY_LIBRARIES = ("torch", "torchvision", "onnxruntime", "tvm", "tensorrt", "mlperf_loadgen", "numpy")


@dataclass(frozen=True)
class PluginModel:
    """A model a package registers: its description and who provides it."""

    spec: ExtraModel
    distribution: str  # as pip names it
    version: str
    entry_point: str  # `module:attribute`
    folder: str = ""  # where its package was found (a site-packages, a folder on PYTHONPATH); "" where unknown
    #: the folder on sys.path its module was imported from: that copy's folder, or an editable install's
    #: project (harness/models/plugin_code.py); "" where unknown
    code_folder: str = ""

    @property
    def package_files(self) -> str:
        """Where its package's own lines lie (its top-level package's folder, or module)."""
        return plugin_reads.package_files(self.entry_point.partition(":")[0], self.code_folder)

    @property
    def provided_by(self) -> str:
        """`distribution==version`: what a bundle and the artifact cache's keys record."""
        return f"{self.distribution}=={self.version}"

    def recorded(self) -> dict[str, Any]:
        """Its entry in bundle.json `model_plugins`."""
        return {"distribution": self.distribution, "version": self.version, "entry_point": self.entry_point,
                "family": self.spec.family, "input_kind": self.spec.input_kind, "input_size": self.spec.input_size,
                **({"code_folder": self.code_folder} if self.code_folder else {})}


@dataclass(frozen=True)
class Found:
    """What the installed packages register: the models that load, and why each other one does not."""

    models: dict[str, PluginModel]
    broken: dict[str, str]
    #: name -> what its module imported of HEAVY_LIBRARIES as it loaded (the first such plugin's alone:
    #: once torch is in, another's import of it costs nothing)
    heavy: dict[str, str]
    #: name -> the other copies of its package installed that never load (another version, or the
    #: model elsewhere: harness/models/plugin_copies.py), where it has any
    hidden_copies: dict[str, list[plugin_copies.Copy]] = field(default_factory=dict)
    #: name -> why it is no model here though a copy of a package registers it: an earlier copy of that
    #: package, registering no model, hides it (harness/models/plugin_copies.py `hidden_by_earlier`)
    hidden: dict[str, str] = field(default_factory=dict)
    #: name -> the look-ups in os.environ its package's own lines made as its module loaded in this
    #: process (harness/models/plugin_reads.py), where it made any
    load_reads: dict[str, list[plugin_reads.Read]] = field(default_factory=dict)

    def why_not(self, name: str) -> str | None:
        """Why a package registering `name` gives no model of that name here (its module failed to
        load, or an earlier copy of its package hides it); None where no package says so."""
        return self.broken.get(name) or self.hidden.get(name)

    @property
    def shadowed(self) -> dict[str, str]:
        """name -> which copy of its package runs it, and the copies that never load, in words."""
        told = {}
        for name, others in self.hidden_copies.items():
            model = self.models[name]
            told[name] = (f"model {name!r} runs from {model.distribution} {model.version} ({model.entry_point}, in "
                          f"{model.folder}), the copy first on sys.path; "
                          f"{plugin_copies.described(model.distribution, name, others)} "
                          f"{'is' if len(others) == 1 else 'are'} installed too and never "
                          f"load{'s' if len(others) == 1 else ''}: take the copy you do not mean to run off "
                          "PYTHONPATH, or uninstall it")
        return told


@functools.lru_cache(maxsize=1)
def found() -> Found:
    """Every installed `fusionbench.models` entry point, loaded once a process (each load imports
    the plugin's module)."""
    models: dict[str, PluginModel] = {}
    broken: dict[str, str] = {}
    heavy: dict[str, str] = {}
    registering: dict[str, list[EntryPoint]] = {}
    looked_up: list[plugin_reads.Read] = []
    for ep in entry_points(group=GROUP):
        # two distributions pointing at one object name one module, which the import finds once
        if all(other.value != ep.value for other in registering.setdefault(ep.name, [])):
            registering[ep.name].append(ep)
    for name, eps in registering.items():
        if len(eps) > 1:  # neither is the model a file naming it means: both named, every other model unaffected
            broken[name] = _registered_twice(name, eps)
            continue
        ep = eps[0]
        where = package_line(ep)
        dist = getattr(ep, "dist", None)
        before = set(HEAVY_LIBRARIES).intersection(sys.modules)
        try:
            with plugin_reads.watched() as reads:
                try:
                    spec = ep.load()
                finally:
                    looked_up.extend(reads)
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - a plugin's fault is its own model's refusal, not every model's
            broken[ep.name] = (f"model {ep.name!r} from {where} does not load: {type(exc).__name__}: {one_line(exc)}"
                               f"{plugin_code.where_imported(ep.module, dist)}")
            continue
        imported = [name for name in HEAVY_LIBRARIES if name in sys.modules and name not in before]
        if imported:
            heavy[ep.name] = (f"model {ep.name!r} from {where} imports {' and '.join(imported)} as its module loads: "
                              "every fusionbench command that reads model names (run, validate, report, compare, "
                              f"models) imports {'it' if len(imported) == 1 else 'them'} too; import "
                              f"{'it' if len(imported) == 1 else 'them'} inside `build`")
        fault = description_fault(spec)
        if fault:
            broken[ep.name] = f"model {ep.name!r} from {where} {fault}"
            continue
        elsewhere = plugin_code.disagreement(ep.name, where, ep.module, dist)
        if elsewhere:  # a bundle would record one copy and run another's code
            broken[ep.name] = elsewhere
            continue
        models[ep.name] = PluginModel(spec, distribution_name(ep) or "?", dist.version if dist else "?", ep.value,
                                      str(dist.locate_file("")) if dist else "", plugin_code.import_root(ep.module) or "")
    every = plugin_copies.installed(GROUP)  # the installed packages read once for all the models
    hidden = {name: plugin_copies.hidden_text(name, *copies)
              for name, copies in plugin_copies.hidden_by_earlier(every).items() if name not in models and name not in broken}
    load_reads = {name: plugin_reads.made_under(looked_up, model.package_files) for name, model in models.items()
                  if model.code_folder}
    return Found(models, broken, heavy, _hidden_copies(models, plugin_copies.copies(every)), hidden,
                 {name: reads for name, reads in load_reads.items() if reads})


def _hidden_copies(models: dict[str, PluginModel],
                   installed: dict[str, list[plugin_copies.Copy]]) -> dict[str, list[plugin_copies.Copy]]:
    """`Found.hidden_copies` of `models`, `installed` the packages of several copies (`plugin_copies.copies`)."""
    hidden = {name: plugin_copies.never_loaded(name, model.distribution, model.version, model.entry_point, model.folder,
                                               installed) if model.folder else []
              for name, model in models.items()}
    return {name: others for name, others in hidden.items() if others}


def _registered_twice(name: str, eps: list[EntryPoint]) -> str:
    """What a file naming `name` is told where several installed packages (`eps`) register it."""
    lines = [package_line(ep) for ep in eps]
    commands = " or ".join(f"pip uninstall {dist}" for dist in dict.fromkeys(map(distribution_name, eps)) if dist)
    count = "two" if len(eps) == 2 else str(len(eps))
    return (f"{count} installed packages register the model {name!r}: {', '.join(lines[:-1])} and {lines[-1]}; "
            "uninstall one" + (f" ({commands}), or take it off PYTHONPATH" if commands else ""))


def description_fault(spec: object) -> str:
    """What is wrong with what a plugin's entry point loaded to, "" where nothing is."""
    if not isinstance(spec, ExtraModel):
        return (f"loads to {type(spec).__name__} {spec!r:.60}, not a harness.models.extra_models.ExtraModel "
                "(family, input kind, input size, about, build)")
    if not callable(spec.build):
        return "has no `build`: give the ExtraModel a function that takes the seed and returns the module"
    if spec.input_kind not in INPUT_KINDS:
        return f"has input kind {spec.input_kind!r}, not one of {', '.join(INPUT_KINDS)}"
    if not (isinstance(spec.input_size, int) and spec.input_size >= INPUT_SIZE_FLOOR):
        return f"has input size {spec.input_size!r}: an int from {INPUT_SIZE_FLOOR} up"
    if spec.input_kind == "sequence" and not (isinstance(spec.features, int) and spec.features > 0):
        return "has input kind 'sequence' without `features` (the features per step)"
    return _sizes_fault(spec.input_sizes, spec.input_size)


def _sizes_fault(sizes: object, size: int) -> str:
    """What is wrong with a description's `input_sizes` beside its input size `size`, "" where nothing is."""
    if sizes is None:
        return ""
    low, high = sizes if isinstance(sizes, tuple) and len(sizes) == 2 else (None, None)
    if not (type(low) is int and low >= INPUT_SIZE_FLOOR and (high is None or (type(high) is int and high >= low))):
        return (f"has input_sizes {sizes!r}: give (smallest, largest), the smallest an int from {INPUT_SIZE_FLOOR} "
                "up, the largest an int from the smallest up or None (no largest)")
    if size < low or (high is not None and size > high):
        return f"has input size {size} outside its input_sizes {sizes!r}"
    return ""


def described_by(model_plugins: object) -> dict[str, tuple[str, int]]:
    """The models a bundle records (bundle.json `model_plugins`), name -> (family, input size), as
    it described them when it ran: its scenario expands into the cells it ran from these wherever it
    is read, the plugin installed here or not, or at another version. A resume or a rerun of it is
    refused where no package here provides the model at that version (`provider_missing`)."""
    return {name: (str(entry.get("family", "")), entry["input_size"])
            for name, entry in (model_plugins.items() if isinstance(model_plugins, Mapping) else ())
            if isinstance(name, str) and isinstance(entry, Mapping) and isinstance(entry.get("input_size"), int)}


def provider_missing(model_plugins: Mapping[str, Any] | None, names: list[str]) -> str:
    """Where a model among `names` came from a plugin (bundle.json `model_plugins`) that no package
    here provides at that version: which, and the pip line; "" otherwise."""
    plugins, hidden = found().models, found().hidden_copies
    for name in dict.fromkeys(names):
        entry = (model_plugins or {}).get(name)
        if not isinstance(entry, Mapping):
            continue
        wanted = f"{entry.get('distribution')}=={entry.get('version')}"
        here = plugins.get(name)
        if here is None or here.provided_by != wanted:
            now = f"{here.provided_by} provides it here" if here else "no package here provides it"
            came = f"its model {name!r} came from {entry.get('distribution')} {entry.get('version')} ({entry.get('entry_point')})"
            if here is not None and any(copy.version == str(entry.get("version"))
                                        and copy.entry_points.get(name) == str(entry.get("entry_point"))
                                        for copy in hidden.get(name, [])):
                # `pip install` of it would change nothing: that copy is there, behind the one that runs
                return (f"{came} and {now}, from {here.folder}; {entry.get('distribution')} {entry.get('version')} is "
                        f"installed too and never loads, {here.folder} coming first on sys.path: take that copy "
                        "off PYTHONPATH, or uninstall it")
            return f"{came} and {now}: pip install {wanted}"
    return ""

