from __future__ import annotations

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
