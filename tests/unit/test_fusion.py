from __future__ import annotations

import pytest

from harness.fusion import FusionReport, KernelGroup, classify, is_view_op, op_name


def test_op_names() -> None:
    assert op_name("aten.convolution.default") == "convolution"
    assert op_name("aten::addmm") == "addmm"
    assert op_name("mkldnn._convolution_pointwise") == "_convolution_pointwise"


def test_classes() -> None:
    assert classify(["aten.convolution"]) == "single"
    assert classify(["aten.convolution", "aten.relu"]) == "tensor+element"
    assert classify(["mkldnn._convolution_pointwise_", "aten.add", "aten.relu"]) == "tensor+element"
    assert classify(["aten.convolution", "aten.relu", "aten.convolution"]) == "tensor+element+tensor"
    assert classify(["aten._native_batch_norm_legit_no_training", "aten.relu"]) == "element"
    assert classify(["aten.addmm", "aten.mm"]) == "tensor+element+tensor"


def test_report_counts_fusions() -> None:
    report = FusionReport(
        kernels=(KernelGroup("k0", ("aten.convolution", "aten.relu")), KernelGroup("k1", ("aten.add",)),
                 KernelGroup("k2", ("aten.mean", "aten.relu"))),
        source="test",
    )
    data = report.to_json()
    assert data["fusion_count"] == 2 and data["kernel_count"] == 3
    assert data["kernels_by_class"] == {"tensor+element+tensor": 0, "tensor+element": 1, "element": 1, "single": 1}


def test_aten_views_are_not_counted_as_fused_operators() -> None:
    assert is_view_op("aten.permute") and is_view_op("aten::view") and is_view_op("aten.as_strided.default")
    assert not is_view_op("onnx.Transpose") and not is_view_op("relax.permute_dims") and not is_view_op("aten.clone")
    # Inductor names a layer norm that writes its output permuted after both origins: one computation.
    assert classify(["aten.native_layer_norm", "aten.permute"]) == "single"
    assert classify(["aten.mul", "aten.permute", "aten.view"]) == "single"
    assert classify(["aten.gelu", "aten.mul", "aten.view"]) == "element"
    assert classify(["onnx.MatMul", "onnx.Transpose"]) == "tensor+element"  # ORT executes Transpose
    report = FusionReport(kernels=(KernelGroup("k", ("aten.native_layer_norm", "aten.permute")),), source="test")
    assert report.fusions == 0 and report.to_json()["kernels"][0]["ops"] == ["aten.native_layer_norm", "aten.permute"]


def test_a_group_whose_ops_are_one_string_is_refused_not_counted_letter_by_letter() -> None:
    """`KernelGroup(name, ("aten.relu"))`, the one-element tuple without its comma, was recorded as a
    fusion of 9 operators ("a", "t", "e", ...): a fusion-off cell read as fused in every kernel, valid."""
    with pytest.raises(TypeError, match=r"^KernelGroup 'k0': ops is a str; give a tuple of operator names"):
        KernelGroup("k0", ("aten.relu"))
    with pytest.raises(TypeError, match=r"^KernelGroup 'k0': ops holds 3 \(int\), not an operator name"):
        KernelGroup("k0", ("aten.relu", 3))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^FusionReport: kernels holds 'k0' \(str\), not a KernelGroup"):
        FusionReport(kernels=("k0", "k1"), source="test")  # type: ignore[arg-type]
    assert FusionReport(kernels=(KernelGroup("k0", ("aten.relu",)),), source="test").fusions == 0
