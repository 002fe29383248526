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
import sys
from collections.abc import Iterable

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


def import_preload(backend: str, modules: Iterable[str]) -> None:
    """Import what a backend asks to have imported before its cells (`Backend.preload`). A module
    that fails to import is the backend's to report: its own import of it fails the cell where it
    is needed, with the backend's reason, so here it is only said in the log."""
    for module in modules:
        try:
            importlib.import_module(module)
        except Exception as exc:  # noqa: BLE001 - a broken plugin is its cells' failure, reported by the backend
            print(f"backend {backend!r} not fully preloaded: {module}: {type(exc).__name__}: {exc}", file=sys.stderr)
