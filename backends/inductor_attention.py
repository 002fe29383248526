"""Which of the model's operators each attention call Inductor made from them runs.

With fusion on, Inductor's attention rewrites (torch/_inductor/fx_passes/fuse_attention.py, patterns
of the joint graph) replace an attention written as matmul, softmax and matmul with one library call,
`aten._scaled_dot_product_flash_attention_for_cpu` on a CPU. The generated code calls it as it calls
one the model made itself (torchvision's vit_b_16 and nn.MultiheadAttention call
scaled_dot_product_attention in eager), so the code alone lists it as one operator, and the fusion
count left out the attention Inductor fused. The rule (docs/metrics.md, "Fusion report"): a library
call a compiler made from several of the model's operators runs those operators, a fusion of them; a
call the model made stays one operator (here, and on ONNX Runtime and TVM, which get it from the export
as its parts: backends/attention_provenance.py).

Which operators a call replaced is the pattern matcher's own record, read while it applies a rewrite:
the nodes of its match, each with the ATen operator it came from (`original_aten`, what Inductor names
its generated kernels after) and the model's call it came from (`source_fn_stack`), so the amax, sub,
exp, sum and div of a decomposed softmax are the one `aten._softmax` the model called, and the two
matmuls two `aten.bmm`. The call the rewrite inserts carries that list in its meta to the post-grad
graph, where `post_grad` reads the attention calls in graph order, as Inductor's wrapper calls them:
the n-th attention call of a graph's code is its n-th in the graph where their counts match
(backends/inductor_folding.py matches convolutions so); where they do not, none is attributed and the
note says so. A graph's subgraphs (a `torch.cond` branch) pass through the post-grad passes before
it, each as a graph of its own, while the code is one per graph, and the report does not read the
subgraphs' functions in it: their calls are folded into the graph that holds them and counted apart
in the note, not matched to the next graph's code (a branch's rewritten attention was read onto the
model's own call in the graph after a break). Nothing of the compile is changed.
"""

from __future__ import annotations

import contextlib
import re
import weakref
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

from backends.inductor_freezing import closure_contents
from harness.fusion import KernelGroup, op_name

#: The node meta key under which the call a rewrite inserted keeps the operators it replaced.
REPLACED = "fusionbench_replaced_ops"
_ATTENTION_REWRITES = "torch._inductor.fx_passes.fuse_attention"
_ATTENTION_CALL = re.compile(r"^_?scaled_dot_product\w*attention\w*$")
# How the wrapper names a library call (backends/inductor_code.py), not a generated kernel named after one.
_LIBRARY_CALL = re.compile(r"^(torch\.ops|extern_kernels)\.")


def is_attention_rewrite(entry: Any) -> bool:
    """Whether a pattern entry is one of Inductor's attention rewrites: its check closes over a
    search function (or check) of `fuse_attention`."""
    return any(getattr(content, "__module__", None) == _ATTENTION_REWRITES
               for content in closure_contents(getattr(entry, "extra_check", None)))


def _qualified(target: Any) -> str:
    """`aten.bmm` for the overload `aten.bmm.default` (the wrapper's spelling, no overload)."""
    return str(getattr(target, "overloadpacket", target))


def replaced_ops(nodes: Iterable[Any]) -> tuple[str, ...]:
    """The model's operators the matched `nodes` came from, in match order: one per operator of each
    call of the model (`source_fn_stack`, else the node itself). A node of no ATen operator
    (`operator.getitem`) is none."""
    found: dict[tuple[str, str], str] = {}
    for node in nodes:
        aten = node.meta.get("original_aten") or node.target
        if getattr(node, "op", None) != "call_function" or not hasattr(aten, "overloadpacket"):
            continue
        stack = node.meta.get("source_fn_stack") or []
        call = str(stack[-1][0]) if stack else node.name
        found.setdefault((call, _qualified(aten)), _qualified(aten))
    return tuple(found.values())


def _subgraphs(graph: Any) -> Iterator[Any]:
    """The FX graphs of the submodules `graph` reads (`get_attr`): a higher-order operator's subgraphs,
    which Inductor's post-grad passes see before it."""
    for node in graph.nodes:
        if getattr(node, "op", None) == "get_attr":
            held: Any = getattr(graph, "owning_module", None)
            for part in str(node.target).split("."):
                held = getattr(held, part, None)
            if held is not None and hasattr(held, "graph"):
                yield held.graph


def _is_attention_call(node: Any) -> bool:
    return getattr(node, "op", None) == "call_function" and bool(_ATTENTION_CALL.match(op_name(_qualified(node.target))))


@dataclass
class AttentionWatch:
    """Enter `recording()` for one torch.compile with fusion on and pass `post_grad` as (part of)
    Inductor's post_grad_custom_pre_pass; then `attribute` the kernels."""

    #: Per graph, its attention calls in graph order: the operators each replaced, None for one the model made.
    graphs: list[list[tuple[str, ...] | None]] = field(default_factory=list)
    #: Per graph, the attention calls Inductor made in its subgraphs, which its code's kernels do not list.
    inner: list[int] = field(default_factory=list)
    #: Per graph, the FX graph itself (weakly: it holds its module, frozen weights and all): a graph's
    #: subgraphs are found among those watched before it.
    _watched: list[weakref.ref[Any]] = field(default_factory=list)

    @contextlib.contextmanager
    def recording(self) -> Iterator[None]:
        from torch._inductor.pattern_matcher import ReplacementPatternEntry

        apply = ReplacementPatternEntry.apply

        def recorded(entry: Any, match: Any, graph: Any, node: Any) -> Any:
            if not is_attention_rewrite(entry):
                return apply(entry, match, graph, node)
            replaced = replaced_ops(match.nodes)  # read first: applying erases them
            before = set(graph.nodes)
            result = apply(entry, match, graph, node)
            for new in graph.nodes:
                if new not in before and _is_attention_call(new):
                    new.meta[REPLACED] = replaced
            return result

        with mock.patch.object(ReplacementPatternEntry, "apply", recorded):
            yield

    def post_grad(self, graph: Any) -> None:
        subgraphs = list(_subgraphs(graph))
        inner = 0
        for at in reversed(range(len(self._watched))):
            if any(self._watched[at]() is sub for sub in subgraphs):  # watched before the graph that holds it
                del self._watched[at]
                inner += self.inner.pop(at) + sum(1 for ops in self.graphs.pop(at) if ops)
        self._watched.append(weakref.ref(graph))
        self.graphs.append([node.meta.get(REPLACED) for node in graph.nodes if _is_attention_call(node)])
        self.inner.append(inner)

    def attribute(self, kernels_per_graph: list[list[KernelGroup]]) -> tuple[list[list[KernelGroup]], str]:
        """The kernels with each attention call Inductor made running the operators it replaced, and a
        note on how many (empty where it made none)."""
        result: list[list[KernelGroup]] = []
        made, unmatched = 0, 0
        inner = sum(self.inner)
        for index, kernels in enumerate(kernels_per_graph):
            replaced = self.graphs[index] if index < len(self.graphs) else []
            calls = [i for i, k in enumerate(kernels)
                     if _LIBRARY_CALL.match(k.kernel) and len(k.ops) == 1 and _ATTENTION_CALL.match(op_name(k.ops[0]))]
            if len(calls) != len(replaced):
                unmatched += sum(1 for ops in replaced if ops)
                result.append(list(kernels))
                continue
            attributed = {i: ops for i, ops in zip(calls, replaced) if ops}
            made += len(attributed)
            result.append([KernelGroup(kernel=k.kernel, ops=attributed[i]) if i in attributed else k
                           for i, k in enumerate(kernels)])
        notes = []
        if made:
            notes.append(f"{made} attention call(s) Inductor made from the model's operators (its attention rewrites), "
                         "each shown running the operators it replaced")
        if unmatched:
            notes.append(f"{unmatched} attention call(s) Inductor made could not be matched to a call in its code, "
                         "each shown as one operator")
        if inner:
            notes.append(f"{inner} attention call(s) Inductor made in a graph's subgraphs (a torch.cond branch, a "
                         "while_loop's body, whose kernels the report does not list; a nested_compile_region, whose "
                         "kernels it lists at each call, such a call as one operator)")
        return result, "; ".join(notes)
