"""Which source ONNX nodes each node of ONNX Runtime's optimised graph runs (`kernel_groups`)."""

from __future__ import annotations

import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from backends.onnx_graph import kernel_groups  # noqa: E402


def _graph(nodes: list, initializers: tuple = ()) -> object:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    return helper.make_model(helper.make_graph(nodes, "g", [x], [y], initializer=list(initializers)))


def test_a_fused_conv_covers_the_conv_and_the_relu_between_its_borders() -> None:
    w = helper.make_tensor("w", TensorProto.FLOAT, [4, 3, 3, 3], [0.0] * 108)
    source = _graph([helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
                     helper.make_node("Relu", ["c"], ["y"], name="relu")], (w,))
    optimized = _graph([helper.make_node("FusedConv", ["x", "w"], ["y"], name="fused", domain="com.microsoft",
                                         activation="Relu")], (w,))
    [group] = kernel_groups(source, optimized)
    assert (group.kernel, group.ops) == ("fused", ("onnx.Conv", "onnx.Relu"))


def test_a_constant_input_is_folded_not_fused() -> None:
    # ORT folds a Constant node into an initializer: the Gather that reads it runs alone.
    index = helper.make_tensor("i", TensorProto.INT64, [], [0])
    source = _graph([helper.make_node("Constant", [], ["k"], name="const", value=index),
                     helper.make_node("Gather", ["x", "k"], ["y"], name="gather")])
    optimized = _graph([helper.make_node("Gather", ["x", "k_folded"], ["y"], name="gather")],
                       (helper.make_tensor("k_folded", TensorProto.INT64, [], [0]),))
    [group] = kernel_groups(source, optimized)
    assert group.ops == ("onnx.Gather",)


def test_an_unattributable_node_is_reported_as_itself() -> None:
    source = _graph([helper.make_node("Relu", ["x"], ["y"], name="relu")])
    optimized = _graph([helper.make_node("Identity", ["x"], ["renamed"], name="id"),
                        helper.make_node("Relu", ["renamed"], ["y2"], name="relu2")])
    assert [g.ops for g in kernel_groups(source, optimized)] == [("onnx.Identity",), ("onnx.Relu",)]


def test_a_renamed_input_stops_the_walk_at_what_another_node_computes() -> None:
    # ORT inserted a Cast before the Relu and renamed its input: without the optimised graph's own
    # tensors as borders, the walk from the Relu's output would run on through the Conv to the
    # graph input and report conv+relu, a fusion that never happened.
    w = helper.make_tensor("w", TensorProto.FLOAT, [4, 3, 3, 3], [0.0] * 108)
    source = _graph([helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
                     helper.make_node("Relu", ["c"], ["y"], name="relu")], (w,))
    optimized = _graph([helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
                        helper.make_node("Cast", ["c"], ["c_cast"], name="cast", to=TensorProto.FLOAT),
                        helper.make_node("Relu", ["c_cast"], ["y"], name="relu")], (w,))
    assert [g.ops for g in kernel_groups(source, optimized)] == [("onnx.Conv",), ("onnx.Cast",), ("onnx.Relu",)]


def _bn(name: str) -> tuple:
    return tuple(helper.make_tensor(f"{name}.{p}", TensorProto.FLOAT, [4], [1.0] * 4)
                 for p in ("weight", "bias", "mean", "var"))


def test_an_nchwc_conv_whose_folded_bias_the_reorder_renamed_still_runs_its_batch_norm() -> None:
    """ORT's NCHWc reorder pads a bias whose channels are not a multiple of its block and renames it
    (`reorder_token_*`): the folded batch norm's `ConvBnFusion_` name was the only sign of it, so 11 of
    mobilenet_v3_small's 34 folds went uncounted. The NCHWc node is named after the source tensor it
    computes, and the walk from it finds Conv, BatchNormalization and Relu."""
    w = helper.make_tensor("w", TensorProto.FLOAT, [4, 3, 3, 3], [0.0] * 108)
    bn = _bn("bn")
    source = _graph([helper.make_node("Conv", ["x", "w"], ["c"], name="node_Conv_0"),
                     helper.make_node("BatchNormalization", ["c", *(t.name for t in bn)], ["getitem"], name="node_bn"),
                     helper.make_node("Relu", ["getitem"], ["relu"], name="node_relu"),
                     helper.make_node("Relu", ["relu"], ["y"], name="node_last")], (w, *bn))
    tokens = [helper.make_tensor(f"reorder_token_{i}", TensorProto.FLOAT, [4], [0.0] * 4) for i in (1, 2)]
    nchwc = "com.microsoft.nchwc"
    optimized = _graph([helper.make_node("ReorderInput", ["x"], ["reorder_token_0"], name="ReorderInput", domain=nchwc),
                        helper.make_node("Conv", ["reorder_token_0", "reorder_token_1", "reorder_token_2"], ["reorder_token_3"],
                                         name="relu_nchwc", domain=nchwc, activation="Relu"),
                        helper.make_node("ReorderOutput", ["reorder_token_3"], ["relu"], name="ReorderOutput", domain=nchwc),
                        helper.make_node("Relu", ["relu"], ["y"], name="node_last")], tokens)
    groups = {g.kernel: g.ops for g in kernel_groups(source, optimized)}
    assert groups["relu_nchwc"] == ("onnx.Conv", "onnx.BatchNormalization", "onnx.Relu")
    assert groups["node_last"] == ("onnx.Relu",)  # the walk stopped at what the NCHWc node computes


def test_an_nchwc_conv_named_after_no_source_tensor_is_read_by_its_schema() -> None:
    source = _graph([helper.make_node("Conv", ["x", "w"], ["y"], name="conv")],
                    (helper.make_tensor("w", TensorProto.FLOAT, [4, 3, 3, 3], [0.0] * 108),))
    optimized = _graph([helper.make_node("Conv", ["x", "ConvBnFusion_W", "ConvBnFusion_BN_B_bn.bias"], ["y2"],
                                         name="renamed_nchwc", domain="com.microsoft.nchwc", activation="Relu")])
    [group] = kernel_groups(source, optimized)
    assert group.ops == ("onnx.Conv", "onnx.BatchNormalization", "onnx.Relu")


def test_nodes_that_compute_no_source_tensor_are_counted() -> None:
    """ORT's CPU provider has no HardSwish kernel: it runs the operator's ONNX function, HardSigmoid
    then Mul, two kernels where eager runs one (fusion off ran 19 more kernels than eager, unsaid)."""
    from backends.onnx_graph import added_nodes

    source = _graph([helper.make_node("HardSwish", ["x"], ["y"], name="hs")])
    optimized = _graph([helper.make_node("HardSigmoid", ["x"], ["hs_sigmoid"], name="hs_sig", alpha=1 / 6),
                        helper.make_node("Mul", ["x", "hs_sigmoid"], ["y"], name="hs_mul")])
    assert added_nodes(source, optimized) == {"HardSigmoid": 1}
    assert [g.ops for g in kernel_groups(source, optimized)] == [("onnx.HardSigmoid",), ("onnx.HardSwish",)]
    assert added_nodes(source, source) == {}
    # an activation the NCHWc transformer left unfused reads a blocked tensor and writes a renamed one:
    # it is its source node's work, not a node ORT added
    source = _graph([helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
                     helper.make_node("Sigmoid", ["c"], ["y"], name="sig")],
                    (helper.make_tensor("w", TensorProto.FLOAT, [4, 3, 3, 3], [0.0] * 108),))
    nchwc = "com.microsoft.nchwc"
    optimized = _graph([helper.make_node("Conv", ["x", "w"], ["reorder_token_1"], name="c_nchwc", domain=nchwc),
                        helper.make_node("Sigmoid", ["reorder_token_1"], ["reorder_token_2"], name="sig"),
                        helper.make_node("ReorderOutput", ["reorder_token_2"], ["y"], name="out", domain=nchwc)])
    assert added_nodes(source, optimized) == {}


def test_the_note_on_added_nodes_counts_the_cells_own_and_gives_its_example_as_a_general_one() -> None:
    """A transformer block's note counted its Gemm and Reshape nodes and went on `(HardSwish as
    HardSigmoid, then Mul)`, read as the block's own; it has no HardSwish."""
    from backends.onnx_graph import added_nodes_note

    note = added_nodes_note({"Reshape": 2, "Gemm": 2})
    assert note.startswith("the optimised graph runs 4 node(s) that compute no tensor of the exported graph "
                           "(Gemm 2, Reshape 2), each a kernel of its own: nodes ONNX Runtime inserted, or the parts ")
    general = note.index("in general, not necessarily here:")
    assert note.index("HardSwish") > general and note.count("HardSwish") == 1


def test_a_fusion_inside_the_nchwc_layout_runs_the_source_nodes_between_the_tensors_it_holds() -> None:
    """ORT fuses a SiLU (Sigmoid, then Mul) that the NCHWc Conv could not take as its activation into one
    QuickGelu, which reads and writes renamed blocked tensors: read as its op type alone, efficientnet_b0's
    49 SiLUs were counted as no fusion (65 fusions where its optimised graph has 114). What the renamed
    tensors hold comes from the layout: the second Conv reads the first SiLU's output, the ReorderOutput
    writes the second's."""
    w = helper.make_tensor("w", TensorProto.FLOAT, [3, 3, 3, 3], [0.0] * 81)
    source = _graph([helper.make_node("Conv", ["x", "w"], ["c1"], name="conv1"),
                     helper.make_node("Sigmoid", ["c1"], ["s1"], name="sig1"),
                     helper.make_node("Mul", ["c1", "s1"], ["silu1"], name="silu1"),
                     helper.make_node("Conv", ["silu1", "w"], ["c2"], name="conv2"),
                     helper.make_node("Sigmoid", ["c2"], ["s2"], name="sig2"),
                     helper.make_node("Mul", ["c2", "s2"], ["y"], name="silu2")], (w,))
    nchwc, ms = "com.microsoft.nchwc", "com.microsoft"
    optimized = _graph([helper.make_node("ReorderInput", ["x"], ["reorder_token_0"], name="ReorderInput", domain=nchwc),
                        helper.make_node("Conv", ["reorder_token_0", "w"], ["reorder_token_1"], name="c1_nchwc", domain=nchwc),
                        helper.make_node("QuickGelu", ["reorder_token_1"], ["reorder_token_2"], name="silu1/QuickGeluFusion/",
                                         domain=ms, alpha=1.0),
                        helper.make_node("Conv", ["reorder_token_2", "w"], ["reorder_token_3"], name="c2_nchwc", domain=nchwc),
                        helper.make_node("QuickGelu", ["reorder_token_3"], ["reorder_token_4"], name="silu2/QuickGeluFusion/",
                                         domain=ms, alpha=1.0),
                        helper.make_node("ReorderOutput", ["reorder_token_4"], ["y"], name="ReorderOutput", domain=nchwc)],
                       (w,))
    groups = [(g.kernel, g.ops, g.fusion_class) for g in kernel_groups(source, optimized)]
    silu = (("onnx.Sigmoid", "onnx.Mul"), "element")
    assert groups == [("ReorderInput", ("onnx.ReorderInput",), "single"), ("c1_nchwc", ("onnx.Conv",), "single"),
                      ("silu1/QuickGeluFusion/", *silu), ("c2_nchwc", ("onnx.Conv",), "single"),
                      ("silu2/QuickGeluFusion/", *silu), ("ReorderOutput", ("onnx.ReorderOutput",), "single")]


def _nchwc(op: str, inputs: list, output: str, name: str, **attributes: object) -> object:
    return helper.make_node(op, inputs, [output], name=name, domain="com.microsoft.nchwc", **attributes)


def test_a_batch_norm_the_layout_runs_as_a_conv_runs_the_batch_norm() -> None:
    """NCHWc runs a batch norm that follows no convolution (DenseNet's, after each Concat) as a
    depthwise Conv named `<tensor>_bn_nchwc`: read by its schema it was a Conv with its relu, so
    densenet121's 62 batch norm+relu kernels were counted as tensor+element, and 62 convolutions
    more than it has. The Concat before it keeps its source node's name: it holds the Concat's output,
    where the walk from the batch norm stops."""
    w = helper.make_tensor("w", TensorProto.FLOAT, [3, 3, 3, 3], [0.0] * 81)
    bn = _bn("bn")
    source = _graph([helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
                     helper.make_node("Concat", ["x", "c"], ["cat"], name="concat", axis=1),
                     helper.make_node("BatchNormalization", ["cat", *(t.name for t in bn)], ["norm"], name="norm"),
                     helper.make_node("Relu", ["norm"], ["y"], name="relu")], (w, *bn))
    optimized = _graph([_nchwc("ReorderInput", ["x"], "t0", "ReorderInput"), _nchwc("Conv", ["t0", "w"], "t1", "c_nchwc"),
                        helper.make_node("Concat", ["t0", "t1"], ["t2"], name="concat", axis=1),
                        _nchwc("Conv", ["t2", "bn_scale", "bn_B"], "t3", "norm_bn_nchwc", activation="Relu"),
                        _nchwc("ReorderOutput", ["t3"], "y", "ReorderOutput")], (w,))
    groups = {g.kernel: (g.ops, g.fusion_class) for g in kernel_groups(source, optimized)}
    assert groups["norm_bn_nchwc"] == (("onnx.BatchNormalization", "onnx.Relu"), "element")
    assert groups["concat"] == (("onnx.Concat",), "single")


def test_a_fusion_whose_output_only_a_kept_node_reads_runs_what_the_kept_node_reads() -> None:
    """EfficientNetV2's SiLU before a residual Add: no ReorderOutput and no NCHWc Conv reads the
    QuickGelu's output, but the Add the layout kept (its source node's name) reads it where its source
    node reads the SiLU's output; without that the QuickGelu was counted as no fusion and the Add as a
    fusion of the SiLU's Sigmoid and Mul with itself."""
    w = helper.make_tensor("w", TensorProto.FLOAT, [3, 3, 3, 3], [0.0] * 81)
    source = _graph([helper.make_node("Conv", ["x", "w"], ["c0"], name="conv0"),
                     helper.make_node("Conv", ["c0", "w"], ["c1"], name="conv1"),
                     helper.make_node("Sigmoid", ["c1"], ["s1"], name="sig1"),
                     helper.make_node("Mul", ["c1", "s1"], ["silu1"], name="silu1"),
                     helper.make_node("Add", ["silu1", "c0"], ["a"], name="add"),
                     helper.make_node("Conv", ["a", "w"], ["y"], name="conv2")], (w,))
    optimized = _graph([_nchwc("ReorderInput", ["x"], "t0", "ReorderInput"), _nchwc("Conv", ["t0", "w"], "t1", "c0_nchwc"),
                        _nchwc("Conv", ["t1", "w"], "t2", "c1_nchwc"),
                        helper.make_node("QuickGelu", ["t2"], ["t3"], name="silu1/QuickGeluFusion/", domain="com.microsoft",
                                         alpha=1.0),
                        helper.make_node("Add", ["t3", "t1"], ["t4"], name="add"), _nchwc("Conv", ["t4", "w"], "t5", "y_nchwc"),
                        _nchwc("ReorderOutput", ["t5"], "y", "ReorderOutput")], (w,))
    groups = {g.kernel: g.ops for g in kernel_groups(source, optimized)}
    assert groups["silu1/QuickGeluFusion/"] == ("onnx.Sigmoid", "onnx.Mul")
    assert groups["add"] == ("onnx.Add",)
    assert groups["y_nchwc"] == ("onnx.Conv",)


def test_a_transpose_the_transpose_optimizer_moved_runs_transposes_only() -> None:
    """Swin's and a transformer block's attention: the query, key and value taken by Gathers from one
    permuted tensor. ORT moves the Transpose past the Gathers (`Transpose_token_1`, which reads a
    Gather's output under a new name) and merges it with the key's own Transpose; each moved
    Transpose was counted as an element fusion of Transpose and Gather, the Gather being its own
    node's (the optimised graph of such a block, as ONNX Runtime 1.31 wrote it)."""
    index = [helper.make_tensor(f"i{n}", TensorProto.INT64, [], [n]) for n in range(2)]
    source = _graph([helper.make_node("Transpose", ["x"], ["p"], name="node_permute", perm=[1, 0, 2, 3]),
                     helper.make_node("Gather", ["p", "i0"], ["select"], name="node_select"),
                     helper.make_node("Gather", ["p", "i1"], ["select_1"], name="node_select_1"),
                     helper.make_node("Transpose", ["select_1"], ["y"], name="node_transpose", perm=[0, 2, 1])], index)
    optimized = _graph([helper.make_node("Gather", ["x", "i0"], ["g0"], name="node_select", axis=1),
                        helper.make_node("Transpose", ["g0"], ["select"], name="Transpose_token_0", perm=[1, 0, 2]),
                        helper.make_node("Gather", ["x", "i1"], ["g1"], name="node_select_1", axis=1),
                        helper.make_node("Transpose", ["g1"], ["y"], name="node_transpose", perm=[1, 2, 0])], index)
    groups = {g.kernel: (g.ops, g.fusion_class) for g in kernel_groups(source, optimized)}
    assert groups["Transpose_token_0"] == (("onnx.Transpose",), "single")
    assert groups["node_select"] == (("onnx.Gather",), "single")
    # the permute's share of the key and the key's own transpose, merged: two source operators in one
    assert groups["node_transpose"] == (("onnx.Transpose", "onnx.Transpose"), "element")


def test_a_node_ort_pointed_at_a_duplicate_kept_elsewhere_runs_only_itself() -> None:
    # Common subexpression elimination: of two identical Abs, ORT keeps one and the Neg that read the
    # other reads it. The walk from the Neg's output ran back through the removed Abs, which the kept
    # one runs: Swin-T's patch merging counted such a Slice as a Slice and Slice fusion, 6 in all.
    source = _graph([helper.make_node("Abs", ["x"], ["kept"], name="abs_kept"),
                     helper.make_node("Abs", ["x"], ["dropped"], name="abs_dropped"),
                     helper.make_node("Neg", ["kept"], ["z"], name="neg_z"),
                     helper.make_node("Neg", ["dropped"], ["y"], name="neg_y")])
    optimized = _graph([helper.make_node("Abs", ["x"], ["kept"], name="abs_kept"),
                        helper.make_node("Neg", ["kept"], ["z"], name="neg_z"),
                        helper.make_node("Neg", ["kept"], ["y"], name="neg_y")])
    groups = kernel_groups(source, optimized)
    assert [(g.kernel, g.ops, g.fusion_class) for g in groups] == [
        ("abs_kept", ("onnx.Abs",), "single"), ("neg_z", ("onnx.Neg",), "single"), ("neg_y", ("onnx.Neg",), "single")]


def test_a_node_whose_removed_predecessor_the_walk_reached_keeps_it() -> None:
    # A node ORT removed between two others (the Neg now reads x itself) is still walked through:
    # only an input the walk never reached is read as a duplicate kept elsewhere.
    source = _graph([helper.make_node("Abs", ["x"], ["a"], name="abs"),
                     helper.make_node("Neg", ["a"], ["y"], name="neg")])
    optimized = _graph([helper.make_node("Neg", ["x"], ["y"], name="neg")])
    [group] = kernel_groups(source, optimized)
    assert group.ops == ("onnx.Abs", "onnx.Neg")


def _from_fx(node: object, fx_name: str, target: str) -> object:
    """`node` as torch's dynamo exporter writes it: with the FX node it came from in its metadata."""
    node.metadata_props.add(  # type: ignore[attr-defined]
        key="pkg.torch.onnx.fx_node",
        value=f"%{fx_name} : [num_users=1] = call_function[target=torch.ops.{target}](args = (%x,), kwargs = {{}})")
    return node


def _attention(*nodes: object) -> list:
    return [_from_fx(node, "scaled_dot_product_attention", "aten.scaled_dot_product_attention.default") for node in nodes]


def test_the_parts_of_the_models_own_attention_call_are_one_operator() -> None:
    # The exporter writes the model's F.scaled_dot_product_attention as its parts; ORT's FusedMatMul of its
    # scale and first matmul runs two of them, which counted a fusion where Inductor calls the attention as
    # one library call. A linear's MatMul and Add stay two operators: their unit is the exporter's nodes.
    source = _graph([
        _from_fx(helper.make_node("MatMul", ["x", "w"], ["mm"], name="node_MatMul_1"), "linear", "aten.linear.default"),
        _from_fx(helper.make_node("Add", ["mm", "b"], ["lin"], name="node_linear"), "linear", "aten.linear.default"),
        *_attention(helper.make_node("Mul", ["lin", "s"], ["q"], name="node_Mul_46"),
                    helper.make_node("MatMul", ["q", "lin"], ["scores"], name="node_MatMul_50"),
                    helper.make_node("Softmax", ["scores"], ["p"], name="node_Softmax_51"),
                    helper.make_node("MatMul", ["p", "lin"], ["y"], name="node_scaled_dot_product_attention")),
    ])
    optimized = _graph([
        helper.make_node("FusedMatMul", ["x", "w"], ["mm"], name="node_MatMul_1/MatMulAddFusion", domain="com.microsoft"),
        helper.make_node("Add", ["mm", "b"], ["lin"], name="node_linear"),
        helper.make_node("FusedMatMul", ["lin", "lin"], ["scores"], name="node_MatMul_50/MatMulScaleFusion/",
                         domain="com.microsoft", alpha=0.5),
        helper.make_node("Softmax", ["scores"], ["p"], name="node_Softmax_51"),
        helper.make_node("MatMul", ["p", "lin"], ["y"], name="node_scaled_dot_product_attention"),
    ])
    groups = kernel_groups(source, optimized)
    assert [(g.ops, g.fusion_class) for g in groups] == [
        (("onnx.MatMul",), "single"), (("onnx.Add",), "single"),
        (("aten.scaled_dot_product_attention",), "single"),  # its Mul and MatMul: one operator
        (("onnx.Softmax",), "single"), (("aten.scaled_dot_product_attention",), "single")]


def test_an_attention_part_beside_another_operator_counts_as_one_of_two() -> None:
    # ORT merges the model's permute with the attention's transpose of its key: two operators in one
    # kernel (a fusion of two Transposes, not of a tensor operator), and a kernel that runs two of the
    # attention's scaling Muls runs one operator.
    source = _graph([
        _from_fx(helper.make_node("Transpose", ["x"], ["k"], name="node_permute", perm=[0, 1, 3, 2]), "permute",
                 "aten.permute.default"),
        *_attention(helper.make_node("Transpose", ["k"], ["kt"], name="node_Transpose_42", perm=[0, 1, 3, 2]),
                    helper.make_node("Mul", ["kt", "s"], ["ks"], name="node_Mul_49"),
                    helper.make_node("Mul", ["ks", "s"], ["y"], name="node_Mul_50")),
    ])
    optimized = _graph([helper.make_node("Transpose", ["x"], ["kt"], name="Transpose_token_9", perm=[0, 1, 2, 3]),
                        helper.make_node("Mul", ["kt", "s"], ["y"], name="node_Mul_50")])
    groups = kernel_groups(source, optimized)
    assert [(g.ops, g.fusion_class) for g in groups] == [
        (("onnx.Transpose", "onnx.Transpose"), "element"), (("onnx.Mul",), "single")]
