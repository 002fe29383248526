"""Measurement passes that run inside a worker: device timing and the kernel/fusion profile.

Each pass has one job. The timed loop does nothing but call, synchronise and store a
pre-allocated sample; profiling never shares a pass with timing, because profilers distort time.
"""

from __future__ import annotations

import json
import math
import time
from collections import Counter
from pathlib import Path
from typing import Any

from harness.contract import Prepared
from harness.stats import summarize_ns


def device_timing(prepared: Prepared, batch: Any, settings: dict[str, Any], device: str) -> dict[str, Any]:
    """Per-batch latency: CUDA events on GPU, perf_counter_ns around call + synchronize on CPU.

    Warm-up calls are timed and kept apart. The number of timed calls is fixed before the loop
    from the warm-up's median, so the loop reads no clock on GPU beyond the events.
    """
    clock = time.perf_counter_ns
    warmup: list[int] = []
    for _ in range(max(settings["warmup_iters"], 1)):
        start = clock()
        prepared(batch)
        prepared.synchronize()
        warmup.append(clock() - start)
    estimate_ns = max(sorted(warmup)[len(warmup) // 2], 1)
    wanted = math.ceil(settings["min_time_s"] * 1e9 / estimate_ns)
    iters = min(max(wanted, settings["min_iters"]), settings["max_iters"])

    host: list[int] | None = None
    if device == "cuda":
        import torch

        starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
        host = [0] * iters
        for i in range(iters):
            t0 = clock()
            starts[i].record()
            prepared(batch)
            ends[i].record()
            prepared.synchronize()
            host[i] = clock() - t0
        torch.cuda.synchronize()
        samples = [round(s.elapsed_time(e) * 1e6) for s, e in zip(starts, ends, strict=True)]
        method = "cuda events around the call on torch's current stream; host wall time beside it"
    else:
        samples = [0] * iters
        for i in range(iters):
            t0 = clock()
            prepared(batch)
            prepared.synchronize()
            samples[i] = clock() - t0
        method = "perf_counter_ns around call + synchronize"
    return {
        "method": method,
        "warmup_samples_ns": warmup,
        "samples_ns": samples,
        "host_samples_ns": host,
        "summary": summarize_ns(samples),
    }


def profile(prepared: Prepared, batch: Any, iters: int, device: str, workdir: Path) -> dict[str, Any]:
    """Kernels per inference and the fusion report. Never timed."""
    result: dict[str, Any] = {"fusion_report": prepared.fusion_report().to_json()}
    if device == "cuda":
        result.update(_cuda_kernels(prepared, batch, iters, workdir))
    else:
        count = prepared.cpu_dispatches(batch)
        result.update(
            {
                "kernels_per_inference": count,
                "kernel_count_method": "cpu dispatches: " + (prepared.dispatch_definition or "undefined"),
            }
        )
    result["backend_figures"] = prepared.profile_figures(batch)
    return result


def _cuda_kernels(prepared: Prepared, batch: Any, iters: int, workdir: Path) -> dict[str, Any]:
    """CUDA kernels launched per inference, counted process-wide by the profiler (CUPTI), so
    every backend's kernels are seen the same way. Memcpy and memset are not kernels."""
    from torch.profiler import ProfilerActivity, profile as torch_profile

    prepared(batch)
    prepared.synchronize()
    with torch_profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            prepared(batch)
            prepared.synchronize()
    trace_path = workdir / "profile_trace.json"
    prof.export_chrome_trace(str(trace_path))
    events = json.loads(trace_path.read_text()).get("traceEvents", [])
    trace_path.unlink()
    kernels = Counter(e.get("name", "?") for e in events if e.get("cat") == "kernel")
    total = sum(kernels.values())
    return {
        "kernels_per_inference": total / iters,
        "kernel_count_method": "CUDA kernels (trace events of category 'kernel') per inference, torch.profiler/CUPTI",
        "profiled_iters": iters,
        "top_kernels": [{"name": n, "calls_per_inference": c / iters} for n, c in kernels.most_common(25)],
    }
