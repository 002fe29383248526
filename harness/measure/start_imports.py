"""What every cell's worker has imported before it reads its memory baseline, however it started.

A preloaded parent (harness/measure/preloaded.py) imports `MODULES` and the run's backends'
`Backend.preload` once, then forks; a fresh worker (`--fresh-workers`, a Ray task, a parent that
cannot fork) imports the same in its own `import` phase, before `rss_baseline_bytes` is read. So
the baseline is taken after the imports either way, and a cell's `peak_rss_delta_bytes` is what
its model, compile and inference add. A fresh worker used to import torchvision only while
building its model: its 170 MiB or so counted in a fresh resnet18 cell's delta (253 MiB, where its
model and inference add about 80).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from collections.abc import Iterable, Sequence

#: What every worker imports before it measures anything (harness/measure/worker.py and its phases.py).
MODULES = (
    "torch",
    "torchvision",
    "numpy",
    "psutil",
    "mlperf_loadgen",
    "harness.measure.worker",
    "harness.measure.activity",
    "harness.measure.correctness",
    "harness.measure.loadgen",
    "harness.measure.machine_speed",
    "harness.measure.passes",
    "harness.measure.roofline",
    "harness.measure.memory",
    "harness.measure.timing",
    "harness.models.zoo",
    "harness.precision",
)


def import_modules() -> None:
    """Import `MODULES` (in a forked worker, already imported: nothing to do)."""
    for module in MODULES:
        importlib.import_module(module)


#: The modules `import_preload` could not import in this process, or in the preloaded parent it was
#: forked from (a fork keeps this), and how each failed the first time. Python keeps no failed import:
#: each forked worker ran it again, at its cost, and said the error of a second run of the module's
#: code, which can be another (a registration it made before failing, refused as made already),
#: where the first was in the parent's log only, deleted with it.
_FAILED: dict[str, str] = {}


class _FailedBefore(importlib.abc.MetaPathFinder):
    """Refuses a module of `_FAILED` with its first error, so that the backend's own import of it, in
    this process or a worker forked from it, fails with that error: run again, the module's code
    fails otherwise (`already registered`), and the cell's reason said that."""

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: object = None) -> importlib.machinery.ModuleSpec | None:
        if fullname in _FAILED:
            raise ImportError(f"{fullname}: {_FAILED[fullname]} (its first import's error, in this process or the "
                              "preloaded parent it was forked from; not imported again)", name=fullname)
        return None


_REFUSER = _FailedBefore()


def import_preload(backend: str, modules: Iterable[str]) -> None:
    """Import what a backend asks to have imported before its cells (`Backend.preload`). A module
    that fails to import is the backend's to report: its own import of it fails the cell where it
    is needed, with the backend's reason and the module's first error (`_FailedBefore`), so here it
    is only said in the log: with its first error, and once tried, never again in this process or
    one forked from it."""
    for module in modules:
        if module in _FAILED:
            print(f"backend {backend!r} not fully preloaded: {module}: {_FAILED[module]} "
                  "(its first import's error, in this process or the preloaded parent; not imported again)",
                  file=sys.stderr)
            continue
        try:
            importlib.import_module(module)
        except Exception as exc:  # noqa: BLE001 - a broken plugin is its cells' failure, reported by the backend
            _FAILED[module] = f"{type(exc).__name__}: {exc}"
            print(f"backend {backend!r} not fully preloaded: {module}: {_FAILED[module]}", file=sys.stderr)
            if _REFUSER not in sys.meta_path:
                sys.meta_path.insert(0, _REFUSER)
