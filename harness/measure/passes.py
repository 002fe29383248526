"""The kernel/fusion profile pass, inside a worker. Never timed: profilers distort time (the
device-timing pass is harness/measure/timing.py).

Besides kernel counts and the fusion report it measures where an inference's time goes: the
time inside kernels (GPU: the union of the CUDA kernels' intervals, from CUPTI; CPU: the share of
an inference the backend's own profiler finds inside kernels, `Prepared.cpu_kernel_times`, the
median over `profile_iters` profiled inferences) against the wall time the timing pass measured; the
rest is launch and host overhead (GPU) or dispatch overhead (CPU). On both, the kernels that take the
most time are listed with their calls and time per inference: on the CPU the time inside kernels
split between them in proportion to the median of each one's part of it in each profiled inference,
so that they add up to it, and one inference the profiler slowed, or a kernel the scheduler preempted in it, names no
kernel longer than the inference. On the CPU every kind of kernel is listed too, with its calls and time
(harness/measure/kernel_kinds.py), so that fusion on can be set against off kind by kind.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pydantic

from harness.bundle.passes_record import PROPORTIONAL_SPLIT, BackendFigures, Kernels
from harness.bundle.record_base import COUNT_MAX
from harness.contract import CpuKernelTimes, Prepared
from harness.errors import BackendFailed
from harness.fusion import FusionReport
from harness.measure import kernel_kinds, plugin_answers
from harness.measure.plugin_answers import CONTRACT, asked
from harness.stats.summary import median


def profile(prepared: Prepared, batch: Any, iters: int, device: str, workdir: Path, wall_ns: float) -> dict[str, Any]:
    """Kernels per inference and the fusion report. Never timed. `wall_ns`: the timed median of an
    inference, which a CPU kernel's share of its profiled inference is applied to."""
    result: dict[str, Any] = {"fusion_report": asked(prepared, "fusion_report", (FusionReport,)).to_json()}
    if device == "cuda":
        result.update(_cuda_kernels(prepared, batch, iters, workdir))
    else:
        count = asked(prepared, "cpu_dispatches", (int, type(None)), batch)
        if count is not None and not 0 <= count <= COUNT_MAX:  # else the cell failed in a pydantic error naming no method
            raise BackendFailed(f"{type(prepared).__name__}.cpu_dispatches() returned {count:.3g}; it returns the "
                                f"compute dispatches of one inference, 0 to {COUNT_MAX:.0e}, or None ({CONTRACT})")
        for definition in ("dispatch_definition", "kernel_time_definition"):
            plugin_answers.attribute(prepared, definition, (str,))
        runs = _cpu_profiled_runs(prepared, batch, iters)
        method = prepared.kernel_time_definition or "not measured by this backend"
        if runs:
            method += f"; the kernels' share the median over {len(runs)} profiled inferences, {PROPORTIONAL_SPLIT}"
        result.update(
            {
                "kernels_per_inference": count,
                "kernel_count_method": "cpu dispatches: " + (prepared.dispatch_definition or "undefined"),
                "kernel_time_method": method,
                **cpu_kernel_figures(runs, wall_ns),
            }
        )
    result["backend_figures"] = _figures(prepared, asked(prepared, "profile_figures", (dict,), batch))
    return result


def _figures(prepared: Prepared, figures: dict[str, Any]) -> dict[str, Any]:
    """`figures`, where the names a reader shows are of their type (BackendFigures: an arena's
    bytes whole and in range); BackendFailed naming the method and the figure otherwise."""
    try:
        BackendFigures.model_validate(figures)
    except pydantic.ValidationError as exc:
        error = exc.errors()[0]
        name = ".".join(str(part) for part in error["loc"])
        raise BackendFailed(f"{type(prepared).__name__}.profile_figures() returned {name} {figures.get(name)!r:.40}: "
                            f"{error['msg'].lower()} ({CONTRACT})") from None
    return figures


def _cuda_kernels(prepared: Prepared, batch: Any, iters: int, workdir: Path) -> dict[str, Any]:
    """CUDA kernels launched per inference, counted process-wide by the profiler (CUPTI), so
    every backend's kernels are seen the same way, each of the kind the backend names for it
    (`Prepared.cuda_kernel_kinds`), else of the kind its name gives. Memcpy and memset are not kernels."""
    kinds = asked(prepared, "cuda_kernel_kinds", (Mapping,))
    if not kernel_kinds.named_well(kinds):
        raise BackendFailed(f"{type(prepared).__name__}.cuda_kernel_kinds() returned {kinds!r:.80}, not a mapping of "
                            f"kernel names to kinds, each a string ({CONTRACT})")
    return cuda_kernel_figures(_cuda_trace(prepared, batch, iters, workdir), iters, kinds)


def _cuda_trace(prepared: Prepared, batch: Any, iters: int, workdir: Path) -> list[dict[str, Any]]:
    """The profiler's trace events (torch.profiler, CUDA's by CUPTI) of `iters` inferences after one
    unprofiled."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    prepared(batch)
    prepared.synchronize()
    with torch_profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            prepared(batch)
            prepared.synchronize()
    trace_path = workdir / "profile_trace.json"
    prof.export_chrome_trace(str(trace_path))
    events: list[dict[str, Any]] = json.loads(trace_path.read_text()).get("traceEvents", [])
    trace_path.unlink()
    return events


#: The kernels a cell lists by the time they take (`Kernels.top_kernels`).
TOP_KERNELS = 25


#: A profile's calls summed by a key (a kernel's name, or its kind), the costliest first: each key with
#: its calls and time per inference and the names of the kernels it holds.
Summed = list[tuple[str, float, float, set[str]]]


def _top_kernels(by_name: Summed) -> list[dict[str, Any]]:
    """`Kernels.top_kernels` from a profile's calls summed by kernel name: the TOP_KERNELS costliest."""
    return [{"name": name, "calls_per_inference": called, "ns_per_inference": ns}
            for name, called, ns, _ in by_name[:TOP_KERNELS]]


def _by_kind(by_kind: Summed) -> list[dict[str, Any]]:
    """`Kernels.by_kind` from a profile's calls summed by kind: every kind, with its kernels."""
    return [{"kind": kind, "kernels": len(names), "calls_per_inference": called, "ns_per_inference": ns}
            for kind, called, ns, names in by_kind]


def _traced(timed: list[tuple[str, float]], iters: int,
            key: Callable[[str], str]) -> Summed:
    """The calls of `iters` traced inferences, (name, ns) each, summed by `key` (a kernel's name, or
    its kind), the costliest first: each key with its calls and time per inference and the kernels'
    names it holds."""
    calls: Counter[str] = Counter()
    spent: dict[str, float] = {}
    names: dict[str, set[str]] = {}
    for name, ns in timed:
        at = key(name)
        calls[at] += 1
        spent[at] = spent.get(at, 0.0) + ns
        names.setdefault(at, set()).add(name)
    return [(at, calls[at] / iters, spent[at] / iters, names[at])
            for at in sorted(calls, key=lambda at: (-spent[at], -calls[at], at))]


def _cpu_profiled_runs(prepared: Prepared, batch: Any, iters: int) -> list[CpuKernelTimes]:
    """`iters` profiled inferences, or none where the backend cannot tell (it answers None)."""
    runs = []
    for _ in range(iters):
        times = asked(prepared, "cpu_kernel_times", (CpuKernelTimes, type(None)), batch)
        if times is not None:
            plugin_answers.kernel_times_fault(prepared, times)
        if times is None or times.wall_ns <= 0:
            return []
        if not kernel_kinds.named_well(times.kinds):
            raise BackendFailed(f"{type(prepared).__name__}.cpu_kernel_times() returned CpuKernelTimes whose kinds are "
                                f"{type(times.kinds).__name__} {times.kinds!r:.80}, not a mapping of kernel names to "
                                f"kinds, each a string ({CONTRACT})")
        runs.append(times)
    return runs


def cpu_kernel_figures(runs: list[CpuKernelTimes], wall_ns: float) -> dict[str, Any]:
    """The kernel figures of profiled inferences on the CPU: the median share of an inference spent
    inside kernels (each at most 1: the backend's clocks may round), and the kernels that take the
    most time, slowest first, each with its calls (the median over the inferences) and its time: that
    share applied to `wall_ns` (the timed median), split between the kernels in proportion to the
    median of each one's part of an inference's time in kernels, so that they add up to it (where
    `wall_ns` is 0, a backend that computes no model, each its median profiled time), and every kind of
    kernel with its time the same way (harness/measure/kernel_kinds.py)."""
    if not runs:
        return {"kernel_share": None}
    inside = median([min(sum(ns for _, ns in t.calls) / t.wall_ns, 1.0) for t in runs])
    return {
        "kernel_share": inside,
        "profiled_iters": len(runs),
        "top_kernels": _top_kernels(_summed(runs, inside * wall_ns, lambda name, times: name)),
        "by_kind": _by_kind(_summed(runs, inside * wall_ns, lambda name, times: kernel_kinds.kind_of(name, times.kinds))),
        "kind_method": kernel_kinds.kind_method(runs),
    }


def _summed(runs: list[CpuKernelTimes], inside_ns: float,
            key: Callable[[str, CpuKernelTimes], str]) -> Summed:
    """The profiled inferences' calls summed by `key` (a kernel's name, or its kind), the costliest
    first: each key with its calls per inference (the median over the inferences), its time per
    inference (`inside_ns`, the time in kernels, split between the keys in proportion to the median
    of each one's part of each inference's time in kernels; where `inside_ns` is 0, its median
    profiled time) and the kernels' names it holds."""
    parts: dict[str, list[float]] = {}
    calls: dict[str, list[int]] = {}
    spent: dict[str, list[float]] = {}
    names: dict[str, set[str]] = {}
    for i, times in enumerate(runs):
        in_kernels = sum(ns for _, ns in times.calls)
        for name, ns in times.calls:
            at = key(name, times)
            if at not in parts:
                parts[at], calls[at], spent[at], names[at] = [0.0] * len(runs), [0] * len(runs), [0.0] * len(runs), set()
            parts[at][i] += ns / in_kernels if in_kernels > 0 else 0.0
            spent[at][i] += ns
            calls[at][i] += 1
            names[at].add(name)
    called = {at: median(counts) for at, counts in calls.items()}
    # a kernel most of the profiled inferences did not run (a lazily built cache, say) is none of the inference's
    part = {at: median(values) for at, values in parts.items() if called[at] > 0}
    # Each key's part of its inference's time in kernels, not of the whole inference: the scheduler
    # taking the core between two kernels shrank every kernel's share of that inference, and one kernel
    # it slowed, every other kernel's. Where most inferences were slowed somewhere, the medians of the
    # shares added up to far less than the time in kernels (0.59 of it, mobilenet_v3_small on ONNX
    # Runtime on a busy VM); the parts, their medians scaled to add up to 1, give all of it.
    total = sum(part.values())
    return [(at, called[at], part[at] / total * inside_ns if inside_ns > 0 and total > 0 else median(spent[at]), names[at])
            for at in sorted(part, key=lambda at: (-part[at], -called[at], at))]


def cuda_kernel_figures(events: list[dict[str, Any]], iters: int, kinds: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The kernel figures of `iters` profiled inferences from the profiler's trace events: how many
    kernels, the GPU's busy time, the kernels that take the most time, each with its calls and
    time per inference (so a report can say which fused kernel a slower cell spends its time in),
    and every kind of kernel with its kernels, calls and time per inference, the costliest first
    (harness/measure/kernel_kinds.py: the kind `kinds`, the backend's, gives a kernel by its name,
    else the one its name gives; a kernel's own time, as the trace gives it)."""
    kinds = kinds or {}
    launched = [e for e in events if e.get("cat") == "kernel"]
    replays = sum(1 for e in events if e.get("cat") == "cuda_runtime" and str(e.get("name", "")).startswith("cudaGraphLaunch"))
    if replays and not launched:
        # CUPTI may leave out the kernels of a graph captured before the profiler started: zero
        # kernels and a GPU never busy would be read as measured, all of the wall time overhead.
        return {"kernels_per_inference": None, "profiled_iters": iters, "kernel_count_method": (
            f"not counted: the profiler (torch.profiler/CUPTI) traced {replays} CUDA graph launch(es) in {iters} "
            "inference(s) and none of the kernels they replayed")}
    timed = [(e.get("name", "?"), float(e.get("dur", 0)) * 1e3) for e in launched]  # the trace's microseconds, as ns
    intervals = [(float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0))) for e in launched if "ts" in e]
    return {
        "kernels_per_inference": len(launched) / iters,
        "kernel_count_method": "CUDA kernels (trace events of category 'kernel') per inference, torch.profiler/CUPTI",
        "profiled_iters": iters,
        "top_kernels": _top_kernels(_traced(timed, iters, lambda name: name)),
        "by_kind": _by_kind(_traced(timed, iters, lambda name: kernel_kinds.kind_of(name, kinds))),
        "kind_method": kernel_kinds.naming(any(name in kinds for name, _ in timed)),
        "kernel_time_ns_per_inference": busy_us(intervals) * 1e3 / iters,
        "kernel_time_method": (
            "the GPU's busy time: the union of the CUDA kernels' intervals (CUPTI), per inference; kernels that overlap count once"
        ),
        "kernel_time_sum_ns_per_inference": sum(end - start for start, end in intervals) * 1e3 / iters,
    }


def busy_us(intervals: list[tuple[float, float]]) -> float:
    """The length of the union of (start, end) intervals."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end <= reach:
            continue
        total += end - max(start, reach)
        reach = end
    return total


def time_split(wall_ns: float, figures: Kernels, device: str) -> dict[str, Any]:
    """Where one inference's wall time (the device-timing median) goes: kernels and the rest.
    GPU: the kernels' busy time; CPU: the backend's kernel share applied to the wall time."""
    kernel_ns = figures.kernel_time_ns_per_inference
    if kernel_ns is None and figures.kernel_share is not None:
        kernel_ns = figures.kernel_share * wall_ns
    if kernel_ns is None or wall_ns <= 0:
        return {"wall_ns": wall_ns, "kernel_ns": None, "overhead_ns": None, "method": figures.kernel_time_method or "not measured"}
    overhead = "launch and host overhead, idle gaps" if device == "cuda" else "dispatch overhead"
    return {
        "wall_ns": wall_ns,
        "kernel_ns": kernel_ns,
        "overhead_ns": max(wall_ns - kernel_ns, 0.0),
        "kernel_share": min(kernel_ns / wall_ns, 1.0),
        "method": f"{figures.kernel_time_method}; the rest of the wall time is {overhead}",
    }
