"""Each compute kernel's time in one inference, for the torch-based backends on the CPU, from
torch's profiler.

One inference runs under `torch.profiler` (CPU activity), timed as a whole. A kernel is a
namespaced operator that computes (`aten::`, `mkldnn::`, `mkl::`, ...; not an allocation, not a
view, not a dropout, which in inference returns its input) or a generated kernel named in
`generated` (Inductor's C++ kernels, which the profiler would not see: they are wrapped in
`record_function` for this call only); a kernel inside
another kernel is counted once, with its parent. Each outermost kernel's time and the whole call's
are measured under the profiler (which adds a little to every operator it records); what the
kernels leave of the call is dispatch overhead: Python, nn.Module calls, Inductor's wrapper, the
dispatcher between operators. Measured in the profile pass, never in a timed one.
"""

from __future__ import annotations

from contextlib import ExitStack
from typing import Any, Callable
from unittest import mock

from harness.contract import CpuKernelTimes
from harness.fusion.ops import is_view_op

DEFINITION = ("one inference under torch.profiler: the operators that compute and generated kernels (outermost "
              "only; allocations and views not counted), each timed; their share of the call applied to the timed median")
# Allocations and the like; the views are harness/fusion/ops.py's, as eager's dispatch count leaves them out.
# Dropout in inference returns its input and dispatches nothing, but the profiler records its call: BERT
# base's eager cell listed 37 `aten::dropout` kernels. Where it computes (training), what it runs is
# recorded under it, and counted as the outermost kernels.
_NOT_KERNELS = ("aten::empty", "aten::empty_strided", "aten::empty_like", "aten::_reshape_alias", "aten::resize_",
                "aten::lift_fresh", "aten::set_", "aten::dropout", "aten::dropout_", "aten::feature_dropout",
                "aten::feature_dropout_", "aten::alpha_dropout", "aten::alpha_dropout_", "aten::feature_alpha_dropout",
                "aten::feature_alpha_dropout_")


def _is_kernel(name: str, generated_prefix: str) -> bool:
    if generated_prefix and name.startswith(generated_prefix):
        return True
    return ("::" in name and not name.startswith(("autograd::", "profiler::")) and name not in _NOT_KERNELS
            and not is_view_op(name))


def kernel_times(run: Callable[[], Any], generated: dict[Any, list[str]] | None = None,
                 generated_prefix: str = "") -> CpuKernelTimes:
    """The outermost kernels `run()` ran, each with its time, and the whole call's. `generated`:
    {module: [names]} of Python-callable kernels to wrap in `record_function` for this run (their
    names must start with `generated_prefix`)."""
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
    calls = []
    for event in sorted(prof.events(), key=lambda event: event.time_range.start):
        if not _is_kernel(event.name, generated_prefix):
            continue
        parent = event.cpu_parent
        while parent is not None and not _is_kernel(parent.name, generated_prefix):
            parent = parent.cpu_parent
        if parent is None:  # an outermost kernel
            calls.append((event.name, event.cpu_time_total * 1e3))
    return CpuKernelTimes(calls=tuple(calls), wall_ns=float(wall_ns))
