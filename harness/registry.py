"""Backend discovery: built-in and third-party backends alike come from one entry-point group.

A plugin package declares, in its pyproject.toml,
    [project.entry-points."fusionbench.backends"]
    mybackend = "my_package.module:MyBackend"
and is found once installed. Looking names up reads package metadata only; `load` imports the
backend's module, which must itself import nothing heavy at module level.
"""

from __future__ import annotations

from importlib.metadata import EntryPoint, entry_points

from harness.contract import Backend
from harness.errors import ConfigError

GROUP = "fusionbench.backends"


def _entry_points() -> dict[str, EntryPoint]:
    found: dict[str, EntryPoint] = {}
    for ep in entry_points(group=GROUP):
        if ep.name in found and found[ep.name].value != ep.value:
            raise ConfigError(
                f"two installed packages register the backend {ep.name!r}: "
                f"{found[ep.name].value} and {ep.value}; uninstall one"
            )
        found[ep.name] = ep
    return found


def names() -> list[str]:
    """Registered backend names, sorted."""
    return sorted(_entry_points())


def load(name: str) -> type[Backend]:
    """The backend class registered under `name`."""
    eps = _entry_points()
    if name not in eps:
        raise ConfigError(f"unknown backend {name!r}; registered: {', '.join(sorted(eps))}")
    cls = eps[name].load()
    if not (isinstance(cls, type) and issubclass(cls, Backend)):
        raise ConfigError(f"backend {name!r} ({eps[name].value}) is not a harness.contract.Backend subclass")
    if cls.name != name:
        raise ConfigError(f"backend {eps[name].value} is registered as {name!r} but calls itself {cls.name!r}")
    return cls
