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
