"""Where a cell's kernel time differs from eager's, by operator class (harness/reporting/class_moves.py)."""

from __future__ import annotations

from harness.bundle.passes_record import Kernels
from harness.reporting.class_moves import against, class_times


def _kernels(*kinds: tuple[str, float]) -> Kernels:
    return Kernels.model_validate({
        "kernels_per_inference": len(kinds), "kernel_count_method": "cpu dispatches",
        "by_kind": [{"kind": kind, "kernels": 1, "calls_per_inference": 1, "ns_per_inference": ns} for kind, ns in kinds]})


# BERT base, batch 1, 128 tokens, two threads (docs/results/bundles/cpu-2core-amd-2026-12-02-ort-bert-kinds,
# round 1's kinds): eager's operators and ONNX Runtime's fused nodes, which share no name.
EAGER = _kernels(("aten::linear", 150.2e6), ("aten::matmul", 5.25e6), ("aten::gelu", 3.37e6), ("aten::layer_norm", 1.2e6),
                 ("aten::softmax", 0.98e6), ("aten::add", 0.9e6), ("aten::mul", 0.86e6), ("aten::contiguous", 0.32e6),
                 ("aten::embedding", 0.26e6))
ORT = _kernels(("Gemm", 111.51e6), ("SkipLayerNormalization", 6.96e6), ("Reshape", 1.87e6), ("Transpose", 1.79e6),
               ("FusedMatMul", 1.63e6), ("MatMul", 1.51e6), ("Erf", 1.46e6), ("Add", 1.2e6), ("Mul", 1.08e6),
               ("Div", 1.03e6), ("Softmax", 0.67e6), ("Gather", 0.07e6))


def test_kinds_of_two_backends_are_set_against_each_other_by_class_the_largest_difference_first() -> None:
    """ONNX Runtime's Gemm, MatMul and FusedMatMul against eager's linear and matmul; its
    SkipLayerNormalization, which took in two adds each, against eager's layer norms: more
    normalization time, less element-wise."""
    assert against(ORT, EAGER, ("onnxruntime", "eager")) == [
        "kernels in all -32.6 ms (eager 163 ms, onnxruntime 131 ms)",
        "matrix multiply -40.8 ms (eager 155 ms, onnxruntime 115 ms)",
        "normalization +5.76 ms (eager 1.20 ms, onnxruntime 6.96 ms)",
        "data movement +3.15 ms (eager 580 us, onnxruntime 3.73 ms)",
        "element-wise and reductions -670 us (eager 6.11 ms, onnxruntime 5.44 ms)",
    ]


def test_a_class_one_side_never_runs_says_none_there_and_each_side_is_scaled_to_its_time_over_rounds() -> None:
    tvm = _kernels(("fused_conv2d_subtract_divide_multiply_add_relu", 30e6), ("fused_matmul_add", 1e6))
    eager = _kernels(("aten::conv2d", 10e6), ("aten::batch_norm", 2e6), ("aten::relu_", 1e6), ("aten::linear", 1e6))
    assert against(tvm, eager, ("tvm", "eager"), (0.5, 1.0))[:3] == [
        "kernels in all +1.50 ms (eager 14.0 ms, tvm 15.5 ms)",
        "convolution +5.00 ms (eager 10.0 ms, tvm 15.0 ms)",
        "normalization -2.00 ms (eager 2.00 ms, tvm none)",
    ]
    assert class_times(tvm) == {"convolution": 30e6, "matrix multiply": 1e6}


def test_nothing_is_said_where_either_side_lists_no_kinds() -> None:
    bare = Kernels.model_validate({"kernels_per_inference": 3, "kernel_count_method": "cpu dispatches"})
    assert against(ORT, bare, ("onnxruntime", "eager")) == [] and against(None, EAGER, ("tvm", "eager")) == []
