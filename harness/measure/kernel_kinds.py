"""What kind each of a cell's kernels is, so that its profile pass sums the kernel time by kind.

A fused kernel replaces several: ONNX Runtime's SkipLayerNormalization stands for two Adds and a
LayerNormalization, TVM's fused_conv2d_add_relu for a conv2d, an add and a relu. Set fusion on
against off kernel by kernel and nothing pairs; kind by kind, the time that moved shows where a
fusion's gain or loss is: a new kind's time on one side, the kinds it replaced giving theirs back
on the other.

A kernel's kind is the one its backend names (`CpuKernelTimes.kinds`: ONNX Runtime's node type, as
its profiler names it; Inductor's generated kernel that only copies, after what it copies,
`cpp_fused_layout_copy`, and one that adds the bias of a matrix multiply or convolution run as a
library call, after what it runs, `cpp_fused_bias_hardswish_mean`, where its name lists the
operators around it, `addmm` among them); else an operator's name
(`aten::linear`, `mkldnn::_convolution_pointwise`: a namespace before `::`) is its own kind; else
its name with the number each of its parts ends in taken off: one kernel generated many times over
is one kind (TVM's matmul14 and matmul18 are matmul, fused_conv2d38_subtract16_add45_relu22 is
fused_conv2d_subtract_add_relu, Inductor's cpp_fused_gelu_176 is cpp_fused_gelu; an operator whose
own name ends in a number, log2 or expm1, loses it too: the two numberings cannot be told apart),
and without its parts that are numbers, tile shapes or hashes (`128x64`, `0xeca0...`). On the CPU
the profile pass (harness/measure/passes.py) sums each kind's time as it sums each kernel's: its
part of the time inside kernels, in proportion to its median part of a profiled inference's; on a GPU the trace's
durations. On a GPU the harness traces the kernels itself and the backend names kinds by the names
CUPTI gives them (`Prepared.cuda_kernel_kinds`): Inductor's Triton kernel that adds a cuDNN
convolution's bias and runs its relu, `triton_poi_fused_convolution_relu_0`, is a
`triton_poi_fused_bias_relu`, as on the CPU (until 2026-12-06 a `triton_poi_fused_convolution_relu`,
its time counted as convolution beside cuDNN's, which runs the convolution).

A GPU's kernels are named by CUPTI, and two more rules come first for them. A C++ kernel's
demangled signature is the function it instantiates, without its return type, template arguments
and parameters (`void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>,
...>(...)` is at::native::vectorized_elementwise_kernel: every elementwise functor of ATen one kind, as
a profiler's base name has it; the functor is in the kernel's own name, `top_kernels`), except a
launcher that only wraps the kernel its first template argument names (CUTLASS's `cutlass::Kernel`,
`cutlass::Kernel2`, `cutlass::device_kernel`), whose kind is that argument's (`void
cutlass::Kernel2<cutlass_80_simt_sgemm_64x64_8x5_tn_align1>(...)` is cutlass_simt_sgemm: otherwise
every CUTLASS kernel, a GEMM or a convolution, would be one kind). A kernel of
NVIDIA's libraries named by its configuration (`sm80_xmma_fprop_implicit_gemm_f32f32_..._tilesize128x32x8_
..._execute_kernel__5x_cudnn`; its first word an architecture, sm80 or ampere, or a family, cutlass or
nvjet, or its last the library) is the library where its last word names one, and the operation, the
words after the architecture (a family's may be a bare number: cutlass_80_...) up to the first with a
number in it (`cudnn xmma_fprop_implicit_gemm`, `cutlass_simt_sgemm`;
TensorRT's, which names no library, `xmma_fprop_implicit_gemm`): each tile shape would otherwise be
a kind. Triton's and TVM's generated kernels (`triton_poi_fused_add_convolution_relu_4`,
`fused_conv2d1_subtract1_relu1_kernel`) the backend names no kind for take the numbering rule above.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from harness.contract import CpuKernelTimes

KIND_METHOD_NAMED = ("the kind the backend names for a kernel (ONNX Runtime: the operator type its profiler names; "
                     "Inductor: a generated kernel that only copies, after what it copies; one that adds a library "
                     "call's bias, after what it runs)")
KIND_METHOD_NAME = ("a C++ kernel's function without its template arguments and parameters (a CUTLASS launcher's: "
                    "the kind of the kernel its first template argument names); a kernel of NVIDIA's "
                    "libraries named by its configuration, its library and operation; an operator's name "
                    "(namespace::name) as it is; else the kernel's name without the number each of its parts ends "
                    "in, and without its parts that are numbers, tile shapes or hashes")
_PART_NUMBER = re.compile(r"\d+$")
#: A part of a name that is a number: a count, a tile shape (128x64, 64x6), a hash (0xeca0...).
_NUMBER_PART = re.compile(r"\d*|\d+(x\d+)+|0x[0-9a-fA-F]+")
_ANONYMOUS = "(anonymous namespace)"
#: How Nsight Compute's demangler writes the anonymous namespace.
_UNNAMED = "<unnamed>"
#: The suffix of a kernel of NVIDIA's libraries that names the library.
_LIBRARY_SUFFIX = re.compile(r"_(cudnn|cublasLt|cublas)$")
#: The architecture a kernel of NVIDIA's libraries was built for (sm80, ampere).
_ARCHITECTURE = re.compile(r"sm\d+|ampere|volta|turing|hopper|blackwell")
#: The first part of a kernel of NVIDIA's libraries named by its configuration: its architecture
#: or its kernel family (cutlass3x, nvjet).
_LIBRARY_FIRST = re.compile(rf"{_ARCHITECTURE.pattern}|cutlass\w*|nvjet")
_CLOSING = {"<": ">", "(": ")"}
#: Functions that only launch the kernel their first template argument names (CUTLASS 2's and 3's).
_LAUNCHERS = frozenset({"cutlass::Kernel", "cutlass::Kernel2", "cutlass::device_kernel"})


def named_well(kinds: Any) -> bool:
    """Whether a backend's `CpuKernelTimes.kinds` is what the contract says: a mapping of kernel
    names to kinds, each a string."""
    return isinstance(kinds, Mapping) and all(isinstance(k, str) and isinstance(v, str) for k, v in kinds.items())


def kind_of(name: str, kinds: Mapping[str, str]) -> str:
    """`name`'s kind: the one `kinds` gives it; else a C++ kernel's function (`_function_of`), a
    CUTLASS launcher's being the kind of the kernel its first template argument names; else
    a library kernel's library and operation (`_library_operation`); else an operator's name
    (`aten::add`) as it is; else the name with the number each `_`-separated part ends in taken
    off, a part that is a number, a tile shape or a hash left out (a name that is nothing else is
    its own kind)."""
    named = kinds.get(name)
    if named:
        return str(named)
    if "<" in name or "(" in name:
        function = _function_of(name)
        launched = _first_template_argument(name, function) if function in _LAUNCHERS else None
        return kind_of(launched, {}) if launched else function
    operation = _library_operation(name)
    if operation:
        return operation
    if "::" in name:
        return name
    kept = [_PART_NUMBER.sub("", part) for part in name.split("_") if not _NUMBER_PART.fullmatch(part) or not part]
    return "_".join(kept).rstrip("_") or name


def kind_method(runs: list[CpuKernelTimes]) -> str:
    """How the kinds of `runs` were named, in words."""
    return naming(any(times.kinds for times in runs))


def naming(named: bool) -> str:
    """How kinds were named, in words: `named`, where the backend named some (`CpuKernelTimes.kinds`,
    `Prepared.cuda_kernel_kinds`), the rest from their names."""
    return f"{KIND_METHOD_NAMED}; else {KIND_METHOD_NAME}" if named else KIND_METHOD_NAME


def _function_of(signature: str) -> str:
    """The function a demangled C++ signature names: without what is between angle brackets or
    parentheses (template arguments, parameters, casts in them) and without its return type, the
    anonymous namespace kept (`void at::native::(anonymous namespace)::max_pool_forward_nchw<float,
    int>(...)` is at::native::(anonymous namespace)::max_pool_forward_nchw). Each bracket closes
    the one it opened (`<(1>0)>`). The anonymous namespace is one word whichever demangler wrote it
    (Nsight Compute's `at::<unnamed>::max_pool_forward_nchw` is at::(anonymous namespace)::max_pool_forward_nchw).
    A signature whose brackets do not close is its own kind."""
    text = signature.replace(_ANONYMOUS, "\0").replace(_UNNAMED, "\0")
    kept, opened = [], []
    for char in text:
        if char in _CLOSING:
            opened.append(_CLOSING[char])
        elif opened and char == opened[-1]:
            opened.pop()
        elif not opened:
            kept.append(char)
    words = "".join(kept).split()
    if opened or not words:
        return signature
    return words[-1].replace("\0", _ANONYMOUS)


def _first_template_argument(signature: str, function: str) -> str | None:
    """The first template argument of `function` in a demangled signature, as written
    (`cutlass_80_simt_sgemm_64x64_8x5_tn_align1` of `void cutlass::Kernel2<cutlass_80_...>(...)`;
    not of a return type's template before it), or None where there is none or its brackets do not
    close."""
    found = signature.find(f"{function}<")
    if found < 0:
        return None
    start = found + len(function)
    opened: list[str] = []
    for index in range(start + 1, len(signature)):
        char = signature[index]
        if char in _CLOSING:
            opened.append(_CLOSING[char])
        elif opened and char == opened[-1]:
            opened.pop()
        elif not opened and char in ",>":
            return signature[start + 1:index].strip() or None
    return None


def _library_operation(name: str) -> str | None:
    """A kernel of NVIDIA's libraries named by its configuration (its first part an architecture or
    a kernel family, or its last the library: `sm80_xmma_fprop_implicit_gemm_f32f32_..._tilesize128x32x8_
    ..._cudnn`): the library where its suffix names one, and the operation, the parts after its
    architecture up to the first with a digit in it (`cudnn xmma_fprop_implicit_gemm`); None for
    another kernel, or where no such part is left."""
    library = _LIBRARY_SUFFIX.search(name)
    parts = name[:library.start()].split("_") if library else name.split("_")
    first = bool(_LIBRARY_FIRST.fullmatch(parts[0]))  # an architecture or a family: not the operation
    if not library and not first:
        return None
    family = parts[:1] if first and not _ARCHITECTURE.fullmatch(parts[0]) else []
    operation: list[str] = []
    for part in parts[1:] if first else parts:
        if not operation and (_ARCHITECTURE.fullmatch(part) or (family and part.isdigit())):
            continue  # the architecture, which a family may write as a bare number (cutlass_80_...)
        if any(char.isdigit() for char in part) or not part:
            break
        operation.append(part)
    if not operation:
        return None
    words = "_".join(family + operation)
    return f"{library.group(1)} {words}" if library else words
