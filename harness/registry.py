"""Backend discovery: built-in and third-party backends alike come from one entry-point group.

A plugin package declares, in its pyproject.toml,
    [project.entry-points."fusionbench.backends"]
    mybackend = "my_package.module:MyBackend"
and is found once installed. Looking names up reads package metadata only; `load` imports the
backend's module, which must itself import nothing heavy at module level.

A source checkout run without installing FusionBench itself (`FUSIONBENCH_NO_VENV=1 ./run.sh ...`
on a machine without network) has no metadata for the built-in backends: then their entry points
are read from the checkout's pyproject.toml, the same table `pip install` would register.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from importlib.metadata import EntryPoint, PackageNotFoundError, distribution, entry_points
from pathlib import Path

from harness.contract import Backend
from harness.did_you_mean import closest
from harness.errors import ConfigError
from harness.options import BackendOptions

GROUP = "fusionbench.backends"
DISTRIBUTION = "fusionbench"
PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"
#: FusionBench's own top-level packages (pyproject.toml's packages): a plugin's of the same name is hidden by them.
OWN_PACKAGES = ("harness", "backends")


def source_entry_points(pyproject: Path = PYPROJECT) -> list[EntryPoint]:
    """The built-in backends' entry points as the checkout's pyproject.toml declares them."""
    try:
        import tomllib
    except ImportError:  # Python 3.10: install the package (./run.sh does) to register them
        return []
    try:
        table = tomllib.loads(pyproject.read_text())["project"]["entry-points"][GROUP]
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return []
    return [EntryPoint(name=name, value=value, group=GROUP) for name, value in table.items()]


def _installed() -> bool:
    try:
        distribution(DISTRIBUTION)
    except PackageNotFoundError:
        return False
    return True


#: The entry points read once for a whole piece of work (`held`), else None: read at each call.
_held: dict[str, EntryPoint] | None = None


@contextmanager
def held() -> Iterator[None]:
    """Within it, the installed backends' entry points are read once: a scenario file's checks
    ask for its backends a score of times, and a run's skip checks once a cell, and each reading
    scans every installed package's metadata (about 9 ms); outside it, each call reads them anew,
    so a package installed meanwhile is found."""
    global _held
    outer = _held
    if outer is None:
        _held = _read_entry_points()
    try:
        yield
    finally:
        _held = outer


def _entry_points() -> dict[str, EntryPoint]:
    return _held if _held is not None else _read_entry_points()


def _read_entry_points() -> dict[str, EntryPoint]:
    found: dict[str, EntryPoint] = {}
    declared = list(entry_points(group=GROUP))
    if not _installed():
        declared += source_entry_points()
    for ep in declared:
        if ep.name in found and found[ep.name].value != ep.value:
            raise ConfigError(_clash(found[ep.name], ep))
        found[ep.name] = ep
    return found


def _clash(first: EntryPoint, second: EntryPoint) -> str:
    """Two packages register one backend name: a plugin that took a built-in's name is renamed
    (uninstalling FusionBench would take the harness with it); two plugins, one is uninstalled or
    taken off PYTHONPATH, where each lies said."""
    both = (first, second)
    plugins = [ep for ep in both if not _built_in(ep)]
    if len(plugins) == 1:
        return (f"the backend name {first.name!r} is a built-in backend's, and {package_line(plugins[0])} registers it too: "
                "rename the plugin's backend (its entry point and its class's `name`)")
    commands = " or ".join(f"pip uninstall {name}" for name in map(distribution_name, both) if name)
    return (f"two installed packages register the backend {first.name!r}: {' and '.join(map(package_line, both))}; "
            "uninstall one" + (f" ({commands}), or take it off PYTHONPATH" if commands else ""))


def _built_in(ep: EntryPoint) -> bool:
    return getattr(ep, "dist", None) is None or distribution_name(ep) == DISTRIBUTION


def misfiled(name: str) -> str:
    """Where a package registers `name` under an entry-point group that is nearly this one
    (`fusionbench.backend`, `fusionbench_backends`): what to write instead; "" where none does."""
    def squeezed(group: str) -> str:
        return "".join(ch for ch in group.lower() if ch.isalnum())

    for ep in entry_points(name=name):
        if ep.group != GROUP and squeezed(ep.group).startswith("fusionbench"):
            return (f"; {package_line(ep)} registers it under the entry-point group {ep.group!r}: a backend is "
                    f"registered under {GROUP!r}")
    return ""


def distribution_name(ep: EntryPoint) -> str | None:
    """The name of the package that registers `ep`, as pip names it; None where none is known."""
    dist = getattr(ep, "dist", None)
    name = dist.metadata["Name"] if dist is not None else None
    return str(name) if name else None


def package_line(ep: EntryPoint) -> str:
    """The package that registers `ep`, as pip names it, with its version and the class it points at."""
    dist = getattr(ep, "dist", None)
    name = distribution_name(ep)
    if dist is None or name is None:  # read from the checkout's pyproject.toml, or a package with no name
        return f"{'this checkout' if dist is None else 'a package without a name'} ({ep.value})"
    return f"{name} {dist.version} ({ep.value}, in {dist.locate_file('')})"


def names() -> list[str]:
    """Registered backend names, sorted."""
    return sorted(_entry_points())


def unknown(name: str) -> str:
    """What a scenario, a resume or a caller is told of a backend `name` no package registers: the
    names nearest it, every registered name, and where a package registered it under a misspelt group."""
    known = names()
    return f"unknown backend {name!r}{closest(name, known)}; registered: {', '.join(known)}{misfiled(name)}"


def package_of(name: str) -> str | None:
    """The top-level package the backend registered under `name` lives in (its entry point's
    module's first part), where one is registered; None otherwise."""
    ep = _entry_points().get(name)
    return ep.module.split(".")[0] if ep is not None else None


def found_in(name: str) -> tuple[str, Path] | None:
    """The package registering the backend `name` (`package_line`) and the folder it was found in
    (a site-packages, a folder on PYTHONPATH); None where no installed package registers it (the
    checkout's own backends, run without installing it)."""
    ep = _entry_points().get(name)
    dist = getattr(ep, "dist", None)
    return None if ep is None or dist is None else (package_line(ep), Path(str(dist.locate_file(""))))


def load(name: str) -> type[Backend]:
    """The backend class registered under `name`."""
    eps = _entry_points()
    if name not in eps:
        raise ConfigError(unknown(name))
    if not _built_in(eps[name]):  # a plugin's package: what it requires, and its name
        unmet = unmet_requirement(eps[name])
        if unmet:
            raise ConfigError(f"backend {eps[name].value}: {unmet}")
        top = eps[name].module.split(".")[0]
        if top in OWN_PACKAGES:  # else "No module named 'backends.mine'"
            raise ConfigError(f"backend {eps[name].value} lies in a package named {top!r}, as FusionBench's own is, "
                              f"which Python finds instead: rename the plugin's package ({package_line(eps[name])})")
    cls = eps[name].load()
    if not (isinstance(cls, type) and issubclass(cls, Backend)):
        raise ConfigError(f"backend {name!r} ({eps[name].value}) is not a harness.contract.Backend subclass")
    if cls.name != name:
        raise ConfigError(f"backend {eps[name].value} is registered as {name!r} but calls itself {cls.name!r}")
    options = cls.options_model
    if not (isinstance(options, type) and issubclass(options, BackendOptions)):  # else a typo in `options:` passes
        raise ConfigError(f"backend {eps[name].value} has an options_model, {getattr(options, '__name__', options)}, "
                          "that is not a harness.options.BackendOptions subclass (which refuses unknown keys and wrong types)")
    wrong = scratch_env_fault(cls.scratch_env)
    if wrong:
        raise ConfigError(f"backend {eps[name].value} has a scratch_env {wrong}")
    # ("mylib") without its comma is one str: the preloaded parent imported "m", "y", ... and said nothing
    if not (isinstance(cls.preload, (tuple, list)) and all(isinstance(module, str) for module in cls.preload)):
        raise ConfigError(f"backend {eps[name].value} has a preload that is {type(cls.preload).__name__} "
                          f"{cls.preload!r:.60}, not a tuple of module names: ({cls.preload!r:.40},)")
    return cls


#: Variables a worker needs as the harness sets them: a backend's scratch folder in their place lost
#: the plugin itself (PYTHONPATH: "unknown backend" in a worker of a backend the probe had found).
RESERVED_VARIABLES = ("PATH", "PYTHONPATH", "PYTHONUNBUFFERED", "VIRTUAL_ENV", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES",
                      "NVIDIA_VISIBLE_DEVICES")


def scratch_env_fault(scratch_env: object) -> str:
    """What is wrong with a backend's `scratch_env` (variable -> the name of a folder of the cell's
    own), "" where nothing is: the contract asks for a folder's name alone, and a path is refused with
    it, since an absolute one or one through `..` is no longer the cell's own (its first round found
    what other cells left there: a compiler cache made its prepare warm); a variable the harness sets
    (RESERVED_VARIABLES, FUSIONBENCH_*) is not the backend's."""
    if not isinstance(scratch_env, dict):
        return f"that is {type(scratch_env).__name__}, not a dict of variable names to folder names"
    for variable, folder in scratch_env.items():
        if not (isinstance(variable, str) and variable and "=" not in variable and "\0" not in variable):
            return f"variable {variable!r} that is no environment variable's name"
        if variable in RESERVED_VARIABLES or variable.startswith("FUSIONBENCH_"):
            return f"variable {variable!r} that the harness sets for every worker: name a variable of your library's"
        if not (isinstance(folder, str) and folder not in ("", ".", "..") and "/" not in folder and "\0" not in folder):
            return (f"folder {folder!r} for {variable}: give a folder's name alone (no '/', no '..'), which "
                    "the harness places in the cell's own scratch folder")
    return ""


def unmet_requirement(ep: EntryPoint) -> str:
    """Where the package that registers `ep` (a plugin's) requires a FusionBench (its `Requires-Dist:
    fusionbench...`) that this harness is not: what to do; "" otherwise. Plugins are installed with `--no-deps` (the
    guide's commands), so pip never checks it: a plugin made for a later contract was listed as
    available and its cells failed in a TypeError of their own."""
    from harness import __version__

    dist = getattr(ep, "dist", None)
    if dist is None:
        return ""
    try:
        from packaging.requirements import InvalidRequirement, Requirement
    except ImportError:  # a bare Python without it (FUSIONBENCH_NO_VENV=1): pip's own check is all there is
        return ""
    for line in dist.requires or []:
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            continue
        if requirement.name.lower() != DISTRIBUTION or (requirement.marker and not requirement.marker.evaluate({"extra": ""})):
            continue
        if not requirement.specifier.contains(__version__, prereleases=True):
            return (f"{distribution_name(ep)} {dist.version} requires fusionbench{requirement.specifier}, and this harness "
                    f"is {__version__}: install a version of {distribution_name(ep)} made for it")
    return ""
