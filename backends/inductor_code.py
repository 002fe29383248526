"""Reading Inductor's generated wrapper code: the kernels one inference calls, in order.

Inductor emits a Python module whose `call(args)` function launches every kernel of the graph:
generated kernels (`cpp_fused_add_relu_3(...)` on CPU, `triton_poi_fused_add_relu_3.run(...)` on
GPU) and library calls (`extern_kernels.convolution(...)`, `torch.ops.mkldnn._convolution_pointwise
.default(..., 'relu', ...)`). With static shapes each statement runs once per inference, so the
calls found here are the inference's kernels. Generated kernels are named after the ATen
operators fused into them (Inductor's `descriptive_names = "original_aten"`, at most
`kernel_name_max_ops` operators); library calls carry their fused post-ops as string arguments.

Known limits: operators folded away at compile time (batch norm into conv weights under
`freezing`) leave no trace in the code; a kernel named without operators (weight-layout
conversions, `cpp_fused_4`) is reported with no operators.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator

from harness.fusion import KernelGroup

_GENERATED_PREFIX = re.compile(r"^(cpp|triton_(poi|red|per|tem|for|mix|spl|sca)|triton)_fused_?")
# Post-op names mkldnn/oneDNN library calls take as string arguments.
_POST_OPS = {
    "relu", "sigmoid", "tanh", "hardswish", "hardsigmoid", "hardtanh", "gelu", "silu", "swish",
    "leaky_relu", "mish", "add", "sub", "mul", "div", "sum",
}
_IGNORED_CALLS = {
    "empty_strided_cpu", "empty_strided_cuda", "empty_strided", "reinterpret_tensor",
    "assert_size_stride", "assert_size_stride_grouped", "assert_tensor_metadata", "assert_alignment",
}


def kernel_calls(source: str, aten_names: Iterable[str]) -> list[KernelGroup]:
    """Kernels called by the `call` function of one generated wrapper module, in order."""
    vocabulary = set(aten_names)
    call_fn = _find_call(ast.parse(source))
    groups: list[KernelGroup] = []
    for call in _calls_in_order(call_fn.body):
        name = _dotted(call.func)
        if name is None or name.split(".")[-1] in _IGNORED_CALLS:
            continue
        head = name.split(".")[0]
        if _GENERATED_PREFIX.match(head):
            groups.append(KernelGroup(kernel=head, ops=ops_from_kernel_name(head, vocabulary)))
        elif name.startswith("extern_kernels."):
            op = name.split(".")[1]
            groups.append(KernelGroup(kernel=name, ops=(f"aten.{op}", *_post_ops(call))))
        elif name.startswith("torch.ops."):
            parts = name.split(".")
            op = ".".join(parts[2:4])
            groups.append(KernelGroup(kernel=".".join(parts[:4]), ops=(op, *_post_ops(call))))
    return groups


def ops_from_kernel_name(kernel: str, vocabulary: set[str]) -> tuple[str, ...]:
    """`cpp_fused__native_batch_norm_legit_no_training_add_relu_3` ->
    (aten._native_batch_norm_legit_no_training, aten.add, aten.relu)."""
    body = _GENERATED_PREFIX.sub("", kernel)
    body = re.sub(r"_\d+$", "", body)
    if not body or body.isdigit():
        return ()
    tokens = body.split("_")
    ops: list[str] = []
    i = 0
    while i < len(tokens):
        match = None
        for j in range(len(tokens), i, -1):
            candidate = "_".join(tokens[i:j])
            if candidate in vocabulary and candidate:
                match = (candidate, j)
                break
        if match is None:
            if tokens[i]:
                ops.append(f"aten.{tokens[i]}")
            i += 1
        else:
            ops.append(f"aten.{match[0]}")
            i = match[1]
    return tuple(ops)


def _find_call(tree: ast.Module) -> ast.FunctionDef:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "call":
            return node
    raise ValueError("no `call` function in Inductor's generated code")


def _calls_in_order(body: list[ast.stmt]) -> Iterator[ast.Call]:
    for stmt in body:
        if isinstance(stmt, (ast.With, ast.If, ast.For)):
            yield from _calls_in_order(stmt.body)
            continue
        value = getattr(stmt, "value", None)
        if isinstance(value, ast.Call):
            yield value


def _dotted(node: ast.expr) -> str | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _post_ops(call: ast.Call) -> tuple[str, ...]:
    found = [
        arg.value
        for arg in call.args
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value in _POST_OPS
    ]
    return tuple(f"aten.{op}" for op in found)
