"""A backend's variant of a model prepared as the worker prepares it: `tune`, then `prepare` with
the same arguments (harness/measure/phases.py), for the tests that call a backend directly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.contract import Backend, Prepared, Variant


def tuned_and_prepared(backend: Backend, model: Any, example: Any, *, variant: Variant, workdir: Path,
                       cache_dir: Path) -> Prepared:
    """`backend.prepare` on CPU at fp32, after `backend.tune` (TVM's MetaSchedule), which says why
    where it did not tune."""
    arguments = {"device": "cpu", "dtype": "fp32", "variant": variant, "workdir": workdir, "cache_dir": cache_dir}
    tuning = backend.tune(model, example, **arguments)
    assert tuning is None or tuning.tuned or tuning.reason, f"{backend.name}: untuned, without saying why"
    return backend.prepare(model, example, **arguments)
