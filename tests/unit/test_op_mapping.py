"""Mapping classes of operators (DNNFusion's taxonomy) and how fused kernels are described."""

from __future__ import annotations

import pytest

from harness.fusion import FusionReport, KernelGroup
from harness.fusion.mapping import kernel_mapping, mapping_class


@pytest.mark.parametrize(("op", "expected"), [
    ("aten.relu", "one-to-one"), ("onnx.Relu", "one-to-one"), ("relax.add", "one-to-one"),
    ("aten._native_batch_norm_legit_no_training", "one-to-one"), ("onnx.BatchNormalization", "one-to-one"),
    ("aten.convolution", "many-to-many"), ("onnx.Conv", "many-to-many"), ("relax.conv2d", "many-to-many"),
    ("mkldnn._convolution_pointwise", "many-to-many"), ("onnx.Gemm", "many-to-many"), ("aten.addmm", "many-to-many"),
    ("aten.native_layer_norm", "many-to-many"), ("onnx.ReduceMean", "many-to-many"), ("aten._softmax", "many-to-many"),
    ("aten.expand", "one-to-many"), ("onnx.Resize", "one-to-many"), ("aten.embedding", "one-to-many"),
    ("aten.view", "reorganize"), ("onnx.Reshape", "reorganize"), ("onnx.Flatten", "reorganize"),
    ("aten.permute", "shuffle"), ("onnx.Transpose", "shuffle"), ("relax.permute_dims", "shuffle"),
    ("onnx.ReorderInput", "shuffle"), ("relax.conv2d1", "many-to-many"), ("aten.frobnicate", "unknown"),
    ("aten.relu_", "one-to-one"), ("aten.add_.Tensor", "one-to-one"), ("aten.hardswish_", "one-to-one"),
    ("aten.frobnicate_", "unknown"),
    # the library calls Inductor makes on CPU: MKL's linear (fp32 with freezing) and oneDNN's transposed convolution
    ("mkl._mkl_linear", "many-to-many"), ("mkldnn._convolution_transpose_pointwise", "many-to-many"),
    # the bias a generated kernel adds after such a call (was unknown: mobilenet_v3_small's last kernel)
    ("aten.addmm (bias or layout)", "one-to-one"), ("aten.convolution (bias or layout)", "one-to-one"),
])
def test_mapping_class(op: str, expected: str) -> None:
    assert mapping_class(op) == expected


def test_inductors_cpu_library_calls_are_tensor_operators() -> None:
    from harness.fusion import is_tensor_op

    assert is_tensor_op("mkl._mkl_linear") and is_tensor_op("mkldnn._convolution_transpose_pointwise")


def test_a_kernel_is_described_by_the_classes_it_combines_in_any_order() -> None:
    assert kernel_mapping(("aten.relu", "mkldnn._convolution_pointwise", "aten.batch_norm")) == "many-to-many+one-to-one"
    assert kernel_mapping(("onnx.Conv",)) == "many-to-many"
    assert kernel_mapping(("aten.native_layer_norm", "aten.permute")) == "many-to-many"  # a view computes nothing
    assert kernel_mapping(("onnx.MatMul", "onnx.Transpose")) == "many-to-many+shuffle"


def test_the_report_carries_the_mapping_of_each_kernel_and_the_totals() -> None:
    report = FusionReport(kernels=(KernelGroup("k0", ("onnx.Conv", "onnx.Relu")), KernelGroup("k1", ("onnx.Add",)),
                                   KernelGroup("k2", ("onnx.Mul", "onnx.Sigmoid"))), source="test").to_json()
    assert [k["mapping"] for k in report["kernels"]] == ["many-to-many+one-to-one", "one-to-one", "one-to-one"]
    assert report["fusions_by_class"] == {"tensor+element+tensor": 0, "tensor+element": 1, "element": 1}
    assert report["fusions_by_mapping"] == {"many-to-many+one-to-one": 1, "one-to-one": 1}
