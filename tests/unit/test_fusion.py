from __future__ import annotations

from harness.fusion import FusionReport, KernelGroup, classify, op_name


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
