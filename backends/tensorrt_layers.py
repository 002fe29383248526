"""Pure helpers of the TensorRT backend: read the engine inspector's layer list, and pick the
tensors to mark as outputs for `fusion: off`. Nothing here imports tensorrt, so it is tested
on machines without a GPU.

The engine inspector (`engine.create_engine_inspector().get_engine_information(JSON)`) returns
`{"Layers": [...], "Bindings": [...]}`. With `ProfilingVerbosity.DETAILED` each layer is a dict
with at least "Name", "LayerType", "Inputs", "Outputs" and, since TensorRT 8.6, "Metadata": the
ONNX nodes the layer computes, each written `[ONNX Layer: <node name>]` and separated by the
control characters \\x1e or \\x1f. With less verbosity a layer is only its name (a string).
Layer names join the ONNX nodes of a fused layer with " + " ("node_Conv_0 + node_relu"), wrap
pointwise fusions as "PWN(a, b)" and Myelin subgraphs as "{ForeignNode[first...last]}", and
name format conversions "Reformatting CopyNode for Input Tensor 0 to <layer>".

How a layer becomes a `KernelGroup`:
- its ONNX nodes come from Metadata; only when Metadata names none are they read from the layer
  name (which names a ForeignNode range by its two ends only);
- each ONNX node counts once, written `onnx.<OpType>` like the ONNX Runtime backend's report, and the
  parts of one of the model's own attention calls count as one operator, as there
  (backends/attention_provenance.py; `onnx_attention_calls` reads which, `engine_layers` is given them);
- a reformat layer is a kernel of its own with the op `tensorrt.Reformat`: TensorRT inserts it to
  convert layouts or precisions; it computes no source operator but does launch a kernel;
- NoOp layers and the multi-stream "signal"/"wait" markers launch no kernel and are left out;
- a layer none of whose nodes is known becomes `tensorrt.<LayerType>`, and the unknown names are
  returned so the report can say how many it could not place.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Collection, Iterable, Mapping, Sequence

from backends.attention_provenance import model_ops, onnx_attention_call
from harness.fusion import KernelGroup

REFORMAT_OP = "tensorrt.Reformat"
# Layer types that launch no kernel (TensorRT Engine Explorer folds NoOp layers the same way).
NO_KERNEL_TYPES = frozenset({"NoOp", "signal", "wait"})

_ONNX_MARKER = re.compile(r"\[ONNX Layer: ([^\]\x1e\x1f]+)\]")
_FOREIGN_NODE = re.compile(r"^\{ForeignNode\[(.*)\]\}$")
_NAME_SEPARATORS = re.compile(r"\s*\+\s*|\s*,\s*|\.\.\.")
_PROFILE_SUFFIX = re.compile(r"\s*\[profile \d+\]$")


@dataclass(frozen=True)
class EngineLayers:
    """The kernels of an engine, and what could not be mapped back to the ONNX graph."""

    groups: tuple[KernelGroup, ...]
    unresolved: tuple[str, ...]  # node names found in layers but not in the ONNX graph
    from_names: int  # layers whose nodes were read from their name (no Metadata)


def onnx_op_types(graph: Any) -> dict[str, str]:
    """{node name: op type} for an onnx GraphProto, subgraphs (If, Loop, Scan bodies) included."""
    types: dict[str, str] = {}
    stack = [graph]
    while stack:
        current = stack.pop()
        for node in current.node:
            if node.name:
                types[node.name] = node.op_type
            for attribute in node.attribute:
                if attribute.HasField("g"):
                    stack.append(attribute.g)
                stack.extend(attribute.graphs)
    return types


def onnx_attention_calls(graph: Any) -> dict[str, list[str]]:
    """{node name: [the FX node's name, its operator]} for the nodes of an onnx GraphProto that the
    exporter wrote as parts of one of the model's own attention calls (JSON-ready: lists)."""
    return {node.name: list(call) for node in graph.node if node.name and (call := onnx_attention_call(node)) is not None}


def is_reformat(name: str, layer_type: str) -> bool:
    return layer_type == "Reformat" or name.startswith("Reformatting CopyNode")


def metadata_nodes(metadata: str) -> list[str]:
    """ONNX node names in a layer's Metadata, in order, each once."""
    return _unique(match.strip() for match in _ONNX_MARKER.findall(metadata or ""))


def name_nodes(name: str) -> list[str]:
    """ONNX node names read from a layer name: "a + b", "PWN(PWN(a), b)", "{ForeignNode[a...b]}"."""
    name = _PROFILE_SUFFIX.sub("", name.strip())
    foreign = _FOREIGN_NODE.match(name)
    if foreign:
        name = foreign.group(1)
    name = name.replace("PWN(", "").replace(")", "")
    return _unique(part.strip() for part in _NAME_SEPARATORS.split(name))


def engine_layers(info: Mapping[str, Any], op_types: Mapping[str, str],
                  attention_calls: Mapping[str, Sequence[str]] | None = None) -> EngineLayers:
    """Map the inspector's layers (`info`, the parsed JSON) to kernel groups of ONNX op types.

    `op_types` is {ONNX node name: op type} of the graph the engine was built from, and
    `attention_calls` its `onnx_attention_calls`. Raises ValueError when `info` is not an engine
    inspector's answer.
    """
    calls = {node: (call[0], call[1]) for node, call in (attention_calls or {}).items()}
    layers = info.get("Layers") if isinstance(info, Mapping) else None
    if not isinstance(layers, list):
        raise ValueError("not TensorRT engine information: no 'Layers' list")
    groups: list[KernelGroup] = []
    unresolved: list[str] = []
    from_names = 0
    for raw in layers:
        layer = {"Name": raw} if isinstance(raw, str) else raw
        if not isinstance(layer, Mapping) or not isinstance(layer.get("Name"), str):
            raise ValueError(f"not TensorRT engine information: layer {raw!r} has no name")
        name, layer_type = layer["Name"], str(layer.get("LayerType", ""))
        if layer_type in NO_KERNEL_TYPES:
            continue
        if is_reformat(name, layer_type):
            groups.append(KernelGroup(kernel=name, ops=(REFORMAT_OP,)))
            continue
        nodes = metadata_nodes(str(layer.get("Metadata", "")))
        if not nodes:
            nodes = name_nodes(name)
            from_names += 1
        known = [node for node in nodes if node in op_types]
        unresolved.extend(node for node in nodes if node not in op_types)
        ops = model_ops((f"onnx.{op_types[node]}", calls.get(node)) for node in known) or (f"tensorrt.{layer_type or 'unknown'}",)
        groups.append(KernelGroup(kernel=name, ops=ops))
    return EngineLayers(groups=tuple(groups), unresolved=tuple(_unique(unresolved)), from_names=from_names)


def onnx_activations(graph: Any) -> set[str]:
    """Names of the tensors the main graph's nodes produce, less the graph's outputs: the
    intermediate activations an unfused runtime writes to memory, one per source operator."""
    produced = {name for node in graph.node for name in node.output if name}
    return produced - {value.name for value in graph.output}


def intermediate_outputs(
    network: Any, *, names: Collection[str], skip_layer_types: Collection[Any], activation_types: Collection[Any],
) -> list[Any]:
    """The tensors to mark as network outputs so that TensorRT must materialise each activation.

    Walks a TensorRT INetworkDefinition (its layers are in topological order). TensorRT's ONNX
    parser gives the tensor that ends each ONNX node the node's output name, and helper tensors
    inside a node (a Gemm's bias add, say) other names, so keeping only `names` (the ONNX
    activations) materialises exactly what eager materialises. Of those it keeps each layer
    output that depends on a network input, has one of `activation_types`, is not a shape
    tensor, is not made by a layer of `skip_layer_types` (constants, shape queries) and is not an
    output already. Tensors computed from weights alone are no activation: TensorRT folds them.
    """
    dependent = {network.get_input(i).name for i in range(network.num_inputs)}
    chosen: list[Any] = []
    for index in range(network.num_layers):
        layer = network.get_layer(index)
        inputs = [layer.get_input(k) for k in range(layer.num_inputs)]
        if not any(tensor is not None and tensor.name in dependent for tensor in inputs):
            continue
        outputs = [layer.get_output(k) for k in range(layer.num_outputs)]
        dependent.update(tensor.name for tensor in outputs if tensor is not None)
        if layer.type in skip_layer_types:
            continue
        for tensor in outputs:
            if (
                tensor is None
                or tensor.name not in names
                or tensor.is_network_output
                or getattr(tensor, "is_shape_tensor", False)
                or tensor.dtype not in activation_types
            ):
                continue
            chosen.append(tensor)
    return chosen


def _unique(items: Iterable[str]) -> list[str]:
    seen: dict[str, None] = {}
    for item in items:
        if item and item not in seen:
            seen[item] = None
    return list(seen)
