"""Which of the model's operators an attention call Inductor made from them runs
(backends/inductor_attention.py), on the pattern matcher's nodes and the wrapper's kernels as a
compile of a 4-head attention block recorded them: the call was listed as one operator, `single`, so
the fusion count left out the attention Inductor fused (0 fusions on and 0 off for a block that ran 5
kernels an inference on against 25 off)."""

from __future__ import annotations

from types import SimpleNamespace

from backends.inductor_attention import AttentionWatch, replaced_ops
from harness.fusion import FusionReport, KernelGroup

SDPA = "aten._scaled_dot_product_flash_attention_for_cpu"
REPLACED = ("aten.expand", "aten.view", "aten.bmm", "aten.mul", "aten._softmax", "aten.expand", "aten.view", "aten.bmm")


def _node(name: str, target: str, original: str, call: str | None) -> SimpleNamespace:
    meta = {"original_aten": SimpleNamespace(overloadpacket=original)}
    if call is not None:
        meta["source_fn_stack"] = [(call, object())]
    return SimpleNamespace(op="call_function", name=name, target=SimpleNamespace(overloadpacket=target), meta=meta)


def test_the_operators_a_rewrite_replaced_are_the_models_calls_not_their_decomposition() -> None:
    nodes = [_node("expand", "aten.expand", "aten.expand", "matmul"), _node("view_5", "aten.view", "aten.view", "matmul"),
             _node("bmm", "aten.bmm", "aten.bmm", "matmul"), _node("mul", "aten.mul", "aten.mul", "mul"),
             *(_node(step, f"aten.{step}", "aten._softmax", "softmax") for step in ("amax", "sub", "exp", "sum", "div")),
             _node("expand_2", "aten.expand", "aten.expand", "matmul_1"), _node("view_8", "aten.view", "aten.view", "matmul_1"),
             _node("bmm_1", "aten.bmm", "aten.bmm", "matmul_1"),
             SimpleNamespace(op="call_function", name="getitem", target=object(), meta={})]
    # softmax's five steps are the one softmax the model called; the two matmuls are two
    assert replaced_ops(nodes) == REPLACED


def _kernels() -> list[KernelGroup]:
    call = f"torch.ops.{SDPA}"
    return [KernelGroup("torch.ops.mkl._mkl_linear", ("mkl._mkl_linear",)), KernelGroup(call, (SDPA,)),
            KernelGroup(f"cpp_fused_{SDPA.split('.')[1]}_addmm_split_transpose_view_0", ("aten.addmm (bias or layout)",)),
            KernelGroup(call, (SDPA,))]


def test_an_attention_call_inductor_made_is_a_fusion_and_one_the_model_made_stays_one_operator() -> None:
    watch = AttentionWatch(graphs=[[None, REPLACED]])  # the model's own call first, then the one a rewrite made
    [kernels], note = watch.attribute([_kernels()])
    report = FusionReport(kernels=tuple(kernels), source="test")
    assert [k.fusion_class for k in report.kernels] == ["single", "single", "single", "tensor+element+tensor"]
    assert report.kernels[3].ops == REPLACED and report.kernels[1].ops == (SDPA,)
    assert report.to_json()["fusions_by_mapping"] == {"many-to-many+one-to-one": 1}
    assert note.startswith("1 attention call(s) Inductor made from the model's operators")


def test_attention_calls_the_code_does_not_match_are_left_as_one_operator_and_said() -> None:
    watch = AttentionWatch(graphs=[[REPLACED]])  # the graph's one call against the code's two
    [kernels], note = watch.attribute([_kernels()])
    assert kernels == _kernels()
    assert note == "1 attention call(s) Inductor made could not be matched to a call in its code, each shown as one operator"
    assert AttentionWatch(graphs=[[None, None]]).attribute([_kernels()]) == ([_kernels()], "")


class _Graph(SimpleNamespace):
    """An FX graph's nodes and module (watched weakly, as a graph is)."""


def _graph(*nodes: SimpleNamespace, **submodules: SimpleNamespace) -> _Graph:
    return _Graph(nodes=list(nodes), owning_module=SimpleNamespace(**submodules))


def test_a_subgraphs_attention_is_not_read_onto_the_next_graphs_own_call() -> None:
    """A `torch.cond` whose false branch is a rewritten attention, a graph break, then the model's own
    call: the post-grad passes saw the branches, the graph holding them and the graph after the break
    as four graphs against two graphs of code, so the branch's rewrite was read onto the model's own
    call in the second (a `single` call listed as a tensor+element+tensor fusion of the branch's
    operators, and the note counted it as made)."""
    target = SimpleNamespace(overloadpacket=SDPA)
    true_branch = _graph()
    false_branch = _graph(SimpleNamespace(op="call_function", name="sdpa", target=target,
                                          meta={"fusionbench_replaced_ops": REPLACED}))
    holding = _graph(SimpleNamespace(op="get_attr", target="true_graph_0", meta={}),
                     SimpleNamespace(op="get_attr", target="false_graph_0", meta={}),
                     true_graph_0=SimpleNamespace(graph=true_branch), false_graph_0=SimpleNamespace(graph=false_branch))
    after_break = _graph(SimpleNamespace(op="call_function", name="sdpa", target=target, meta={}))
    watch = AttentionWatch()
    for graph in (true_branch, false_branch, holding, after_break):  # the post-grad passes' order
        watch.post_grad(graph)
    condition, own = [KernelGroup("cpp_fused_lt_sum_0", ("aten.lt", "aten.sum"))], [KernelGroup(f"torch.ops.{SDPA}", (SDPA,))]
    assert watch.attribute([condition, own])[0] == [condition, own]
    note = watch.attribute([condition, own])[1]
    assert note == ("1 attention call(s) Inductor made in a graph's subgraphs (a torch.cond branch, a while_loop's body, "
                    "whose kernels the report does not list; a nested_compile_region, whose kernels it lists at each call, "
                    "such a call as one operator)")
