"""A CPU cell's kernel time summed by kind, inside a worker's profile pass.

A fused kernel replaces several: ONNX Runtime's SkipLayerNormalization stands for two Adds and a
LayerNormalization, TVM's fused_conv2d_add_relu for a conv2d, an add and a relu. Set fusion on
against off kernel by kernel and nothing pairs; kind by kind, the time that moved shows where a
fusion's gain or loss is: a new kind's time on one side, the kinds it replaced giving theirs back
on the other.

A kernel's kind is the one its backend's profiler names (`CpuKernelTimes.kinds`: ONNX Runtime's
node type); else an operator's name (`aten::linear`, `mkldnn::_convolution_pointwise`: a namespace
before `::`) is its own kind; else its name with the number each of its parts ends in taken off:
one kernel generated many times over is one kind (TVM's matmul14 and matmul18 are matmul,
fused_conv2d38_subtract16_add45_relu22 is fused_conv2d_subtract_add_relu, Inductor's
cpp_fused_gelu_176 is cpp_fused_gelu; an operator whose own name ends in a number, log2 or expm1,
loses it too: the two numberings cannot be told apart). Each kind's time is taken as each kernel's is
(harness/measure/passes.py): its median share of the profiled inferences applied to the timed median.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from harness.contract import CpuKernelTimes
from harness.stats.summary import median

KIND_METHOD_NAMED = "the operator type the backend's profiler names for each kernel"
KIND_METHOD_NAME = ("an operator's name (namespace::name) as it is, else the kernel's name without the number each "
                    "of its parts ends in")
_PART_NUMBER = re.compile(r"\d+$")


def named_well(kinds: Any) -> bool:
    """Whether a backend's `CpuKernelTimes.kinds` is what the contract says: a mapping of kernel
    names to kinds, each a string."""
    return isinstance(kinds, Mapping) and all(isinstance(k, str) and isinstance(v, str) for k, v in kinds.items())


def kind_of(name: str, kinds: Mapping[str, str]) -> str:
    """`name`'s kind: the one `kinds` gives it; else an operator's name (`aten::add`) as it is;
    else the name with the number each `_`-separated part ends in taken off, a part that is all
    number left out (a name that is all number is its own kind)."""
    named = kinds.get(name)
    if named:
        return str(named)
    if "::" in name:
        return name
    parts = [_PART_NUMBER.sub("", part) if part else part for part in name.split("_")]
    return "_".join(part for part, given in zip(parts, name.split("_")) if part or not given) or name


def kind_method(runs: list[CpuKernelTimes]) -> str:
    """How the kinds of `runs` were named, in words."""
    named = any(times.kinds for times in runs)
    return f"{KIND_METHOD_NAMED}; else {KIND_METHOD_NAME}" if named else KIND_METHOD_NAME


def by_kind(runs: list[CpuKernelTimes], wall_ns: float) -> list[dict[str, Any]]:
    """Each kind of kernel the profiled inferences `runs` ran, the costliest first: its kernels (how
    many differently named), its calls per inference (the median over the inferences) and its time
    per inference (the median of its share of each inference applied to `wall_ns`, the timed
    median; where that is 0, a backend that computes no model, the median of its profiled time). A
    kind most inferences did not run is left out, as a kernel is."""
    shares: dict[str, list[float]] = {}
    calls: dict[str, list[int]] = {}
    spent: dict[str, list[float]] = {}
    names: dict[str, set[str]] = {}
    for i, times in enumerate(runs):
        for name, ns in times.calls:
            kind = kind_of(name, times.kinds)
            if kind not in shares:
                shares[kind], calls[kind], spent[kind] = [0.0] * len(runs), [0] * len(runs), [0.0] * len(runs)
                names[kind] = set()
            shares[kind][i] += ns / times.wall_ns
            spent[kind][i] += ns
            calls[kind][i] += 1
            names[kind].add(name)
    called = {kind: median(counts) for kind, counts in calls.items()}
    share = {kind: median(values) for kind, values in shares.items() if called[kind] > 0}
    ordered = sorted(share, key=lambda kind: (-share[kind], -called[kind], kind))
    return [{"kind": kind, "kernels": len(names[kind]), "calls_per_inference": called[kind],
             "ns_per_inference": share[kind] * wall_ns if wall_ns > 0 else median(spent[kind])}
            for kind in ordered]
