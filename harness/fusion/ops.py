"""Operator names and the fusion class of a group of operators.

Classes (docs/metrics.md, "Fusion report"):
- `tensor+element`: one compute-heavy operator (conv, matmul, linear, attention) with element-wise ops
- `tensor+element+tensor`: two or more compute-heavy operators in one kernel
- `element`: element-wise operators and reductions only
- `single`: one operator alone (not a fusion)
A fusion is a group of two operators or more.

ATen's view operators (`view`, `permute`, `as_strided`, ...) compute nothing: eager runs them as a
change of shape and strides, and a kernel whose name lists one only indexes its data through it.
They stay in a kernel's `ops` but are not counted when classifying it or counting fusions, so a
layer norm writing its output permuted is one operator, as it is in eager. (ONNX's Reshape or
Transpose, and TVM's permute_dims, are not views: those runtimes execute them as nodes or kernels.)

A backend that knows a kernel runs only part of a compute-heavy operator (Inductor's kernel that
adds a convolution's bias, the convolution itself a library call) names that part
`aten.convolution (bias or layout)` (`PART_OF_TENSOR_OP`): no tensor operator, counted as an
element-wise one (harness/fusion/mapping.py maps it one-to-one).
"""

from __future__ import annotations

import re

CLASSES = ("tensor+element+tensor", "tensor+element", "element", "single")
#: How a backend names the part of a tensor operator a kernel runs where the operator itself is a
#: library call: `aten.addmm (bias or layout)`.
PART_OF_TENSOR_OP = " (bias or layout)"

# Operator names (without namespace or overload) that do the heavy lifting.
_TENSOR_OPS = re.compile(
    r"^(_?convolution\w*|conv\w*|_convolution_pointwise\w*|mkldnn_convolution|cudnn_convolution\w*|"
    r"mm|addmm|bmm|baddbmm|matmul|linear|_linear_pointwise\w*|_mkl_linear|gemm|"
    r"_?scaled_dot_product\w*|_flash_attention\w*|_efficient_attention\w*|attention|"
    r"dense|multiheadattention|einsum)$",
    re.IGNORECASE,  # ONNX spells them Conv, Gemm, MatMul
)


# ATen operators that return a view of their input (torch's "view ops"), by bare name.
_ATEN_VIEWS = frozenset({
    "view", "_unsafe_view", "reshape", "view_as", "permute", "transpose", "t", "expand", "expand_as",
    "squeeze", "unsqueeze", "flatten", "unflatten", "as_strided", "alias", "select", "slice", "narrow",
    "split", "split_with_sizes", "unbind", "chunk", "detach", "diagonal", "movedim", "unfold",
})


def op_name(qualified: str) -> str:
    """`aten.convolution.default` or `aten::convolution` -> `convolution`."""
    name = qualified.replace("::", ".")
    parts = name.split(".")
    if len(parts) >= 3:  # namespace.op.overload
        return parts[1]
    if len(parts) == 2 and parts[0] in ("aten", "prims", "mkldnn", "quantized", "torch", "onnx", "relax"):
        return parts[1]
    return parts[-1]


def is_tensor_op(name: str) -> bool:
    return bool(_TENSOR_OPS.match(op_name(name)))


def is_part_of_tensor_op(name: str) -> bool:
    """A tensor operator's bias or layout part, which a kernel runs apart from the operator."""
    return name.endswith(PART_OF_TENSOR_OP)


def is_view_op(name: str) -> bool:
    """An ATen view (`aten.permute`, `aten::view`): no computation of its own."""
    qualified = name.replace("::", ".")
    return qualified.startswith("aten.") and op_name(qualified) in _ATEN_VIEWS


def computing_ops(ops: tuple[str, ...] | list[str]) -> list[str]:
    """`ops` without ATen views."""
    return [op for op in ops if not is_view_op(op)]


def classify(ops: tuple[str, ...] | list[str]) -> str:
    """The fusion class of a kernel that runs `ops` (ATen views not counted)."""
    ops = computing_ops(ops)
    if len(ops) <= 1:
        return "single"
    heavy = sum(1 for op in ops if is_tensor_op(op))
    if heavy >= 2:
        return "tensor+element+tensor"
    if heavy == 1:
        return "tensor+element"
    return "element"


