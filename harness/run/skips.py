"""Why a cell cannot run here: written as a skipped cell with that reason, never run."""

from __future__ import annotations

from collections.abc import Mapping
from importlib.metadata import PackageNotFoundError, distribution
from typing import Any

from harness import precision, registry
from harness.bundle.header_record import BackendReport
from harness.bundle.reader import lookup
from harness.errors import BackendFailed
from harness.measure import plugin_answers
from harness.models.zoo import missing_requirement
from harness.plain_text import shell_word
from harness.scenario.cells import Cell


def gpu_capabilities(system: Any) -> list[str]:
    """The compute capabilities of the GPUs in a bundle's system record ("9.0", ...)."""
    devices = lookup(system, "torch", "devices")
    devices = devices if isinstance(devices, list) else []
    return [str(d.get("capability")) for d in devices if isinstance(d, dict) and d.get("capability")]


def skip_reason(cell: Cell, backends: Mapping[str, BackendReport], capabilities: list[str]) -> str | None:
    """Why `cell` cannot run on this machine (backend missing, dtype the device lacks, a model's
    package missing, a variant the backend or device does not support), or None when it can."""
    config = cell.config
    report = backends[config.backend]
    if not report.available:
        return str(report.reason)
    unsupported = precision.unsupported_reason(config.dtype, config.device, capabilities)
    if unsupported:
        return unsupported
    missing = missing_requirement(config.model.name)
    if missing:
        return missing
    # a plugin's own fault is its cells' reason, not the run's end: its sys.exit too, which ended the
    # run with exit 0, its bundle left running and no cell recorded
    try:
        backend = registry.load(config.backend)()
    except (Exception, SystemExit) as exc:
        return f"backend {config.backend!r} could not be made: {type(exc).__name__}: {exc}"
    try:
        variant = backend.variant(config.variant.fusion, config.variant.options, config.variant.graphs)
    except BackendFailed:
        return None  # options the scenario loader let through and the backend refuses: the cell fails, saying so
    except (Exception, SystemExit) as exc:
        return f"backend {config.backend!r} could not make the cell's variant: {type(exc).__name__}: {exc}"
    if variant.graphs == "on":
        if config.device != "cuda":
            return "graphs: CUDA graphs need a GPU (device cuda)"
        if not backend.cuda_graphs:
            return f"graphs: {backend.name} has no CUDA-graph variant (its backend does not declare cuda_graphs)"
    return _refusal(backend, variant, config.dtype, config.device)


def _refusal(backend: Any, variant: Any, dtype: str, device: str) -> str | None:
    """The backend's own refusal of the variant (`Backend.supports`), or None; a `supports` that
    raises or answers no Availability (a stub copied as `...` returns None) is the plugin's fault,
    said as the cells' reason: it stopped the run with a traceback and left its bundle running."""
    try:
        support = backend.supports(variant, dtype, device)
    except (Exception, SystemExit) as exc:
        return plugin_answers.raised(backend, "supports", exc)
    return plugin_answers.wrong_availability(backend, "supports", support) or (None if support.ok else support.reason)


def with_plugins_to_install(backends: Mapping[str, BackendReport], header: Mapping[str, Any]) -> dict[str, BackendReport]:
    """`backends` (this machine's probe), each that no package registers here given, where the
    bundle's run had it, the packages to install: those its record of the backend names (`versions`)
    at the version the run's package list (`system.packages`) has, and that are not installed here.
    A resume's cells of a plugin missing here were skipped as `unknown backend 'torchscript';
    registered: ...`, which names no package, though the bundle records it."""
    names = registry.names()
    return {name: report.model_copy(update={"reason": f"{report.reason}{to_install(name, header)}"})
            if not report.available and name not in names else report for name, report in backends.items()}


def to_install(backend: str, header: Mapping[str, Any]) -> str:
    """The clause naming the packages the bundle's run had `backend` from and this machine lacks,
    with their pip line ("; the run that made this bundle had it from ...: pip install ..."), or
    empty where the bundle records none."""
    versions, packages = lookup(header, "backends", backend, "versions"), lookup(header, "system", "packages")
    if not isinstance(versions, dict) or not isinstance(packages, dict):
        return ""
    wanted = sorted(f"{package}=={version}" for package, version in versions.items()
                    if isinstance(version, str) and packages.get(package) == version and not _installed(package))
    if not wanted:
        return ""
    return (f"; the run that made this bundle had it from {', '.join(w.replace('==', ' ') for w in wanted)}: "
            f"pip install {' '.join(shell_word(w) for w in wanted)}")


def _installed(package: object) -> bool:
    try:
        distribution(str(package))
    except (PackageNotFoundError, ValueError):
        return False
    return True
