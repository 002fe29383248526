"""The model's own attention calls in an exported graph, so that each counts as one operator on ONNX
Runtime and TVM as it does on Inductor.

Inductor calls a model's own `F.scaled_dot_product_attention` (torchvision's vit_b_16 and
`nn.MultiheadAttention` call it) as one library call, one operator (backends/inductor_attention.py).
ONNX Runtime and TVM receive it as its parts: torch's dynamo exporter writes it as Reshape, Transpose,
Mul, MatMul, Softmax and MatMul, and TVM's importer decomposes the exported program into core ATen first
(mul, permute, bmm, _softmax, TVM's guard against a row of all -inf, bmm). A kernel that ran two of those
parts (ORT's FusedMatMul of the scale and the first matmul; TVM's softmax with the guard) counted a
fusion where Inductor counted none. Both exporters say which call of the model each part came from: ONNX
nodes carry their FX node in their metadata (`pkg.torch.onnx.fx_node`), and each node of the decomposed
program the node it was decomposed from (`from_node`), whose Relax bindings `attention_origins` records
as the importer emits them. The parts of one such call in one kernel are one operator (`model_ops`):
named as the call (`aten.scaled_dot_product_attention`) where a matrix multiply is among them, else as the
first part (its Softmax, its key's Transpose). Other operators keep each backend's own unit (a linear's
MatMul and Add: docs/metrics.md, "Fusion report"); a graph without the record reads as before.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Iterator
from typing import Any
from unittest import mock

from harness.fusion import is_tensor_op

FX_NODE = "pkg.torch.onnx.fx_node"
# `%name : [num_users=1] = call_function[target=torch.ops.aten.scaled_dot_product_attention.default](...)`
_FX_CALL = re.compile(r"^%(?P<name>[\w.]+) : .*?call_function\[target=torch\.ops\.(?P<space>\w+)\.(?P<op>\w+)[.\]]")
# The model's attention operators that the exporters write as several nodes.
_ATTENTION = re.compile(r"^_?(scaled_dot_product\w*attention\w*|native_multi_head_attention)$")

#: One of the model's attention calls: (its FX node's name, its operator `aten.scaled_dot_product_attention`).
Call = tuple[str, str]


def _attention(name: str, target: str) -> Call | None:
    """The call for an FX node `name` of `target` (`aten.scaled_dot_product_attention.default`), if attention."""
    parts = target.split(".")
    if len(parts) >= 2 and _ATTENTION.match(parts[1]):
        return name, f"{parts[0]}.{parts[1]}"
    return None


def onnx_attention_call(node: Any) -> Call | None:
    """The model's attention call an exported ONNX node is part of, from the exporter's metadata; else None."""
    for entry in getattr(node, "metadata_props", ()):
        if entry.key == FX_NODE:
            found = _FX_CALL.match(entry.value)
            return _attention(found["name"], f"{found['space']}.{found['op']}") if found else None
    return None


def model_ops(parts: Iterable[tuple[str, Call | None]]) -> tuple[str, ...]:
    """The operators a kernel runs, from its parts in order (each an operator name and the model's attention
    call it is part of, or None): each part, except that the parts of one attention call are one operator,
    where its first part stands: the call where a matrix multiply is among them, else that first part."""
    grouped: dict[Call, list[str]] = {}
    order: list[tuple[str, Call | None]] = []
    for op, call in parts:
        if call is None:
            order.append((op, None))
        else:
            if call not in grouped:
                grouped[call] = []
                order.append((op, call))
            grouped[call].append(op)
    return tuple(op if call is None else call[1] if any(is_tensor_op(part) for part in grouped[call]) else grouped[call][0]
                 for op, call in order)


def onnx_model_ops(source_nodes: list[Any]) -> tuple[str, ...]:
    """`model_ops` of a kernel that covers `source_nodes` (exported ONNX nodes, in graph order)."""
    return model_ops((f"onnx.{node.op_type}", onnx_attention_call(node)) for node in source_nodes)


def _origin(node: Any) -> tuple[str, str]:
    """The node of the exported program an FX node of the decomposed one came from (itself if none)."""
    source = node.meta.get("from_node") or []
    while source and source[-1].from_node:
        source = source[-1].from_node
    return (source[-1].name, str(source[-1].target)) if source else (node.name, str(node.target))


@contextlib.contextmanager
def attention_origins(origins: dict[Any, Call]) -> Iterator[None]:
    """While TVM's `from_exported_program` runs inside, record in `origins` each Relax variable its converters
    emit: the model's attention call the FX node converted is part of, else None. A converter's nested
    expression is bound by the normaliser to variables of its own, not emitted: those are not recorded
    (`tvm_fusion_report` reads them as the emitted binding after them). Nothing of the import changes."""
    from tvm import relax
    from tvm.relax.frontend.torch.exported_program_translator import ExportedProgramImporter

    converting: list[Call | None] = []
    create, emit = ExportedProgramImporter.create_convert_map, relax.BlockBuilder.emit

    def watched(convert: Any) -> Any:
        def call(node: Any, *args: Any, **kwargs: Any) -> Any:
            converting.append(_attention(*_origin(node)))
            try:
                return convert(node, *args, **kwargs)
            finally:
                converting.pop()
        return call

    def create_watched(importer: Any) -> Any:
        return {key: watched(convert) for key, convert in create(importer).items()}

    def emit_watched(builder: Any, expr: Any, name_hint: str = "") -> Any:
        var = emit(builder, expr, name_hint)
        if converting:
            origins[var] = converting[-1]
        return var

    with mock.patch.object(ExportedProgramImporter, "create_convert_map", create_watched), \
            mock.patch.object(relax.BlockBuilder, "emit", emit_watched):
        yield
