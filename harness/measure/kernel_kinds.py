"""What kind each of a CPU cell's kernels is, so that its profile pass sums the kernel time by kind.

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
loses it too: the two numberings cannot be told apart). The profile pass (harness/measure/passes.py)
sums each kind's time as it sums each kernel's: its median share of the profiled inferences applied
to the timed median.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from harness.contract import CpuKernelTimes

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
    given = name.split("_")
    kept = [_PART_NUMBER.sub("", part) for part in given]
    return "_".join(part for part, was in zip(kept, given) if part or not was) or name


def kind_method(runs: list[CpuKernelTimes]) -> str:
    """How the kinds of `runs` were named, in words."""
    named = any(times.kinds for times in runs)
    return f"{KIND_METHOD_NAMED}; else {KIND_METHOD_NAME}" if named else KIND_METHOD_NAME
