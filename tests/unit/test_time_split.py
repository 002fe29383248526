"""Where an inference's time goes: the GPU's busy time from kernel intervals, and the split of the
wall time into time inside kernels and overhead."""

from __future__ import annotations

import pytest

from harness.measure.passes import busy_us, time_split


def test_busy_time_counts_overlapping_kernels_once() -> None:
    assert busy_us([(0, 10), (5, 15), (20, 25), (21, 22)]) == 20
    assert busy_us([]) == 0


def test_the_split_is_kernels_and_the_rest_of_the_wall_time() -> None:
    split = time_split(10e6, {"kernel_time_ns_per_inference": 7.5e6, "kernel_time_method": "the profiler"}, "cuda")
    assert split["overhead_ns"] == pytest.approx(2.5e6) and split["kernel_share"] == pytest.approx(0.75)
    assert "launch and host overhead" in split["method"]
    cpu = time_split(10e6, {"kernel_share": 0.9, "kernel_time_method": "x"}, "cpu")
    assert "dispatch overhead" in cpu["method"] and cpu["kernel_ns"] == pytest.approx(9e6)
    assert time_split(10e6, {"kernel_time_ns_per_inference": None, "kernel_time_method": "not measured"}, "cpu")[
        "kernel_ns"] is None
    # a profiler's kernel time above the wall time (its own cost, or noise) leaves no negative overhead
    assert time_split(1e6, {"kernel_time_ns_per_inference": 1.2e6, "kernel_time_method": "x"}, "cpu")["overhead_ns"] == 0
