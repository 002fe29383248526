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

The "all" level's NCHWc layout transformer renames every tensor it touches, but names each NCHWc
node after the source tensor it computes (`<tensor>_nchwc`): an NCHWc `Conv`'s source nodes are
those from that tensor back to its convolution (the walk above, stopping at the first Conv and at
any tensor another node of the optimised graph computes or is named after), plus its `activation`
attribute and the Add of its fused sum input (4th input) where the walk did not reach them. Where
the name is no source tensor, its schema says what it can: Conv, plus BatchNormalization/Add/Mul
when its weights come from ORT's ConvBnFusion/ConvAddFusion/ConvMulFusion (their initializer names
say so, unless the NCHWc reorder of the bias renamed it), plus its sum input and activation.
Nodes of the default and Microsoft domains inside the blocked layout (an activation NCHWc did
not take, or what a fusion made of one: Sigmoid and Mul as one `QuickGelu`) read and write renamed
tensors too; each renamed tensor is read as the source tensor it holds where the layout says so
(a ReorderOutput's output, a ReorderInput's input, the tensor an NCHWc node is named after, the
outputs of the source node a kept node is named after, the input of the source Conv or batch norm
an NCHWc Conv runs), and the walk runs between those. The transformer runs a batch norm that
follows no convolution as a depthwise NCHWc Conv named `<tensor>_bn_nchwc`: it runs that batch
norm (and its activation), not a convolution. A Transpose runs only the source Transposes between
its borders: the transpose optimizer, which inserts and moves them (`Transpose_token_21`), merges
Transposes that meet but takes no other operator into one, and a Transpose it moved past a Gather
reads the Gather's output under a new name, so the walk ran on through the Gather, which its own
node runs. Where ORT's common subexpression elimination removed one of two identical nodes, a node
that read the removed one's output reads the kept one's, which the walk does not reach: it stops at
the input its source node read instead, whose producers the kept node runs. A node that can be
attributed no way is reported as itself, under its own op type. The source nodes a node runs are named by
their op type, except the parts of one of the model's own attention calls, which are that one call
(backends/attention_provenance.py).
"""

from __future__ import annotations

from typing import Any

from backends.attention_provenance import onnx_model_ops
from harness.fusion import KernelGroup

# A walk that goes this far has crossed a border it did not recognise; report the node alone.
_MAX_COVERED = 64
NCHWC_DOMAIN = "com.microsoft.nchwc"
# Prefixes of the initializers ORT's constant-folding fusions create, and the op each one folded.
_FOLDED_BY = {"ConvBnFusion_": "BatchNormalization", "ConvAddFusion_": "Add", "ConvMulFusion_": "Mul"}


NCHWC_SUFFIX = "_nchwc"
#: What the NCHWc transformer adds to the name of a batch norm it runs as a depthwise NCHWc Conv.
BATCH_NORM_SUFFIX = "_bn"


def _named_after(name: str, produced: dict[str, int]) -> str | None:
    """The source tensor an NCHWc node is named after (`relu_2_nchwc`; a batch norm run as an NCHWc
    Conv, `getitem_3_bn_nchwc`), or None."""
    if not name.endswith(NCHWC_SUFFIX):
        return None
    tensor = name.removesuffix(NCHWC_SUFFIX)
    if tensor in produced:
        return tensor
    tensor = tensor.removesuffix(BATCH_NORM_SUFFIX)
    return tensor if name.endswith(BATCH_NORM_SUFFIX + NCHWC_SUFFIX) and tensor in produced else None


def _nchwc_ops(node: Any, walked: list[str]) -> tuple[str, ...]:
    """The op types an NCHWc node runs: `walked` (the source nodes the walk from its tensor
    found, in order) where there is one, else its schema's; plus its sum input's Add and its
    activation where those are not among them."""
    ops = list(walked) if walked else [node.op_type]
    if node.op_type == "Conv":
        if not walked:
            for prefix, folded in _FOLDED_BY.items():
                if any(name.startswith(prefix) for name in node.input):
                    ops.append(folded)
        if len(node.input) >= 4 and node.input[3] and "Add" not in ops:
            ops.append("Add")
        for attribute in node.attribute:
            if attribute.name == "activation" and attribute.s and attribute.s.decode() not in ops:
                ops.append(attribute.s.decode())
    return tuple(f"onnx.{op}" for op in ops)


def _walk(start: list[str], nodes: list[Any], produced: dict[str, int], stop: set[str], leaves: set[str],
          past_conv: bool) -> set[int]:
    """The source nodes from the tensors `start` back to `stop`, the leaves and, where not
    `past_conv`, the first Conv on each path (included); empty where the walk went past _MAX_COVERED."""
    covered: set[int] = set()
    stack = list(start)
    while stack and len(covered) <= _MAX_COVERED:
        tensor = stack.pop()
        if tensor in stop or tensor in leaves or tensor not in produced:
            continue
        index = produced[tensor]
        if index not in covered:
            covered.add(index)
            if past_conv or nodes[index].op_type != "Conv":
                stack.extend(nodes[index].input)
    return covered if len(covered) <= _MAX_COVERED else set()


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
    # The source tensor each NCHWc node is named after (its own outputs are renamed).
    named_after = {node.name: tensor for node in optimized.graph.node
                   if node.domain == NCHWC_DOMAIN and (tensor := _named_after(node.name, produced)) is not None}
    held |= set(named_after.values())
    holds = _layout_holds(optimized, nodes, named_after)
    held |= set(holds.values())
    walks = {}
    for i, node in enumerate(optimized.graph.node):
        tensor = named_after.get(node.name)
        if tensor is not None and node.op_type == "Conv":
            walks[i] = _walk([tensor], nodes, produced, held - {tensor}, leaves, past_conv=False)
            # what it reads is what the source node its walk entered by reads: the only sign of a tensor
            # that a node between two NCHWc Convs wrote under a new name
            inside = {out for j in walks[i] for out in nodes[j].output}
            entries = [nodes[j] for j in sorted(walks[i]) if nodes[j].op_type in ("Conv", "BatchNormalization")
                       and nodes[j].input and nodes[j].input[0] not in inside]
            if len(entries) == 1 and node.input:
                holds.setdefault(node.input[0], entries[0].input[0])
    held |= set(holds.values())
    groups = []
    for i, node in enumerate(optimized.graph.node):
        if node.domain == NCHWC_DOMAIN:
            walked = walks.get(i, set())
            groups.append(KernelGroup(kernel=node.name or node.op_type,
                                      ops=_nchwc_ops(node, [nodes[j].op_type for j in sorted(walked)])))
            continue
        own = [holds.get(name, name) for name in node.output if name]
        stop = {holds.get(name, name) for name in node.input if name} | (held - set(own))
        covered = _walk(own, nodes, produced, stop, leaves, past_conv=True)
        replaced = _replaced_inputs(node, own, covered, nodes, produced)
        if replaced:
            covered = _walk(own, nodes, produced, stop | replaced, leaves, past_conv=True)
        if node.op_type == "Transpose" and node.domain in ("", "ai.onnx"):
            # ORT's transpose optimizer moves a Transpose past the nodes after it and merges Transposes
            # that meet, but puts no other operator into one: the other source nodes between a moved
            # Transpose's (renamed) input and its output are run by the nodes before it
            covered = {j for j in covered if nodes[j].op_type == "Transpose"}
        ops = onnx_model_ops([nodes[j] for j in sorted(covered)]) if covered else (f"onnx.{node.op_type}",)
        groups.append(KernelGroup(kernel=node.name or node.op_type, ops=ops))
    return groups


def _replaced_inputs(node: Any, own: list[str], covered: set[int], nodes: list[Any], produced: dict[str, int]) -> set[str]:
    """The inputs of `node`'s source node (same output, same op type) that it reads another source
    tensor in place of, where the walk never reached that tensor: ORT's common subexpression
    elimination kept one of two identical nodes and pointed the other's readers at it (Swin's patch
    merging slices `pad[:, 1::2]` twice), so the source nodes from the old input back are run by the
    node that computes the kept tensor, and the walk, which went through them, made one Slice a Slice
    and Slice fusion. An input that the walk reached (a node ORT removed between two others) is not one."""
    if len(own) != 1 or own[0] not in produced:
        return set()
    kept = nodes[produced[own[0]]]
    if kept.op_type != node.op_type or len(kept.input) != len(node.input):
        return set()
    reached = {name for j in covered for name in nodes[j].input}
    return {old for old, new in zip(kept.input, node.input)
            if old != new and old in produced and new in produced and new not in reached}


def _layout_holds(optimized: Any, nodes: list[Any], named_after: dict[str, str]) -> dict[str, str]:
    """Renamed tensor of the NCHWc layout -> the source tensor it holds, where the layout says: a
    ReorderOutput writes its input under the source name, a ReorderInput reads the source tensor, an
    NCHWc node computes the tensor it is named after, and a node the layout kept (a Concat, an
    activation: its source node's name and op type) reads its source node's inputs and computes its
    outputs."""
    by_name = {node.name: node for node in nodes if node.name}
    holds: dict[str, str] = {}
    blocked: set[str] = set()  # tensors in the blocked layout, as the nodes that write them run
    for node in optimized.graph.node:
        if not node.output or not node.input:
            continue
        if node.domain != NCHWC_DOMAIN:
            if not blocked & set(node.input):
                continue  # outside the layout: a renamed output there is another rewrite's (a moved transpose)
            kept = by_name.get(node.name)
            if kept is not None and kept.op_type == node.op_type:
                for renamed, out in zip(node.output, kept.output):
                    if renamed and out and renamed != out:
                        holds.setdefault(renamed, out)
                # and reads what its source node reads: the only sign of what a fused node before it
                # (a QuickGelu feeding a residual Add) wrote
                for renamed, read in zip(node.input, kept.input):
                    if renamed in blocked and read and renamed != read:
                        holds.setdefault(renamed, read)
            blocked |= set(node.output)
            continue
        if node.op_type == "ReorderOutput":  # back to the plain layout, under the source name
            holds.setdefault(node.input[0], node.output[0])
            continue
        blocked |= set(node.output)
        if node.op_type == "ReorderInput":
            holds.setdefault(node.output[0], node.input[0])
        elif node.name in named_after:
            holds.setdefault(node.output[0], named_after[node.name])
    return holds


def added_nodes(source: Any, optimized: Any) -> dict[str, int]:
    """Op type -> count of the nodes of `optimized` that compute no tensor of `source`: a source
    operator ORT runs as several kernels (one without a kernel of its own runs through its ONNX
    function body: HardSwish as HardSigmoid, then Mul) or a node it inserted. Not counted: the NCHWc
    layout's nodes, and the nodes of the default domain inside it (an activation, Add or Concat the
    NCHWc transformer did not fuse reads a blocked tensor and writes one under a new name: it still
    computes its source node's work)."""
    computed = {out for node in source.graph.node for out in node.output if out}
    blocked = {out for node in optimized.graph.node if node.domain == NCHWC_DOMAIN for out in node.output if out}
    added: dict[str, int] = {}
    for node in optimized.graph.node:
        in_layout = node.domain == NCHWC_DOMAIN or any(name in blocked for name in node.input)
        if not in_layout and not any(out in computed for out in node.output if out):
            added[node.op_type] = added.get(node.op_type, 0) + 1
    return added


def added_nodes_note(added: dict[str, int]) -> str:
    """The fusion report's note on the nodes `added_nodes` counts. The cause is said as a general one:
    which source operator each node belongs to is not known here, and the example of an operator run
    through its function body (HardSwish), said as the cell's own, was read so in a transformer
    block's report, whose added nodes were the Gemm and Reshape ORT puts in place of a MatMul and Add."""
    counts = ", ".join(f"{op} {n}" for op, n in sorted(added.items()))
    return (f"the optimised graph runs {sum(added.values())} node(s) that compute no tensor of the exported graph "
            f"({counts}), each a kernel of its own: nodes ONNX Runtime inserted, or the parts of a source operator it "
            "runs as several kernels (in general, not necessarily here: an operator with no kernel of its own runs its "
            "ONNX function body, as HardSwish runs as HardSigmoid, then Mul)")
