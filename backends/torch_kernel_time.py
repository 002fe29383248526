"""The share of an inference spent inside compute kernels, for the torch-based backends on the
CPU, from torch's profiler.

One inference runs under `torch.profiler` (CPU activity), timed as a whole. A kernel is a
namespaced operator that computes (`aten::`, `mkldnn::`, `mkl::`, ...; not an allocation, not a
view) or a generated kernel named in `generated` (Inductor's C++ kernels, which the profiler
would not see: they are wrapped in `record_function` for this call only); a kernel inside
another kernel is counted once, with its parent. The share is the kernels' time over the whole
call's, both under the profiler (which adds a little to every operator it records); what is
left is dispatch overhead: Python, nn.Module calls, Inductor's wrapper, the dispatcher between
operators. Measured in the profile pass, never in a timed one.
"""

from __future__ import annotations

from contextlib import ExitStack
from typing import Any, Callable
from unittest import mock

DEFINITION = ("share of one inference under torch.profiler spent inside operators that compute and generated "
              "kernels (outermost only; allocations and views not counted), applied to the timed median")
_NOT_KERNELS = ("aten::empty", "aten::empty_strided", "aten::empty_like", "aten::as_strided", "aten::view",
                "aten::_reshape_alias", "aten::reshape", "aten::detach", "aten::t", "aten::transpose",
                "aten::permute", "aten::expand", "aten::slice", "aten::select", "aten::unsqueeze", "aten::squeeze",
                "aten::resize_", "aten::lift_fresh", "aten::alias", "aten::set_")


def _is_kernel(name: str, generated_prefix: str) -> bool:
    if generated_prefix and name.startswith(generated_prefix):
        return True
    return "::" in name and not name.startswith(("autograd::", "profiler::")) and name not in _NOT_KERNELS


def kernel_share(run: Callable[[], Any], generated: dict[Any, list[str]] | None = None,
                 generated_prefix: str = "") -> float:
    """The share of `run()`'s time inside kernels. `generated`: {module: [names]} of
    Python-callable kernels to wrap in `record_function` for this run (their names must start
    with `generated_prefix`)."""
    from time import perf_counter_ns

    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    def timed(name: str, kernel: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with record_function(name):
                return kernel(*args, **kwargs)

        return wrapper

    with ExitStack() as stack:
        for module, names in (generated or {}).items():
            for name in names:
                stack.enter_context(mock.patch.object(module, name, timed(name, getattr(module, name))))
        with torch.no_grad(), profile(activities=[ProfilerActivity.CPU]) as prof:
            start = perf_counter_ns()
            run()
            wall_ns = perf_counter_ns() - start
    total_us = 0.0
    for event in prof.events():
        if not _is_kernel(event.name, generated_prefix):
            continue
        parent = event.cpu_parent
        while parent is not None and not _is_kernel(parent.name, generated_prefix):
            parent = parent.cpu_parent
        if parent is None:  # an outermost kernel
            total_us += event.cpu_time_total
    return min(total_us * 1e3 / max(wall_ns, 1), 1.0)
