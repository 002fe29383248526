"""Which source ONNX nodes each node of an optimised graph executes.

ONNX Runtime's fusions up to its "extended" level (ConvBNFusion, ConvActivationFusion into
FusedConv, GEMM and MatMul fusions, ...) keep the tensor names at the borders of what they fuse.
So the source nodes of an optimised node are those between its inputs and its outputs in the
source graph: walk back from each output through the source producers until reaching one of its
inputs, a tensor another node of the optimised graph computes or holds (where ORT renamed the
tensor between two nodes, say for an inserted Cast or a transposed weight, the walk stops there
instead of running on through the model), an initializer, a graph input or a `Constant` node's
value (a constant computes nothing: ORT folds it into an initializer, so it is never part of
what a kernel runs).

The "all" level's NCHWc layout transformer renames every tensor it touches, so its nodes are
read by their schema instead: an NCHWc `Conv` runs Conv, plus BatchNormalization/Add/Mul when
its weights come from ORT's ConvBnFusion/ConvAddFusion/ConvMulFusion (their initializer names
say so), plus the Add of its fused sum input (4th input), plus its `activation` attribute.
A node that can be attributed neither way is reported as itself, under its own op type.
"""

from __future__ import annotations

from typing import Any

from harness.fusion import KernelGroup

# A walk that goes this far has crossed a border it did not recognise; report the node alone.
_MAX_COVERED = 64
NCHWC_DOMAIN = "com.microsoft.nchwc"
# Prefixes of the initializers ORT's constant-folding fusions create, and the op each one folded.
_FOLDED_BY = {"ConvBnFusion_": "BatchNormalization", "ConvAddFusion_": "Add", "ConvMulFusion_": "Mul"}


def _nchwc_ops(node: Any) -> tuple[str, ...]:
    ops = [node.op_type]
    if node.op_type == "Conv":
        for prefix, folded in _FOLDED_BY.items():
            if any(name.startswith(prefix) for name in node.input):
                ops.append(folded)
        if len(node.input) >= 4 and node.input[3]:
            ops.append("Add")
        for attribute in node.attribute:
            if attribute.name == "activation" and attribute.s:
                ops.append(attribute.s.decode())
    return tuple(f"onnx.{op}" for op in ops)


def kernel_groups(source: Any, optimized: Any) -> list[KernelGroup]:
    """One KernelGroup per node of `optimized` (an onnx.ModelProto, in execution order), with
    the op types of the `source` nodes it covers, written `onnx.<OpType>`."""
    nodes = list(source.graph.node)
    produced = {out: i for i, node in enumerate(nodes) for out in node.output if out}
    leaves = {t.name for t in source.graph.initializer} | {t.name for t in source.graph.input}
    leaves |= {out for node in nodes if node.op_type == "Constant" for out in node.output}
    # Tensors the optimised graph itself holds: what one of its nodes computes is not part of
    # another node's work, even where ORT renamed the tensor that connects them.
    held = ({out for node in optimized.graph.node for out in node.output if out}
            | {t.name for t in optimized.graph.initializer} | {t.name for t in optimized.graph.input})
    groups = []
    for node in optimized.graph.node:
        if node.domain == NCHWC_DOMAIN:
            groups.append(KernelGroup(kernel=node.name or node.op_type, ops=_nchwc_ops(node)))
            continue
        own = [name for name in node.output if name]
        borders = {name for name in node.input if name} | (held - set(own))
        covered: set[int] = set()
        stack = list(own)
        while stack and len(covered) <= _MAX_COVERED:
            tensor = stack.pop()
            if tensor in borders or tensor in leaves or tensor not in produced:
                continue
            index = produced[tensor]
            if index not in covered:
                covered.add(index)
                stack.extend(nodes[index].input)
        if not covered or len(covered) > _MAX_COVERED:
            ops = (f"onnx.{node.op_type}",)
        else:
            ops = tuple(f"onnx.{nodes[i].op_type}" for i in sorted(covered))
        groups.append(KernelGroup(kernel=node.name or node.op_type, ops=ops))
    return groups
