"""Validate's check of a cell's kernel figures against each other (`metrics.kernels`): the profile
pass (harness/measure/passes.py) counts and times the kernels and their kinds from one profile, so
the kinds must add up to what the cell says the kernels are.

- On a GPU one profiler trace gives the kernels per inference and each kind's calls, so the kinds'
  calls add up to the count. On the CPU they are two counts: the backend's dispatches, and the
  medians of the profiler's calls.
- On the CPU, in a cell whose kernel time method says the time in kernels was split between the
  kernels (`PROPORTIONAL_SPLIT`, cells written since 2026-12-06), the kinds' times add up to the
  time in kernels: the cell's kernel share of the samples' median. Before, each kind's time was its
  own median share of an inference, and they added up to less (0.59 of it in one kept cell): those
  cells are read as recorded.
"""

from __future__ import annotations

from typing import Any

from harness.bundle.passes_record import PROPORTIONAL_SPLIT
from harness.bundle.reader import lookup
from harness.bundle.tolerance import close, number


def problems(cell: dict[str, Any], wall: float | None) -> list[str]:
    """What in a cell's kernel figures disagrees with the rest of them; `wall`: the samples' median
    the worker applied the kernel share to (None where the record cannot give it)."""
    kernels, kinds = cell["metrics"].get("kernels"), lookup(cell, "metrics", "kernels", "by_kind")
    if not isinstance(kernels, dict) or not isinstance(kinds, list) or not kinds:
        return []  # a cell of a schema before 11, or a GPU cell written before 2026-12-02, lists no kinds
    if cell["config"].get("device") == "cuda":
        return _calls(kernels, kinds)
    return _times(kernels, kinds, wall)


def _calls(kernels: dict[str, Any], kinds: list[Any]) -> list[str]:
    count, calls = number(kernels.get("kernels_per_inference")), [number(lookup(k, "calls_per_inference")) for k in kinds]
    if count is None or None in calls:
        return []  # not counted (CUDA graphs the profiler did not see into), or the schema's finding
    total = sum(call or 0.0 for call in calls)
    if not close(count, total, absolute=0.0):
        return [f"kernels: kernels_per_inference {kernels['kernels_per_inference']} but its kinds' calls per inference "
                f"add up to {total:.6g}"]
    return []


def _times(kernels: dict[str, Any], kinds: list[Any], wall: float | None) -> list[str]:
    share, times = number(kernels.get("kernel_share")), [number(lookup(k, "ns_per_inference")) for k in kinds]
    if PROPORTIONAL_SPLIT not in str(kernels.get("kernel_time_method")) or share is None or None in times:
        return []  # split the older way, or the schema's finding
    inside = share * wall if wall is not None else None
    if not inside:
        return []  # a backend that computes no model: each kind its median profiled time, nothing to add up to
    total = sum(ns or 0.0 for ns in times)
    # each recorded time may be off by its last nanosecond
    if not close(total, inside, absolute=float(len(times))):
        return [f"kernels: its kinds' ns_per_inference add up to {total:.6g}, but its time in kernels (kernel_share "
                f"{kernels['kernel_share']} of the samples' median {wall:.6g}) is {inside:.6g}"]
    return []
