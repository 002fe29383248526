"""Where an inference's time goes: the GPU's busy time from kernel intervals, and the split of the
wall time into time inside kernels and overhead."""

from __future__ import annotations

from typing import Any

import pytest

from harness.bundle.cell_record import Kernels
from harness.contract import CpuKernelTimes
from harness.measure.passes import busy_us, cpu_kernel_figures, cuda_kernel_figures, time_split


def _kernels(**figures: Any) -> Kernels:
    """The profile pass's kernel figures, with a count that the split does not read."""
    return Kernels(kernels_per_inference=None, kernel_count_method="not counted here", **figures)


def test_busy_time_counts_overlapping_kernels_once() -> None:
    assert busy_us([(0, 10), (5, 15), (20, 25), (21, 22)]) == 20
    assert busy_us([]) == 0


def test_the_split_is_kernels_and_the_rest_of_the_wall_time() -> None:
    split = time_split(10e6, _kernels(kernel_time_ns_per_inference=7.5e6, kernel_time_method="the profiler"), "cuda")
    assert split["overhead_ns"] == pytest.approx(2.5e6) and split["kernel_share"] == pytest.approx(0.75)
    assert "launch and host overhead" in split["method"]
    cpu = time_split(10e6, _kernels(kernel_share=0.9, kernel_time_method="x"), "cpu")
    assert "dispatch overhead" in cpu["method"] and cpu["kernel_ns"] == pytest.approx(9e6)
    assert time_split(10e6, _kernels(kernel_time_ns_per_inference=None, kernel_time_method="not measured"), "cpu")["kernel_ns"] is None
    # a profiler's kernel time above the wall time (its own cost, or noise) leaves no negative overhead
    assert time_split(1e6, _kernels(kernel_time_ns_per_inference=1.2e6, kernel_time_method="x"), "cpu")["overhead_ns"] == 0


def test_the_trace_gives_each_kernels_calls_and_time_the_slowest_first() -> None:
    """Two profiled inferences: `mm` twice each (10 us a call), `fused_conv` once each (50 us), a copy
    and a CPU event beside them, which are not kernels."""
    events = []
    for i in range(2):
        t = i * 1000.0
        events += [
            {"cat": "kernel", "name": "mm", "ts": t, "dur": 10.0},
            {"cat": "kernel", "name": "mm", "ts": t + 20, "dur": 10.0},
            {"cat": "kernel", "name": "fused_conv", "ts": t + 40, "dur": 50.0},
            {"cat": "gpu_memcpy", "name": "Memcpy HtoD", "ts": t + 100, "dur": 30.0},
            {"cat": "cpu_op", "name": "aten::conv2d", "ts": t, "dur": 200.0},
        ]
    figures = cuda_kernel_figures(events, iters=2)
    assert figures["kernels_per_inference"] == 3
    assert figures["top_kernels"] == [
        {"name": "fused_conv", "calls_per_inference": 1, "ns_per_inference": 50e3},
        {"name": "mm", "calls_per_inference": 2, "ns_per_inference": 20e3},
    ]
    assert figures["kernel_time_ns_per_inference"] == figures["kernel_time_sum_ns_per_inference"] == 70e3


def test_the_split_reads_the_figures_the_profile_pass_returned() -> None:
    """The worker hands the split what `profile` returned, read once as the cell's `Kernels`."""
    figures = {
        "kernels_per_inference": 3.0,
        "kernel_count_method": "CUDA kernels",
        "kernel_time_ns_per_inference": 7.5e6,
        "kernel_time_method": "the profiler",
        "top_kernels": [],
    }
    assert time_split(10e6, Kernels.model_validate(figures), "cuda")["kernel_share"] == pytest.approx(0.75)


def test_a_cpu_profile_gives_the_kernels_share_and_each_kernels_calls_and_time_the_slowest_first() -> None:
    """One profiled inference of 10 ms: `fused_conv` twice (3 ms a call), `relu` once (1 ms); 3 ms
    of dispatch between them."""
    times = CpuKernelTimes(calls=(("fused_conv", 3e6), ("relu", 1e6), ("fused_conv", 3e6)), wall_ns=10e6)
    figures = cpu_kernel_figures(times)
    assert figures["kernel_share"] == pytest.approx(0.7)
    assert figures["top_kernels"] == [
        {"name": "fused_conv", "calls_per_inference": 2, "ns_per_inference": 6e6},
        {"name": "relu", "calls_per_inference": 1, "ns_per_inference": 1e6},
    ]
    assert Kernels.model_validate({"kernels_per_inference": 3, "kernel_count_method": "x", **figures}).profiled_iters == 1
    # kernels timed past the call's own clock (rounding) still give a share of at most 1
    assert cpu_kernel_figures(CpuKernelTimes(calls=(("k", 11e6),), wall_ns=10e6))["kernel_share"] == 1.0


def test_a_backend_whose_profiler_cannot_tell_leaves_the_share_unmeasured() -> None:
    assert cpu_kernel_figures(None) == {"kernel_share": None}
    split = time_split(10e6, _kernels(**cpu_kernel_figures(None), kernel_time_method="not measured by this backend"), "cpu")
    assert split["kernel_ns"] is None
