"""Which batch norms Inductor's freezing folded into which convolutions.

With `freezing`, Inductor folds a batch norm that follows a convolution into the convolution's
weights and bias before it generates code, so the generated code shows a convolution (with its
activation as a oneDNN post-op) and no batch norm: the conv+bn+relu group is fused, but reading
the code alone would report conv+relu. This module watches two graphs of each compile through
Inductor's custom-pass hooks, changing neither:
- the pre-grad graph (before freezing): each batch norm whose input is a convolution, by the
  nn.Module path of that convolution;
- the post-grad graph (after freezing, before lowering): the convolutions in graph order, by
  module path, and the batch norms that remain.
A batch norm present before and absent after was folded into its convolution. The generated
code calls the convolutions in the post-grad graph's order; when their counts match, the n-th
convolution call of the code is the n-th of the graph, and gets `aten.batch_norm` beside its
operators. When they do not match nothing is attributed and the report says so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.fusion import KernelGroup, is_tensor_op, op_name

FOLDED_BN = "aten.batch_norm"


def _target_name(node: Any) -> str:
    target = node.target
    return str(getattr(target, "__name__", None) or target)


def _module_path(node: Any) -> str | None:
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return None
    path = list(stack.values())[-1]
    return str(path[0] if isinstance(path, tuple) else path)


def _is_conv(node: Any) -> bool:
    return node.op == "call_function" and "conv" in _target_name(node).lower()


def _is_batch_norm(node: Any) -> bool:
    return node.op == "call_function" and "batch_norm" in _target_name(node).lower()


@dataclass
class _Graph:
    bn_after_conv: dict[str, str] = field(default_factory=dict)  # conv module path -> bn module path
    convs: list[str | None] = field(default_factory=list)  # post-grad, in graph order
    remaining_bns: set[str] = field(default_factory=set)


@dataclass
class FoldWatch:
    """Pass `pre_grad` and `post_grad` as Inductor's pre_grad_custom_pass and
    post_grad_custom_pre_pass for one torch.compile; then `attribute` the kernels."""

    graphs: list[_Graph] = field(default_factory=list)

    def pre_grad(self, graph: Any) -> None:
        record = _Graph()
        for node in graph.nodes:
            if _is_batch_norm(node) and node.args and hasattr(node.args[0], "op") and _is_conv(node.args[0]):
                conv, bn = _module_path(node.args[0]), _module_path(node)
                if conv and bn:
                    record.bn_after_conv[conv] = bn
        self.graphs.append(record)

    def post_grad(self, graph: Any) -> None:
        if not self.graphs:
            self.graphs.append(_Graph())
        record = self.graphs[-1]
        for node in graph.nodes:
            if _is_conv(node):
                record.convs.append(_module_path(node))
            elif _is_batch_norm(node) and _module_path(node):
                record.remaining_bns.add(str(_module_path(node)))

    def folded(self, index: int) -> list[bool] | None:
        """Per convolution of graph `index` (post-grad order): whether a batch norm was folded into it."""
        if index >= len(self.graphs):
            return None
        record = self.graphs[index]
        return [bool(conv and conv in record.bn_after_conv and record.bn_after_conv[conv] not in record.remaining_bns)
                for conv in record.convs]

    def attribute(self, kernels_per_graph: list[list[KernelGroup]]) -> tuple[list[KernelGroup], str]:
        """The kernels of all graphs with folded batch norms added to their convolutions, and a
        note on what was attributed (that there was none to fold, where no batch norm follows a
        convolution: a transformer block, a model without batch norm)."""
        result: list[KernelGroup] = []
        attributed, unmatched = 0, 0
        for index, kernels in enumerate(kernels_per_graph):
            folded = self.folded(index)
            convs = [i for i, k in enumerate(kernels)
                     if k.ops and is_tensor_op(k.ops[0]) and "conv" in op_name(k.ops[0]).lower()]
            if folded is None or len(folded) != len(convs):
                unmatched += sum(folded or [])
                result.extend(kernels)
                continue
            with_bn = {i for i, was_folded in zip(convs, folded) if was_folded}
            for i, kernel in enumerate(kernels):
                if i in with_bn:
                    kernel = KernelGroup(kernel=kernel.kernel, ops=(kernel.ops[0], FOLDED_BN, *kernel.ops[1:]))
                    attributed += 1
                result.append(kernel)
        if not any(record.bn_after_conv for record in self.graphs):
            # a count of none folded would read as batch norms freezing failed to fold
            return result, "no batch norm follows a convolution in the model: none to fold into convolution weights"
        note = f"{attributed} batch norm(s) folded into convolution weights by freezing, shown as {FOLDED_BN} in their kernel"
        if unmatched:
            note += f"; {unmatched} more were folded but could not be matched to a kernel"
        return result, note
